package tpu

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/sample"
)

// BenchOptions configures BenchModel. Zero values mean the documented defaults.
type BenchOptions struct {
	Presets []string `json:"presets"` // model presets; default tiny, small, base
	Batch   int      `json:"batch"`   // training rows; default 16
	Seq     int      `json:"seq"`     // training tokens per row; default 128
	Steps   int      `json:"steps"`   // timed training steps after the first; default 5

	GenPrompts   int `json:"gen_prompts"`    // prompts per generation call; default 64; < 0 skips generation
	GenPromptLen int `json:"gen_prompt_len"` // tokens per prompt; default 16
	GenTokens    int `json:"gen_tokens"`     // new tokens per prompt; default 64
	// UncachedTokens is the new tokens of the uncached reference run; default GenTokens, < 0 skips
	// it. Fewer tokens make the uncached run's cache bucket smaller (each of its steps cheaper),
	// so the reported speedup is then a lower bound.
	UncachedTokens int `json:"uncached_tokens"`

	Mode        string        `json:"mode"`         // Go executor: "sequential" (default) or "parallel"
	Backend     string        `json:"backend"`      // "go" (default) or "xla" (see Options.Backend)
	Plugin      string        `json:"plugin"`       // PJRT plugin of the xla backend (see Options.Plugin)
	PeakGFLOPS  float64       `json:"peak_gflops"`  // MFU reference (`temper bench peak`); 0: no MFU
	ExecTimeout time.Duration `json:"exec_timeout"` // watchdog per execution; default 30m
	Seed        uint64        `json:"seed"`         // weights and data; default 1

	// Progress, when set, receives a line before each phase (CLIs print it to stderr).
	Progress func(line string) `json:"-"`
}

func (o BenchOptions) withDefaults() BenchOptions {
	if len(o.Presets) == 0 {
		o.Presets = []string{"tiny", "small", "base"}
	}
	o.Batch = cmp.Or(o.Batch, 16)
	o.Seq = cmp.Or(o.Seq, 128)
	o.Steps = cmp.Or(o.Steps, 5)
	o.GenPrompts = cmp.Or(o.GenPrompts, 64)
	o.GenPromptLen = cmp.Or(o.GenPromptLen, 16)
	o.GenTokens = cmp.Or(o.GenTokens, 64)
	o.UncachedTokens = cmp.Or(o.UncachedTokens, o.GenTokens)
	o.Mode = cmp.Or(o.Mode, ExecutorSequential)
	o.ExecTimeout = cmp.Or(o.ExecTimeout, 30*time.Minute)
	o.Seed = cmp.Or(o.Seed, 1)
	return o
}

// BenchRow is one preset's measurements. Seconds are wall time; throughput counts real tokens and
// algorithms/model's FLOPs; MFU is against BenchReport.PeakGFLOPS.
type BenchRow struct {
	Preset string `json:"preset"`
	Params int64  `json:"params"`

	Batch int `json:"batch"`
	Seq   int `json:"seq"`
	Steps int `json:"steps"`
	// CompileSeconds builds and compiles the train executable; FirstStepSeconds is the first
	// execution after it (buffer allocation, optimizer state creation).
	CompileSeconds    float64 `json:"compile_seconds"`
	FirstStepSeconds  float64 `json:"first_step_seconds"`
	StepSeconds       float64 `json:"step_seconds"` // mean over the steady steps
	TrainTokensPerSec float64 `json:"train_tokens_per_sec"`
	TrainGFLOPS       float64 `json:"train_gflops"`
	TrainMFU          float64 `json:"train_mfu"`
	LossFirst         float32 `json:"loss_first"`
	LossLast          float32 `json:"loss_last"`

	GenPrompts   int `json:"gen_prompts"`
	GenPromptLen int `json:"gen_prompt_len"`
	GenTokens    int `json:"gen_tokens"`
	// GenFirstCallSeconds is the first cached call (it compiles prefill and decode).
	GenFirstCallSeconds float64 `json:"gen_first_call_seconds"`
	CachedSeconds       float64 `json:"cached_seconds"`
	CachedTokensPerSec  float64 `json:"cached_tokens_per_sec"`
	CachedGFLOPS        float64 `json:"cached_gflops"`

	// The uncached reference runs once; its seconds include its compile.
	UncachedTokens       int     `json:"uncached_tokens"`
	UncachedSeconds      float64 `json:"uncached_seconds"`
	UncachedTokensPerSec float64 `json:"uncached_tokens_per_sec"`
	Speedup              float64 `json:"speedup"` // cached / uncached tokens per second

	// RSS and PeakRSS are process-wide, read after the preset ran; PeakRSS (VmHWM) never goes
	// down, so a preset's value includes every earlier one.
	RSS     int64 `json:"rss_bytes"`
	PeakRSS int64 `json:"peak_rss_bytes"`
}

// BenchReport is BenchModel's result.
type BenchReport struct {
	GoVersion  string       `json:"go_version"`
	GOMAXPROCS int          `json:"gomaxprocs"`
	Backend    string       `json:"backend"`
	PeakGFLOPS float64      `json:"peak_gflops"`
	Options    BenchOptions `json:"options"`
	Rows       []BenchRow   `json:"rows"`
}

