package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/internal/usage"
	"github.com/temperml/temper/tpu"
)

// MemoryPointOptions is one point of the memory curve: a training step of one preset at one
// length, measured in the process that runs it (MemoryPoint).
type MemoryPointOptions struct {
	Preset    string
	Seq       int    // tokens per row
	Batch     int    // rows
	Steps     int    // timed steps after the first (which compiles)
	Remat     string // model.remat: "" (none, unless a budget asks), none, layer, attention
	Attention string // model.attention: "" (auto), auto, plain, blocked
	Executor  string // tpu.Options.Executor
}

// MemoryPointResult is what one point measured. PeakRSS is the process's VmHWM after the steps: a
// fresh process per point, since the high-water mark never goes down.
type MemoryPointResult struct {
	Preset         string  `json:"preset"`
	Seq            int     `json:"seq"`
	Batch          int     `json:"batch"`
	Remat          string  `json:"remat"`
	Attention      string  `json:"attention"`
	PeakRSS        int64   `json:"peak_rss_bytes"`
	EstimateBytes  int64   `json:"estimate_bytes"` // the executor's estimate of the step's intermediates
	StepSeconds    float64 `json:"step_seconds"`   // wall, mean of the timed steps
	StepCPUSeconds float64 `json:"step_cpu_seconds"`
	TokensPerSec   float64 `json:"tokens_per_sec"` // Batch×Seq / StepSeconds
	Loss           float32 `json:"loss"`
}

// memoryPointPrefix starts the line a child prints its result on.
const memoryPointPrefix = "MEMORY-POINT "

// MemoryPoint trains o.Steps+1 steps of o.Preset on random tokens in this process and reads its
// peak RSS: meaningful once per process (MemoryCurve runs each point in a new one).
func MemoryPoint(ctx context.Context, o MemoryPointOptions) (MemoryPointResult, error) {
	res := MemoryPointResult{Preset: o.Preset, Seq: o.Seq, Batch: o.Batch, Remat: o.Remat, Attention: o.Attention}
	if o.Seq < 1 || o.Batch < 1 || o.Steps < 1 {
		return res, usage.Errorf("bench memory point: --seq=%d --batch=%d --steps=%d: must be positive", o.Seq, o.Batch, o.Steps)
	}
	cfg, err := model.Preset(o.Preset)
	if err != nil {
		return res, usage.Errorf("bench memory point: --presets: %w", err)
	}
	cfg.MaxSeq = max(cfg.MaxSeq, o.Seq+1)
	cfg.Remat, cfg.Attention = o.Remat, o.Attention
	if err := cfg.Validate(); err != nil {
		return res, usage.Errorf("bench memory point: --remat=%q --attention=%q: %w", o.Remat, o.Attention, err)
	}
	r, err := tpu.New(tpu.Options{Model: cfg, Seed: 1, Executor: o.Executor, ExecTimeout: -1, Optimizer: tpu.AdamW{WeightDecay: 0.01}})
	if err != nil {
		return res, fmt.Errorf("bench memory point %s seq %d: %w", o.Preset, o.Seq, err)
	}
	defer r.Close()
	plan, err := r.TrainStepMemory(o.Batch, o.Seq)
	if err != nil {
		return res, fmt.Errorf("bench memory point %s seq %d: %w", o.Preset, o.Seq, err)
	}
	res.EstimateBytes = plan.EstimateBytes
	rng := rand.New(rand.NewPCG(1, 0x3e3))
	seqs := make([][]int, o.Batch)
	for i := range seqs {
		seqs[i] = make([]int, o.Seq+1)
		for j := range seqs[i] {
			seqs[i][j] = rng.IntN(cfg.Vocab)
		}
	}
	batch, err := tpu.LMBatch(seqs, nil)
	if err != nil {
		return res, err
	}
	var wall, cpu float64
	for step := range o.Steps + 1 {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("bench memory point %s seq %d: %w", o.Preset, o.Seq, err)
		}
		c0, _ := processCPUTime()
		t0 := time.Now()
		m, err := r.TrainStep(batch, 1e-3)
		if err != nil {
			return res, fmt.Errorf("bench memory point %s seq %d: %w", o.Preset, o.Seq, err)
		}
		c1, _ := processCPUTime()
		if step > 0 { // the first compiles
			wall += time.Since(t0).Seconds()
			cpu += (c1 - c0).Seconds()
		}
		res.Loss = m.Loss
	}
	res.StepSeconds, res.StepCPUSeconds = wall/float64(o.Steps), cpu/float64(o.Steps)
	res.TokensPerSec = float64(o.Batch*o.Seq) / res.StepSeconds
	mem, err := tpu.ReadMemory()
	if err != nil {
		return res, fmt.Errorf("bench memory point %s seq %d: %w", o.Preset, o.Seq, err)
	}
	res.PeakRSS = mem.PeakRSS
	return res, nil
}

