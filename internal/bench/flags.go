package bench

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"

	"github.com/temperml/temper/internal/modeldir"
	"github.com/temperml/temper/internal/usage"
	"github.com/temperml/temper/scripts/peer"
	"github.com/temperml/temper/tpu"
	"github.com/temperml/temper/workers"
)

// Flags are `temper bench`'s flags, one set for every benchmark: each reads the ones it names. Bind
// declares them, Run runs the benchmark its first argument names.
type Flags struct {
	fs               *flag.FlagSet
	presets          string
	batch, steps     int
	seq              string
	remat, attention string
	svg              string
	genPrompts       int
	genTokens        int
	mode             string
	backend, plugin  string
	peer             peerFlags
	peak             float64
	shapes           string
	streamMiB        int
	asJSON           bool
	iterations       int
	rolloutWorkers   string
	rs               RLvsSFTOptions
	ds               DistillOptions
	md               modelDirFlags
}

// peerFlags are the flags of `bench model --peer`.
type peerFlags struct {
	on                   bool
	repeats              int
	torch, interop, blas int
	decodeAttend         string
	genPromptLen         int
}

func (c *Flags) Bind(fs *flag.FlagSet) {
	c.fs = fs
	fs.StringVar(&c.presets, "presets", "tiny,small,base", "model presets, comma-separated")
	fs.IntVar(&c.batch, "batch", 16, "training rows")
	fs.StringVar(&c.seq, "seq", "128", "training tokens per row; bench model: several, comma-separated (e.g. 512,2048,8192,16384), or with --remat, measure the memory curve instead: peak RSS and tok/s per length, one process per preset and length")
	fs.StringVar(&c.remat, "remat", "", "bench model: model.remat of the memory curve (none, layer, attention; setting it measures the curve); bench model-dir: of the LoRA step (default the engine's)")
	fs.StringVar(&c.attention, "attention", "", "bench model: model.attention of the memory curve; bench model-dir: of the LoRA step (auto, plain, blocked; default the model's, auto)")
	fs.StringVar(&c.svg, "svg", "", "bench model's memory curve: also write it as an SVG picture to this file")
	fs.IntVar(&c.steps, "steps", 5, "timed training steps after the first")
	fs.IntVar(&c.genPrompts, "gen-prompts", 64, "prompts per generation call (negative: skip generation)")
	fs.IntVar(&c.genTokens, "gen-tokens", 64, "new tokens per prompt")
	fs.StringVar(&c.mode, "executor", tpu.ExecutorSequential, "Go backend executor: sequential or parallel (with --peer the default is "+PeerDefaultExecutor+")")
	fs.StringVar(&c.backend, "backend", "", "bench model: compute backend: go, or xla (a binary built with -tags xla, and a PJRT plugin); default go, or xla when --plugin is set")
	fs.StringVar(&c.plugin, "plugin", "", "bench model: PJRT plugin of --backend xla: cpu (default), cuda, tpu, or the path of a plugin .so (e.g. a TPU VM's libtpu.so)")
	c.peer.bind(fs)
	fs.Float64Var(&c.peak, "peak", 0, "bench model: the machine's attainable float32 GFLOP/s to compute MFU against (what `temper bench peak` printed); 0: measure it in this run before the presets (--shapes, --seconds)")
	fs.StringVar(&c.shapes, "shapes", "", "bench peak, and bench model's in-run peak: float32 matmul shapes M×K×N (or MxKxN), comma-separated (default: 1024³, 2048³ and the base preset's MLP products at 16×128 tokens)")
	fs.IntVar(&c.streamMiB, "stream-mib", 0, "bench peak: MiB per array of the streaming copy and triad (0: the larger of 256 and 8 × the last-level cache; -1: skip them)")
	fs.BoolVar(&c.asJSON, "json", false, "print JSON instead of a table")
	fs.IntVar(&c.iterations, "iterations", 12, "bench rl: GRPO iterations per mode")
	fs.StringVar(&c.rolloutWorkers, "rollout-workers", "", "bench rl: instead of sync vs async, time an iteration's rollout generation with these numbers of rollout worker processes, each on one core (GOMAXPROCS=1, taskset), e.g. 1,2")
	c.bindRLvsSFT(fs)
	c.bindDistill(fs)
	c.md.bind(fs)
}

