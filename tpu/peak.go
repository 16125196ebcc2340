package tpu

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/gomlx/gomlx/core/graph"
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/algorithms/stats"
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
	Calls   int         `json:"calls"`   // timed calls, after two untimed ones (compile, buffers, check; calibration)
	Groups  int         `json:"groups"`  // timed groups of calls (see MatmulOptions.Group)
	Seconds float64     `json:"seconds"` // their total wall time
	// MedianGFLOPS is the median group's rate: a load spike on a shared machine moves it less than
	// the mean, and one lucky group does not set it as it sets BestGFLOPS.
	MedianGFLOPS float64 `json:"median_gflops"`
	MeanGFLOPS   float64 `json:"mean_gflops"` // total FLOPs / total seconds
	BestGFLOPS   float64 `json:"best_gflops"`
	// CPUSeconds is the process's CPU time (user + system) over the timed calls, and
	// GFLOPSPerCPUSecond the work per CPU-second: what a core computes while it runs the kernel,
	// which other processes' load changes far less than the wall-time rates. 0 without
	// MatmulOptions.CPUTime.
	CPUSeconds         float64 `json:"cpu_seconds,omitempty"`
	GFLOPSPerCPUSecond float64 `json:"gflops_per_cpu_second,omitempty"`
}

// MatmulOptions configures MeasureMatmul.
type MatmulOptions struct {
	Shapes   []MatmulShape
	PerShape time.Duration // wall time of each shape's timed calls (at least one group); > 0
	// Group is the least wall time of one timed group of calls; 0 → DefaultMatmulGroup. Calls
	// shorter than a scheduler time slice could run between other processes' slices on a shared
	// machine and read faster than long ones; grouped, every shape's figure spans slices alike.
	Group time.Duration
	// CPUTime, when set, reads the process's CPU time, for MatmulRate.CPUSeconds.
	CPUTime func() (time.Duration, error)
}

// DefaultMatmulGroup is MatmulOptions.Group's default: several scheduler time slices.
const DefaultMatmulGroup = 50 * time.Millisecond

// MeasureMatmul runs each shape's product on the Go backend as the runtime builds it (sequential
// executor: the matmul kernels split a product across the backend's worker pool, GOMAXPROCS
// workers): one untimed call compiles it and checks a few output elements against float64 dot
// products (a kernel that skipped work cannot pass for a fast one), a second one sizes the groups,
// then groups of calls run for at least o.PerShape. Products of 4M multiply-adds or more take the
// fork's packing kernel (third_party/compute, dot/matmul/*_large.go) on the best vector ISA the
// engine found; on AVX-512 products of at most 64 rows take the register-blocked one. ctx is
// checked between calls.
func MeasureMatmul(ctx context.Context, o MatmulOptions) (rates []MatmulRate, err error) {
	defer recoverInto("measure matmul", &err)
	for _, s := range o.Shapes {
		if s.M < 1 || s.K < 1 || s.N < 1 {
			return nil, fmt.Errorf("tpu: measure matmul: shape %s: every dimension must be >= 1", s)
		}
	}
	if !(o.PerShape > 0) {
		return nil, fmt.Errorf("tpu: measure matmul: duration %v: must be > 0", o.PerShape)
	}
	if o.Group == 0 {
		o.Group = DefaultMatmulGroup
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
	exec.SetMaxCache(len(o.Shapes) + 1)
	for _, s := range o.Shapes {
		r, err := measureShape(ctx, exec, s, o)
		if err != nil {
			return rates, fmt.Errorf("tpu: measure matmul %s: %w", s, err)
		}
		rates = append(rates, r)
	}
	return rates, nil
}

func measureShape(ctx context.Context, exec *graph.Exec, s MatmulShape, o MatmulOptions) (MatmulRate, error) {
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
	call := func() error {
		outs, err := exec.Call(ta, tb)
		if err != nil {
			return err
		}
		finalize(outs)
		return nil
	}
	t0 := time.Now()
	if err := call(); err != nil {
		return r, err
	}
	group := max(1, int(math.Ceil(float64(o.Group)/float64(time.Since(t0)))))

	var cpu0 time.Duration
	if o.CPUTime != nil {
		if cpu0, err = o.CPUTime(); err != nil {
			return r, err
		}
	}
	var rates []float64
	start := time.Now()
	for r.Groups == 0 || time.Since(start) < o.PerShape {
		if err := ctx.Err(); err != nil {
			return r, err
		}
		t0 := time.Now()
		for range group {
			if err := call(); err != nil {
				return r, err
			}
		}
		sec := time.Since(t0).Seconds()
		r.Groups++
		r.Calls += group
		r.Seconds += sec
		rates = append(rates, float64(group)*s.FLOPs()/sec/1e9)
	}
	if o.CPUTime != nil {
		cpu1, err := o.CPUTime()
		if err != nil {
			return r, err
		}
		r.CPUSeconds = (cpu1 - cpu0).Seconds()
		if r.CPUSeconds > 0 {
			r.GFLOPSPerCPUSecond = s.FLOPs() * float64(r.Calls) / r.CPUSeconds / 1e9
		}
	}
	r.MedianGFLOPS = stats.Median(rates)
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
