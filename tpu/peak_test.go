package tpu

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestMatmulShapeFLOPs(t *testing.T) {
	for _, c := range []struct {
		s    MatmulShape
		want float64
		str  string
	}{
		{MatmulShape{M: 2, K: 3, N: 4}, 48, "2×3×4"},
		{MatmulShape{M: 1, K: 1, N: 1}, 2, "1×1×1"},
		{MatmulShape{M: 1024, K: 1024, N: 1024}, 1 << 31, "1024×1024×1024"},
		{MatmulShape{M: 2048, K: 384, N: 1024}, 2 * 2048 * 384 * 1024, "2048×384×1024"},
	} {
		if got := c.s.FLOPs(); got != c.want {
			t.Errorf("%v.FLOPs() = %v, want %v", c.s, got, c.want)
		}
		if got := c.s.String(); got != c.str {
			t.Errorf("String() = %q, want %q", got, c.str)
		}
	}
}

// TestThroughputMFU: MFU is GFLOP/s over the peak, and nothing without one.
func TestThroughputMFU(t *testing.T) {
	for _, c := range []struct {
		name              string
		tp                Throughput
		peak              float64
		gflops, mfu, toks float64
	}{
		{"half the peak", Throughput{Tokens: 100, Seconds: 2, FLOPs: 200e9}, 200, 100, 0.5, 50},
		{"at the peak", Throughput{Tokens: 1, Seconds: 0.5, FLOPs: 90e9}, 180, 180, 1, 2},
		{"no peak", Throughput{Tokens: 10, Seconds: 1, FLOPs: 5e9}, 0, 5, 0, 10},
		{"nothing timed", Throughput{}, 100, 0, 0, 0},
	} {
		tp := c.tp
		tp.derive(c.peak)
		if tp.GFLOPS != c.gflops || tp.MFU != c.mfu || tp.TokensPerSec != c.toks {
			t.Errorf("%s: GFLOP/s %v MFU %v tok/s %v, want %v %v %v", c.name, tp.GFLOPS, tp.MFU, tp.TokensPerSec, c.gflops, c.mfu, c.toks)
		}
	}
}

func TestMeasureMatmul(t *testing.T) {
	shapes := []MatmulShape{{M: 33, K: 17, N: 65, Label: "ragged"}, {M: 128, K: 256, N: 160}}
	var cpuReads int
	// A fake clock: 1 s more CPU time at every read, so each shape's timed calls took 1 CPU-second.
	cpu := func() (time.Duration, error) { cpuReads++; return time.Duration(cpuReads) * time.Second, nil }
	rates, err := MeasureMatmul(context.Background(), MatmulOptions{Shapes: shapes, PerShape: 20 * time.Millisecond,
		Group: 2 * time.Millisecond, CPUTime: cpu})
	if err != nil {
		t.Fatal(err)
	}
	if len(rates) != 2 || cpuReads != 4 {
		t.Fatalf("%d rates, %d CPU time reads; want 2 and 4", len(rates), cpuReads)
	}
	for i, r := range rates {
		if r.Shape != shapes[i] || r.Groups < 1 || r.Calls%r.Groups != 0 || !(r.Seconds > 0) || !(r.MedianGFLOPS > 0) ||
			!(r.BestGFLOPS >= r.MedianGFLOPS) || !(r.MeanGFLOPS > 0) {
			t.Errorf("rate %+v", r)
		}
		if mean := r.Shape.FLOPs() * float64(r.Calls) / r.Seconds / 1e9; r.MeanGFLOPS != mean {
			t.Errorf("%s: mean %v, want total FLOPs / total seconds %v", r.Shape, r.MeanGFLOPS, mean)
		}
		if want := r.Shape.FLOPs() * float64(r.Calls) / 1e9; r.CPUSeconds != 1 || r.GFLOPSPerCPUSecond != want {
			t.Errorf("%s: %v CPU-s, %v GFLOP per CPU-second; want 1 and %v", r.Shape, r.CPUSeconds, r.GFLOPSPerCPUSecond, want)
		}
	}
	// The small shape's calls take microseconds: they must run in groups of about Group.
	if r := rates[0]; r.Calls < 2*r.Groups {
		t.Errorf("%s: %d calls in %d groups, want groups of several calls", r.Shape, r.Calls, r.Groups)
	}
	rates, err = MeasureMatmul(context.Background(), MatmulOptions{Shapes: shapes[:1], PerShape: time.Millisecond})
	if err != nil || rates[0].CPUSeconds != 0 || rates[0].GFLOPSPerCPUSecond != 0 {
		t.Errorf("without CPUTime: %+v, %v", rates, err)
	}

	for _, c := range []struct {
		name string
		o    MatmulOptions
		want string
	}{
		{"shape", MatmulOptions{Shapes: []MatmulShape{{M: 0, K: 1, N: 1}}, PerShape: time.Millisecond}, "shape 0×1×1: every dimension must be >= 1"},
		{"duration", MatmulOptions{Shapes: shapes}, "duration 0s: must be > 0"},
		{"cpu time", MatmulOptions{Shapes: shapes, PerShape: time.Millisecond,
			CPUTime: func() (time.Duration, error) { return 0, errors.New("no rusage") }}, "no rusage"},
	} {
		if _, err := MeasureMatmul(context.Background(), c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := MeasureMatmul(ctx, MatmulOptions{Shapes: shapes[:1], PerShape: time.Second}); err == nil || !strings.Contains(err.Error(), "context canceled") {
		t.Errorf("cancelled: err %v", err)
	}
}

// TestCheckProduct: the check that keeps a broken kernel from passing for a fast one.
func TestCheckProduct(t *testing.T) {
	s := MatmulShape{M: 5, K: 7, N: 3}
	a, b := peakOperand(s.M*s.K, 1), peakOperand(s.K*s.N, 2)
	good := make([]float32, s.M*s.N)
	for i := range s.M {
		for j := range s.N {
			for k := range s.K {
				good[i*s.N+j] += a[i*s.K+k] * b[k*s.N+j]
			}
		}
	}
	if err := checkProduct(s, a, b, good); err != nil {
		t.Fatalf("a right product: %v", err)
	}
	for _, c := range []struct {
		name string
		edit func(p []float32) []float32
		want string
	}{
		{"corner", func(p []float32) []float32 { p[0] += 0.01; return p }, "product[0][0]"},
		{"centre", func(p []float32) []float32 { p[2*s.N+1] = 0; return p }, "product[2][1]"},
		{"last", func(p []float32) []float32 { p[len(p)-1] *= 2; return p }, "product[4][2]"},
		{"short", func(p []float32) []float32 { return p[:4] }, "4 elements, want 15"},
	} {
		p := c.edit(append([]float32(nil), good...))
		if err := checkProduct(s, a, b, p); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err %v, want %q", c.name, err, c.want)
		}
	}
}
