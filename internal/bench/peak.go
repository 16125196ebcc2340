package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/stats"
	"github.com/temperml/temper/internal/usage"
	"github.com/temperml/temper/scripts/peer"
	"github.com/temperml/temper/tpu"
)

// DefaultPeakSeconds is the wall time of each measurement of `bench peak` (each matmul shape, the
// copy, the triad): long enough for a few dozen calls of the largest shape on two cores.
const DefaultPeakSeconds = 2

// minStreamBytes is the smallest default array of the streaming measurements: far beyond any
// last-level cache of the machines this runs on (32 MiB here), so every pass goes to memory.
const minStreamBytes = 256 << 20

// PeakOptions size `temper bench peak`.
type PeakOptions struct {
	Seconds float64           // per measurement; 0 → DefaultPeakSeconds
	Shapes  []tpu.MatmulShape // float32 products to time; empty → DefaultPeakShapes()
	// StreamBytes is the size of each array of the streaming copy and triad; 0 → the larger of
	// 256 MiB and 8 × the last-level cache; < 0 skips the memory measurements.
	StreamBytes int64
	Log         io.Writer // progress
}

// DefaultPeakShapes are 1024³ and 2048³, and the MLP products of a training step of the base preset
// at `bench model`'s default 16 × 128 tokens (forward up/gate, forward down, the up/gate weight's
// gradient), every one large enough for the packing kernel; and base's MLP up/gate at 64 decode
// rows, which the register-blocked kernel takes on AVX-512 (the packing one on AVX2).
func DefaultPeakShapes() ([]tpu.MatmulShape, error) {
	cfg, err := model.Preset("base")
	if err != nil {
		return nil, fmt.Errorf("bench peak: default shapes: %w", err)
	}
	rows, d, f := 16*128, cfg.DModel, cfg.FFN
	return []tpu.MatmulShape{
		{M: 1024, K: 1024, N: 1024, Label: "square"},
		{M: 2048, K: 2048, N: 2048, Label: "square"},
		{M: rows, K: d, N: f, Label: "base MLP up/gate: x·W"},
		{M: rows, K: f, N: d, Label: "base MLP down: h·W"},
		{M: d, K: rows, N: f, Label: "base MLP up/gate weight gradient: xᵀ·dy"},
		{M: 64, K: d, N: f, Label: "base MLP up/gate, 64 decode rows"},
	}, nil
}

// ParseShapes reads --shapes: products M×K×N (or MxKxN), comma-separated.
func ParseShapes(s string) ([]tpu.MatmulShape, error) {
	var out []tpu.MatmulShape
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		dims := strings.Split(strings.ReplaceAll(f, "×", "x"), "x")
		var v [3]int
		ok := len(dims) == 3
		for i := 0; ok && i < 3; i++ {
			n, err := strconv.Atoi(strings.TrimSpace(dims[i]))
			v[i], ok = n, err == nil && n >= 1
		}
		if !ok {
			return nil, usage.Errorf("--shapes %q: %q is not M×K×N with positive integers (e.g. 2048x2048x2048,2048x384x1024)", s, f)
		}
		out = append(out, tpu.MatmulShape{M: v[0], K: v[1], N: v[2]})
	}
	return out, nil
}

// PeakReport is what `bench peak` measured: the machine's attainable float32 matmul rate on the
// engine's best kernel, and its memory bandwidth.
type PeakReport struct {
	CPU        string  `json:"cpu"`        // /proc/cpuinfo's model name
	CPUs       int     `json:"cpus"`       // logical CPUs
	CPUVector  string  `json:"cpu_vector"` // the best vector ISA /proc/cpuinfo lists
	ISA        string  `json:"isa"`        // the engine's matmul kernels: avx512f, avx2 or none
	ISAEnv     string  `json:"isa_env,omitempty"`
	GOMAXPROCS int     `json:"gomaxprocs"` // the kernels' workers and the streams' threads
	GoVersion  string  `json:"go_version"`
	Seconds    float64 `json:"seconds"` // per measurement

	Matmul []tpu.MatmulRate `json:"matmul"`
	// PeakGFLOPS is the highest median-group rate over the shapes: what MFU is computed against.
	PeakGFLOPS        float64         `json:"peak_gflops"`
	PeakPerCoreGFLOPS float64         `json:"peak_per_core_gflops"` // PeakGFLOPS / GOMAXPROCS
	PeakShape         tpu.MatmulShape `json:"peak_shape"`
	// PeakGFLOPSPerCPUSecond is the peak shape's work per CPU-second (0 where the CPU time is not
	// known): a core's rate while it runs the kernel, whatever else loads the machine.
	PeakGFLOPSPerCPUSecond float64 `json:"peak_gflops_per_cpu_second"`

	LLCBytes int64        `json:"llc_bytes"` // the last-level cache; 0 when unknown
	Stream   []StreamRate `json:"stream,omitempty"`
}