func (p *peerFlags) bind(fs *flag.FlagSet) {
	fs.BoolVar(&p.on, "peer", false, "bench model: also run the PyTorch peer (scripts/peer/bench_torch.py on "+peer.Python+"), alternating with Temper, and print Temper/PyTorch ratios")
	fs.IntVar(&p.repeats, "repeats", 2, "bench model --peer: runs of each side per preset (the order alternates between repeats)")
	fs.IntVar(&p.torch, "peer-torch-threads", 1, "bench model --peer: torch.set_num_threads of the peer")
	fs.IntVar(&p.interop, "peer-interop-threads", 1, "bench model --peer: torch.set_num_interop_threads of the peer")
	fs.IntVar(&p.blas, "peer-blas-threads", runtime.NumCPU(), "bench model --peer: OPENBLAS_NUM_THREADS of the peer (0: the environment's)")
	fs.StringVar(&p.decodeAttend, "peer-decode-attend", "filled", "bench model --peer: the peer's decode attends over the filled cache (filled, as inference engines do) or all of it with a mask (full); Temper attends over the filled part rounded up to 32 columns")
	fs.IntVar(&p.genPromptLen, "gen-prompt-len", 16, "bench model: tokens per generation prompt")
}

func (c *Flags) bindRLvsSFT(fs *flag.FlagSet) {
	rs := &c.rs
	fs.StringVar(&rs.Task, "task", "add2", "bench rl-vs-sft: built-in task")
	fs.IntVar(&rs.SFTExamples, "sft-examples", 500, "bench rl-vs-sft: labelled examples (base and continued SFT train on these only)")
	fs.IntVar(&rs.SFTSteps, "sft-steps", 400, "bench rl-vs-sft: base SFT steps on the labelled examples")
	fs.IntVar(&rs.Heldout, "heldout", 200, "bench rl-vs-sft: held-out prompts (never trained on by any phase; both arms are evaluated on them)")
	fs.IntVar(&rs.Pretrain, "pretrain-steps", 2000, "bench rl-vs-sft: pretraining steps on the task's text (8000 examples) before the base SFT; 0: SFT from scratch")
	fs.StringVar(&rs.PretrainOn, "pretrain-task", "", "bench rl-vs-sft: built-in task whose text the base model is pretrained on (default: --task)")
	fs.Float64Var(&rs.Seconds, "seconds", 150, "bench rl-vs-sft: training wall time of each arm; bench peak, and bench model's in-run peak: wall time of each measurement (default there 2)")
	fs.IntVar(&rs.Seeds, "seeds", 3, "bench rl-vs-sft: seeds (each runs both arms from the same base checkpoint)")
	fs.StringVar(&rs.Algo, "algo", "grpo", "bench rl-vs-sft: RL phase kind (ppo: lr 5e-4, loss.value_coef 0.1, loss.kl_beta 0.04 unless --rl-config says otherwise)")
	fs.StringVar(&rs.From, "from", "", "bench rl-vs-sft: start both arms from this checkpoint URI instead of training a base SFT model (its labelled set and held-out prompts: data seed 1)")
	fs.StringVar(&rs.RLConfig, "rl-config", "", "bench rl, rl-vs-sft: JSON merged into the RL phases' config")
	fs.StringVar(&rs.SFTConfig, "sft-config", "", "bench rl-vs-sft: JSON merged into the continued-SFT arm's config")
}

func (c *Flags) bindDistill(fs *flag.FlagSet) {
	ds := &c.ds
	fs.IntVar(&ds.TeacherSteps, "teacher-steps", 600, "bench distill: the teacher's SFT steps on the labelled examples (--task, --sft-examples, --heldout, --seconds and --seeds apply too)")
	fs.IntVar(&ds.TeacherData, "teacher-examples", 0, "bench distill: the teacher's labelled examples (0: the students' --sft-examples; more: a superset of them, the held-out prompts still unseen)")
	fs.StringVar(&ds.TeacherPreset, "teacher-preset", "small", "bench distill: the teacher's model preset")
	fs.StringVar(&ds.StudentPreset, "student-preset", "tiny", "bench distill: both students' model preset")
	fs.StringVar(&ds.Teacher, "teacher", "", "bench distill: teacher checkpoint URI instead of training one (it should have trained on data seed 1's labelled set only)")
	fs.StringVar(&ds.DistillConfig, "distill-config", "", "bench distill: JSON merged into the distill arm's config (e.g. {\"loss\":{\"divergence\":\"jsd\",\"lambda\":0.5}})")
}

