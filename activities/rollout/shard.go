package rollout

import (
	"context"
	"fmt"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/tasks"
)

// batchSamples is about how many samples one generation batch holds.
const batchSamples = 64

// BatchPrompts is how many prompts one generation batch holds. Batches are windows of the
// iteration's prompts aligned to multiples of it, whatever the shard: a batch's padding and shapes,
// and so its floating-point results, depend only on which prompts it holds.
func BatchPrompts(group int) int { return max(1, batchSamples/max(1, group)) }

// ShardRanges splits an iteration's prompts [0, prompts) into at most shards contiguous, non-empty
// ranges [lo, hi) that begin at multiples of BatchPrompts(group), as evenly as that allows. Every
// sample is seeded by its prompt's index in the iteration and batched by the aligned windows, so
// the concatenated shards are byte-identical to one shard whatever their number. Workflows call it
// (it is pure).
func ShardRanges(prompts, group, shards int) [][2]int {
	unit := BatchPrompts(group)
	units := (prompts + unit - 1) / unit
	shards = max(1, min(shards, units))
	out := make([][2]int, 0, shards)
	lo := 0
	for s := range shards {
		n := units / shards
		if s < units%shards {
			n++
		}
		hi := min(prompts, lo+n*unit)
		out = append(out, [2]int{lo, hi})
		lo = hi
	}
	return out
}

// ShardTag names shard s's rollouts object (iter-000003-s0001.jsonl).
func ShardTag(s int) string { return fmt.Sprintf("s%04d", s) }

// batchCuts returns the sample index where each generation batch ends for a shard whose first
// prompt is prompt lo of the iteration, with n prompts of group samples each.
func batchCuts(lo, n, group int) []int {
	unit := BatchPrompts(group)
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
func promptRange(in GenerateInput, exs []tasks.Example) ([]tasks.Example, int, error) {
	if in.PromptHi == 0 && in.PromptLo == 0 {
		return exs, 0, nil
	}
	if in.PromptLo < 0 || in.PromptHi <= in.PromptLo || in.PromptHi > len(exs) {
		return nil, 0, fmt.Errorf("rollout: generate %s/%s: prompts [%d, %d) of %d: want 0 <= prompt_lo < prompt_hi <= prompts",
			in.Run, in.Phase, in.PromptLo, in.PromptHi, len(exs))
	}
	return exs[in.PromptLo:in.PromptHi], in.PromptLo, nil
}