// JSON renders the report as indented JSON.
func (r BenchReport) JSON() ([]byte, error) { return json.MarshalIndent(r, "", "  ") }

// String renders the report as two aligned tables (training, generation).
func (r BenchReport) String() string {
	var sb strings.Builder
	mfu := "no MFU (no peak)"
	if r.PeakGFLOPS > 0 {
		mfu = fmt.Sprintf("MFU vs %.1f GFLOP/s", r.PeakGFLOPS)
	}
	fmt.Fprintf(&sb, "backend %s, GOMAXPROCS %d, %s, %s\n\n", r.Backend, r.GOMAXPROCS, r.GoVersion, mfu)
	tw := tabwriter.NewWriter(&sb, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "preset\tparams\tbatch×seq\tcompile s\tfirst step s\tstep s\ttok/s\tGFLOP/s\tMFU\tloss first→last\tpeak RSS MB\t")
	for _, w := range r.Rows {
		mfu := "-"
		if r.PeakGFLOPS > 0 {
			mfu = fmt.Sprintf("%.1f%%", 100*w.TrainMFU)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d×%d\t%.3f\t%.3f\t%.3f\t%.0f\t%.1f\t%s\t%.3f→%.3f\t%.0f\t\n",
			w.Preset, humanCount(w.Params), w.Batch, w.Seq, w.CompileSeconds, w.FirstStepSeconds, w.StepSeconds,
			w.TrainTokensPerSec, w.TrainGFLOPS, mfu, w.LossFirst, w.LossLast, float64(w.PeakRSS)/(1<<20))
	}
	tw.Flush()
	if len(r.Rows) > 0 && r.Rows[0].GenPrompts > 0 {
		sb.WriteString("\n")
		tw = tabwriter.NewWriter(&sb, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "preset\tprompts×new\tfirst call s\tcached s\tcached tok/s\tcached GFLOP/s\tuncached new\tuncached s\tuncached tok/s\tspeedup\t")
		for _, w := range r.Rows {
			unc, speed := "-", "-"
			if w.UncachedTokens > 0 {
				unc, speed = fmt.Sprintf("%.1f", w.UncachedTokensPerSec), fmt.Sprintf("%.1f×", w.Speedup)
			}
			fmt.Fprintf(tw, "%s\t%d×%d\t%.2f\t%.2f\t%.1f\t%.1f\t%d\t%.2f\t%s\t%s\t\n", w.Preset, w.GenPrompts, w.GenTokens,
				w.GenFirstCallSeconds, w.CachedSeconds, w.CachedTokensPerSec, w.CachedGFLOPS, w.UncachedTokens,
				w.UncachedSeconds, unc, speed)
		}
		tw.Flush()
	}
	return sb.String()
}