// Subcommands are the benchmarks Run takes as its first argument (memory-point, one point of the
// memory curve in its own process, is run by the curve, not by people).
var Subcommands = []string{"peak", "model", "rl", "rl-vs-sft", "distill", "serve", "model-dir"}

// Run runs the benchmark args[0] names and prints its report to out, as text or as JSON (--json);
// progress goes to stderr. Bad flags are *usage.Error.
func (c *Flags) Run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 1 && args[0] == "serve" {
		return c.serve(ctx, out)
	}
	runs := map[string]func(context.Context) (Report, error){"peak": c.peakCmd, "model": c.model, "rl": c.rl, "rl-vs-sft": c.rlVsSFT, "distill": c.distill,
		"memory-point": c.memoryPoint}
	name := ""
	if len(args) > 0 {
		name = args[0]
	}
	if name == "model-dir" {
		if len(args) != 2 {
			return usage.Errorf("usage: temper bench model-dir DIR [--gen-batches 1,8] [--gen-tokens 64] [--lora-batch 4] [--lora-seq 512]")
		}
		runs[name] = func(ctx context.Context) (Report, error) { return c.modelDir(ctx, args[1]) }
	} else if len(args) != 1 || runs[name] == nil {
		return usage.Errorf("usage: temper bench %s [flags]", strings.Join(Subcommands, "|"))
	}
	rep, err := runs[name](ctx)
	if err != nil {
		return err
	}
	if c.asJSON {
		b, err := rep.JSON()
		if err != nil {
			return fmt.Errorf("bench %s: %w", name, err)
		}
		fmt.Fprintln(out, string(b))
		return nil
	}
	rep.Text(out)
	return nil
}

func (c *Flags) model(ctx context.Context) (Report, error) {
	seqs, err := ParseSeqs(c.seq)
	if err != nil {
		return nil, err
	}
	if len(seqs) > 1 || c.remat != "" || c.attention != "" {
		return c.memoryCurve(ctx, seqs)
	}
	if c.svg != "" {
		return nil, usage.Errorf("bench model: --svg %q: only for the memory curve (several --seq lengths or --remat)", c.svg)
	}
	c.backend, c.plugin = tpu.ResolveBackend(c.backend, c.plugin)
	o := ModelOptions{Bench: tpu.BenchOptions{
		Presets: strings.Split(c.presets, ","), Batch: c.batch, Seq: seqs[0], Steps: c.steps,
		GenPrompts: c.genPrompts, GenTokens: c.genTokens, Mode: c.mode, Backend: c.backend, Plugin: c.plugin,
		GenPromptLen: c.peer.genPromptLen, PeakGFLOPS: c.peak, Progress: func(line string) { fmt.Fprintln(os.Stderr, line) },
	}}
	if o.Peak, err = c.peakOptions(); err != nil {
		return nil, err
	}
	o.Peak.StreamBytes = -1
	if c.peer.on {
		o.Peer = &PeerOptions{Repeats: c.peer.repeats, DecodeAttend: c.peer.decodeAttend, ExecutorSet: flagSet(c.fs, "executor"),
			Threads: peer.Threads{Torch: c.peer.torch, Interop: c.peer.interop, BLAS: c.peer.blas}, Log: os.Stderr}
	}
	return Model(ctx, o)
}