// StreamRate is one streaming kernel's bandwidth, in STREAM's byte counts: each array read or
// written once per element (copy 2 arrays, triad 3; the write-allocate read of the destination is
// not counted), in GB/s (10⁹ bytes).
type StreamRate struct {
	Kernel     string  `json:"kernel"` // "copy" (a = b) or "triad" (a = b + s·c), float32
	ArrayBytes int64   `json:"array_bytes"`
	Arrays     int     `json:"arrays"`
	Threads    int     `json:"threads"`
	Passes     int     `json:"passes"` // timed passes, after one untimed pass that faults the pages in
	Seconds    float64 `json:"seconds"`
	MedianGBps float64 `json:"median_gbps"`
	BestGBps   float64 `json:"best_gbps"`
}

// MeasurePeak times each shape on the engine's matmul kernel and, unless o.StreamBytes < 0, a
// streaming copy and triad on GOMAXPROCS threads.
func MeasurePeak(ctx context.Context, o PeakOptions) (*PeakReport, error) {
	if o.Seconds == 0 {
		o.Seconds = DefaultPeakSeconds
	}
	if !(o.Seconds > 0) || math.IsInf(o.Seconds, 0) {
		return nil, usage.Errorf("bench peak: --seconds=%g: must be a positive number of seconds", o.Seconds)
	}
	if len(o.Shapes) == 0 {
		var err error
		if o.Shapes, err = DefaultPeakShapes(); err != nil {
			return nil, err
		}
	}
	if o.StreamBytes > 0 && o.StreamBytes/4 < int64(runtime.GOMAXPROCS(0)) {
		return nil, usage.Errorf("bench peak: --stream-mib: arrays of %d bytes are too small for %d threads", o.StreamBytes, runtime.GOMAXPROCS(0))
	}
	log := logTo(o.Log)
	isa, err := engineISA()
	if err != nil {
		return nil, fmt.Errorf("bench peak: engine ISA: %w", err)
	}
	cpu := peer.DetectISA()
	r := &PeakReport{CPU: cpu.Model, CPUs: cpu.CPUs, CPUVector: cpu.Vector, ISA: isa, ISAEnv: isaEnv(),
		GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(), Seconds: o.Seconds}
	per := time.Duration(o.Seconds * float64(time.Second))
	for _, s := range o.Shapes {
		fmt.Fprintf(log, "bench peak: float32 matmul %s for %gs\n", s, o.Seconds)
		mo := tpu.MatmulOptions{Shapes: []tpu.MatmulShape{s}, PerShape: per}
		if haveCPUTime {
			mo.CPUTime = processCPUTime
		}
		rates, err := tpu.MeasureMatmul(ctx, mo)
		if err != nil {
			return nil, err
		}
		r.Matmul = append(r.Matmul, rates...)
	}
	for _, m := range r.Matmul {
		if m.MedianGFLOPS > r.PeakGFLOPS {
			r.PeakGFLOPS, r.PeakShape, r.PeakGFLOPSPerCPUSecond = m.MedianGFLOPS, m.Shape, m.GFLOPSPerCPUSecond
		}
	}
	r.PeakPerCoreGFLOPS = r.PeakGFLOPS / float64(r.GOMAXPROCS)

	if llc, err := lastLevelCache("/sys/devices/system/cpu/cpu0/cache"); err == nil {
		r.LLCBytes = llc
	} else {
		fmt.Fprintf(log, "bench peak: %v (the default stream arrays assume none above 32 MiB)\n", err)
	}
	if o.StreamBytes >= 0 {
		size := o.StreamBytes
		if size == 0 {
			size = max(minStreamBytes, 8*r.LLCBytes)
		}
		fmt.Fprintf(log, "bench peak: streaming copy and triad over %d MiB arrays, %gs each\n", size>>20, o.Seconds)
		if r.Stream, err = measureStream(ctx, size, r.GOMAXPROCS, per); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// isaEnv lists the settings that narrow the engine's kernels, as "NAME=value".
func isaEnv() string {
	var out []string
	for _, name := range []string{"GOMLX_DOT_MATMUL", "GOMLX_SIMD_AVX512", "GOMLX_SIMD_AVX2"} {
		if v, ok := os.LookupEnv(name); ok {
			out = append(out, name+"="+v)
		}
	}
	return strings.Join(out, " ")
}

// lastLevelCache reads the size of the highest-level cache of cpu0 from sysfs (dir holds index*/).
func lastLevelCache(dir string) (int64, error) {
	idx, _ := filepath.Glob(filepath.Join(dir, "index*"))
	best, size := 0, int64(0)
	for _, d := range idx {
		lb, err1 := os.ReadFile(filepath.Join(d, "level"))
		sb, err2 := os.ReadFile(filepath.Join(d, "size"))
		if err1 != nil || err2 != nil {
			continue
		}
		level, err := strconv.Atoi(strings.TrimSpace(string(lb)))
		if err != nil {
			return 0, fmt.Errorf("read last-level cache: %s/level: %q is not a number", d, lb)
		}
		n, err := parseCacheSize(strings.TrimSpace(string(sb)))
		if err != nil {
			return 0, fmt.Errorf("read last-level cache: %s/size: %w", d, err)
		}
		if level > best {
			best, size = level, n
		}
	}
	if best == 0 {
		return 0, fmt.Errorf("read last-level cache: no index*/level and size under %s", dir)
	}
	return size, nil
}

// parseCacheSize reads sysfs's "32768K" (K, M or G suffix, or bytes).
func parseCacheSize(s string) (int64, error) {
	mult := int64(1)
	switch {
	case strings.HasSuffix(s, "K"):
		mult, s = 1<<10, strings.TrimSuffix(s, "K")
	case strings.HasSuffix(s, "M"):
		mult, s = 1<<20, strings.TrimSuffix(s, "M")
	case strings.HasSuffix(s, "G"):
		mult, s = 1<<30, strings.TrimSuffix(s, "G")
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("cache size %q: want a number of bytes with an optional K, M or G", s)
	}
	return n * mult, nil
}

// measureStream times the copy and the triad over arrays of size bytes each, split across threads
// goroutines, for d each after one untimed pass.
func measureStream(ctx context.Context, size int64, threads int, d time.Duration) ([]StreamRate, error) {
	n := int(size / 4)
	a, b, c := make([]float32, n), make([]float32, n), make([]float32, n)
	parallel(n, threads, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			b[i], c[i] = float32(i%1024), float32(i%7)
		}
	})
	const s = 3
	kernels := []struct {
		name   string
		arrays int
		pass   func(lo, hi int)
		check  func(i int) bool
	}{
		{"copy", 2, func(lo, hi int) { copy(a[lo:hi], b[lo:hi]) }, func(i int) bool { return a[i] == b[i] }},
		{"triad", 3, func(lo, hi int) { triad(a[lo:hi], b[lo:hi], c[lo:hi], s) }, func(i int) bool { return a[i] == b[i]+s*c[i] }},
	}
	var out []StreamRate
	for _, k := range kernels {
		r := StreamRate{Kernel: k.name, ArrayBytes: int64(n) * 4, Arrays: k.arrays, Threads: threads}
		parallel(n, threads, k.pass)
		for _, i := range []int{0, n / 2, n - 1} {
			if !k.check(i) {
				return nil, fmt.Errorf("bench peak: stream %s: element %d is wrong after a pass", k.name, i)
			}
		}
		bytes := float64(k.arrays) * float64(n) * 4
		var rates []float64
		start := time.Now()
		for r.Passes == 0 || time.Since(start) < d {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("bench peak: stream %s: %w", k.name, err)
			}
			t0 := time.Now()
			parallel(n, threads, k.pass)
			sec := time.Since(t0).Seconds()
			r.Passes++
			r.Seconds += sec
			rates = append(rates, bytes/sec/1e9)
		}
		r.MedianGBps, r.BestGBps = stats.Median(rates), slices.Max(rates)
		out = append(out, r)
	}
	return out, nil
}

