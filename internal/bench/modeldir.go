package bench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/tpu"
)

// ModelDirOptions size `temper bench model-dir DIR`.
type ModelDirOptions struct {
	Dir       string
	NewEngine train.NewEngine
	// GenBatches are the rows of each cached-generation measurement (default 1 and 8), each
	// PromptLen random prompt tokens and GenTokens new ones, greedy.
	GenBatches           []int
	GenTokens, PromptLen int
	// LoRABatch × LoRASeq is the LoRA SFT step's batch (default 4 × 512), LoRARank its rank
	// (default 8, all-linear); LoRASteps timed steps follow the first (which compiles). LoRABatch
	// < 0 skips the step.
	LoRABatch, LoRASeq, LoRARank, LoRASteps int
	// Remat and Attention are the model's execution choices for the LoRA step (model.remat,
	// model.attention; "" the engine's defaults).
	Remat, Attention string
	Progress         io.Writer
}

// ModelDirReport is what `bench model-dir` measured. Peak RSS is per phase: the process's
// high-water mark is reset (/proc/self/clear_refs) before each.
type ModelDirReport struct {
	Dir        string  `json:"dir"`
	Family     string  `json:"family"`
	Parameters int64   `json:"parameters"`
	DType      string  `json:"dtype_on_disk"`
	DiskBytes  int64   `json:"disk_bytes"`
	ISA        string  `json:"isa"`
	GOMAXPROCS int     `json:"gomaxprocs"`
	GoVersion  string  `json:"go_version"`
	HostMemory int64   `json:"host_memory_bytes"`
	Load       Phase   `json:"load"`
	Gen        []Phase `json:"generation"`
	LoRA       *Phase  `json:"lora_step,omitempty"`
	// Notes say what was not measured and why.
	Notes []string `json:"notes,omitempty"`
}

// Phase is one measurement.
type Phase struct {
	What    string  `json:"what"`
	Seconds float64 `json:"seconds"`
	// FirstSeconds is the first call (compiling the graphs) where Seconds is a later one.
	FirstSeconds float64 `json:"first_seconds,omitempty"`
	TokPerSec    float64 `json:"tok_per_sec,omitempty"`
	// CPUSeconds is the process's CPU time (user + system) over Seconds: on a shared machine the
	// wall time says as much about the neighbours as about Temper.
	CPUSeconds float64 `json:"cpu_seconds"`
	PeakRSS    int64   `json:"peak_rss_bytes"`
	RSS        int64   `json:"rss_bytes"`
	Loss       float32 `json:"loss,omitempty"`
}