// memoryCurve is `bench model --seq 512,2048,… --remat layer`: each preset and length trains in a
// new process of this binary (`bench memory-point`), which reports its peak RSS and speed.
func (c *Flags) memoryCurve(ctx context.Context, seqs []int) (Report, error) {
	if c.peer.on || flagSet(c.fs, "backend") || flagSet(c.fs, "plugin") || flagSet(c.fs, "peak") {
		return nil, usage.Errorf("bench model: the memory curve (several --seq lengths, --remat or --attention) runs the go backend alone: drop --peer, --backend, --plugin and --peak")
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("bench model: memory curve: %w", err)
	}
	if strings.HasSuffix(exe, ".test") { // a test binary would run its tests in every child
		return nil, fmt.Errorf("bench model: memory curve: %s is a test binary: it re-runs the temper binary per point", exe)
	}
	steps := 1
	if flagSet(c.fs, "steps") {
		steps = c.steps
	}
	o := MemoryCurveOptions{Presets: strings.Split(c.presets, ","), Seqs: seqs, Log: os.Stderr,
		Point: MemoryPointOptions{Batch: c.batch, Steps: steps, Remat: c.remat, Attention: c.attention, Executor: c.mode},
		Child: func(p MemoryPointOptions) *exec.Cmd {
			cmd := exec.CommandContext(ctx, exe, "bench", "memory-point", "--presets", p.Preset, "--seq", strconv.Itoa(p.Seq),
				"--batch", strconv.Itoa(p.Batch), "--steps", strconv.Itoa(p.Steps), "--executor", p.Executor)
			if p.Remat != "" {
				cmd.Args = append(cmd.Args, "--remat", p.Remat)
			}
			if p.Attention != "" {
				cmd.Args = append(cmd.Args, "--attention", p.Attention)
			}
			cmd.Stderr = os.Stderr
			return cmd
		}}
	rep, err := MemoryCurve(ctx, o)
	if err != nil {
		return nil, err
	}
	if c.svg != "" {
		if err := os.WriteFile(c.svg, []byte(rep.SVG()), 0o644); err != nil {
			return nil, fmt.Errorf("bench model: --svg: %w", err)
		}
	}
	return rep, nil
}

// memoryPoint is one point of the memory curve, in its own process (run by memoryCurve).
func (c *Flags) memoryPoint(ctx context.Context) (Report, error) {
	seqs, err := ParseSeqs(c.seq)
	if err != nil {
		return nil, err
	}
	if len(seqs) != 1 || strings.Contains(c.presets, ",") {
		return nil, usage.Errorf("bench memory-point: --seq %q --presets %q: want one length and one preset", c.seq, c.presets)
	}
	return MemoryPoint(ctx, MemoryPointOptions{Preset: c.presets, Seq: seqs[0], Batch: c.batch, Steps: c.steps,
		Remat: c.remat, Attention: c.attention, Executor: c.mode})
}

func (c *Flags) peakCmd(ctx context.Context) (Report, error) {
	o, err := c.peakOptions()
	if err != nil {
		return nil, err
	}
	if c.streamMiB < -1 {
		return nil, usage.Errorf("bench peak: --stream-mib=%d: want MiB per array, 0 (default size) or -1 (skip)", c.streamMiB)
	}
	o.StreamBytes = int64(c.streamMiB) << 20
	return MeasurePeak(ctx, o)
}

// peakOptions reads --seconds (its own default here, not rl-vs-sft's) and --shapes.
func (c *Flags) peakOptions() (PeakOptions, error) {
	o := PeakOptions{Seconds: DefaultPeakSeconds, Log: os.Stderr}
	if flagSet(c.fs, "seconds") {
		if !(c.rs.Seconds > 0) {
			return o, usage.Errorf("bench peak: --seconds=%g: must be a positive number of seconds per measurement", c.rs.Seconds)
		}
		o.Seconds = c.rs.Seconds
	}
	if c.shapes != "" {
		var err error
		if o.Shapes, err = ParseShapes(c.shapes); err != nil {
			return o, err
		}
	}
	return o, nil
}

func (c *Flags) rl(ctx context.Context) (Report, error) {
	if c.rolloutWorkers == "" {
		return RL(ctx, RLOptions{Iterations: c.iterations, RLConfig: c.rs.RLConfig, Log: os.Stderr})
	}
	counts, err := parseCounts(c.rolloutWorkers)
	if err != nil {
		return nil, err
	}
	return RolloutWorkers(ctx, RolloutOptions{Workers: counts, Iterations: c.iterations, RLConfig: c.rs.RLConfig, Log: os.Stderr})
}

func (c *Flags) rlVsSFT(ctx context.Context) (Report, error) {
	rs := c.rs
	if rs.Seeds < 1 || rs.Seconds <= 0 || rs.SFTExamples < 1 || rs.SFTSteps < 1 || rs.Heldout < 1 {
		return nil, usage.Errorf("bench rl-vs-sft: --seeds, --seconds, --sft-examples, --sft-steps and --heldout must be positive")
	}
	rs.Log = os.Stderr
	return RLvsSFT(ctx, rs)
}

