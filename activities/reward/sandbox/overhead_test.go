//go:build linux

package sandbox

import (
	"os"
	"slices"
	"testing"
	"time"
)

// TestRunOverhead reports the p50 and p90 wall time of a Python hello world run (50 runs after
// 3 warm-up runs): the sandbox's own cost per run. It alternates, run by run, a sandbox with
// every protection and one without the per-run cgroup and the seccomp filter, so that both see
// the same machine load, and reports the ratio of their p50s. Set TEMPER_SANDBOX_OVERHEAD=1:
//
//	TEMPER_SANDBOX_OVERHEAD=1 go test ./activities/reward/sandbox/ -run TestRunOverhead -v
func TestRunOverhead(t *testing.T) {
	if os.Getenv("TEMPER_SANDBOX_OVERHEAD") == "" {
		t.Skip("set TEMPER_SANDBOX_OVERHEAD=1 to measure the per-run overhead")
	}
	full := newSandbox(t, Config{})
	needPython(t, full)
	bare := newSandbox(t, Config{})
	bare.cg, bare.filter = nil, nil
	const n = 50
	cmd := Command{Path: full.Config().Python, Args: []string{"-I", "-S", "-c", "print('hello')"}, Limits: Limits{Timeout: 10 * time.Second}}
	times := map[*Sandbox][]time.Duration{}
	for i := range n + 3 {
		for _, s := range []*Sandbox{full, bare} {
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
				times[s] = append(times[s], el)
			}
		}
	}
	p50 := map[*Sandbox]time.Duration{}
	for _, s := range []*Sandbox{full, bare} {
		ts := times[s]
		slices.Sort(ts)
		p50[s] = ts[n/2]
		name := "all protections"
		if s == bare {
			name = "no cgroup, no seccomp"
		}
		t.Logf("python hello world, %d runs, mode %s, %s: p50 %v p90 %v min %v", n, s.Mode(), name,
			ts[n/2].Round(10*time.Microsecond), ts[n*9/10].Round(10*time.Microsecond), ts[0].Round(10*time.Microsecond))
	}
	t.Logf("p50 ratio all/none: %.3f", float64(p50[full])/float64(p50[bare]))
}