// ModelDir loads a Hugging Face model directory with the one loader and measures the load, cached
// generation at each batch and one LoRA SFT step.
func ModelDir(ctx context.Context, o ModelDirOptions) (*ModelDirReport, error) {
	if len(o.GenBatches) == 0 {
		o.GenBatches = []int{1, 8}
	}
	o.GenTokens = cmp.Or(o.GenTokens, 64)
	o.PromptLen = cmp.Or(o.PromptLen, 16)
	o.LoRABatch = cmp.Or(o.LoRABatch, 4)
	o.LoRASeq = cmp.Or(o.LoRASeq, 512)
	o.LoRARank = cmp.Or(o.LoRARank, 8)
	o.LoRASteps = cmp.Or(o.LoRASteps, 1)
	progress := func(format string, a ...any) {
		if o.Progress != nil {
			fmt.Fprintf(o.Progress, format+"\n", a...)
		}
	}
	isa, err := engineISA()
	if err != nil {
		return nil, err
	}
	rep := &ModelDirReport{Dir: o.Dir, ISA: isa, GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
		HostMemory: hostMemory()}
	cl := ckpt.New(ckpt.Options{})
	defer cl.Close()
	ld := train.Loader{Ckpt: cl, NewEngine: o.NewEngine}

	progress("loading %s", o.Dir)
	resetPeak()
	cpu0 := cpuNow()
	start := time.Now()
	m, err := ld.Load(ctx, o.Dir, train.LoadOptions{})
	if err != nil {
		return nil, err
	}
	rep.Load = measured("load (config, weights into the engine)", time.Since(start))
	rep.Load.CPUSeconds = cpuNow() - cpu0
	cfg := m.Config
	rep.Family, rep.Parameters, rep.DType = cfg.Family, cfg.ParamCount(), string(m.HF.DType)
	rep.DiskBytes = diskBytes(o.Dir)
	progress("loaded in %.1fs (%.1f CPU-s), peak RSS %.2f GiB", rep.Load.Seconds, rep.Load.CPUSeconds, gib(rep.Load.PeakRSS))

	rng := rand.New(rand.NewPCG(1, 2))
	for _, b := range o.GenBatches {
		if err := ctx.Err(); err != nil {
			m.Close()
			return nil, err
		}
		prompts := make([][]int, b)
		for i := range prompts {
			for range o.PromptLen {
				prompts[i] = append(prompts[i], rng.IntN(cfg.Vocab))
			}
		}
		progress("generation: batch %d, %d new tokens (a first call of 2 tokens compiles)", b, o.GenTokens)
		resetPeak()
		t0 := time.Now()
		// No stop tokens: every row decodes GenTokens tokens.
		if _, err := m.Engine.Generate(prompts, sample.Options{MaxNewTokens: 2}); err != nil {
			m.Close()
			return nil, err
		}
		first := time.Since(t0)
		cpu0 := cpuNow()
		t1 := time.Now()
		outs, err := m.Engine.Generate(prompts, sample.Options{MaxNewTokens: o.GenTokens})
		if err != nil {
			m.Close()
			return nil, err
		}
		p := measured(fmt.Sprintf("cached generation, batch %d, %d prompt + %d new tokens, greedy", b, o.PromptLen, o.GenTokens), time.Since(t1))
		p.CPUSeconds = cpuNow() - cpu0
		p.FirstSeconds = first.Seconds()
		n := 0
		for _, c := range outs {
			n += len(c.Tokens)
		}
		p.TokPerSec = float64(n) / p.Seconds
		rep.Gen = append(rep.Gen, p)
		progress("  %.2f tok/s, %.1f s, %.1f CPU-s, peak RSS %.2f GiB (first call %.1fs)", p.TokPerSec, p.Seconds, p.CPUSeconds, gib(p.PeakRSS), p.FirstSeconds)
	}
	if err := m.Close(); err != nil {
		return nil, err
	}
	if o.LoRABatch < 0 {
		rep.Notes = append(rep.Notes, "LoRA step skipped (--lora-batch < 0)")
		return rep, nil
	}
	runtime.GC()
	progress("LoRA SFT step: batch %d × %d, rank %d, all-linear (remat %q, attention %q; the first step compiles)", o.LoRABatch, o.LoRASeq, o.LoRARank, o.Remat, o.Attention)
	resetPeak()
	ne := o.NewEngine
	lo := train.Loader{Ckpt: cl, NewEngine: func(eo train.EngineOptions) (train.Engine, error) {
		eo.Model.Remat, eo.Model.Attention = o.Remat, o.Attention
		return ne(eo)
	}}
	lm, err := lo.Load(ctx, o.Dir, train.LoadOptions{LoRA: &model.LoRA{Rank: o.LoRARank, Seed: 1}})
	if err != nil {
		return nil, err
	}
	defer lm.Close()
	batch := randomBatch(rng, o.LoRABatch, o.LoRASeq, cfg.Vocab)
	t0 := time.Now()
	sm, err := lm.Engine.TrainStep(batch, 1e-4)
	if err != nil {
		return nil, err
	}
	first := time.Since(t0)
	progress("  first step %.1fs, loss %.3f", first.Seconds(), sm.Loss)
	cpu1 := cpuNow()
	t1 := time.Now()
	for range o.LoRASteps {
		if sm, err = lm.Engine.TrainStep(batch, 1e-4); err != nil {
			return nil, err
		}
	}
	p := measured(fmt.Sprintf("LoRA SFT step, batch %d × %d, rank %d all-linear", o.LoRABatch, o.LoRASeq, o.LoRARank), time.Since(t1)/time.Duration(o.LoRASteps))
	p.FirstSeconds, p.Loss = first.Seconds(), sm.Loss
	p.CPUSeconds = (cpuNow() - cpu1) / float64(o.LoRASteps)
	p.TokPerSec = float64(o.LoRABatch*o.LoRASeq) / p.Seconds
	rep.LoRA = &p
	progress("  step %.1fs (%.1f CPU-s), peak RSS %.2f GiB", p.Seconds, p.CPUSeconds, gib(p.PeakRSS))
	return rep, nil
}

