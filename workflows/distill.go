package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/objective/objectivecfg"
	"github.com/temperml/temper/internal/config"
)

// Where a distill phase's student starts.
const (
	StudentScratch = "scratch"
	StudentFrom    = "from"
)

// DistillConfig configures the "distill" phase kind: a student learns a teacher checkpoint's
// next-token distributions (any size, the same tokenizer) on the data's completions and, with
// loss.lambda > 0, on its own samples of the data's prompts (GKD's on-policy mixture).
type DistillConfig struct {
	Teacher string                     `json:"teacher" help:"the teacher: the name of an earlier phase or a checkpoint URI (any size; the same tokenizer)"`
	Targets string                     `json:"targets" default:"on_the_fly" help:"on_the_fly: the teacher is held beside the student and run on every batch (any loss) | precomputed: the teacher's top-k distributions over the training data are computed once into the store (train.DistillTargets) and chunks never load the teacher (needs loss.top_k >= 1, loss.lambda 0)"`
	Student string                     `json:"student" default:"scratch" help:"scratch: a fresh model.preset student | from: start from the phase's from checkpoint (default: the previous phase's output, often the teacher itself: set from)"`
	Model   ModelSpec                  `json:"model" help:"the student's architecture when student is scratch"`
	Data    trainapi.DataSpec          `json:"data"`
	Batch   trainapi.BatchSpec         `json:"batch" help:"rows: examples per step, one per row; seq: tokens per row (the longest example and every on-policy sample must fit)"`
	Loss    objectivecfg.DistillConfig `json:"loss"`
	ChunkSpec
	Eval EvalSpec `json:"eval"`
}

func defaultDistillConfig() *DistillConfig {
	return &DistillConfig{
		Targets:   trainapi.TeacherOnTheFly,
		Student:   StudentScratch,
		Model:     ModelSpec{Preset: "tiny"},
		Data:      trainapi.DataSpec{TrainExamples: 2000, HeldoutExamples: 200},
		Batch:     trainapi.BatchSpec{Rows: 16, Seq: 32},
		Loss:      objectivecfg.DefaultDistill(),
		ChunkSpec: defaultChunkSpec(200, 50, trainapi.Optim{LR: 3e-3, WarmupSteps: 20, MinLRRatio: 0.1, WeightDecay: 0.01, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}),
		Eval:      EvalSpec{EvalCadence: EvalCadence{Before: true}, Examples: 200, MaxNewTokens: 16, PassK: 1, Temperature: 1},
	}
}

// Validate names the bad field and its allowed values.
func (c *DistillConfig) Validate() error {
	if c.Teacher == "" {
		return &config.FieldError{Path: "teacher", Msg: "required: the name of an earlier phase or a checkpoint URI"}
	}
	if c.Targets != trainapi.TeacherOnTheFly && c.Targets != trainapi.TeacherPrecomputed {
		return &config.FieldError{Path: "targets", Msg: fmt.Sprintf("%q: allowed values: %s, %s", c.Targets, trainapi.TeacherOnTheFly, trainapi.TeacherPrecomputed)}
	}
	if c.Student != StudentScratch && c.Student != StudentFrom {
		return &config.FieldError{Path: "student", Msg: fmt.Sprintf("%q: allowed values: %s, %s", c.Student, StudentScratch, StudentFrom)}
	}
	if _, err := c.Model.Resolve(); err != nil {
		return err
	}
	if err := c.Data.Validate(); err != nil {
		return err
	}
	if c.Data.Text {
		return &config.FieldError{Path: "data.text", Msg: "distillation learns the teacher on completions: leave text false"}
	}
	if err := c.Batch.Validate(); err != nil {
		return err
	}
	if err := c.Loss.Validate(); err != nil {
		if fe, ok := err.(*config.FieldError); ok {
			return &config.FieldError{Path: "loss." + fe.Path, Msg: fe.Msg}
		}
		return err
	}
	if c.Targets == trainapi.TeacherPrecomputed {
		switch {
		case c.Loss.TopK < 1:
			return &config.FieldError{Path: "loss.top_k", Msg: "targets precomputed stores the teacher's top-k tokens: set top_k >= 1 (e.g. 8), or targets on_the_fly"}
		case c.Loss.Lambda > 0:
			return &config.FieldError{Path: "loss.lambda", Msg: "the student's own samples need the teacher on the fly: set targets on_the_fly, or lambda 0"}
		}
	}
	if err := firstError(c.ChunkSpec.Validate, c.Eval.validateVerifiers, c.Eval.EvalCadence.Validate); err != nil {
		return err
	}
	if c.Eval.PassK < 1 {
		return &config.FieldError{Path: "eval.pass_k", Msg: "must be >= 1"}
	}
	return nil
}

