package tpu

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"runtime/metrics"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gomlx/compute/gobackend"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/sample"
)

// TestTrainStepOpProfile runs training steps under the engine's op profile (the fork's
// instrumented sequential executor) and prints where a step's time goes: by op class (matmul,
// transpose, elementwise, reductions, softmax...), the top ops by shape, and the Go runtime's GC
// CPU. Opt in with TEMPER_BENCH=1; TEMPER_BENCH_PRESETS picks the preset (default base),
// TEMPER_BENCH_STEPS the profiled steps (default 3), TEMPER_BENCH_TOP the rows (default 40):
//
//	TEMPER_BENCH=1 TEMPER_BENCH_PRESETS=small GOEXPERIMENT=simd go test ./tpu/ -run TestTrainStepOpProfile -v
//
// CPU time is the whole process's (a matmul's workers included) over each op: on a machine
// shared with other jobs it is steadier than wall time. "thread" is the CPU time of the thread that
// ran the op (the executing goroutine is locked to one): its sum estimates a step's wall time on an idle
// machine (an op split across workers counts the caller's share).
func TestTrainStepOpProfile(t *testing.T) {
	if os.Getenv("TEMPER_BENCH") == "" {
		t.Skip("set TEMPER_BENCH=1")
	}
	preset := "base"
	if p := os.Getenv("TEMPER_BENCH_PRESETS"); p != "" {
		preset = strings.Split(p, ",")[0]
	}
	steps, top := envInt(t, "TEMPER_BENCH_STEPS", 3), envInt(t, "TEMPER_BENCH_TOP", 40)
	cfg, err := model.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	// Each execution runs on its own goroutine (the watchdog's): lock it to its thread so per-op
	// thread CPU times are that thread's (the thread exits with the goroutine).
	r := newRuntime(t, Options{Model: cfg, Seed: 1, Executor: ExecutorSequential, ExecTimeout: -1,
		execHook: func(string) { runtime.LockOSThread() }})
	b := randomBatch(t, cfg.Vocab, 16, 128, 1)
	for range 2 { // compile, then one step so buffers are pooled
		if _, err := r.TrainStep(b, 1e-3); err != nil {
			t.Fatal(err)
		}
	}
	gc0 := gcCPU()
	gobackend.StartOpProfile()
	start, cpu0 := time.Now(), processCPUTime(t)
	for range steps {
		if _, err := r.TrainStep(b, 1e-3); err != nil {
			gobackend.StopOpProfile()
			t.Fatal(err)
		}
	}
	wall, cpu := time.Since(start), processCPUTime(t)-cpu0
	stats := gobackend.StopOpProfile()
	gc := gcCPU() - gc0

	t.Logf("\n%s", opReport(fmt.Sprintf("%s 16×128, %d steps", preset, steps), stats, steps, top, wall, cpu, gc))
}

// TestGenerateOpProfile is TestTrainStepOpProfile for cached generation: calls of the bench's
// generation (64 prompts × 16 tokens, 64 new; TEMPER_BENCH_GEN_PROMPTS changes the prompts) under
// the op profile, per call (a call is one prefill and 63 decode steps, each step ~150 ops):
//
//	TEMPER_BENCH=1 TEMPER_BENCH_PRESETS=base GOEXPERIMENT=simd go test ./tpu/ -run TestGenerateOpProfile -v
func TestGenerateOpProfile(t *testing.T) {
	if os.Getenv("TEMPER_BENCH") == "" {
		t.Skip("set TEMPER_BENCH=1")
	}
	preset := "base"
	if p := os.Getenv("TEMPER_BENCH_PRESETS"); p != "" {
		preset = strings.Split(p, ",")[0]
	}
	calls, top := envInt(t, "TEMPER_BENCH_STEPS", 3), envInt(t, "TEMPER_BENCH_TOP", 40)
	n := envInt(t, "TEMPER_BENCH_GEN_PROMPTS", 64)
	cfg, err := model.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t, Options{Model: cfg, Seed: 1, Executor: ExecutorSequential, ExecTimeout: -1,
		execHook: func(string) { runtime.LockOSThread() }})
	rng := rand.New(rand.NewPCG(1, 2))
	prompts := make([][]int, n)
	for i := range prompts {
		prompts[i] = make([]int, 16)
		for j := range prompts[i] {
			prompts[i][j] = rng.IntN(cfg.Vocab)
		}
	}
	opts := sample.Options{MaxNewTokens: 64, Seed: 1}
	for range 2 { // compile, then one call so buffers are pooled
		if _, err := r.Generate(prompts, opts); err != nil {
			t.Fatal(err)
		}
	}
	gc0 := gcCPU()
	gobackend.StartOpProfile()
	start, cpu0 := time.Now(), processCPUTime(t)
	for range calls {
		if _, err := r.Generate(prompts, opts); err != nil {
			gobackend.StopOpProfile()
			t.Fatal(err)
		}
	}
	wall, cpu := time.Since(start), processCPUTime(t)-cpu0
	stats := gobackend.StopOpProfile()
	gc := gcCPU() - gc0
	t.Logf("\n%s\ncached tok/s %.0f", opReport(fmt.Sprintf("%s generation %d×16+64, %d calls", preset, n, calls), stats, calls, top, wall, cpu, gc),
		float64(calls*n*64)/wall.Seconds())
}

