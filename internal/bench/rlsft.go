package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/workflows"
)

// RLvsSFTOptions size `temper bench rl-vs-sft`.
type RLvsSFTOptions struct {
	Task        string    // built-in task
	SFTExamples int       // the small labelled set: the base SFT and continued SFT both train on it only
	SFTSteps    int       // base SFT steps
	Pretrain    int       // pretraining steps on the task's text before the base SFT (0: SFT from scratch)
	PretrainOn  string    // the pretraining text's task ("": Task)
	Seconds     float64   // training wall time of each arm
	Seeds       int       // arms are run once per seed, from the same base checkpoint
	Algo        string    // RL phase kind
	RLConfig    string    // JSON merged into the RL arm's config
	SFTConfig   string    // JSON merged into the continued-SFT arm's config
	From        string    // base checkpoint URI (skips the base SFT)
	Heldout     int       // held-out prompts: excluded from every phase's training data, evaluated by both arms
	Log         io.Writer // progress
}

// longestAnswer is the longest completion of the task's first 2,000 examples (seed 1): sampling
// budgets follow it.
func longestAnswer(task tasks.Task) int {
	longest := 0
	for _, ex := range tasks.Generate(task, 2000, 1, 0) {
		longest = max(longest, len(ex.Completion))
	}
	return longest
}

// RLvsSFTPhases returns the pipeline phases of one seed: the base model (only when from is empty:
// pretraining on the task's text as the demo does, then SFT on the small labelled set), then
// continued SFT on that same labelled set and an RL phase on unlimited fresh prompts scored by the
// task's verifier, both from the base checkpoint and both bounded by the same training wall time.
//
// Every phase of every seed uses the base's data seed: the same labelled set the base was trained on
// and the same held-out prompts, which pretraining and the base SFT never saw. (With the pipeline seed
// instead, seed 2's held-out prompts were partly in seed 1's pretraining text, and its continued SFT
// trained on 500 examples the base had not seen.) Seeds vary RL's prompts and samples; continued SFT
// on a fixed set in a fixed order is the same run in every seed.
func RLvsSFTPhases(o RLvsSFTOptions, from string) ([]workflows.PhaseSpec, error) {
	task, err := tasks.Lookup(o.Task)
	if err != nil {
		return nil, fmt.Errorf("--task: %w", err)
	}
	pretrainOn := o.Task
	if o.PretrainOn != "" {
		if _, err := tasks.Lookup(o.PretrainOn); err != nil {
			return nil, fmt.Errorf("--pretrain-task: %w", err)
		}
		pretrainOn = o.PretrainOn
	}
	// One token for EOS when sampling, one more of slack when evaluating (add2: 4 and 5).
	longest := longestAnswer(task)
	data := fmt.Sprintf(`{"task":%q,"train_examples":%d,"heldout_examples":%d,"seed":%d}`, o.Task, o.SFTExamples, o.Heldout, dataSeed)
	eval := fmt.Sprintf(`{"examples":%d,"max_new_tokens":%d,"before":true}`, o.Heldout, longest+2)
	var phases []workflows.PhaseSpec
	if from == "" && o.Pretrain > 0 {
		phases = append(phases, workflows.PhaseSpec{Name: "pretrain", Kind: "pretrain", Config: json.RawMessage(fmt.Sprintf(
			`{"model":{"preset":"tiny"},"data":{"task":%q,"train_examples":8000,"heldout_examples":%d,"seed":%d},"batch":{"rows":16,"seq":64},
			"steps":%d,"chunk_steps":%d,"optimizer":{"lr":0.003,"warmup_steps":30},"eval":{"examples":%d,"max_new_tokens":%d,"before":false}}`,
			pretrainOn, o.Heldout, dataSeed, o.Pretrain, max(1, o.Pretrain/4), o.Heldout, longest+2))})
	}
	if from == "" {
		phases = append(phases, workflows.PhaseSpec{Name: "base", Kind: "sft", Config: json.RawMessage(fmt.Sprintf(
			`{"model":{"preset":"tiny"},"data":%s,"batch":{"rows":32,"seq":32},"steps":%d,"chunk_steps":%d,
			"optimizer":{"lr":0.003,"warmup_steps":20},"eval":{"examples":%d,"max_new_tokens":%d,"before":false}}`,
			data, o.SFTSteps, max(1, o.SFTSteps/4), o.Heldout, longest+2))})
		from = "base"
	}
	more, err := mergeJSON(fmt.Sprintf(`{"data":%s,"batch":{"rows":32,"seq":32},"steps":1000000,"chunk_steps":100,
		"max_seconds":%g,"optimizer":{"lr":0.0001,"warmup_steps":0,"min_lr_ratio":1},"eval":%s,"keep_last":1}`,
		data, o.Seconds, strings.Replace(eval, "}", `,"every_chunks":2}`, 1)), o.SFTConfig)
	if err != nil {
		return nil, fmt.Errorf("--sft-config: %w", err)
	}
	rl, err := rlArmConfig(o, eval, longest)
	if err != nil {
		return nil, err
	}
	return append(phases,
		workflows.PhaseSpec{Name: "sft_more", Kind: "sft", From: from, Config: more},
		workflows.PhaseSpec{Name: o.Algo, Kind: o.Algo, From: from, Config: rl},
	), nil
}

