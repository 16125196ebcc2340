package reward

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/verify"
)

// PRMVerifier is the name of the process-reward verifier: a model trained by a "prm" phase scoring
// every step (line) of a completion.
const PRMVerifier = "prm"

// Outcomes of the prm verifier: how step scores make the completion's score.
const (
	OutcomeMin     = "min"
	OutcomeProduct = "product"
)

// PRMParams configures the "prm" verifier.
type PRMParams struct {
	// Checkpoint is the process reward model (file:///… or gs://…), the output of a "prm" phase.
	Checkpoint string `json:"checkpoint"`
	// Outcome makes the score from the step scores: min (the weakest step; default) or product
	// (the chance every step is right, if the scores were independent).
	Outcome string `json:"outcome,omitempty"`
	// Threshold: the sample passes when its score >= Threshold; 0 means 0.5.
	Threshold float64 `json:"threshold,omitempty"`
	// MaxSteps bounds the steps scored (the first ones); 0 means 16.
	MaxSteps int `json:"max_steps,omitempty"`
}

func (p PRMParams) validate() error {
	switch {
	case !strings.HasPrefix(p.Checkpoint, "file:///") && !strings.HasPrefix(p.Checkpoint, "gs://"):
		return fmt.Errorf("verify: prm params: checkpoint=%q: want the URI of a process reward model (file:///… or gs://…)", p.Checkpoint)
	case p.Outcome != "" && p.Outcome != OutcomeMin && p.Outcome != OutcomeProduct:
		return fmt.Errorf("verify: prm params: outcome=%q: allowed values: %s, %s", p.Outcome, OutcomeMin, OutcomeProduct)
	case !(p.Threshold >= 0 && p.Threshold < 1):
		return fmt.Errorf("verify: prm params: threshold=%g: want 0 <= threshold < 1 (0 means 0.5)", p.Threshold)
	case p.MaxSteps < 0 || p.MaxSteps > 256:
		return fmt.Errorf("verify: prm params: max_steps=%d: want 0..256 (0 means 16)", p.MaxSteps)
	}
	return nil
}

// StepScoreKey is the Verdict.Partial key of step i's score (0-based): the per-step rewards a
// step-level learner reads (step i is line i of the completion). The format is verify's, which
// the trainer reads too (PPO's ppo.step_rewards).
func StepScoreKey(i int) string { return verify.StepScoreKey(i) }

// NewPRMFactory returns the factory of "prm": it scores each line of the completion with the
// process reward model's value head at the line's end (σ of it, as the prm phase trained it) and
// reports the step scores in Partial (StepScoreKey), Score = their min or product, Pass = Score >=
// threshold, and feedback naming the weakest line. Models load and are cached as the critic's.
func NewPRMFactory(cl *ckpt.Client, newEngine train.NewEngine) verify.Factory {
	cache := newCriticCache(cl, newEngine)
	return func(params json.RawMessage) (verify.Verifier, error) {
		p, err := decodeChecked[PRMParams](PRMVerifier, params)
		if err != nil {
			return nil, err
		}
		if p.Outcome == "" {
			p.Outcome = OutcomeMin
		}
		if p.Threshold == 0 {
			p.Threshold = 0.5
		}
		if p.MaxSteps == 0 {
			p.MaxSteps = 16
		}
		return &prmVerifier{p: p, cache: cache}, nil
	}
}

type prmVerifier struct {
	p     PRMParams
	cache *criticCache
}

// Verify scores one sample's steps. It is safe for concurrent use (the engine serializes executions).
func (v *prmVerifier) Verify(ctx context.Context, s verify.Sample) (verify.Verdict, error) {
	if err := v.cache.usable(PRMVerifier); err != nil {
		return verify.Verdict{}, err
	}
	steps := tasks.SolutionSteps(s.Completion)
	if len(steps) == 0 {
		return verify.Verdict{Feedback: "empty output"}, nil
	}
	m, err := v.cache.acquire(ctx, v.p.Checkpoint)
	if err != nil {
		return verify.Verdict{}, err
	}
	defer v.cache.release(m)
	rows, err := train.StepRows([]tasks.StepExample{{Prompt: s.Prompt, Steps: steps}}, m.cfg.MaxSeq, v.p.MaxSteps)
	if err != nil {
		return verify.Verdict{Feedback: fmt.Sprintf("too long for the process reward model (at most %d tokens)", m.cfg.MaxSeq)}, nil
	}
	scores, err := train.ScoreSteps(m.eng, rows, 1, len(rows[0].Ends), m.cfg.MaxSeq, nil)
	if err != nil {
		return verify.Verdict{}, fmt.Errorf("verify: prm %s: %w", v.p.Checkpoint, err)
	}
	return prmVerdict(scores[0], v.p.Outcome, v.p.Threshold)
}

// prmVerdict makes the verdict of step scores: Partial holds each step's, Score their min or
// product; the feedback names the weakest step (1-based, as a reader counts lines).
func prmVerdict(scores []float64, outcome string, threshold float64) (verify.Verdict, error) {
	v := verify.Verdict{Partial: map[string]float64{}, Score: 1}
	weakest := 0
	for i, p := range scores {
		if math.IsNaN(p) {
			return verify.Verdict{}, fmt.Errorf("verify: prm: step %d: score is NaN", i+1)
		}
		v.Partial[StepScoreKey(i)] = p
		if p < scores[weakest] {
			weakest = i
		}
		if outcome == OutcomeProduct {
			v.Score *= p
		} else {
			v.Score = min(v.Score, p)
		}
	}
	v.Pass = v.Score >= threshold
	if !v.Pass {
		v.Feedback = fmt.Sprintf("line %d looks wrong to the process reward model (%.2f)", weakest+1, scores[weakest])
	}
	return v, nil
}