// Text prints the point as the line MemoryCurve reads back from a child.
func (r MemoryPointResult) Text(w io.Writer) {
	b, _ := json.Marshal(r)
	fmt.Fprintf(w, "%s%s\n", memoryPointPrefix, b)
}

// JSON is the point as JSON.
func (r MemoryPointResult) JSON() ([]byte, error) { return json.Marshal(r) }

// MemoryCurveOptions: the memory curve of `bench model --seq 512,2048,… --remat layer`.
type MemoryCurveOptions struct {
	Presets []string
	Seqs    []int
	Point   MemoryPointOptions // Batch, Steps, Remat, Attention, Executor of every point
	// Child returns the command that runs one point in a new process and prints its
	// MemoryPointResult.Text (the temper binary's `bench memory-point`).
	Child func(p MemoryPointOptions) *exec.Cmd
	Log   io.Writer
}

// MemoryCurveReport is the curve: one point per preset and length, in order.
type MemoryCurveReport struct {
	Date   string              `json:"date"`
	ISA    string              `json:"isa"`
	Points []MemoryPointResult `json:"points"`
}

// MemoryCurve measures each preset at each length in a fresh process (peak RSS is a high-water
// mark). A point that fails (out of memory, say) ends the curve with its error and output.
func MemoryCurve(ctx context.Context, o MemoryCurveOptions) (MemoryCurveReport, error) {
	rep := MemoryCurveReport{Date: time.Now().UTC().Format(time.RFC3339)}
	var err error
	if rep.ISA, err = engineISA(); err != nil {
		return rep, usage.Errorf("bench model: %w", err)
	}
	if len(o.Seqs) == 0 || len(o.Presets) == 0 {
		return rep, usage.Errorf("bench model: --seq and --presets must name at least one length and preset")
	}
	for _, preset := range o.Presets {
		for _, seq := range o.Seqs {
			p := o.Point
			p.Preset, p.Seq = preset, seq
			fmt.Fprintf(logTo(o.Log), "bench memory: %s seq %d batch %d remat %q: new process\n", preset, seq, p.Batch, p.Remat)
			res, err := runMemoryChild(ctx, o.Child(p))
			if err != nil {
				return rep, fmt.Errorf("bench memory %s seq %d: %w", preset, seq, err)
			}
			rep.Points = append(rep.Points, res)
		}
	}
	return rep, nil
}

func runMemoryChild(ctx context.Context, cmd *exec.Cmd) (MemoryPointResult, error) {
	var out bytes.Buffer
	cmd.Stdout = &out
	if cmd.Stderr == nil {
		cmd.Stderr = &out
	}
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		return MemoryPointResult{}, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		return MemoryPointResult{}, ctx.Err()
	case err := <-done:
		if err != nil {
			return MemoryPointResult{}, fmt.Errorf("%s: %w\n%s", strings.Join(cmd.Args, " "), err, out.String())
		}
	}
	sc := bufio.NewScanner(&out)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if _, js, ok := strings.Cut(sc.Text(), memoryPointPrefix); ok {
			var r MemoryPointResult
			if err := json.Unmarshal([]byte(js), &r); err != nil {
				return r, fmt.Errorf("child's result %q: %w", js, err)
			}
			return r, nil
		}
	}
	return MemoryPointResult{}, fmt.Errorf("%s printed no %q line:\n%s", strings.Join(cmd.Args, " "), memoryPointPrefix, out.String())
}

// JSON is the curve as JSON.
func (r MemoryCurveReport) JSON() ([]byte, error) { return json.MarshalIndent(r, "", "  ") }

