package tpu

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/temperml/temper/algorithms/model"
)

// memPoint is one training step's measurement, made in a fresh process.
type memPoint struct {
	Preset    string  `json:"preset"`
	Seq       int     `json:"seq"`
	Attention string  `json:"attention"`
	Remat     string  `json:"remat"`
	Seconds   float64 `json:"step_seconds"`     // the second step (the first compiles)
	CPU       float64 `json:"step_cpu_seconds"` // process CPU time of the second step (robust to load)
	Loss      float32 `json:"loss"`
	PeakRSS   int64   `json:"peak_rss_bytes"` // the child's VmHWM
	Estimate  int64   `json:"estimate_bytes"` // TrainStepMemory's estimate
	MaxRSS    int64   `json:"maxrss_bytes"`   // getrusage of the child, read by the parent
}

// TestMemoryCurve measures the peak RSS of training `small` (TEMPER_MEMCURVE_PRESET) at batch 1
// per sequence length and mode, one fresh process per point (peak RSS never goes down within a
// process): two TrainSteps each (compile, then the timed one), VmHWM read by the child and the
// child's max RSS by the parent. Minutes of CPU; opt in:
//
//	TEMPER_MEMCURVE=1 GOEXPERIMENT=simd go test ./tpu/ -run 'TestMemoryCurve$' -v -timeout 180m
//
// TEMPER_MEMCURVE_SEQ (default 2048,4096,8192,16384), TEMPER_MEMCURVE_MODES (attention/remat
// pairs, default blocked/layer,blocked/none,plain/none), TEMPER_MEMCURVE_MAX_GIB (default 12:
// points whose TrainStepMemory estimate is larger are skipped, not run). docs/engine-memory.md
// has the numbers.
func TestMemoryCurve(t *testing.T) {
	if os.Getenv("TEMPER_MEMCURVE") == "" {
		t.Skip("set TEMPER_MEMCURVE=1")
	}
	preset := envOr("TEMPER_MEMCURVE_PRESET", "small")
	var seqs []int
	for _, s := range strings.Split(envOr("TEMPER_MEMCURVE_SEQ", "2048,4096,8192,16384"), ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("TEMPER_MEMCURVE_SEQ: %v", err)
		}
		seqs = append(seqs, n)
	}
	maxGiB, err := strconv.ParseFloat(envOr("TEMPER_MEMCURVE_MAX_GIB", "12"), 64)
	if err != nil {
		t.Fatalf("TEMPER_MEMCURVE_MAX_GIB: %v", err)
	}
	var points []memPoint
	for _, mode := range strings.Split(envOr("TEMPER_MEMCURVE_MODES", "blocked/layer,blocked/none,plain/none"), ",") {
		attention, remat, _ := strings.Cut(mode, "/")
		for _, seq := range seqs {
			cfg, err := memCurveConfig(preset, seq, attention, remat)
			if err != nil {
				t.Fatal(err)
			}
			est, err := stepMemory(t, cfg, seq)
			if err != nil {
				t.Fatal(err)
			}
			if float64(est) > maxGiB*(1<<30) {
				t.Logf("%s seq %d %s: skipped, estimate %.1f GiB > %.0f GiB", preset, seq, mode, float64(est)/(1<<30), maxGiB)
				continue
			}
			p, err := memCurveChild(preset, seq, attention, remat)
			if err != nil {
				t.Fatalf("%s seq %d %s: %v", preset, seq, mode, err)
			}
			t.Logf("%s seq %6d %-14s step %7.2f s (CPU %7.2f s)  peak RSS %6.0f MiB (maxrss %6.0f)  estimate %6.0f MiB  loss %.4f",
				preset, seq, mode, p.Seconds, p.CPU, float64(p.PeakRSS)/(1<<20), float64(p.MaxRSS)/(1<<20), float64(p.Estimate)/(1<<20), p.Loss)
			points = append(points, p)
		}
	}
	js, _ := json.MarshalIndent(map[string]any{"date": time.Now().UTC().Format(time.RFC3339), "goarch": runtime.GOARCH,
		"cpus": runtime.NumCPU(), "points": points}, "", "  ")
	t.Logf("\n%s", js)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

