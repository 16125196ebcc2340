package peer

import (
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
)

// ISA is the CPU as far as kernels care.
type ISA struct {
	Model  string `json:"model"`
	Vector string `json:"vector"` // best of "avx512f", "avx2", "avx", or "none" (non-x86: "unknown")
	CPUs   int    `json:"cpus"`   // logical CPUs Go sees
	// Kernels is the vector ISA each side's kernels were told to use, when the environment narrows
	// it below Vector (GOMLX_SIMD_AVX512=false for Temper; ATEN_CPU_CAPABILITY and OPENBLAS_CORETYPE
	// for PyTorch): the way to measure the AVX2 paths on an AVX-512 machine. Empty: the best of Vector.
	Kernels string `json:"kernels,omitempty"`
}

// kernelEnv lists the environment settings that narrow the kernels' ISA, as "NAME=value" pairs.
func kernelEnv() string {
	var set []string
	for _, name := range []string{"GOMLX_SIMD_AVX512", "GOMLX_SIMD_AVX2", "ATEN_CPU_CAPABILITY", "OPENBLAS_CORETYPE"} {
		if v, ok := os.LookupEnv(name); ok {
			set = append(set, name+"="+v)
		}
	}
	return strings.Join(set, " ")
}

// ParseISA reads /proc/cpuinfo text: the first processor's model name and flags.
func ParseISA(cpuinfo string) ISA {
	isa := ISA{Vector: "unknown"}
	var flags []string
	for line := range strings.SplitSeq(cpuinfo, "\n") {
		key, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch {
		case key == "model name" && isa.Model == "":
			isa.Model = val
		case key == "flags" && flags == nil:
			flags = strings.Fields(val)
		}
	}
	if flags != nil {
		isa.Vector = "none"
		for _, f := range []string{"avx512f", "avx2", "avx"} {
			if slices.Contains(flags, f) {
				isa.Vector = f
				break
			}
		}
	}
	return isa
}

// DetectISA reads this machine's /proc/cpuinfo.
func DetectISA() ISA {
	b, _ := os.ReadFile("/proc/cpuinfo") // absent off Linux: "unknown"
	isa := ParseISA(string(b))
	isa.CPUs = runtime.NumCPU()
	isa.Kernels = kernelEnv()
	return isa
}

// Sample is one side's figures for one preset in one repeat.
type Sample struct {
	Side            string  `json:"side"` // SideTemper or SidePeer
	Repeat          int     `json:"repeat"`
	Preset          string  `json:"preset"`
	TrainTokPerSec  float64 `json:"train_tokens_per_sec"`
	CachedTokPerSec float64 `json:"cached_tokens_per_sec"` // 0: not measured
}

// Sides of a Sample.
const (
	SideTemper = "temper"
	SidePeer   = "pytorch"
)

// Figure summarizes one figure over repeats: the median, the extremes and the spread
// (max−min)/median.
type Figure struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Spread float64 `json:"spread"`
	N      int     `json:"n"`
}

// Summarize returns the Figure of xs (zeros, i.e. unmeasured values, are left out).
func Summarize(xs []float64) Figure {
	v := slices.DeleteFunc(slices.Clone(xs), func(x float64) bool { return !(x > 0) })
	if len(v) == 0 {
		return Figure{}
	}
	slices.Sort(v)
	f := Figure{Min: v[0], Max: v[len(v)-1], N: len(v)}
	if n := len(v); n%2 == 1 {
		f.Median = v[n/2]
	} else {
		f.Median = (v[n/2-1] + v[n/2]) / 2
	}
	f.Spread = (f.Max - f.Min) / f.Median
	return f
}

// RatioRow compares the sides on one preset: ratios are Temper's median over PyTorch's (> 1: Temper
// faster); 0 when a side did not measure the figure.
type RatioRow struct {
	Preset      string  `json:"preset"`
	TemperTrain Figure  `json:"temper_train_tokens_per_sec"`
	PeerTrain   Figure  `json:"pytorch_train_tokens_per_sec"`
	TrainRatio  float64 `json:"train_ratio"`
	TemperGen   Figure  `json:"temper_cached_tokens_per_sec"`
	PeerGen     Figure  `json:"pytorch_cached_tokens_per_sec"`
	GenRatio    float64 `json:"gen_ratio"`
}

// Compare summarizes samples per preset, in the order of presets.
func Compare(presets []string, samples []Sample) []RatioRow {
	rows := make([]RatioRow, 0, len(presets))
	for _, p := range presets {
		var tt, pt, tg, pg []float64
		for _, s := range samples {
			if s.Preset != p {
				continue
			}
			if s.Side == SideTemper {
				tt, tg = append(tt, s.TrainTokPerSec), append(tg, s.CachedTokPerSec)
			} else {
				pt, pg = append(pt, s.TrainTokPerSec), append(pg, s.CachedTokPerSec)
			}
		}
		r := RatioRow{Preset: p, TemperTrain: Summarize(tt), PeerTrain: Summarize(pt), TemperGen: Summarize(tg), PeerGen: Summarize(pg)}
		r.TrainRatio = ratio(r.TemperTrain, r.PeerTrain)
		r.GenRatio = ratio(r.TemperGen, r.PeerGen)
		rows = append(rows, r)
	}
	return rows
}

