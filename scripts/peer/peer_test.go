package peer

import (
	"context"
	"math"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseISA(t *testing.T) {
	const zen4 = "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14\n" +
		"flags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512dq avx512bw\n\nprocessor\t: 1\nmodel name\t: other\nflags\t\t: fpu\n"
	for _, tc := range []struct {
		name, cpuinfo string
		want          ISA
	}{
		{"avx-512 (first processor wins)", zen4, ISA{Model: "AMD EPYC 9R14", Vector: "avx512f"}},
		{"avx2 only", "model name : AMD EPYC\nflags : sse avx avx2 fma\n", ISA{Model: "AMD EPYC", Vector: "avx2"}},
		// avx512vl alone must not count: the kernels need the foundation set.
		{"avx512vl is not avx512f", "flags : avx avx2 avx512vl\n", ISA{Vector: "avx2"}},
		{"avx", "flags : sse avx\n", ISA{Vector: "avx"}},
		{"no vector flags", "flags : fpu sse\n", ISA{Vector: "none"}},
		{"no cpuinfo", "", ISA{Vector: "unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ParseISA(tc.cpuinfo); got != tc.want {
				t.Fatalf("ParseISA = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestSummarize(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		want Figure
	}{
		{"odd", []float64{3, 1, 2}, Figure{Median: 2, Min: 1, Max: 3, Spread: 1, N: 3}},
		{"even", []float64{100, 110, 90, 100}, Figure{Median: 100, Min: 90, Max: 110, Spread: 0.2, N: 4}},
		{"one", []float64{5}, Figure{Median: 5, Min: 5, Max: 5, N: 1}},
		{"unmeasured left out", []float64{0, 4, 0, 6}, Figure{Median: 5, Min: 4, Max: 6, Spread: 0.4, N: 2}},
		{"none", []float64{0}, Figure{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Summarize(tc.xs)
			if math.Abs(got.Spread-tc.want.Spread) > 1e-12 {
				t.Fatalf("spread %g, want %g", got.Spread, tc.want.Spread)
			}
			got.Spread = tc.want.Spread
			if got != tc.want {
				t.Fatalf("Summarize = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestCompare(t *testing.T) {
	samples := []Sample{
		{SidePeer, 1, "tiny", 20000, 14000}, {SideTemper, 1, "tiny", 3000, 3500},
		{SideTemper, 2, "tiny", 3200, 3700}, {SidePeer, 2, "tiny", 24000, 14000},
		{SidePeer, 1, "small", 6000, 0}, {SideTemper, 1, "small", 900, 0},
		{SideTemper, 1, "base", 250, 100}, // no peer sample: no ratio
	}
	rows := Compare([]string{"tiny", "small", "base"}, samples)
	if len(rows) != 3 || rows[0].Preset != "tiny" || rows[1].Preset != "small" || rows[2].Preset != "base" {
		t.Fatalf("rows %+v: want tiny, small, base in that order", rows)
	}
	for _, tc := range []struct {
		name      string
		got, want float64
	}{
		{"tiny train ratio", rows[0].TrainRatio, 3100.0 / 22000},
		{"tiny gen ratio", rows[0].GenRatio, 3600.0 / 14000},
		{"tiny temper train spread", rows[0].TemperTrain.Spread, 200.0 / 3100},
		{"tiny peer train spread", rows[0].PeerTrain.Spread, 4000.0 / 22000},
		{"small train ratio", rows[1].TrainRatio, 0.15},
		{"small gen not measured", rows[1].GenRatio, 0},
		{"base without peer", rows[2].TrainRatio, 0},
	} {
		if math.Abs(tc.got-tc.want) > 1e-12 {
			t.Errorf("%s = %g, want %g", tc.name, tc.got, tc.want)
		}
	}
	c := Comparison{ISA: ISA{Model: "AMD EPYC", Vector: "avx2", CPUs: 2}, Repeats: 2, Rows: rows}
	c.Peer.Threads = map[string]any{"torch": 1, "OPENBLAS_NUM_THREADS": "2", "OMP_NUM_THREADS": ""}
	out := c.String()
	for _, want := range []string{"vector ISA avx2", "OMP_NUM_THREADS=unset OPENBLAS_NUM_THREADS=2 torch=1",
		"3100 ±6%", "22000 ±18%", "0.14", "0.26", "0.15"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	if base := out[strings.LastIndex(out, "base"):]; !strings.Contains(base, "250 ±0%") || strings.Count(base, "-") != 4 {
		t.Errorf("base row should show Temper's figure and '-' for the rest: %q", base)
	}
}

// fakeOutput is what bench_torch.py prints, trimmed to the fields Parse reads.
const fakeOutput = `{"peer": "pytorch", "torch_version": "1.13.0a0", "python": "/usr/bin/python3",
 "blas_libraries": ["/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3",
   "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so"],
 "openblas_core": "Haswell", "matmul512_gflops": 40.9, "threads": {"torch": 1, "interop": 1, "OPENBLAS_NUM_THREADS": "2"},
 "decode_attend": "filled",
 "rows": [{"preset": "tiny", "params": 90944, "batch": 16, "seq": 128, "step_seconds": [0.1, 0.1],
   "train_tokens_per_sec": 20480, "gen_prompts": 64, "gen_tokens": 64, "gen_seconds": [0.3],
   "cached_tokens_per_sec": 13653.3}]}`

func TestParse(t *testing.T) {
	r, err := Parse([]byte(fakeOutput))
	if err != nil {
		t.Fatal(err)
	}
	row, ok := r.Row("tiny")
	if !ok || row.TrainTokensPerSec != 20480 || row.CachedTokensPerSec != 13653.3 || row.Params != 90944 {
		t.Fatalf("row %+v", row)
	}
	if _, ok := r.Row("base"); ok {
		t.Fatal("Row(base) found a row that is not there")
	}
	if r.BLAS() != "libopenblasp-r0.3.21.so (Haswell kernels)" || r.SlowBLAS() != "" {
		t.Fatalf("BLAS %q, SlowBLAS %q", r.BLAS(), r.SlowBLAS())
	}
	for _, tc := range []struct{ name, from, to, want string }{
		{"not json", `{"peer"`, `{peer`, "parse output"},
		{"other peer", `"pytorch"`, `"jax"`, `peer="jax"`},
		{"no train figure", `"train_tokens_per_sec": 20480`, `"train_tokens_per_sec": 0`, "(tiny): train_tokens_per_sec=0"},
		{"no gen figure", `"cached_tokens_per_sec": 13653.3`, `"cached_tokens_per_sec": 0`, "cached_tokens_per_sec=0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(strings.Replace(fakeOutput, tc.from, tc.to, 1)))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := Parse([]byte(`{"peer": "pytorch", "rows": []}`)); err == nil || !strings.Contains(err.Error(), "no rows") {
		t.Fatalf("empty rows: err %v", err)
	}
}

func TestSlowBLAS(t *testing.T) {
	for _, tc := range []struct {
		name   string
		libs   []string
		gflops float64
		want   string // "" → fine
	}{
		{"openblas", []string{"/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"}, 40, ""},
		{"reference blas", []string{"/usr/lib/x86_64-linux-gnu/blas/libblas.so.3.11.0"}, 3, "not running on OpenBLAS"},
		{"openblas but slow", []string{"/usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3"}, 2.5, "2.5 GFLOP per CPU-second"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Report{BLASLibraries: tc.libs, MatmulGFLOPS: 1, MatmulPerCPU: tc.gflops}.SlowBLAS()
			if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
				t.Fatalf("SlowBLAS = %q, want %q", got, tc.want)
			}
			if got != "" && !strings.Contains(got, "install.sh") {
				t.Fatalf("SlowBLAS = %q: does not say how to fix it", got)
			}
		})
	}
}

func TestArgs(t *testing.T) {
	got := Options{Presets: []string{"tiny", "small"}, Steps: 2, GenPrompts: -1, DecodeAttend: "full", Seed: 3,
		Threads: Threads{Torch: 1, BLAS: 2}}.Args()
	want := []string{"--presets", "tiny,small", "--steps", "2", "--gen-prompts", "-1", "--torch-threads", "1",
		"--blas-threads", "2", "--decode-attend", "full", "--seed", "3"}
	if !slices.Equal(got, want) {
		t.Fatalf("Args = %q, want %q", got, want)
	}
}

// TestRunScript runs the real script on a small workload: it needs Debian's python3-torch, so it
// skips in -short and where torch is not importable.
func TestRunScript(t *testing.T) {
	if testing.Short() {
		t.Skip("runs PyTorch: long test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := Available(ctx); err != nil {
		t.Skipf("no peer here: %v", err)
	}
	r, err := Run(ctx, Options{Presets: []string{"tiny"}, Batch: 2, Seq: 16, Steps: 1, GenPrompts: 3, GenPromptLen: 5,
		GenTokens: 4, Threads: Threads{Torch: 1, Interop: 1, BLAS: 1}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	row, ok := r.Row("tiny")
	// Temper's tiny preset: 90,944 parameters (model.Config.ParamCount).
	if !ok || row.Params != 90944 || row.Batch != 2 || row.Seq != 16 || len(row.StepSeconds) != 1 || row.GenTokens != 4 {
		t.Fatalf("row %+v", row)
	}
	// Random tokens over 264 ids: the first loss is near ln(264) ≈ 5.58 at N(0, 0.02) init.
	if math.Abs(row.LossFirst-math.Log(264)) > 0.1 {
		t.Fatalf("first loss %g, want ≈ ln 264 = %g", row.LossFirst, math.Log(264))
	}
	if r.Threads["OPENBLAS_NUM_THREADS"] != "1" || r.Threads["torch"] != float64(1) {
		t.Fatalf("threads %v: want torch 1, OPENBLAS_NUM_THREADS 1", r.Threads)
	}
	if w := r.SlowBLAS(); w != "" {
		t.Logf("warning: %s", w)
	}
	if _, err := Run(ctx, Options{Presets: []string{"huge"}}, nil); err == nil || !strings.Contains(err.Error(), "unknown preset 'huge'") {
		t.Fatalf("bad preset: err %v", err)
	}
}
