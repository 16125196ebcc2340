package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/workflows"
)

// DistillOptions size `temper bench distill`.
type DistillOptions struct {
	Task          string    // built-in task
	Examples      int       // the labelled set: both student arms train on it only
	TeacherData   int       // the teacher's labelled examples (0: Examples); a larger set starts with the students' (tasks.Split draws training examples as a prefix of one stream)
	Heldout       int       // held-out prompts, never trained on; every model is evaluated on them
	TeacherSteps  int       // teacher SFT steps
	TeacherPreset string    // teacher architecture (small)
	StudentPreset string    // both students' architecture (tiny)
	Seconds       float64   // training wall time of each student arm
	Seeds         int       // student arms run once per seed (the student's initialisation), from the same teacher
	Teacher       string    // teacher checkpoint URI (skips training one; it should have seen only data seed 1's labelled set)
	DistillConfig string    // JSON merged into the distill arm's config
	SFTConfig     string    // JSON merged into the SFT arm's config
	Log           io.Writer // progress
}

// DistillPhases returns the teacher's SFT phase and the two student arms of `bench distill`: a
// fresh student fine-tuned on the labelled set (sft) and a fresh student distilled from the teacher
// on the same set (distill), both with the same optimizer and bounded by the same training wall time
// (max_seconds; the distill arm's time includes running the teacher). Every phase uses data seed 1
// (dataSeed): the same labelled examples and held-out prompts in every seed.
func DistillPhases(o DistillOptions, teacher string) (workflows.PhaseSpec, []workflows.PhaseSpec, error) {
	task, err := tasks.Lookup(o.Task)
	if err != nil {
		return workflows.PhaseSpec{}, nil, fmt.Errorf("--task: %w", err)
	}
	longest, seq := 0, 0
	enc := 2 // BOS and EOS
	for _, ex := range tasks.Generate(task, 2000, 1, 0) {
		longest = max(longest, len(ex.Completion))
		seq = max(seq, len(ex.Prompt)+len(ex.Completion)+enc)
	}
	data := fmt.Sprintf(`{"task":%q,"train_examples":%d,"heldout_examples":%d,"seed":%d}`, o.Task, o.Examples, o.Heldout, dataSeed)
	eval := fmt.Sprintf(`{"examples":%d,"max_new_tokens":%d,"before":false`, o.Heldout, longest+2)
	teacherData := data
	if o.TeacherData > 0 {
		teacherData = fmt.Sprintf(`{"task":%q,"train_examples":%d,"heldout_examples":%d,"seed":%d}`, o.Task, o.TeacherData, o.Heldout, dataSeed)
	}
	teacherPhase := workflows.PhaseSpec{Name: "teacher", Kind: "sft", Config: json.RawMessage(fmt.Sprintf(
		`{"model":{"preset":%q},"data":%s,"batch":{"rows":32,"seq":32},"steps":%d,"chunk_steps":%d,
		"optimizer":{"lr":0.003,"warmup_steps":20},"eval":%s},"keep_last":1}`,
		o.TeacherPreset, teacherData, o.TeacherSteps, max(1, o.TeacherSteps/4), eval))}
	// Both arms: constant learning rate after warmup (the time bound, not steps, ends them), an
	// evaluation every 4 chunks for the curve.
	common := fmt.Sprintf(`"model":{"preset":%q},"data":%s,"steps":1000000,"chunk_steps":50,"max_seconds":%g,
		"optimizer":{"lr":0.003,"warmup_steps":20,"min_lr_ratio":1},"eval":%s,"every_chunks":4},"keep_last":1`,
		o.StudentPreset, data, o.Seconds, eval)
	sft, err := mergeJSON(`{`+common+`,"batch":{"rows":32,"seq":32}}`, o.SFTConfig)
	if err != nil {
		return workflows.PhaseSpec{}, nil, fmt.Errorf("--sft-config: %w", err)
	}
	dist, err := mergeJSON(fmt.Sprintf(`{%s,"teacher":%q,"batch":{"rows":32,"seq":%d}}`, common, teacher, max(8, seq)), o.DistillConfig)
	if err != nil {
		return workflows.PhaseSpec{}, nil, fmt.Errorf("--distill-config: %w", err)
	}
	return teacherPhase, []workflows.PhaseSpec{
		{Name: "sft", Kind: "sft", Config: sft},
		{Name: "distill", Kind: "distill", Config: dist},
	}, nil
}

// DistillArm is one student arm's result in one seed.
type DistillArm struct {
	Seed    int                    `json:"seed"`
	Arm     string                 `json:"arm"`
	Curve   []workflows.CurvePoint `json:"curve"`
	Final   float64                `json:"final_exact_match"`
	Steps   float64                `json:"steps"`
	Seconds float64                `json:"train_seconds"`
}

// DistillReport is every arm of every seed and their summary.
type DistillReport struct {
	Arms    []DistillArm   `json:"arms"`
	Summary DistillSummary `json:"summary"`
}