// rlArmConfig is the RL arm's config: fresh prompts of the task for o.Seconds, evaluated every 20
// iterations on eval, with o.RLConfig merged in last.
func rlArmConfig(o RLvsSFTOptions, eval string, longest int) (json.RawMessage, error) {
	rlBase := fmt.Sprintf(`{"data":{"task":%q,"heldout_examples":%d,"seed":%d},"iterations":1000000,"max_seconds":%g,
		"prompts":32,"group":8,"max_new_tokens":%d,"optimizer":{"lr":0.001,"warmup_steps":20},"eval_every":20,"eval":%s}`,
		o.Task, o.Heldout, dataSeed, o.Seconds, longest+1, eval)
	if o.Algo == "ppo" {
		// PPO's critic is a value head on the policy's own trunk: at the kind's default value
		// coefficient (0.5, no KL term) the value loss reshaped the trunk and exact match fell
		// (docs/benchmarks.md, bench rl-vs-sft); 0.1 with a KL term at half GRPO's lr is what beat continued SFT.
		b, err := mergeJSON(rlBase, `{"optimizer":{"lr":0.0005},"loss":{"value_coef":0.1,"kl_beta":0.04}}`)
		if err != nil {
			return nil, err
		}
		rlBase = string(b)
	}
	rl, err := mergeJSON(rlBase, o.RLConfig)
	if err != nil {
		return nil, fmt.Errorf("--rl-config: %w", err)
	}
	return rl, nil
}

// RLvsSFTArm is one arm's curve in one seed.
type RLvsSFTArm struct {
	Seed  int                    `json:"seed"`
	Arm   string                 `json:"arm"`
	Curve []workflows.CurvePoint `json:"curve"`
	Final float64                `json:"final_exact_match"`
}

// RLvsSFTReport is every arm of every seed and their summary.
type RLvsSFTReport struct {
	Arms    []RLvsSFTArm   `json:"arms"`
	Summary RLvsSFTSummary `json:"summary"`
	o       RLvsSFTOptions
}