// opReport prints an op profile of `steps` repetitions (a training step or a generation call): the
// wall and CPU time of each, by op class, and the top ops by shape.
func opReport(title string, stats []gobackend.OpStat, steps, top int, wall, cpu time.Duration, gc float64) string {
	per := func(d time.Duration) float64 { return d.Seconds() / float64(steps) }
	var opsCPU, opsThread time.Duration
	classes := map[string]*gobackend.OpStat{}
	for _, s := range stats {
		opsCPU += s.CPU
		opsThread += s.Thread
		c := opClass(s.Op)
		if classes[c] == nil {
			classes[c] = &gobackend.OpStat{Key: c}
		}
		classes[c].Count += s.Count
		classes[c].Wall += s.Wall
		classes[c].CPU += s.CPU
		classes[c].Thread += s.Thread
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s: per step wall %.3f s, process CPU %.3f s, ops' CPU %.3f s, ops' thread %.3f s, GC CPU %.3f s\n",
		title, per(wall), per(cpu), per(opsCPU), per(opsThread), gc/float64(steps))
	names := make([]string, 0, len(classes))
	for c := range classes {
		names = append(names, c)
	}
	sort.Slice(names, func(i, j int) bool { return classes[names[i]].CPU > classes[names[j]].CPU })
	fmt.Fprintf(&sb, "%-12s %6s %9s %9s %9s %6s\n", "class", "ops", "cpu s", "thread s", "wall s", "cpu%")
	for _, c := range names {
		s := classes[c]
		fmt.Fprintf(&sb, "%-12s %6d %9.4f %9.4f %9.4f %5.1f%%\n", c, s.Count/steps, per(s.CPU), per(s.Thread), per(s.Wall), 100*s.CPU.Seconds()/opsCPU.Seconds())
	}
	fmt.Fprintf(&sb, "\ntop %d ops (per step):\n%6s %5s %9s %9s %9s  %s\n", top, "cpu%", "n", "cpu ms", "thread ms", "wall ms", "op")
	for i, s := range stats {
		if i == top {
			break
		}
		fmt.Fprintf(&sb, "%5.1f%% %5d %9.2f %9.2f %9.2f  %s\n", 100*s.CPU.Seconds()/opsCPU.Seconds(), s.Count/steps,
			1e3*per(s.CPU), 1e3*per(s.Thread), 1e3*per(s.Wall), s.Key)
	}
	return sb.String()
}

// opClass groups op types into the classes a training step's profile is read by.
func opClass(op string) string {
	switch {
	case op == "DotGeneral":
		return "matmul"
	case op == "Transpose":
		return "transpose"
	case strings.HasPrefix(op, "Reduce") || op == "ArgMinMax":
		return "reduce"
	case strings.Contains(op, "Softmax"):
		return "softmax"
	case strings.HasPrefix(op, "Gather") || strings.HasPrefix(op, "Scatter"):
		return "gather/scat"
	case op == "Reshape" || op == "Slice" || op == "Pad" || op == "Concatenate" || op == "BroadcastInDim" ||
		op == "Broadcast" || op == "Iota" || op == "ConvertDType" || op == "DynamicSlice" || op == "DynamicUpdateSlice":
		return "layout"
	}
	return "elementwise"
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

// gcCPU is the Go runtime's estimate of the CPU seconds spent in garbage collection so far.
func gcCPU() float64 {
	s := []metrics.Sample{{Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64 {
		return 0
	}
	return s[0].Value.Float64()
}

// processCPUTime is the process's user + system CPU time so far.
func processCPUTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestDecodeFusesGLUAndRMSNorm: cached generation's graphs hold the engine's fused gated MLP and
// RMS norm (the fork's compilation passes match the op chains model's splitLinear, activate and
// rmsNorm build; a change there that breaks the match would otherwise only show as lost speed),
// and the decode attention writes the new key and value rows itself (no ScatterSum into the caches).
func TestDecodeFusesGLUAndRMSNorm(t *testing.T) {
	r := newRuntime(t, Options{Seed: 1, InitStd: 0.3, Executor: ExecutorSequential})
	prompts := [][]int{{1, 2, 3}, {4, 5}, {6}, {7, 8, 9, 10}}
	opts := sample.Options{MaxNewTokens: 3}
	if _, err := r.Generate(prompts, opts); err != nil { // compile outside the profile
		t.Fatal(err)
	}
	gobackend.StartOpProfile()
	_, err := r.Generate(prompts, opts)
	stats := gobackend.StopOpProfile()
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	for _, s := range stats {
		count[s.Op] += s.Count
	}
	for op, env := range map[string]string{"FusedGLU": "GOMLX_FUSE_GLU", "FusedRMSNorm": "GOMLX_FUSE_RMSNORM"} {
		if on, err := strconv.ParseBool(os.Getenv(env)); err == nil && !on {
			continue // switched off
		}
		if count[op] == 0 {
			t.Errorf("no %s op in cached generation (ops run: %v)", op, count)
		}
	}
	if count["FusedScaledDotProductAttention"] == 0 || count["ScatterSum"] != 0 {
		t.Errorf("cached generation: want the fused decode attention writing the caches and no ScatterSum (ops run: %v)", count)
	}
}