// Distill trains the teacher (unless o.Teacher names it), then per seed runs the two student arms one
// after the other, each alone on the workers with the same training-time budget.
func Distill(ctx context.Context, o DistillOptions) (*DistillReport, error) {
	st, err := newStack("bench-distill", nil)
	if err != nil {
		return nil, err
	}
	defer st.close()
	log := logTo(o.Log)
	fmt.Fprintf(log, "bench distill: %s, %d labelled examples (the teacher: %d); a %s teacher; %s students fine-tuned vs distilled for %.0f s of training each, %d seed(s)\n",
		o.Task, o.Examples, max(o.Examples, o.TeacherData), o.TeacherPreset, o.StudentPreset, o.Seconds, o.Seeds)
	run := func(name string, seed int, phases []workflows.PhaseSpec) (workflows.PhaseResult, error) {
		in := workflows.PipelineInput{Name: "bench-distill", Seed: int64(seed), Store: st.store(), Phases: phases}
		out, err := st.run(ctx, fmt.Sprintf("bench-distill-%d-%s-s%d", time.Now().UnixNano(), name, seed), in)
		if err != nil {
			return workflows.PhaseResult{}, err
		}
		return out.Phases[len(out.Phases)-1], nil
	}
	teacher, teacherEM := o.Teacher, -1.0
	if teacher == "" {
		tp, _, err := DistillPhases(o, "file:///unused/")
		if err != nil {
			return nil, err
		}
		r, err := run("teacher", 1, []workflows.PhaseSpec{tp})
		if err != nil {
			return nil, err
		}
		teacher, teacherEM = r.Checkpoint, r.Metrics["heldout_exact_match"]
		fmt.Fprintf(log, "teacher (%s, %d steps): held-out exact match %.3f (%s)\n", o.TeacherPreset, o.TeacherSteps, teacherEM, teacher)
	}
	rep := &DistillReport{}
	for seed := 1; seed <= o.Seeds; seed++ {
		_, phases, err := DistillPhases(o, teacher)
		if err != nil {
			return nil, err
		}
		for _, p := range phases {
			r, err := run(p.Name, seed, []workflows.PhaseSpec{p})
			if err != nil {
				return nil, err
			}
			a := DistillArm{Seed: seed, Arm: r.Name, Curve: r.Curve, Final: r.Metrics["heldout_exact_match"], Steps: r.Metrics["steps"], Seconds: r.Metrics["train_seconds"]}
			rep.Arms = append(rep.Arms, a)
			fmt.Fprintf(log, "seed %d %s: held-out exact match %.3f after %.0f steps in %.0f s\n", seed, a.Arm, a.Final, a.Steps, a.Seconds)
		}
	}
	rep.Summary = summarizeDistill(rep.Arms)
	rep.Summary.Teacher, rep.Summary.TeacherEM, rep.Summary.Seconds = teacher, teacherEM, o.Seconds
	return rep, nil
}

func (r *DistillReport) JSON() ([]byte, error) { return json.Marshal(r) }

// DistillSummary averages each arm's final held-out exact match over the seeds and pairs the arms
// seed by seed (both arms of a seed start from the same initialisation).
type DistillSummary struct {
	Teacher    string  `json:"teacher"`
	TeacherEM  float64 `json:"teacher_exact_match"` // -1 when the teacher was given (--teacher)
	Seconds    float64 `json:"seconds_per_arm"`
	SFT        float64 `json:"sft_mean_exact_match"`
	SFTErr     float64 `json:"sft_stderr"`
	Distill    float64 `json:"distill_mean_exact_match"`
	DistillErr float64 `json:"distill_stderr"`
	Diff       float64 `json:"paired_difference"` // distill − sft, mean over seeds
	DiffErr    float64 `json:"paired_difference_stderr"`
	Wins       int     `json:"seeds_distill_higher"`
	Paired     int     `json:"paired_seeds"`
}

func summarizeDistill(arms []DistillArm) DistillSummary {
	var s DistillSummary
	var sft, dist, diffs []float64
	bySeed := map[int]map[string]float64{}
	var seeds []int
	for _, a := range arms {
		if bySeed[a.Seed] == nil {
			bySeed[a.Seed] = map[string]float64{}
			seeds = append(seeds, a.Seed)
		}
		bySeed[a.Seed][a.Arm] = a.Final
		switch a.Arm {
		case "sft":
			sft = append(sft, a.Final)
		case "distill":
			dist = append(dist, a.Final)
		}
	}
	s.SFT, s.SFTErr = meanStdErr(sft)
	s.Distill, s.DistillErr = meanStdErr(dist)
	for _, seed := range seeds {
		d, okD := bySeed[seed]["distill"]
		f, okF := bySeed[seed]["sft"]
		if okD && okF {
			diffs = append(diffs, d-f)
			if d > f {
				s.Wins++
			}
		}
	}
	if s.Paired = len(diffs); s.Paired > 0 {
		s.Diff, s.DiffErr = meanStdErr(diffs)
	}
	return s
}

// Text prints each arm's steps, time and final exact match, then the means and the paired difference.
func (r *DistillReport) Text(w io.Writer) {
	s := r.Summary
	if s.TeacherEM >= 0 {
		fmt.Fprintf(w, "teacher held-out exact match %.3f\n", s.TeacherEM)
	}
	fmt.Fprintf(w, "  %-12s %8s %8s %10s\n", "arm/seed", "steps", "seconds", "exact@end")
	for _, a := range r.Arms {
		fmt.Fprintf(w, "  %-12s %8.0f %8.0f %10.3f\n", fmt.Sprintf("%s/%d", a.Arm, a.Seed), a.Steps, a.Seconds, a.Final)
	}
	fmt.Fprintf(w, "mean final held-out exact match (%.0f s of training per arm): distill %.3f ± %.3f, sft %.3f ± %.3f; paired difference distill − sft %+.3f ± %.3f, distill higher in %d of %d seed(s)\n",
		s.Seconds, s.Distill, s.DistillErr, s.SFT, s.SFTErr, s.Diff, s.DiffErr, s.Wins, s.Paired)
}
