package rollout

import (
	"context"
	"fmt"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/tasks"
)

// batchSamples: see rolloutapi.BatchSamples.
const batchSamples = rolloutapi.BatchSamples

// batchCuts returns the sample index where each generation batch ends for a shard whose first
// prompt is prompt lo of the iteration, with n prompts of group samples each.
func batchCuts(lo, n, group int) []int {
	unit := rolloutapi.BatchPrompts(group)
	var cuts []int
	for p := lo; p < lo+n; {
		end := min(lo+n, (p/unit+1)*unit)
		cuts = append(cuts, (end-lo)*group)
		p = end
	}
	return cuts
}

// flatCuts cuts n samples into batches of batchSamples (retries: one sample per prompt).
func flatCuts(n int) []int {
	var cuts []int
	for hi := batchSamples; ; hi += batchSamples {
		cuts = append(cuts, min(hi, n))
		if hi >= n {
			return cuts
		}
	}
}

// readShards reads the rollouts objects of uris and concatenates them in order.
func readShards(ctx context.Context, cl *ckpt.Client, uris []string) ([]rollout.Rollout, error) {
	var out []rollout.Rollout
	for _, u := range uris {
		rs, err := readRollouts(ctx, cl, u)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// promptRange returns the shard's slice of the iteration's prompts: [PromptLo, PromptHi), or all
// of them when PromptHi is 0.
func promptRange(in rolloutapi.GenerateInput, exs []tasks.Example) ([]tasks.Example, int, error) {
	if in.PromptHi == 0 && in.PromptLo == 0 {
		return exs, 0, nil
	}
	if in.PromptLo < 0 || in.PromptHi <= in.PromptLo || in.PromptHi > len(exs) {
		return nil, 0, fmt.Errorf("rollout: generate %s/%s: prompts [%d, %d) of %d: want 0 <= prompt_lo < prompt_hi <= prompts",
			in.Run, in.Phase, in.PromptLo, in.PromptHi, len(exs))
	}
	return exs[in.PromptLo:in.PromptHi], in.PromptLo, nil
}
