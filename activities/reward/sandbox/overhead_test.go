//go:build linux

package sandbox

import (
	"os"
	"slices"
	"testing"
	"time"
)

// TestRunOverhead reports the p50 and p90 wall time of a Python hello world run (50 runs after
// 3 warm-up runs): the sandbox's own cost per run. Set TEMPER_SANDBOX_OVERHEAD=1 to run it:
//
//	TEMPER_SANDBOX_OVERHEAD=1 go test ./activities/reward/sandbox/ -run TestRunOverhead -v
func TestRunOverhead(t *testing.T) {
	if os.Getenv("TEMPER_SANDBOX_OVERHEAD") == "" {
		t.Skip("set TEMPER_SANDBOX_OVERHEAD=1 to measure the per-run overhead")
	}
	s := newSandbox(t, Config{})
	needPython(t, s)
	const n = 50
	cmd := Command{Path: s.Config().Python, Args: []string{"-I", "-S", "-c", "print('hello')"}, Limits: Limits{Timeout: 10 * time.Second}}
	var times []time.Duration
	for i := range n + 3 {
		start := time.Now()
		r, err := s.Run(t.Context(), cmd)
		el := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if f := r.Failure(); f != "" || string(r.Stdout) != "hello\n" {
			t.Fatalf("run %d: %q %q %s", i, f, r.Stdout, r.Stderr)
		}
		if i >= 3 {
			times = append(times, el)
		}
	}
	slices.Sort(times)
	t.Logf("python hello world, %d runs, mode %s: p50 %v p90 %v min %v", n, s.Mode(),
		times[n/2].Round(10*time.Microsecond), times[n*9/10].Round(10*time.Microsecond), times[0].Round(10*time.Microsecond))
}