// PhaseRefs: the teacher names an earlier phase or a URI.
func (c *DistillConfig) PhaseRefs() []PhaseRef {
	return append([]PhaseRef{{Path: "teacher", Value: c.Teacher}}, verifierRefs("eval.verifiers", c.Eval.Verifiers)...)
}

// NeedsFrom: a student that starts from a checkpoint needs one.
func (c *DistillConfig) NeedsFrom() string {
	if c.Student == StudentFrom {
		return "student from starts from a checkpoint (set from, or student scratch)"
	}
	return ""
}

// DistillWorkflow is the registered workflow type of the "distill" phase kind.
const DistillWorkflow = "Distill"

func init() {
	RegisterPhase(PhaseKind{Kind: "distill", WorkflowName: DistillWorkflow, Workflow: Distill,
		Doc:       "distillation: a student (fresh, or from) learns a teacher checkpoint's next-token distributions (teacher: PHASE or URI; any size, same tokenizer): forward KL on the data (full, or top-k precomputed once), reverse KL or GKD's β-skewed JSD on a fraction λ of the student's own samples; reports held-out exact match",
		NewConfig: func() PhaseConfig { return defaultDistillConfig() }})
}

// Distill runs a distill phase (runChunked): its start makes the student (Init, or from) and, with
// targets precomputed, the teacher's top-k targets (DistillTargets); DistillChunk trains the
// divergence; Evaluate measures held-out exact match (the score; ties go to the lower held-out loss).
// It returns the student's final checkpoint.
func Distill(ctx workflow.Context, in PhaseInput) (PhaseOutput, error) {
	cfg, err := decodeKindConfig[*DistillConfig](in)
	if err != nil {
		return PhaseOutput{}, err
	}
	invalid := func(err error) (PhaseOutput, error) {
		return PhaseOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
	}
	teacher := resolvePhaseRef(cfg.Teacher, in.Earlier)
	if teacher == "" {
		return invalid(fmt.Errorf("%s phase %s: teacher %q is neither a checkpoint URI nor an earlier phase", in.Kind, in.Phase, cfg.Teacher))
	}
	if cfg.Student == StudentFrom && in.From == "" {
		return invalid(fmt.Errorf("%s phase %s: student from needs a starting checkpoint: set from, or student scratch", in.Kind, in.Phase))
	}
	return runChunked(ctx, in, chunkedKind{
		spec: cfg.ChunkSpec, cadence: cfg.Eval.EvalCadence, dataSeed: cfg.Data.Seed,
		start: func(r *chunkedRun) (string, bool, error) {
			s := &r.st.Setup
			s.Reference = teacher
			if cfg.Targets == trainapi.TeacherPrecomputed {
				var out trainapi.DistillTargetsOutput
				if err := r.exec(true, trainapi.DistillTargetsName, trainapi.DistillTargetsInput{
					Store: in.Store, Run: in.RunID, Phase: in.Phase, Teacher: teacher, Data: cfg.Data, Seq: cfg.Batch.Seq,
					TopK: cfg.Loss.TopK, Temperature: cfg.Loss.Temperature, Seed: r.st.Cursor.Seed,
				}, &out); err != nil {
					return "", false, fmt.Errorf("%s %s: teacher targets: %w", in.Kind, in.Phase, err)
				}
				s.RefData = out.Targets
				s.Metrics = map[string]float64{"teacher_target_examples": float64(out.Examples)}
			}
			if cfg.Student == StudentFrom {
				return in.From, true, nil
			}
			return r.initFresh(cfg.Model)
		},
		chunk: func(r *chunkedRun, head trainapi.ChunkHead) (string, any) {
			ci := trainapi.DistillChunkInput{ChunkHead: head, Data: cfg.Data, Batch: cfg.Batch, Loss: cfg.Loss}
			if r.st.Setup.RefData != "" {
				ci.Targets = r.st.Setup.RefData
			} else {
				ci.Teacher = r.st.Setup.Reference
			}
			return trainapi.DistillChunkName, ci
		},
		evaluate: lmEvaluate(in, cfg.Data, cfg.Eval),
		headline: "heldout_exact_match",
		score:    lmScore,
		report: func(st *LoopState, metrics map[string]float64) {
			for _, k := range sortedKeys(st.Train) {
				metrics["train_"+k] = st.Train[k]
			}
		},
	})
}