// RLvsSFT trains the base once (unless o.From names it), then per seed runs continued SFT and the RL
// arm from it, one after the other, each alone on the workers with the same training-time budget. (Run
// side by side they would share the trainer's one slot, and the RL arm's short policy steps would queue
// behind the SFT arm's long chunks: its budget would go to waiting.)
func RLvsSFT(ctx context.Context, o RLvsSFTOptions) (*RLvsSFTReport, error) {
	st, err := newStack("bench-rlsft", nil)
	if err != nil {
		return nil, err
	}
	defer st.close()
	log := logTo(o.Log)
	fmt.Fprintf(log, "bench rl-vs-sft: %s, %d labelled examples; continued SFT vs %s for %.0f s of training each, %d seed(s)\n",
		o.Task, o.SFTExamples, o.Algo, o.Seconds, o.Seeds)
	run := func(name string, seed int, phases []workflows.PhaseSpec) (workflows.PipelineOutput, error) {
		in := workflows.PipelineInput{Name: "bench-rl-vs-sft", Seed: int64(seed), Store: st.store(), Phases: phases}
		return st.run(ctx, fmt.Sprintf("bench-rl-vs-sft-%d-%s-s%d", time.Now().UnixNano(), name, seed), in)
	}
	from := o.From
	if from == "" { // the base model, once: both arms of every seed start from it
		phases, err := RLvsSFTPhases(o, "")
		if err != nil {
			return nil, err
		}
		out, err := run("base", 1, phases[:len(phases)-2])
		if err != nil {
			return nil, err
		}
		base := out.Phases[len(out.Phases)-1]
		from = base.Checkpoint
		fmt.Fprintf(log, "base SFT: held-out exact match %.3f (%s)\n", base.Metrics["heldout_exact_match"], from)
	}
	rep := &RLvsSFTReport{o: o}
	for seed := 1; seed <= o.Seeds; seed++ {
		phases, err := RLvsSFTPhases(o, from)
		if err != nil {
			return nil, err
		}
		for _, p := range phases {
			out, err := run(p.Name, seed, []workflows.PhaseSpec{p})
			if err != nil {
				return nil, err
			}
			r := out.Phases[0]
			rep.Arms = append(rep.Arms, RLvsSFTArm{Seed: seed, Arm: r.Name, Curve: r.Curve, Final: r.Metrics["heldout_exact_match"]})
			fmt.Fprintf(log, "seed %d %s: held-out exact match %.3f → %.3f\n", seed, r.Name, r.Metrics["heldout_exact_match_before"], r.Metrics["heldout_exact_match"])
		}
	}
	rep.Summary = summarizeRLvsSFT(rep.Arms, o)
	return rep, nil
}

func (r *RLvsSFTReport) JSON() ([]byte, error) { return json.Marshal(r) }

// RLvsSFTSummary averages each arm's final held-out exact match over the seeds, with its standard
// error, and pairs the arms seed by seed: both arms of a seed start from the same checkpoint, so the
// per-seed difference RL − continued SFT cancels what the seeds share, and its standard error says
// whether the mean difference is more than seed noise.
type RLvsSFTSummary struct {
	Start float64            `json:"start_exact_match"`
	Mean  map[string]float64 `json:"mean_final_exact_match"`
	// StdErr is the standard error of each arm's mean final value over the seeds (sample standard
	// deviation / √seeds; 0 with one seed, or for an arm that is the same run in every seed).
	StdErr map[string]float64 `json:"stderr_final_exact_match"`
	// LastMinute averages, per arm, every evaluation of the last 60 s of training over the seeds:
	// less noisy than the final point alone (one evaluation of 200 prompts moves by ~±0.03).
	LastMinute map[string]float64 `json:"mean_last_minute_exact_match"`
	// Diff is the mean over seeds of (RL final − continued-SFT final), DiffStdErr its standard error
	// and DiffT their ratio (0 when the standard error is 0); Paired counts the seeds with both arms.
	Diff       float64 `json:"paired_difference"`
	DiffStdErr float64 `json:"paired_difference_stderr"`
	DiffT      float64 `json:"paired_difference_t"`
	Paired     int     `json:"paired_seeds"`
	Winner     string  `json:"winner"`
	Margin     float64 `json:"margin"`
	Seconds    float64 `json:"seconds_per_arm"`
}