// Text is a table: per preset and length the peak RSS, the executor's estimate and the speed.
func (r MemoryCurveReport) Text(w io.Writer) {
	fmt.Fprintf(w, "training memory per length (one process per point; ISA %s; %s)\n", r.ISA, r.Date)
	fmt.Fprintf(w, "%-8s %7s %5s %-6s %10s %10s %9s %9s %9s\n", "preset", "seq", "batch", "remat", "peak RSS", "estimate", "step s", "CPU s", "tok/s")
	for _, p := range r.Points {
		remat := p.Remat
		if remat == "" {
			remat = "-"
		}
		fmt.Fprintf(w, "%-8s %7d %5d %-6s %6.0f MiB %6.0f MiB %9.2f %9.2f %9.0f\n", p.Preset, p.Seq, p.Batch, remat,
			mib(p.PeakRSS), mib(p.EstimateBytes), p.StepSeconds, p.StepCPUSeconds, p.TokensPerSec)
	}
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// ParseSeqs reads --seq: lengths, comma-separated.
func ParseSeqs(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, usage.Errorf("--seq %q: want positive token counts, comma-separated (e.g. 512,2048,8192)", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// SVG draws peak RSS (MiB) and training tokens per CPU-second (steadier than tok/s on a shared
// machine) against the sequence length (log2 axis), one line per preset: the picture of
// docs/engine-memory.md.
func (r MemoryCurveReport) SVG() string {
	const W, H, left, right, top, bottom = 760, 320, 70, 30, 40, 66
	panelW := (W - 2*left - 2*right) / 2
	var presets []string
	byPreset := map[string][]MemoryPointResult{}
	minSeq, maxSeq := math.Inf(1), math.Inf(-1)
	maxRSS, maxTok := 0.0, 0.0
	for _, p := range r.Points {
		if _, ok := byPreset[p.Preset]; !ok {
			presets = append(presets, p.Preset)
		}
		byPreset[p.Preset] = append(byPreset[p.Preset], p)
		minSeq, maxSeq = math.Min(minSeq, float64(p.Seq)), math.Max(maxSeq, float64(p.Seq))
		maxRSS, maxTok = math.Max(maxRSS, mib(p.PeakRSS)), math.Max(maxTok, tokensPerCPU(p))
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", W, H)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", W, H)
	if len(r.Points) == 0 {
		b.WriteString("</svg>\n")
		return b.String()
	}
	if minSeq == maxSeq {
		maxSeq = minSeq * 2
	}
	colors := []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd"}
	panel := func(x0 int, title, unit string, maxY float64, value func(MemoryPointResult) float64) {
		maxY = niceCeil(maxY)
		x := func(seq int) float64 {
			return float64(x0) + (math.Log2(float64(seq))-math.Log2(minSeq))/(math.Log2(maxSeq)-math.Log2(minSeq))*float64(panelW)
		}
		y := func(v float64) float64 { return float64(H-bottom) - v/maxY*float64(H-top-bottom) }
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-weight="bold">%s</text>`+"\n", x0, top-15, title)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", x0, H-bottom, x0+panelW, H-bottom)
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", x0, top, x0, H-bottom)
		for i := 0; i <= 4; i++ {
			v := maxY * float64(i) / 4
			fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`+"\n", x0, y(v), x0+panelW, y(v))
			fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", x0-5, y(v)+4, strconv.FormatFloat(v, 'f', -1, 64))
		}
		seen := map[int]bool{}
		for _, p := range r.Points {
			if !seen[p.Seq] {
				seen[p.Seq] = true
				fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%d</text>`+"\n", x(p.Seq), H-bottom+16, p.Seq)
			}
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">tokens per row (log scale); %s</text>`+"\n", x0+panelW/2, H-bottom+32, unit)
		for i, preset := range presets {
			c := colors[i%len(colors)]
			var pts []string
			for _, p := range byPreset[preset] {
				pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p.Seq), y(value(p))))
				fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(p.Seq), y(value(p)), c)
			}
			fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), c)
			fmt.Fprintf(&b, `<text x="%d" y="%d" fill="%s">%s</text>`+"\n", x0+panelW-50, top+14+14*i, c, preset)
		}
	}
	panel(left, "peak RSS", "MiB", maxRSS, func(p MemoryPointResult) float64 { return mib(p.PeakRSS) })
	panel(left+panelW+left+right, "training speed", "tokens per CPU-second", maxTok, tokensPerCPU)
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" fill="#555">batch 1, remat %s, ISA %s</text>`+"\n", W-right, H-6, r.Points[0].Remat, r.ISA)
	b.WriteString("</svg>\n")
	return b.String()
}

func tokensPerCPU(p MemoryPointResult) float64 {
	if !(p.StepCPUSeconds > 0) {
		return 0
	}
	return float64(p.Batch*p.Seq) / p.StepCPUSeconds
}

// niceCeil rounds v up to a round multiple of a power of ten (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}