func ratio(a, b Figure) float64 {
	if a.N == 0 || b.N == 0 {
		return 0
	}
	return a.Median / b.Median
}

// Comparison is the result of `temper bench model --peer`.
type Comparison struct {
	ISA     ISA    `json:"isa"`
	Repeats int    `json:"repeats"`
	Order   string `json:"order"` // how the sides alternate
	Temper  struct {
		Backend    string `json:"backend"` // e.g. "go (parallel)"
		GOMAXPROCS int    `json:"gomaxprocs"`
		GoVersion  string `json:"go_version"`
		// ExecutorChoice says why this executor ran (the default, or chosen by flag).
		ExecutorChoice string `json:"executor_choice"`
	} `json:"temper"`
	Peer struct {
		TorchVersion string         `json:"torch_version"`
		Python       string         `json:"python"`
		BLAS         string         `json:"blas"`
		MatmulGFLOPS float64        `json:"matmul512_gflops"`
		MatmulPerCPU float64        `json:"matmul512_gflops_per_cpu_second"`
		Threads      map[string]any `json:"threads"`
		DecodeAttend string         `json:"decode_attend"`
		Warning      string         `json:"warning,omitempty"`
	} `json:"pytorch"`
	Workload string     `json:"workload"`
	Rows     []RatioRow `json:"rows"`
	Samples  []Sample   `json:"samples"`
}

// SetPeer copies what the peer reported about itself.
func (c *Comparison) SetPeer(r Report) {
	c.Peer.TorchVersion, c.Peer.Python, c.Peer.BLAS = r.TorchVersion, r.Python, r.BLAS()
	c.Peer.MatmulGFLOPS, c.Peer.MatmulPerCPU = r.MatmulGFLOPS, r.MatmulPerCPU
	c.Peer.Threads, c.Peer.DecodeAttend = r.Threads, r.DecodeAttend
	c.Peer.Warning = r.SlowBLAS()
}

// String renders the comparison as a header and one aligned table.
func (c Comparison) String() string {
	var sb strings.Builder
	fmt.Fprintf(&sb, "CPU: %s, vector ISA %s, %d logical CPUs\n", c.ISA.Model, c.ISA.Vector, c.ISA.CPUs)
	if c.ISA.Kernels != "" {
		fmt.Fprintf(&sb, "kernels narrowed by: %s\n", c.ISA.Kernels)
	}
	fmt.Fprintf(&sb, "Temper: backend %s (%s), GOMAXPROCS %d, %s\n", c.Temper.Backend, c.Temper.ExecutorChoice, c.Temper.GOMAXPROCS, c.Temper.GoVersion)
	fmt.Fprintf(&sb, "PyTorch %s (%s): threads %s, BLAS %s (512² fp32 matmul %.1f GFLOP/s, %.1f per CPU-second), decode attends over the %s cache\n",
		c.Peer.TorchVersion, c.Peer.Python, threadString(c.Peer.Threads), c.Peer.BLAS, c.Peer.MatmulGFLOPS, c.Peer.MatmulPerCPU, c.Peer.DecodeAttend)
	if c.Peer.Warning != "" {
		fmt.Fprintf(&sb, "WARNING: %s\n", c.Peer.Warning)
	}
	fmt.Fprintf(&sb, "workload: %s\n", c.Workload)
	fmt.Fprintf(&sb, "%d repeats, %s; tok/s are medians over repeats, ± the spread (max−min)/median; ratio = Temper / PyTorch\n\n", c.Repeats, c.Order)
	tw := tabwriter.NewWriter(&sb, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "preset\tTemper train tok/s\tPyTorch train tok/s\ttrain ratio\tTemper gen tok/s\tPyTorch gen tok/s\tgen ratio\t")
	for _, r := range c.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", r.Preset, fig(r.TemperTrain), fig(r.PeerTrain), rat(r.TrainRatio),
			fig(r.TemperGen), fig(r.PeerGen), rat(r.GenRatio))
	}
	tw.Flush()
	return sb.String()
}

func fig(f Figure) string {
	if f.N == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f ±%.0f%%", f.Median, 100*f.Spread)
}

func rat(r float64) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f", r)
}

func threadString(t map[string]any) string {
	keys := make([]string, 0, len(t))
	for k := range t {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		v := fmt.Sprint(t[k])
		if v == "" {
			v = "unset"
		}
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, " ")
}