func humanCount(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// BenchModel measures training and generation for each preset on a fresh Runtime: compile time,
// the first step, steady-state tokens/s, GFLOP/s and MFU, cached vs uncached generation, and
// memory. ctx is checked between executions.
func BenchModel(ctx context.Context, o BenchOptions) (BenchReport, error) {
	o = o.withDefaults()
	if o.Batch <= 0 || o.Seq < 2 || o.Steps <= 0 {
		return BenchReport{}, fmt.Errorf("tpu: bench: batch=%d seq=%d steps=%d: need batch > 0, seq >= 2, steps > 0", o.Batch, o.Seq, o.Steps)
	}
	rep := BenchReport{GoVersion: runtime.Version(), GOMAXPROCS: runtime.GOMAXPROCS(0), PeakGFLOPS: o.PeakGFLOPS, Options: o}
	for _, preset := range o.Presets {
		row, backend, err := benchPreset(ctx, o, preset)
		if err != nil {
			return rep, err
		}
		rep.Backend = backend
		rep.Rows = append(rep.Rows, row)
	}
	return rep, nil
}

func benchPreset(ctx context.Context, o BenchOptions, preset string) (BenchRow, string, error) {
	progress := func(format string, args ...any) {
		if o.Progress != nil {
			o.Progress(fmt.Sprintf("bench %s: ", preset) + fmt.Sprintf(format, args...))
		}
	}
	if err := ctx.Err(); err != nil {
		return BenchRow{}, "", fmt.Errorf("tpu: bench %s: %w", preset, err)
	}
	cfg, err := model.Preset(preset)
	if err != nil {
		return BenchRow{}, "", fmt.Errorf("tpu: bench: %w", err)
	}
	if o.Seq+1 > cfg.MaxSeq {
		cfg.MaxSeq = o.Seq + 1
	}
	if need := o.GenPromptLen + max(o.GenTokens, o.UncachedTokens); o.GenPrompts > 0 && need > cfg.MaxSeq {
		cfg.MaxSeq = need
	}
	r, err := New(Options{Model: cfg, Seed: o.Seed, Backend: o.Backend, Plugin: o.Plugin, Executor: o.Mode,
		PeakGFLOPS: o.PeakGFLOPS, ExecTimeout: o.ExecTimeout, Optimizer: AdamW{WeightDecay: 0.01}})
	if err != nil {
		return BenchRow{}, "", fmt.Errorf("tpu: bench %s: %w", preset, err)
	}
	defer r.Close()
	row := BenchRow{Preset: preset, Params: cfg.ParamCount(), Batch: o.Batch, Seq: o.Seq, Steps: o.Steps}

	rng := rand.New(rand.NewPCG(o.Seed, 0xbe7c4))
	seqs := make([][]int, o.Batch)
	for i := range seqs {
		seqs[i] = make([]int, o.Seq+1)
		for j := range seqs[i] {
			seqs[i][j] = rng.IntN(cfg.Vocab)
		}
	}
	batch, err := LMBatch(seqs, nil)
	if err != nil {
		return row, "", err
	}
	const lr = 1e-3
	progress("compile + first train step (%d×%d)", o.Batch, o.Seq)
	compileBefore := r.Stats().Cache.CompileSeconds
	start := time.Now()
	m, err := r.TrainStep(batch, lr)
	if err != nil {
		return row, "", fmt.Errorf("tpu: bench %s: %w", preset, err)
	}
	row.CompileSeconds = r.Stats().Cache.CompileSeconds - compileBefore
	row.FirstStepSeconds = time.Since(start).Seconds() - row.CompileSeconds
	row.LossFirst = m.Loss
	r.ResetStats()
	progress("%d timed train steps", o.Steps)
	for range o.Steps {
		if err := ctx.Err(); err != nil {
			return row, "", fmt.Errorf("tpu: bench %s: %w", preset, err)
		}
		if m, err = r.TrainStep(batch, lr); err != nil {
			return row, "", fmt.Errorf("tpu: bench %s: %w", preset, err)
		}
	}
	row.LossLast = m.Loss
	st := r.Stats().Train
	row.StepSeconds = st.Seconds / float64(st.Calls)
	row.TrainTokensPerSec, row.TrainGFLOPS, row.TrainMFU = st.TokensPerSec, st.GFLOPS, st.MFU

	if o.GenPrompts > 0 {
		prompts := make([][]int, o.GenPrompts)
		for i := range prompts {
			prompts[i] = make([]int, o.GenPromptLen)
			for j := range prompts[i] {
				prompts[i][j] = rng.IntN(cfg.Vocab)
			}
		}
		row.GenPrompts, row.GenPromptLen, row.GenTokens = o.GenPrompts, o.GenPromptLen, o.GenTokens
		// gen runs `calls` generation calls and times the first and the last.
		gen := func(uncached bool, tokens, calls int) (first, last float64, err error) {
			opts := sample.Options{MaxNewTokens: tokens, Seed: o.Seed}
			for i := range calls {
				if err := ctx.Err(); err != nil {
					return 0, 0, err
				}
				start := time.Now()
				var out []model.Completion
				if uncached {
					out, err = r.GenerateUncached(prompts, opts)
				} else {
					out, err = r.Generate(prompts, opts)
				}
				if err != nil {
					return 0, 0, err
				}
				for _, c := range out {
					if len(c.Tokens) != tokens {
						return 0, 0, fmt.Errorf("completion of %d tokens, want %d", len(c.Tokens), tokens)
					}
				}
				last = time.Since(start).Seconds()
				if i == 0 {
					first = last
				}
			}
			return first, last, nil
		}
		progress("cached generation %d×%d (2 calls)", o.GenPrompts, o.GenTokens)
		first, steady, err := gen(false, o.GenTokens, 2)
		if err != nil {
			return row, "", fmt.Errorf("tpu: bench %s: generate: %w", preset, err)
		}
		newTok := float64(o.GenPrompts * o.GenTokens)
		row.GenFirstCallSeconds, row.CachedSeconds = first, steady
		row.CachedTokensPerSec = newTok / steady
		row.CachedGFLOPS = float64(o.GenPrompts) * GenerateFLOPs(cfg, o.GenPromptLen, o.GenTokens) / steady / 1e9
		if o.UncachedTokens > 0 {
			// One call: it recomputes everything per token, so its compile (tens of milliseconds
			// on the Go backend) is noise next to its run, and a second call would double the
			// longest phase of the benchmark.
			progress("uncached generation %d×%d (1 call)", o.GenPrompts, o.UncachedTokens)
			_, sec, err := gen(true, o.UncachedTokens, 1)
			if err != nil {
				return row, "", fmt.Errorf("tpu: bench %s: generate uncached: %w", preset, err)
			}
			row.UncachedTokens, row.UncachedSeconds = o.UncachedTokens, sec
			row.UncachedTokensPerSec = float64(o.GenPrompts*o.UncachedTokens) / sec
			row.Speedup = row.CachedTokensPerSec / row.UncachedTokensPerSec
		}
	}
	if mem, err := ReadMemory(); err == nil {
		row.RSS, row.PeakRSS = mem.RSS, mem.PeakRSS
	}
	return row, r.BackendName(), nil
}