func (c *Flags) distill(ctx context.Context) (Report, error) {
	ds, rs := c.ds, c.rs
	ds.Task, ds.Examples, ds.Heldout, ds.Seconds, ds.Seeds, ds.SFTConfig = rs.Task, rs.SFTExamples, rs.Heldout, rs.Seconds, rs.Seeds, rs.SFTConfig
	if ds.Seeds < 1 || ds.Seconds <= 0 || ds.Examples < 1 || ds.TeacherSteps < 1 || ds.Heldout < 1 {
		return nil, usage.Errorf("bench distill: --seeds, --seconds, --sft-examples, --teacher-steps and --heldout must be positive")
	}
	ds.Log = os.Stderr
	return Distill(ctx, ds)
}

// parseCounts reads --rollout-workers "1,2" as worker counts.
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > runtime.NumCPU() {
			return nil, usage.Errorf("--rollout-workers %q: want counts from 1 to %d (this machine's CPUs), e.g. 1,2", s, runtime.NumCPU())
		}
		out = append(out, n)
	}
	return out, nil
}

// serve is `temper bench serve`: Serve on --presets (its default client counts and lengths),
// printed as a table or as JSON.
func (c *Flags) serve(ctx context.Context, out io.Writer) error {
	rep, err := Serve(ctx, strings.Split(c.presets, ","), nil, 0, 0, func(line string) { fmt.Fprintln(os.Stderr, line) })
	if err != nil {
		return err
	}
	if c.asJSON {
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Fprintln(out, string(b))
		return nil
	}
	fmt.Fprint(out, rep.String())
	return nil
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// modelDirFlags are the flags of `bench model-dir`.
type modelDirFlags struct {
	genBatches                  string
	loraBatch, loraSeq, loraRnk int
	loraSteps                   int
}

func (f *modelDirFlags) bind(fs *flag.FlagSet) {
	fs.StringVar(&f.genBatches, "gen-batches", "1,8", "bench model-dir: rows of each cached-generation measurement (--gen-tokens new tokens each, greedy)")
	fs.IntVar(&f.loraBatch, "lora-batch", 4, "bench model-dir: rows of the LoRA SFT step (negative: skip it)")
	fs.IntVar(&f.loraSeq, "lora-seq", 512, "bench model-dir: tokens per row of the LoRA SFT step")
	fs.IntVar(&f.loraRnk, "lora-rank", 8, "bench model-dir: LoRA rank (all-linear)")
	fs.IntVar(&f.loraSteps, "lora-steps", 1, "bench model-dir: timed LoRA steps after the first (which compiles)")
}

// modelDir is `temper bench model-dir DIR`.
func (c *Flags) modelDir(ctx context.Context, dir string) (Report, error) {
	var batches []int
	for _, f := range strings.Split(c.md.genBatches, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, usage.Errorf("bench model-dir: --gen-batches %q: want positive row counts, comma-separated", c.md.genBatches)
		}
		batches = append(batches, n)
	}
	if c.md.loraSeq < 1 || c.md.loraRnk < 1 || c.md.loraSteps < 1 || c.genTokens < 1 {
		return nil, usage.Errorf("bench model-dir: --lora-seq, --lora-rank, --lora-steps and --gen-tokens must be positive")
	}
	eo := workers.EngineOptions{Executor: c.mode, ExecTimeout: -1} // a 1B LoRA step on 2 shared cores outlasts any watchdog
	eo.Backend, eo.Plugin = tpu.ResolveBackend(c.backend, c.plugin)
	return ModelDir(ctx, ModelDirOptions{Dir: modeldir.LocalDir(dir), NewEngine: workers.NewTrainEngine(eo),
		GenBatches: batches, GenTokens: c.genTokens, PromptLen: c.peer.genPromptLen,
		LoRABatch: c.md.loraBatch, LoRASeq: c.md.loraSeq, LoRARank: c.md.loraRnk, LoRASteps: c.md.loraSteps,
		Remat: c.remat, Attention: c.attention, Progress: os.Stderr})
}