// randomBatch is rows × seq random tokens, every position trained.
func randomBatch(rng *rand.Rand, rows, seq, vocab int) data.TokenBatch {
	var b data.TokenBatch
	for range rows {
		tok, tgt := make([]int, seq), make([]int, seq)
		mask, pos, valid := make([]float32, seq), make([]int, seq), make([]bool, seq)
		for t := range seq {
			tok[t], tgt[t], mask[t], pos[t], valid[t] = rng.IntN(vocab), rng.IntN(vocab), 1, t, true
		}
		b.Tokens, b.Targets, b.LossMask = append(b.Tokens, tok), append(b.Targets, tgt), append(b.LossMask, mask)
		b.Positions, b.Valid = append(b.Positions, pos), append(b.Valid, valid)
	}
	return b
}

func measured(what string, d time.Duration) Phase {
	p := Phase{What: what, Seconds: d.Seconds()}
	if mem, err := tpu.ReadMemory(); err == nil {
		p.PeakRSS, p.RSS = mem.PeakRSS, mem.RSS
	}
	return p
}

// resetPeak resets the process's peak RSS (VmHWM) so that the next phase's peak is its own (Linux:
// "5" to /proc/self/clear_refs); where that fails, peaks are since the process started.
func resetPeak() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func hostMemory() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	var kb int64
	for _, line := range strings.Split(string(b), "\n") {
		if _, err := fmt.Sscanf(line, "MemTotal: %d kB", &kb); err == nil {
			return kb << 10
		}
	}
	return 0
}

func diskBytes(dir string) int64 {
	var n int64
	ents, _ := os.ReadDir(strings.TrimPrefix(dir, "file://"))
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".safetensors") {
			if st, err := os.Stat(filepath.Join(strings.TrimPrefix(dir, "file://"), e.Name())); err == nil {
				n += st.Size()
			}
		}
	}
	return n
}

func gib(b int64) float64 { return float64(b) / (1 << 30) }

// Text prints the report as the rows of docs/bring-your-model.md's table.
func (r *ModelDirReport) Text(w io.Writer) {
	fmt.Fprintf(w, "%s: %s, %.3f B parameters, %s on disk (%.2f GB); %s kernels, GOMAXPROCS %d, %s, host memory %.1f GiB\n",
		r.Dir, r.Family, float64(r.Parameters)/1e9, r.DType, float64(r.DiskBytes)/1e9, r.ISA, r.GOMAXPROCS, r.GoVersion, gib(r.HostMemory))
	row := func(p Phase) {
		extra := ""
		if p.TokPerSec > 0 {
			extra = fmt.Sprintf("  %.2f tok/s", p.TokPerSec)
		}
		if p.FirstSeconds > 0 {
			extra += fmt.Sprintf("  (first call %.1f s)", p.FirstSeconds)
		}
		if p.Loss != 0 {
			extra += fmt.Sprintf("  loss %.3f", p.Loss)
		}
		fmt.Fprintf(w, "  %-70s %8.2f s (%7.1f CPU-s)  peak RSS %6.2f GiB%s\n", p.What, p.Seconds, p.CPUSeconds, gib(p.PeakRSS), extra)
	}
	row(r.Load)
	for _, p := range r.Gen {
		row(p)
	}
	if r.LoRA != nil {
		row(*r.LoRA)
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

// JSON is the report as JSON.
func (r *ModelDirReport) JSON() ([]byte, error) { return json.MarshalIndent(r, "", "  ") }

// cpuNow is the process's CPU seconds so far (0 where they cannot be read).
func cpuNow() float64 {
	d, err := processCPUTime()
	if err != nil {
		return 0
	}
	return d.Seconds()
}
