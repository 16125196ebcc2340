package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/temperml/temper/internal/usage"
	"github.com/temperml/temper/tpu"
)

func TestParseShapes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []tpu.MatmulShape
		err  string
	}{
		{"2048x384x1024", []tpu.MatmulShape{{M: 2048, K: 384, N: 1024}}, ""},
		{"1×2×3, 4x5x6", []tpu.MatmulShape{{M: 1, K: 2, N: 3}, {M: 4, K: 5, N: 6}}, ""},
		{"", nil, `"" is not M×K×N`},
		{"1x2", nil, `"1x2" is not M×K×N`},
		{"1x2x3x4", nil, `"1x2x3x4" is not M×K×N`},
		{"0x1x1", nil, `"0x1x1" is not M×K×N`},
		{"ax1x1", nil, `"ax1x1" is not M×K×N`},
		{"8x8x8,", nil, `"" is not M×K×N`},
	} {
		got, err := ParseShapes(c.in)
		if c.err != "" {
			var ue *usage.Error
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "--shapes") || !errors.As(err, &ue) {
				t.Errorf("ParseShapes(%q): err %v, want a usage error naming --shapes and %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil || len(got) != len(c.want) {
			t.Errorf("ParseShapes(%q) = %v, %v; want %v", c.in, got, err, c.want)
			continue
		}
		for i := range got {
			if got[i] != c.want[i] {
				t.Errorf("ParseShapes(%q)[%d] = %v, want %v", c.in, i, got[i], c.want[i])
			}
		}
	}
}

func TestDefaultPeakShapes(t *testing.T) {
	shapes, err := DefaultPeakShapes()
	if err != nil {
		t.Fatal(err)
	}
	// base: d_model 384, FFN 1024; 16 × 128 training tokens.
	want := []string{"1024×1024×1024", "2048×2048×2048", "2048×384×1024", "2048×1024×384", "384×2048×1024", "64×384×1024"}
	if len(shapes) != len(want) {
		t.Fatalf("%v, want %v", shapes, want)
	}
	for i, s := range shapes {
		if s.String() != want[i] || s.Label == "" {
			t.Errorf("shape %d = %v %q, want %s with a label", i, s, s.Label, want[i])
		}
	}
}

func TestCacheSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  bool
	}{
		{"32768K", 32 << 20, false},
		{"512K", 512 << 10, false},
		{"2M", 2 << 20, false},
		{"1G", 1 << 30, false},
		{"4096", 4096, false},
		{"", 0, true},
		{"32KB", 0, true},
		{"-1K", 0, true},
	} {
		got, err := parseCacheSize(c.in)
		if (err != nil) != c.err || got != c.want {
			t.Errorf("parseCacheSize(%q) = %d, %v; want %d (error %v)", c.in, got, err, c.want, c.err)
		}
	}

	dir := t.TempDir()
	for _, idx := range []struct{ name, level, size string }{
		{"index0", "1", "32K"}, {"index1", "1", "32K"}, {"index2", "2", "512K"}, {"index3", "3", "32768K"},
	} {
		d := filepath.Join(dir, idx.name)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(d, "level"), []byte(idx.level+"\n"), 0o644)
		os.WriteFile(filepath.Join(d, "size"), []byte(idx.size+"\n"), 0o644)
	}
	if got, err := lastLevelCache(dir); err != nil || got != 32<<20 {
		t.Errorf("lastLevelCache = %d, %v; want the level-3 cache, 32 MiB", got, err)
	}
	if _, err := lastLevelCache(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no index*/level and size") {
		t.Errorf("no caches: err %v", err)
	}
	os.WriteFile(filepath.Join(dir, "index3", "size"), []byte("lots\n"), 0o644)
	if _, err := lastLevelCache(dir); err == nil || !strings.Contains(err.Error(), "index3/size") {
		t.Errorf("bad size: err %v, want one naming the file", err)
	}
}

func TestTriadAndParallel(t *testing.T) {
	for _, c := range []struct{ n, threads int }{{1, 1}, {7, 2}, {10, 3}, {1000, 4}} {
		a, b, cc := make([]float32, c.n), make([]float32, c.n), make([]float32, c.n)
		for i := range b {
			b[i], cc[i] = float32(i), float32(2*i+1)
		}
		parallel(c.n, c.threads, func(lo, hi int) { triad(a[lo:hi], b[lo:hi], cc[lo:hi], 3) })
		for i := range a {
			if want := float32(i) + 3*float32(2*i+1); a[i] != want {
				t.Fatalf("n %d threads %d: a[%d] = %v, want %v", c.n, c.threads, i, a[i], want)
			}
		}
	}
}

