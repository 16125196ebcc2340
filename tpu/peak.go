package tpu

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"slices"
	"time"

	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"
)

// MatmulShape is one float32 product [M, K] · [K, N] (row-major operands, no transposes).
type MatmulShape struct {
	M     int    `json:"m"`
	K     int    `json:"k"`
	N     int    `json:"n"`
	Label string `json:"label,omitempty"` // what the shape stands for, e.g. "base MLP down"
}

// FLOPs counts a multiply and an add per term: 2·M·K·N, the convention of model FLOP counts (and of
// algorithms/model's), so MFU divides like by like.
func (s MatmulShape) FLOPs() float64 { return 2 * float64(s.M) * float64(s.K) * float64(s.N) }

func (s MatmulShape) String() string { return fmt.Sprintf("%d×%d×%d", s.M, s.K, s.N) }

// MatmulRate is one shape's measurement. Rates are GFLOP/s of wall time over the whole product,
// whatever the number of workers the kernel split it across.
type MatmulRate struct {
	Shape   MatmulShape `json:"shape"`
	Calls   int         `json:"calls"`   // timed calls, after one untimed call (compile, buffers)
	Seconds float64     `json:"seconds"` // their total wall time
	// MedianGFLOPS is the median call's rate: a load spike on a shared machine moves it less than
	// the mean, and one lucky call does not set it as it sets BestGFLOPS.
	MedianGFLOPS float64 `json:"median_gflops"`
	MeanGFLOPS   float64 `json:"mean_gflops"` // total FLOPs / total seconds
	BestGFLOPS   float64 `json:"best_gflops"`
}

// MeasureMatmul runs each shape's product on the Go backend as the runtime builds it (sequential
// executor: the matmul kernels split a product across the backend's worker pool, GOMAXPROCS
// workers), once untimed and then for at least perShape of wall time (at least one timed call).
// Products this large take the fork's packing kernel (third_party/compute, dot/matmul/*_large.go)
// on the best vector ISA the engine found. After the untimed call a few output elements are
// checked against float64 dot products, so a kernel that skipped work cannot pass for a fast one.
// ctx is checked between calls.
func MeasureMatmul(ctx context.Context, shapes []MatmulShape, perShape time.Duration) (rates []MatmulRate, err error) {
	defer recoverInto("measure matmul", &err)
	for _, s := range shapes {
		if s.M < 1 || s.K < 1 || s.N < 1 {
			return nil, fmt.Errorf("tpu: measure matmul: shape %s: every dimension must be >= 1", s)
		}
	}
	if !(perShape > 0) {
		return nil, fmt.Errorf("tpu: measure matmul: duration %v: must be > 0", perShape)
	}
	backend, err := newBackend(Options{Backend: BackendGo, Executor: ExecutorSequential})
	if err != nil {
		return nil, err
	}
	defer backend.Finalize()
	exec, err := graph.NewExec(backend, func(a, b *graph.Node) *graph.Node { return graph.Dot(a, b).Product() })
	if err != nil {
		return nil, fmt.Errorf("tpu: measure matmul: %w", err)
	}
	defer exec.Finalize()
	// Each shape compiles once; the default cache of a few shapes would recompile on revisits.
	exec.SetMaxCache(len(shapes) + 1)
	for _, s := range shapes {
		r, err := measureShape(ctx, exec, s, perShape)
		if err != nil {
			return rates, fmt.Errorf("tpu: measure matmul %s: %w", s, err)
		}
		rates = append(rates, r)
	}
	return rates, nil
}

func measureShape(ctx context.Context, exec *graph.Exec, s MatmulShape, d time.Duration) (MatmulRate, error) {
	r := MatmulRate{Shape: s}
	a, b := peakOperand(s.M*s.K, 1), peakOperand(s.K*s.N, 2)
	ta := tensors.FromFlatDataAndDimensions(a, s.M, s.K)
	tb := tensors.FromFlatDataAndDimensions(b, s.K, s.N)
	defer func() { _ = ta.FinalizeAll(); _ = tb.FinalizeAll() }()

	outs, err := exec.Call(ta, tb) // compiles; moves the operands to the backend once
	if err != nil {
		return r, err
	}
	got, err := tensors.CopyFlatData[float32](outs[0])
	finalize(outs)
	if err != nil {
		return r, err
	}
	if err := checkProduct(s, a, b, got); err != nil {
		return r, err
	}

	var rates []float64
	start := time.Now()
	for r.Calls == 0 || time.Since(start) < d {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		t0 := time.Now()
		outs, err := exec.Call(ta, tb)
		sec := time.Since(t0).Seconds()
		if err != nil {
			return r, err
		}
		finalize(outs)
		r.Calls++
		r.Seconds += sec
		rates = append(rates, s.FLOPs()/sec/1e9)
	}
	r.MedianGFLOPS = medianOf(rates)
	r.MeanGFLOPS = s.FLOPs() * float64(r.Calls) / r.Seconds / 1e9
	r.BestGFLOPS = slices.Max(rates)
	return r, nil
}

// peakOperand fills n values in [-1, 1) from a fixed sequence: no zeros or subnormals that could
// make a kernel faster than on real weights.
func peakOperand(n int, seed uint32) []float32 {
	out := make([]float32, n)
	x := seed*2654435761 + 1
	for i := range out {
		x = x*1664525 + 1013904223
		out[i] = float32(x>>8)/float32(1<<23) - 1
	}
	return out
}

// checkProduct compares the corners and the centre of the product with float64 dot products.
func checkProduct(s MatmulShape, a, b, got []float32) error {
	if len(got) != s.M*s.N {
		return fmt.Errorf("product has %d elements, want %d", len(got), s.M*s.N)
	}
	for _, ij := range [][2]int{{0, 0}, {s.M - 1, s.N - 1}, {s.M / 2, s.N / 2}, {0, s.N - 1}, {s.M - 1, 0}} {
		i, j := ij[0], ij[1]
		var want, scale float64
		for k := range s.K {
			p := float64(a[i*s.K+k]) * float64(b[k*s.N+j])
			want += p
			scale += math.Abs(p)
		}
		// float32 accumulation over K terms in any order: within K·eps of the sum of magnitudes.
		if g := float64(got[i*s.N+j]); !(math.Abs(g-want) <= float64(s.K)*0x1p-23*scale+1e-6) {
			return fmt.Errorf("product[%d][%d] = %g, want %g", i, j, g, want)
		}
	}
	return nil
}

func medianOf(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// MatmulWorkers is the number of workers the Go backend's matmul kernels split a product across:
// its pool's limit, GOMAXPROCS.
func MatmulWorkers() int { return runtime.GOMAXPROCS(0) }
