package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/internal/config"
)

// PRMEval says when and how a prm phase evaluates.
type PRMEval struct {
	EvalCadence
	Examples int `json:"examples" default:"400" help:"held-out step-labelled solutions used (0: all)"`
}

// PRMConfig configures the "prm" phase kind: a process reward model, the reward phase's decoder
// with a value head (same init, same chunked skeleton) trained per step: the head read at every
// step's end, binary cross-entropy against the step's label.
type PRMConfig struct {
	Model ModelSpec         `json:"model" help:"architecture when the phase has no from (a value head is added)"`
	Data  trainapi.PRMData  `json:"data"`
	Batch trainapi.PRMBatch `json:"batch"`
	Loss  trainapi.PRMLoss  `json:"loss"`
	// LogProbReward off keeps the value head alone (and the RewardInit input of phases before it).
	LogProbReward bool `json:"logprob_reward" help:"a new value head also scores with the LM: a step's logit = value at its newline + α·Σ log π(the step's own tokens), α learned from 1 (model.Config.RewardLogProb, as the reward phase's); false: the value head alone"`
	ChunkSpec
	Eval PRMEval `json:"eval"`
}

func defaultPRMConfig() *PRMConfig {
	return &PRMConfig{
		Model: ModelSpec{Preset: "tiny"},
		Data:  trainapi.PRMData{TrainExamples: 2000, HeldoutExamples: 200, HeldoutShare: 0.2},
		Batch: trainapi.PRMBatch{Rows: 32, MaxSeq: 64, MaxSteps: 8},
		Loss:  trainapi.PRMLoss{Balance: trainapi.PRMBalanceLabels},
		// The reward phase's optimizer: a small model fine-tuned from an sft checkpoint.
		ChunkSpec: defaultChunkSpec(400, 200, trainapi.Optim{LR: 1e-3, WarmupSteps: 20, MinLRRatio: 0.1, WeightDecay: 0.1, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}),
		Eval:      PRMEval{EvalCadence: EvalCadence{Before: true}, Examples: 400},
	}
}

// Validate names the bad field and its allowed values.
func (c *PRMConfig) Validate() error {
	if _, err := c.Model.Resolve(); err != nil {
		return err
	}
	for _, err := range []error{c.Data.Validate(), c.Batch.Validate(), c.Loss.Validate(), c.ChunkSpec.Validate(), c.Eval.EvalCadence.Validate()} {
		if err != nil {
			return err
		}
	}
	if c.Eval.Examples < 0 {
		return &config.FieldError{Path: "eval.examples", Msg: fmt.Sprintf("%d: want >= 0 (0: all)", c.Eval.Examples)}
	}
	return nil
}

// PRMWorkflow is the registered workflow type of the "prm" phase kind.
const PRMWorkflow = "PRM"

func init() {
	RegisterPhase(PhaseKind{Kind: "prm", WorkflowName: PRMWorkflow, Workflow: PRM, TakesData: DataSteps,
		Doc: "process reward model: the decoder plus a value head read at every step's end, trained with binary cross-entropy on step-labelled solutions " +
			"(a task's per-line checker, or a search phase's step labels through from_data); reports held-out step accuracy; used by the prm verifier and search's value: prm",
		NewConfig: func() PhaseConfig { return defaultPRMConfig() }})
}

// versionPRMBalance: a prm phase weighs its loss's classes as loss.balance says (default labels)
// and keeps the checkpoint of best held-out balanced accuracy. Before: every step weighed 1 and the
// best was the one of best step accuracy, which a PRM calling every step wrong wins on search-tree
// labels (most of their steps are wrong).
const versionPRMBalance = "prm-balance"

// PRM runs a prm phase (runChunked): RewardInit (the `from` checkpoint with a value head, with the
// generative term when logprob_reward is set), PRMChunk's steps, PRMEvaluate's held-out balanced accuracy (the score, step
// accuracy where only one label is held out; ties go to the lower held-out cross-entropy). A
// from_data phase's step labels are the training data.
func PRM(ctx workflow.Context, in PhaseInput) (PhaseOutput, error) {
	cfg, err := decodeKindConfig[*PRMConfig](in)
	if err != nil {
		return PhaseOutput{}, err
	}
	if fd := in.FromData; fd != nil {
		cfg.Data.Task, cfg.Data.Train = "", fd.Steps
	}
	score := prmScore
	if workflow.GetVersion(ctx, versionPRMBalance, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		cfg.Loss.Balance, score = trainapi.PRMBalanceNone, prmScoreBefore
	}
	return runChunked(ctx, in, chunkedKind{
		spec: cfg.ChunkSpec, cadence: cfg.Eval.EvalCadence, dataSeed: cfg.Data.Seed,
		start: func(r *chunkedRun) (string, bool, error) {
			mc, _ := cfg.Model.Resolve() // validated
			return rewardInit(r, in, trainapi.RewardInitInput{Store: in.Store, Run: in.RunID, Phase: in.Phase, From: in.From, Model: mc, Seed: r.seed, LogProb: cfg.LogProbReward})
		},
		chunk: func(r *chunkedRun, head trainapi.ChunkHead) (string, any) {
			return trainapi.PRMChunkName, trainapi.PRMChunkInput{ChunkHead: head, Data: cfg.Data, Batch: cfg.Batch, Loss: cfg.Loss}
		},
		evaluate: func(r *chunkedRun, uri string) (map[string]float64, error) {
			var out trainapi.RewardEvalOutput
			err := r.exec(true, trainapi.PRMEvaluateName, trainapi.PRMEvalInput{
				Store: in.Store, Checkpoint: uri, Data: cfg.Data, Batch: cfg.Batch, Examples: cfg.Eval.Examples, Seed: r.seed,
			}, &out)
			return out.Metrics, err
		},
		headline: "heldout_step_accuracy",
		score:    score,
		report: func(st *LoopState, metrics map[string]float64) {
			metrics["train_step_accuracy"], metrics["solutions_per_s"] = st.Train["step_accuracy"], st.Train["solutions_per_s"]
		},
	})
}

// prmScore ranks a prm phase's evaluations: held-out balanced accuracy (step accuracy when only one
// label is held out), ties to the lower cross-entropy.
func prmScore(m map[string]float64) float64 {
	acc, ok := m["heldout_balanced_accuracy"]
	if !ok {
		acc = m["heldout_step_accuracy"]
	}
	return acc - 1e-6*m["heldout_bce"]
}

// prmScoreBefore is prmScore before versionPRMBalance: step accuracy.
func prmScoreBefore(m map[string]float64) float64 {
	return m["heldout_step_accuracy"] - 1e-6*m["heldout_bce"]
}