// TestMeasurePeak runs the whole measurement on tiny sizes: the report's figures, its text and its
// JSON.
func TestMeasurePeak(t *testing.T) {
	var log bytes.Buffer
	shapes := []tpu.MatmulShape{{M: 64, K: 64, N: 64, Label: "tiny"}, {M: 96, K: 128, N: 80}}
	r, err := MeasurePeak(context.Background(), PeakOptions{Seconds: 0.02, Shapes: shapes, StreamBytes: 1 << 20, Log: &log})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Matmul) != 2 || r.GOMAXPROCS < 1 || r.CPUs < 1 || r.Seconds != 0.02 || r.GoVersion == "" {
		t.Fatalf("report %+v", r)
	}
	switch r.ISA {
	case "avx512f", "avx2", "none":
	default:
		t.Errorf("isa %q, want avx512f, avx2 or none", r.ISA)
	}
	best := math.Max(r.Matmul[0].MedianGFLOPS, r.Matmul[1].MedianGFLOPS)
	if !(best > 0) || r.PeakGFLOPS != best || r.PeakPerCoreGFLOPS != best/float64(r.GOMAXPROCS) {
		t.Errorf("peak %v (per core %v), want the best median %v over %d cores", r.PeakGFLOPS, r.PeakPerCoreGFLOPS, best, r.GOMAXPROCS)
	}
	peakRate := r.Matmul[1]
	if r.Matmul[0].MedianGFLOPS == best {
		peakRate = r.Matmul[0]
	}
	if r.PeakShape != peakRate.Shape || r.PeakGFLOPSPerCPUSecond != peakRate.GFLOPSPerCPUSecond {
		t.Errorf("peak shape %v (%v GFLOP per CPU-s) is not the best one's, %+v", r.PeakShape, r.PeakGFLOPSPerCPUSecond, peakRate)
	}
	if haveCPUTime && !(r.PeakGFLOPSPerCPUSecond > 0) {
		t.Errorf("no GFLOP per CPU-second: %+v", r.Matmul)
	}
	if len(r.Stream) != 2 || r.Stream[0].Kernel != "copy" || r.Stream[1].Kernel != "triad" {
		t.Fatalf("stream %+v", r.Stream)
	}
	for _, s := range r.Stream {
		if s.ArrayBytes != 1<<20 || s.Threads != r.GOMAXPROCS || s.Passes < 1 || !(s.MedianGBps > 0) || s.BestGBps < s.MedianGBps {
			t.Errorf("stream %+v", s)
		}
	}
	if r.Stream[0].Arrays != 2 || r.Stream[1].Arrays != 3 {
		t.Errorf("arrays per element: copy %d, triad %d; want STREAM's 2 and 3", r.Stream[0].Arrays, r.Stream[1].Arrays)
	}

	var text bytes.Buffer
	r.Text(&text)
	for _, want := range []string{"engine kernels: " + r.ISA, "64×64×64", "tiny", "median GFLOP/s", "attainable: ",
		"per core", "per CPU-s", "GFLOP per CPU-second there", "memory: float32 arrays of 1 MiB", "copy", "triad"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text lacks %q:\n%s", want, text.String())
		}
	}
	js, err := r.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"isa", "cpu", "gomaxprocs", "matmul", "peak_gflops", "peak_per_core_gflops", "peak_shape", "peak_gflops_per_cpu_second", "stream"} {
		if _, ok := m[k]; !ok {
			t.Errorf("JSON lacks %q: %s", k, js)
		}
	}
	if !strings.Contains(log.String(), "bench peak: float32 matmul 64×64×64") {
		t.Errorf("progress %q", log.String())
	}

	r, err = MeasurePeak(context.Background(), PeakOptions{Seconds: 0.01, Shapes: shapes[:1], StreamBytes: -1})
	if err != nil || len(r.Stream) != 0 {
		t.Fatalf("StreamBytes < 0 must skip the streams: %+v, %v", r, err)
	}
	text.Reset()
	r.Text(&text)
	if strings.Contains(text.String(), "memory:") {
		t.Errorf("no stream, yet:\n%s", text.String())
	}
}

