package tpu

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/sample"
)

func TestBenchModel(t *testing.T) {
	var lines []string
	rep, err := BenchModel(context.Background(), BenchOptions{Presets: []string{"tiny"}, Batch: 2, Seq: 16, Steps: 2,
		GenPrompts: 4, GenPromptLen: 4, GenTokens: 8, PeakGFLOPS: 50, Progress: func(l string) { lines = append(lines, l) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 1 || rep.Backend != "go (sequential)" || len(lines) != 4 {
		t.Fatalf("report %+v, progress %q", rep, lines)
	}
	w := rep.Rows[0]
	for name, v := range map[string]float64{"compile": w.CompileSeconds, "step": w.StepSeconds,
		"train tok/s": w.TrainTokensPerSec, "GFLOP/s": w.TrainGFLOPS, "MFU": w.TrainMFU,
		"cached tok/s": w.CachedTokensPerSec, "uncached tok/s": w.UncachedTokensPerSec, "speedup": w.Speedup,
		"peak rss": float64(w.PeakRSS)} {
		if !(v > 0) {
			t.Errorf("%s = %v, want > 0", name, v)
		}
	}
	if w.TrainMFU != w.TrainGFLOPS/50 {
		t.Errorf("MFU %v, want GFLOP/s %v / peak 50", w.TrainMFU, w.TrainGFLOPS)
	}
	s := rep.String()
	for _, want := range []string{"preset", "tiny", "2×16", "4×8", "MFU vs 50.0 GFLOP/s", fmt.Sprintf("%.1f%%", 100*w.TrainMFU), "speedup"} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	noPeak := rep
	noPeak.PeakGFLOPS = 0
	if s := noPeak.String(); !strings.Contains(s, "no MFU (no peak)") || strings.Contains(s, "%") {
		t.Errorf("without a peak the table must say so and print no MFU:\n%s", s)
	}
	js, err := rep.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var back BenchReport
	if err := json.Unmarshal(js, &back); err != nil || back.Rows[0].Preset != "tiny" || back.Rows[0].Speedup != w.Speedup {
		t.Fatalf("JSON round trip: %v\n%s", err, js)
	}
	t.Logf("\n%s", s)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := BenchModel(ctx, BenchOptions{Presets: []string{"tiny"}, Batch: 1, Seq: 8, Steps: 1, GenPrompts: -1}); err == nil {
		t.Fatal("cancelled context: want an error")
	}
	if _, err := BenchModel(context.Background(), BenchOptions{Presets: []string{"huge"}}); err == nil ||
		!strings.Contains(err.Error(), `preset "huge"`) {
		t.Fatalf("unknown preset: err %v", err)
	}
}

// TestBenchReport prints the full benchmark (all presets at the defaults: 16×128 training, 64×64
// generation). Minutes of CPU; opt in with TEMPER_BENCH=1 (TEMPER_BENCH_PRESETS=tiny,small to
// narrow it, TEMPER_BENCH_MODE=parallel for the parallel executor, TEMPER_BENCH_UNCACHED=n for
// fewer uncached tokens):
//
//	TEMPER_BENCH=1 GOEXPERIMENT=simd go test ./tpu/ -run TestBenchReport -v -timeout 60m
func TestBenchReport(t *testing.T) {
	if os.Getenv("TEMPER_BENCH") == "" {
		t.Skip("set TEMPER_BENCH=1")
	}
	o := BenchOptions{Mode: os.Getenv("TEMPER_BENCH_MODE"), Progress: func(l string) { t.Log(l) }}
	if p := os.Getenv("TEMPER_BENCH_PRESETS"); p != "" {
		o.Presets = strings.Split(p, ",")
	}
	if u := os.Getenv("TEMPER_BENCH_UNCACHED"); u != "" {
		fmt.Sscan(u, &o.UncachedTokens)
	}
	rep, err := BenchModel(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	js, _ := rep.JSON()
	t.Logf("\n%s\n%s", rep, js)
}

// BenchmarkModel runs BenchModel itself (tiny preset, small shapes) as a Go benchmark.
//
//	GOEXPERIMENT=simd go test ./tpu/ -run '^$' -bench Model -benchtime 1x
func BenchmarkModel(b *testing.B) {
	var w BenchRow
	for range b.N {
		rep, err := BenchModel(context.Background(), BenchOptions{Presets: []string{"tiny"}, Batch: 8, Seq: 64,
			Steps: 3, GenPrompts: 16, GenTokens: 16})
		if err != nil {
			b.Fatal(err)
		}
		w = rep.Rows[0]
	}
	b.ReportMetric(w.TrainTokensPerSec, "train-tok/s")
	b.ReportMetric(w.TrainGFLOPS, "GFLOP/s")
	b.ReportMetric(w.Speedup, "gen-speedup")
}

var benchPresets = []struct {
	preset     string
	batch, seq int
}{
	{"tiny", 16, 128},
	{"small", 16, 128},
	{"base", 16, 128},
}

// BenchmarkTrainStep: one TrainStep (forward, backward, clipping, AdamW) per iteration; reports
// tok/s, GFLOP/s and the process's peak RSS (MFU: `temper bench model`, against the measured peak).
//
//	GOEXPERIMENT=simd go test ./tpu/ -run '^$' -bench TrainStep/base -benchtime 5x -cpuprofile cpu.out
func BenchmarkTrainStep(b *testing.B) {
	for _, mode := range []string{ExecutorSequential, ExecutorParallel} {
		for _, s := range benchPresets {
			b.Run(fmt.Sprintf("%s/%s", s.preset, mode), func(b *testing.B) {
				cfg, err := model.Preset(s.preset)
				if err != nil {
					b.Fatal(err)
				}
				r := newRuntime(b, Options{Model: cfg, Seed: 1, Executor: mode, ExecTimeout: -1})
				batch := randomBatch(b, cfg.Vocab, s.batch, s.seq, 1)
				if _, err := r.TrainStep(batch, 1e-3); err != nil { // compile + first step
					b.Fatal(err)
				}
				r.ResetStats()
				b.ResetTimer()
				for range b.N {
					if _, err := r.TrainStep(batch, 1e-3); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				st := r.Stats().Train
				b.ReportMetric(st.TokensPerSec, "tok/s")
				b.ReportMetric(st.GFLOPS, "GFLOP/s")
				if m, err := ReadMemory(); err == nil {
					b.ReportMetric(float64(m.PeakRSS)/(1<<20), "peakRSS-MB")
				}
			})
		}
	}
}

// BenchmarkGenerate: 64 prompts × 64 new tokens, greedy, with the KV cache.
//
//	GOEXPERIMENT=simd go test ./tpu/ -run '^$' -bench Generate -benchtime 2x
func BenchmarkGenerate(b *testing.B) {
	for _, preset := range []string{"tiny", "small", "base"} {
		b.Run(preset, func(b *testing.B) {
			cfg, err := model.Preset(preset)
			if err != nil {
				b.Fatal(err)
			}
			r := newRuntime(b, Options{Model: cfg, Seed: 1, ExecTimeout: -1})
			prompts := make([][]int, 64)
			for i := range prompts {
				prompts[i] = randomBatch(b, cfg.Vocab, 1, 16, uint64(i)).Tokens[0]
			}
			opts := sample.Options{MaxNewTokens: 64}
			if _, err := r.Generate(prompts, opts); err != nil { // compile
				b.Fatal(err)
			}
			r.ResetStats()
			b.ResetTimer()
			for range b.N {
				if _, err := r.Generate(prompts, opts); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			g := r.Stats().Generate
			b.ReportMetric(g.TokensPerSec, "tok/s")
			b.ReportMetric(g.GFLOPS, "GFLOP/s")
		})
	}
}
