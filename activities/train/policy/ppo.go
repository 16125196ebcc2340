package policy

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/safetensors"
)

// PPO (Schulman et al. 2017) trains a value-head critic on the policy's trunk. The plan (policy.go)
// loads it with the policy (train.Load with train.HeadCritic), reads V_old with π_old before any update, folds
// ppo.kl_coef·(log π_old − log π_ref) into the token rewards (and, with ppo.step_rewards, a process
// reward model's step scores on the tokens that end the steps, steps.go) and computes GAE(γ, λ) advantages,
// whitened over the iteration's tokens, and returns R = A + V_old (ppoAdvantages); it commits the
// critic beside the policy (writePolicyWithCritic).

// writePolicyWithCritic commits a PPO policy: config.json and model.safetensors of the causal LM
// alone, its value head in trainapi.CriticFile, the optimizer state (head included) and state.json.
func writePolicyWithCritic(ctx context.Context, w *ckpt.Writer, pol *train.Loaded, st ckpt.State) error {
	eng := pol.Engine
	if err := train.WriteModelFiles(ctx, w, pol); err != nil {
		return err
	}
	var buf bytes.Buffer
	if err := eng.SaveWeights(&buf); err != nil {
		return fmt.Errorf("write %s: %w", trainapi.ModelFile, err)
	}
	f, err := safetensors.Read(bytes.NewReader(buf.Bytes()))
	if err != nil {
		return fmt.Errorf("write %s: %w", trainapi.ModelFile, err)
	}
	var policy, critic []safetensors.Tensor
	for _, t := range f.Tensors {
		if strings.HasPrefix(t.Name, "score.") {
			critic = append(critic, t)
		} else {
			policy = append(policy, t)
		}
	}
	if len(critic) != 2 {
		return fmt.Errorf("write %s: the engine saved %d value-head tensors, want %s and %s", trainapi.CriticFile, len(critic), train.ScoreWeight, train.ScoreBias)
	}
	for _, part := range []struct {
		name string
		ts   []safetensors.Tensor
	}{{trainapi.ModelFile, policy}, {trainapi.CriticFile, critic}} {
		var b bytes.Buffer
		if err := safetensors.Write(&b, part.ts, f.Metadata); err != nil {
			return fmt.Errorf("write %s: %w", part.name, err)
		}
		if err := w.Add(ctx, part.name, &b); err != nil {
			return err
		}
	}
	if err := train.Stream(ctx, w, trainapi.OptimizerFile, eng.SaveOptimizer); err != nil {
		return err
	}
	return w.AddState(ctx, st)
}