func TestMeasurePeakErrors(t *testing.T) {
	tiny := []tpu.MatmulShape{{M: 8, K: 8, N: 8}}
	for _, c := range []struct {
		name  string
		o     PeakOptions
		want  string
		usage bool
	}{
		{"negative seconds", PeakOptions{Seconds: -1, Shapes: tiny}, "--seconds=-1: must be a positive number", true},
		{"NaN seconds", PeakOptions{Seconds: math.NaN(), Shapes: tiny}, "--seconds=NaN", true},
		{"infinite seconds", PeakOptions{Seconds: math.Inf(1), Shapes: tiny}, "--seconds=+Inf", true},
		{"bad shape", PeakOptions{Seconds: 0.01, Shapes: []tpu.MatmulShape{{M: 8, K: 0, N: 8}}}, "8×0×8: every dimension", false},
		{"tiny arrays", PeakOptions{Seconds: 0.01, Shapes: tiny, StreamBytes: 4}, "--stream-mib: arrays of 4 bytes", true},
	} {
		_, err := MeasurePeak(context.Background(), c.o)
		var ue *usage.Error
		if err == nil || !strings.Contains(err.Error(), c.want) || errors.As(err, &ue) != c.usage {
			t.Errorf("%s: err %v, want %q (usage error: %v)", c.name, err, c.want, c.usage)
		}
	}
}

// TestModelPeak: `bench model`'s MFU is against the peak measured in the run, or --peak.
func TestModelPeak(t *testing.T) {
	bo := tpu.BenchOptions{Presets: []string{"tiny"}, Batch: 2, Seq: 16, Steps: 1, GenPrompts: -1}
	po := PeakOptions{Seconds: 0.01, Shapes: []tpu.MatmulShape{{M: 64, K: 64, N: 64}}, StreamBytes: 64 << 20}
	for _, c := range []struct {
		name   string
		peak   float64
		source string
		text   string
	}{
		{"measured", 0, "measured", "peak measured in this run: "},
		{"flag", 40, "flag", "peak from --peak: 40.0 GFLOP/s"},
	} {
		o := ModelOptions{Bench: bo, Peak: po}
		o.Bench.PeakGFLOPS = c.peak
		rep, err := Model(context.Background(), o)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		js, err := rep.JSON()
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			tpu.BenchReport
			PeakSource string      `json:"peak_source"`
			Peak       *PeakReport `json:"peak"`
		}
		if err := json.Unmarshal(js, &got); err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, js)
		}
		want := c.peak
		if c.source == "measured" {
			if got.Peak == nil || len(got.Peak.Stream) != 0 || len(got.Peak.Matmul) != 1 {
				t.Fatalf("%s: in-run peak %+v: want the matmul only", c.name, got.Peak)
			}
			want = got.Peak.PeakGFLOPS
		} else if got.Peak != nil {
			t.Errorf("%s: a peak report without a measurement: %+v", c.name, got.Peak)
		}
		row := got.Rows[0]
		if got.PeakSource != c.source || !(want > 0) || got.PeakGFLOPS != want || row.TrainMFU != row.TrainGFLOPS/want {
			t.Errorf("%s: source %q peak %v MFU %v (GFLOP/s %v), want source %q peak %v", c.name, got.PeakSource,
				got.PeakGFLOPS, row.TrainMFU, row.TrainGFLOPS, c.source, want)
		}
		var text bytes.Buffer
		rep.Text(&text)
		if !strings.Contains(text.String(), c.text) || !strings.Contains(text.String(), "MFU vs ") {
			t.Errorf("%s: text lacks %q:\n%s", c.name, c.text, text.String())
		}
	}

	var text bytes.Buffer
	modelReport{source: peakNone}.Text(&text)
	if !strings.Contains(text.String(), "no MFU") || !strings.Contains(text.String(), "--peak") {
		t.Errorf("no peak: %s", text.String())
	}

	for _, c := range []struct {
		name string
		o    ModelOptions
		want string
	}{
		{"negative", ModelOptions{Bench: tpu.BenchOptions{PeakGFLOPS: -5}}, "--peak=-5"},
		{"NaN", ModelOptions{Bench: tpu.BenchOptions{PeakGFLOPS: math.NaN()}}, "--peak=NaN"},
		{"with the peer", ModelOptions{Bench: tpu.BenchOptions{PeakGFLOPS: 100}, Peer: &PeerOptions{Repeats: 1}}, "--peer: --peak"},
	} {
		_, err := Model(context.Background(), c.o)
		var ue *usage.Error
		if err == nil || !strings.Contains(err.Error(), c.want) || !errors.As(err, &ue) {
			t.Errorf("%s: err %v, want a usage error with %q", c.name, err, c.want)
		}
	}
	// An unknown preset is reported before the peak's seconds, not after.
	start := time.Now()
	_, err := Model(context.Background(), ModelOptions{Bench: tpu.BenchOptions{Presets: []string{"tiny", "huge"}}, Peak: PeakOptions{Seconds: 12, Shapes: []tpu.MatmulShape{{M: 8, K: 8, N: 8}}}})
	if err == nil || !strings.Contains(err.Error(), `preset "huge"`) || time.Since(start) > 10*time.Second {
		t.Errorf("unknown preset: err %v after %v", err, time.Since(start))
	}
}
