package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/tpu"
	"github.com/temperml/temper/workers"
)

func init() {
	register(&command{
		name:    "generate",
		summary: "generate text from a model directory (config.json + model.safetensors), e.g. one `temper ckpt export` wrote",
		usage:   "MODEL_DIR",
		flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			var prompts multiFlag
			fs.Var(&prompts, "prompt", "prompt text (repeatable: prompts are generated as one batch)")
			maxNew := fs.Int("max-new-tokens", 32, "tokens to generate per prompt")
			temp := fs.Float64("temperature", 0, "0 = greedy")
			topK := fs.Int("top-k", 0, "keep the k most likely tokens (0: off)")
			topP := fs.Float64("top-p", 0, "nucleus sampling mass (0: off)")
			seed := fs.Uint64("seed", 1, "sampling seed: same seed, same text")
			bos := fs.Bool("bos", true, "prepend BOS (models trained by temper expect it)")
			executor := fs.String("executor", tpu.ExecutorSequential, "Go backend executor: sequential or parallel")
			backend := fs.String("backend", "", "compute backend: go, or xla (a binary built with -tags xla, and a PJRT plugin); default go, or xla when --plugin is set")
			plugin := fs.String("plugin", "", "PJRT plugin of --backend xla: cpu (default), cuda, tpu, or the path of a plugin .so")
			return func(ctx context.Context, args []string) error {
				if len(args) != 1 || len(prompts) == 0 {
					return usageErr("usage: temper generate MODEL_DIR --prompt TEXT [--prompt TEXT ...]")
				}
				eo := workers.EngineOptions{Executor: *executor}
				eo.Backend, eo.Plugin = backendFlags(*backend, *plugin)
				cl := ckpt.New(ckpt.Options{})
				defer cl.Close()
				m, err := train.Loader{Ckpt: cl, NewEngine: workers.NewTrainEngine(eo)}.Load(ctx, args[0], train.LoadOptions{})
				if err != nil {
					return err
				}
				rt := m.Engine
				defer rt.Close()
				tok := tokenize.Byte{}
				ids := make([][]int, len(prompts))
				for i, p := range prompts {
					if *bos {
						ids[i] = append(ids[i], tokenize.ByteBOS)
					}
					ids[i] = append(ids[i], tok.Encode(p)...)
				}
				opts := sample.Options{MaxNewTokens: *maxNew, Temperature: *temp, TopK: *topK, TopP: *topP, Seed: *seed, StopTokens: []int{tokenize.ByteEOS}}
				outs, err := rt.Generate(ids, opts)
				if err != nil {
					return err
				}
				for i, o := range outs {
					toks := o.Tokens
					if n := len(toks); n > 0 && toks[n-1] == tokenize.ByteEOS {
						toks = toks[:n-1]
					}
					fmt.Fprintf(stdout, "%s%s\t[%s]\n", prompts[i], tok.Decode(toks), o.StopReason)
				}
				return nil
			}
		},
	})
	register(&command{
		name:    "bench",
		summary: "benchmarks: `bench model` (train tok/s, GFLOP/s, MFU, memory, cached vs uncached generation; --peer: Temper/PyTorch ratios); `bench rl` (async vs sync GRPO; --rollout-workers 1,2: rollout generation vs worker processes); `bench rl-vs-sft` (RL vs continued SFT, same training time); `bench distill` (a student distilled from a bigger teacher vs one fine-tuned on the same labels, same training time)",
		usage:   "model | rl | rl-vs-sft | distill",
		flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			presets := fs.String("presets", "tiny,small,base", "model presets, comma-separated")
			batch := fs.Int("batch", 16, "training rows")
			seq := fs.Int("seq", 128, "training tokens per row")
			steps := fs.Int("steps", 5, "timed training steps after the first")
			genPrompts := fs.Int("gen-prompts", 64, "prompts per generation call (negative: skip generation)")
			genTokens := fs.Int("gen-tokens", 64, "new tokens per prompt")
			mode := fs.String("executor", tpu.ExecutorSequential, "Go backend executor: sequential or parallel (with --peer the default is "+peerDefaultExecutor+")")
			backend := fs.String("backend", "", "bench model: compute backend: go, or xla (a binary built with -tags xla, and a PJRT plugin); default go, or xla when --plugin is set")
			plugin := fs.String("plugin", "", "bench model: PJRT plugin of --backend xla: cpu (default), cuda, tpu, or the path of a plugin .so (e.g. a TPU VM's libtpu.so)")
			var pf peerFlags
			pf.register(fs)
			peak := fs.Float64("peak-gflops", tpu.DefaultPeakGFLOPS, "machine peak for MFU")
			asJSON := fs.Bool("json", false, "print JSON instead of a table")
			iterations := fs.Int("iterations", 12, "bench rl: GRPO iterations per mode")
			rolloutWorkers := fs.String("rollout-workers", "", "bench rl: instead of sync vs async, time an iteration's rollout generation with these numbers of rollout worker processes, each on one core (GOMAXPROCS=1, taskset), e.g. 1,2")
			var rs rlVsSFTOptions
			fs.StringVar(&rs.Task, "task", "add2", "bench rl-vs-sft: built-in task")
			fs.IntVar(&rs.SFTExamples, "sft-examples", 500, "bench rl-vs-sft: labelled examples (base and continued SFT train on these only)")
			fs.IntVar(&rs.SFTSteps, "sft-steps", 400, "bench rl-vs-sft: base SFT steps on the labelled examples")
			fs.IntVar(&rs.Heldout, "heldout", 200, "bench rl-vs-sft: held-out prompts (never trained on by any phase; both arms are evaluated on them)")
			fs.IntVar(&rs.Pretrain, "pretrain-steps", 2000, "bench rl-vs-sft: pretraining steps on the task's text (8000 examples) before the base SFT; 0: SFT from scratch")
			fs.StringVar(&rs.PretrainOn, "pretrain-task", "", "bench rl-vs-sft: built-in task whose text the base model is pretrained on (default: --task)")
			fs.Float64Var(&rs.Seconds, "seconds", 150, "bench rl-vs-sft: training wall time of each arm")
			fs.IntVar(&rs.Seeds, "seeds", 3, "bench rl-vs-sft: seeds (each runs both arms from the same base checkpoint)")
			fs.StringVar(&rs.Algo, "algo", "grpo", "bench rl-vs-sft: RL phase kind (ppo: lr 5e-4, loss.value_coef 0.1, loss.kl_beta 0.04 unless --rl-config says otherwise)")
			fs.StringVar(&rs.From, "from", "", "bench rl-vs-sft: start both arms from this checkpoint URI instead of training a base SFT model (its labelled set and held-out prompts: data seed 1)")
			fs.StringVar(&rs.RLConfig, "rl-config", "", "bench rl, rl-vs-sft: JSON merged into the RL phases' config")
			fs.StringVar(&rs.SFTConfig, "sft-config", "", "bench rl-vs-sft: JSON merged into the continued-SFT arm's config")
			ds := distillBenchOptions{TeacherPreset: "small", StudentPreset: "tiny"}
			fs.IntVar(&ds.TeacherSteps, "teacher-steps", 600, "bench distill: the teacher's SFT steps on the labelled examples (--task, --sft-examples, --heldout, --seconds and --seeds apply too)")
			fs.IntVar(&ds.TeacherData, "teacher-examples", 0, "bench distill: the teacher's labelled examples (0: the students' --sft-examples; more: a superset of them, the held-out prompts still unseen)")
			fs.StringVar(&ds.TeacherPreset, "teacher-preset", "small", "bench distill: the teacher's model preset")
			fs.StringVar(&ds.StudentPreset, "student-preset", "tiny", "bench distill: both students' model preset")
			fs.StringVar(&ds.Teacher, "teacher", "", "bench distill: teacher checkpoint URI instead of training one (it should have trained on data seed 1's labelled set only)")
			fs.StringVar(&ds.DistillConfig, "distill-config", "", "bench distill: JSON merged into the distill arm's config (e.g. {\"loss\":{\"divergence\":\"jsd\",\"lambda\":0.5}})")
			return func(ctx context.Context, args []string) error {
				if len(args) == 1 && args[0] == "distill" {
					ds.Task, ds.Examples, ds.Heldout, ds.Seconds, ds.Seeds, ds.SFTConfig = rs.Task, rs.SFTExamples, rs.Heldout, rs.Seconds, rs.Seeds, rs.SFTConfig
					if ds.Seeds < 1 || ds.Seconds <= 0 || ds.Examples < 1 || ds.TeacherSteps < 1 || ds.Heldout < 1 {
						return usageErr("bench distill: --seeds, --seconds, --sft-examples, --teacher-steps and --heldout must be positive")
					}
					return runBenchDistill(ctx, ds, *asJSON)
				}
				if len(args) == 1 && args[0] == "rl" && *rolloutWorkers != "" {
					counts, err := parseCounts(*rolloutWorkers)
					if err != nil {
						return err
					}
					return runBenchRolloutWorkers(ctx, counts, *iterations, rs.RLConfig, *asJSON)
				}
				if len(args) == 1 && args[0] == "rl" {
					return runBenchRL(ctx, *iterations, rs.RLConfig, *asJSON)
				}
				if len(args) == 1 && args[0] == "rl-vs-sft" {
					if rs.Seeds < 1 || rs.Seconds <= 0 || rs.SFTExamples < 1 || rs.SFTSteps < 1 || rs.Heldout < 1 {
						return usageErr("bench rl-vs-sft: --seeds, --seconds, --sft-examples, --sft-steps and --heldout must be positive")
					}
					return runBenchRLvsSFT(ctx, rs, *asJSON)
				}
				if len(args) != 1 || args[0] != "model" {
					return usageErr("usage: temper bench model|rl|rl-vs-sft|distill [flags]")
				}
				*backend, *plugin = backendFlags(*backend, *plugin)
				bo := tpu.BenchOptions{
					Presets: strings.Split(*presets, ","), Batch: *batch, Seq: *seq, Steps: *steps,
					GenPrompts: *genPrompts, GenTokens: *genTokens, Mode: *mode, Backend: *backend, Plugin: *plugin,
					GenPromptLen: pf.genPromptLen, PeakGFLOPS: *peak, Progress: func(line string) { fmt.Fprintln(os.Stderr, line) },
				}
				if pf.on {
					return runBenchPeer(ctx, bo, pf, flagSet(fs, "executor"), *asJSON)
				}
				rep, err := tpu.BenchModel(ctx, bo)
				if err != nil {
					return err
				}
				if *asJSON {
					b, _ := json.MarshalIndent(rep, "", "  ")
					fmt.Fprintln(stdout, string(b))
					return nil
				}
				fmt.Fprint(stdout, rep.String())
				return nil
			}
		},
	})
}

// backendFlags resolves --backend and --plugin: the backend is go unless xla is asked for or a
// plugin is named; xla without a plugin means the CPU plugin, so that a missing plugin is reported
// as such (with what to install) rather than as a missing flag.
func backendFlags(backend, plugin string) (string, string) {
	if backend == "" {
		backend = tpu.BackendGo
		if plugin != "" {
			backend = tpu.BackendXLA
		}
	}
	if backend == tpu.BackendXLA && plugin == "" {
		plugin = "cpu"
	}
	return backend, plugin
}