func summarizeRLvsSFT(arms []RLvsSFTArm, o RLvsSFTOptions) RLvsSFTSummary {
	s := RLvsSFTSummary{Mean: map[string]float64{}, StdErr: map[string]float64{}, LastMinute: map[string]float64{}, Seconds: o.Seconds}
	finals := map[string][]float64{}
	bySeed := map[int]map[string]float64{}
	var seeds []int
	nLast := map[string]int{}
	for _, a := range arms {
		finals[a.Arm] = append(finals[a.Arm], a.Final)
		if bySeed[a.Seed] == nil {
			bySeed[a.Seed] = map[string]float64{}
			seeds = append(seeds, a.Seed)
		}
		bySeed[a.Seed][a.Arm] = a.Final
		if len(a.Curve) > 0 {
			s.Start = a.Curve[0].ExactMatch
		}
		for _, p := range a.Curve {
			if p.Step > 0 && p.Seconds >= o.Seconds-60 {
				s.LastMinute[a.Arm] += p.ExactMatch
				nLast[a.Arm]++
			}
		}
	}
	for k, xs := range finals {
		s.Mean[k], s.StdErr[k] = meanStdErr(xs)
	}
	for k := range s.LastMinute {
		s.LastMinute[k] /= float64(nLast[k])
	}
	var diffs []float64
	for _, seed := range seeds { // arms order: no map-order dependence in what is printed
		rl, okRL := bySeed[seed][o.Algo]
		sft, okSFT := bySeed[seed]["sft_more"]
		if okRL && okSFT {
			diffs = append(diffs, rl-sft)
		}
	}
	if s.Paired = len(diffs); s.Paired > 0 {
		s.Diff, s.DiffStdErr = meanStdErr(diffs)
		if s.DiffStdErr > 0 {
			s.DiffT = s.Diff / s.DiffStdErr
		}
	}
	rl, sft := s.Mean[o.Algo], s.Mean["sft_more"]
	switch {
	case rl > sft:
		s.Winner, s.Margin = o.Algo, rl-sft
	case sft > rl:
		s.Winner, s.Margin = "sft_more", sft-rl
	default:
		s.Winner = "tie"
	}
	return s
}

// emAt is the curve's held-out exact match at training time t: the last evaluation at or before t.
func emAt(c []workflows.CurvePoint, t float64) float64 {
	v := math.NaN()
	for _, p := range c {
		if p.Seconds <= t+1e-9 {
			v = p.ExactMatch
		}
	}
	return v
}

// Text prints each arm's curve by training minute, then the means, the paired difference and the
// last minute's means.
func (r *RLvsSFTReport) Text(w io.Writer) {
	s, o := r.Summary, r.o
	fmt.Fprintf(w, "held-out exact match by training minute (last evaluation at or before it), start %.3f:\n", s.Start)
	var marks []float64
	for m := 0.0; m < o.Seconds; m += 60 {
		marks = append(marks, m)
	}
	marks = append(marks, math.Inf(1))
	fmt.Fprintf(w, "  %-14s", "arm/seed")
	for _, m := range marks {
		if math.IsInf(m, 1) {
			fmt.Fprintf(w, " %7s", "end")
		} else {
			fmt.Fprintf(w, " %6.0fm", m/60)
		}
	}
	fmt.Fprintln(w)
	for _, a := range r.Arms {
		fmt.Fprintf(w, "  %-14s", fmt.Sprintf("%s/%d", a.Arm, a.Seed))
		for _, m := range marks {
			fmt.Fprintf(w, " %7.3f", emAt(a.Curve, m))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "mean final exact match over %d seed(s): %s %.3f ± %.3f, sft_more %.3f ± %.3f (± one standard error) → %s by %.3f (%.0f s of training per arm)\n",
		o.Seeds, o.Algo, s.Mean[o.Algo], s.StdErr[o.Algo], s.Mean["sft_more"], s.StdErr["sft_more"], s.Winner, s.Margin, s.Seconds)
	if s.Paired > 0 {
		t := "n/a"
		if s.DiffStdErr > 0 {
			t = fmt.Sprintf("%.1f", s.DiffT)
		}
		fmt.Fprintf(w, "paired difference %s − sft_more over %d seed(s): %+.3f ± %.3f (%s standard errors from 0)\n",
			o.Algo, s.Paired, s.Diff, s.DiffStdErr, t)
	}
	fmt.Fprintf(w, "mean of the last minute's evaluations: %s %.3f, sft_more %.3f\n", o.Algo, s.LastMinute[o.Algo], s.LastMinute["sft_more"])
}