func memCurveConfig(preset string, seq int, attention, remat string) (model.Config, error) {
	cfg, err := model.Preset(preset)
	if err != nil {
		return cfg, err
	}
	cfg.MaxSeq = max(cfg.MaxSeq, seq)
	cfg.Attention, cfg.Remat = attention, remat
	return cfg, cfg.Validate()
}

// stepMemory is TrainStepMemory's estimate for one row of seq tokens, compiled but not run.
func stepMemory(t *testing.T, cfg model.Config, seq int) (int64, error) {
	r, err := New(Options{Model: cfg, Seed: 1, ExecTimeout: -1})
	if err != nil {
		return 0, err
	}
	defer r.Close()
	plan, err := r.TrainStepMemory(1, seq)
	return plan.EstimateBytes, err
}

// memCurveChild runs TestMemoryCurveChild in a new process for one point.
func memCurveChild(preset string, seq int, attention, remat string) (memPoint, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryCurveChild$", "-test.v", "-test.timeout=0")
	cmd.Env = append(os.Environ(), fmt.Sprintf("TEMPER_MEMCURVE_CHILD=%s,%d,%s,%s", preset, seq, attention, remat))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return memPoint{}, fmt.Errorf("child: %w\n%s", err, out.String())
	}
	var p memPoint
	sc := bufio.NewScanner(&out)
	found := false
	for sc.Scan() {
		if _, js, ok := strings.Cut(sc.Text(), "MEMCURVE "); ok {
			if err := json.Unmarshal([]byte(js), &p); err != nil {
				return p, fmt.Errorf("child output %q: %w", js, err)
			}
			found = true
		}
	}
	if !found {
		return p, fmt.Errorf("child printed no MEMCURVE line:\n%s", out.String())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		p.MaxRSS = ru.Maxrss << 10 // kilobytes on Linux
	}
	return p, nil
}

// cpuSeconds is the process's CPU time so far (user and system).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// TestMemoryCurveChild is one point of TestMemoryCurve (it runs only as its child).
func TestMemoryCurveChild(t *testing.T) {
	spec := os.Getenv("TEMPER_MEMCURVE_CHILD")
	if spec == "" {
		t.Skip("run by TestMemoryCurve")
	}
	var p memPoint
	parts := strings.Split(spec, ",")
	if len(parts) != 4 {
		t.Fatalf("TEMPER_MEMCURVE_CHILD=%q: want preset,seq,attention,remat", spec)
	}
	p.Preset, p.Attention, p.Remat = parts[0], parts[2], parts[3]
	var err error
	if p.Seq, err = strconv.Atoi(parts[1]); err != nil {
		t.Fatal(err)
	}
	cfg, err := memCurveConfig(p.Preset, p.Seq, p.Attention, p.Remat)
	if err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t, Options{Model: cfg, Seed: 1, ExecTimeout: -1})
	plan, err := r.TrainStepMemory(1, p.Seq)
	if err != nil {
		t.Fatal(err)
	}
	p.Estimate = plan.EstimateBytes
	batch := randomBatch(t, cfg.Vocab, 1, p.Seq, 1)
	for range 2 {
		c0 := cpuSeconds()
		m, err := r.TrainStep(batch, 1e-3)
		if err != nil {
			t.Fatal(err)
		}
		p.Seconds, p.Loss, p.CPU = m.Seconds, m.Loss, cpuSeconds()-c0
	}
	mem, err := ReadMemory()
	if err != nil {
		t.Fatal(err)
	}
	p.PeakRSS = mem.PeakRSS
	js, _ := json.Marshal(p)
	fmt.Printf("MEMCURVE %s\n", js)
}