// triad is STREAM's a = b + s·c.
func triad(a, b, c []float32, s float32) {
	b, c = b[:len(a)], c[:len(a)]
	for i := range a {
		a[i] = b[i] + s*c[i]
	}
}

// parallel runs f over [0, n) in threads contiguous ranges, each on its own goroutine.
func parallel(n, threads int, f func(lo, hi int)) {
	var wg sync.WaitGroup
	chunk := (n + threads - 1) / threads
	for lo := 0; lo < n; lo += chunk {
		wg.Go(func() { f(lo, min(lo+chunk, n)) })
	}
	wg.Wait()
}

// Text prints the matmul table, the attainable figure and the bandwidths.
func (r *PeakReport) Text(w io.Writer) {
	fmt.Fprintf(w, "CPU: %s, %d logical CPUs, vector ISA %s; engine kernels: %s", r.CPU, r.CPUs, r.CPUVector, r.ISA)
	if r.ISAEnv != "" {
		fmt.Fprintf(w, " (%s)", r.ISAEnv)
	}
	fmt.Fprintf(w, "; GOMAXPROCS %d, %s\n\n", r.GOMAXPROCS, r.GoVersion)
	fmt.Fprintf(w, "float32 matmul, Go backend, %d workers, %gs per shape in groups of calls of ≥ %v (2·M·K·N FLOPs per call); GFLOP/s of wall time, and GFLOP per CPU-second of this process:\n",
		r.GOMAXPROCS, r.Seconds, tpu.DefaultMatmulGroup)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "M×K×N\tcalls\tmedian GFLOP/s\tper core\tmean\tbest\tper CPU-s\t\tshape\t")
	for _, m := range r.Matmul {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t\t%s\t\n", m.Shape, m.Calls, m.MedianGFLOPS,
			m.MedianGFLOPS/float64(r.GOMAXPROCS), m.MeanGFLOPS, m.BestGFLOPS, perCPU(m.GFLOPSPerCPUSecond), m.Shape.Label)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nattainable: %.1f GFLOP/s (%.1f per core, %d cores), the median group of %s; %s GFLOP per CPU-second there\n",
		r.PeakGFLOPS, r.PeakPerCoreGFLOPS, r.GOMAXPROCS, r.PeakShape, perCPU(r.PeakGFLOPSPerCPUSecond))
	if r.PeakGFLOPSPerCPUSecond > 0 && r.PeakPerCoreGFLOPS < 0.8*r.PeakGFLOPSPerCPUSecond {
		fmt.Fprintf(w, "(per core below per CPU-second: the kernels had the cores %.0f%% of the time; other processes load this machine)\n",
			100*r.PeakPerCoreGFLOPS/r.PeakGFLOPSPerCPUSecond)
	}
	if len(r.Stream) == 0 {
		return
	}
	llc := "unknown"
	if r.LLCBytes > 0 {
		llc = fmt.Sprintf("%d MiB", r.LLCBytes>>20)
	}
	fmt.Fprintf(w, "\nmemory: float32 arrays of %d MiB (last-level cache %s), %d threads, %gs each; STREAM byte counts (copy 2 arrays, triad 3):\n",
		r.Stream[0].ArrayBytes>>20, llc, r.Stream[0].Threads, r.Seconds)
	tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kernel\tpasses\tmedian GB/s\tbest GB/s\t")
	for _, s := range r.Stream {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.1f\t\n", s.Kernel, s.Passes, s.MedianGBps, s.BestGBps)
	}
	tw.Flush()
}

func perCPU(g float64) string {
	if g == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", g)
}

// JSON is the report as one indented object.
func (r *PeakReport) JSON() ([]byte, error) { return json.MarshalIndent(r, "", "  ") }
