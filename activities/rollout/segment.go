package rollout

import (
	"context"
	"fmt"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/sample"
)

// Partial generation (async RL with partial: true). A generation that outlives one policy step is
// cut into segments: each Generate call samples at most SegmentTokens tokens per row, writes every
// row (the unfinished ones with StopReason rollout.StopPartial) and the next call, under a newer
// policy, continues the unfinished rows. The KV cache does not outlive an activity: a continuation
// prefills the prompt and the tokens so far again under its own weights, so every token's log-prob
// is the one of the version that sampled it, recorded per token (rollout.Rollout.Versions), and the
// trainer's off-policy correction reads each token's own behaviour log-prob.
//
// A segment's result is a function of its input alone: the rows continued, the checkpoint, and
// seeds derived from each row's prompt, sample and length, batched by the iteration's aligned
// prompt windows (as whole generations are), so a retried or replayed segment writes the same bytes
// and the shards' segments concatenated are one unsharded segment's.

// checkSegment refuses what segments do not support.
func checkSegment(in rolloutapi.GenerateInput) error {
	bad := ""
	switch {
	case in.SegmentTokens < 0:
		bad = fmt.Sprintf("segment_tokens %d: want >= 0", in.SegmentTokens)
	case len(in.Tools) > 0:
		bad = "segments with tools: agentic episodes are generated whole"
	case len(in.Retry) > 0:
		bad = "segments of self-correction retries: retries are generated whole"
	case in.Continue == "" && in.SegmentTokens == 0:
		bad = "a first segment needs segment_tokens > 0"
	}
	if bad == "" {
		return nil
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("rollout: generate %s/%s iteration %d: %s", in.Run, in.Phase, in.Iteration, bad), "InvalidInput", nil)
}

// segmentBudget is how many tokens a call samples for a row that has done tokens already: what is
// left of MaxNewTokens, at most SegmentTokens when set.
func segmentBudget(in rolloutapi.GenerateInput, done int) int {
	n := in.MaxNewTokens - done
	if in.SegmentTokens > 0 {
		n = min(n, in.SegmentTokens)
	}
	return n
}

// endSegment records a segment's tokens on r (sampled by in.PolicyVersion, appended to r's) and
// reports r unfinished: it stopped at the segment's budget before MaxNewTokens.
func endSegment(r *rollout.Rollout, in rolloutapi.GenerateInput, stop sample.StopReason) (unfinished bool) {
	for len(r.Versions) < len(r.Tokens) {
		r.Versions = append(r.Versions, in.PolicyVersion)
	}
	if stop == sample.StopLength && len(r.Tokens) < in.MaxNewTokens {
		r.StopReason = rollout.StopPartial
		return true
	}
	return false
}

// continueSegment continues the unfinished rows of the segment in.Continue under in.Checkpoint and
// writes every row as this segment's object.
func (a *Activities) continueSegment(ctx context.Context, in rolloutapi.GenerateInput) (rolloutapi.GenerateOutput, error) {
	rs, err := readRollouts(ctx, a.Ckpt, in.Continue)
	if err != nil {
		return rolloutapi.GenerateOutput{}, err
	}
	batches, err := segmentBatches(rs, in)
	if err != nil {
		return rolloutapi.GenerateOutput{}, err
	}
	var shared *sharedEngine
	if len(batches) > 0 {
		if shared, err = a.engines.acquire(ctx, in.Checkpoint, a.loadPolicy); err != nil {
			return rolloutapi.GenerateOutput{}, err
		}
		defer a.engines.release(shared)
	}
	start := time.Now()
	tokens, unfinished := 0, 0
	for b, rows := range batches {
		prompts, seeds := make([][]int, len(rows)), make([]uint64, len(rows))
		for j, i := range rows {
			r := &rs[i]
			prompts[j] = append(append([]int{}, r.PromptTokens...), r.Tokens...)
			seeds[j] = continueSeed(in, r, sampleIndex(rs, i))
		}
		done := len(rs[rows[0]].Tokens)
		outs, err := shared.eng.Generate(prompts, in.Sampling.Apply(sample.Options{MaxNewTokens: segmentBudget(in, done), Temperature: in.Temperature, TopP: in.TopP,
			StopTokens: shared.stops, Seeds: seeds}, shared.enc.Tok.Decode))
		if err != nil {
			return rolloutapi.GenerateOutput{}, fmt.Errorf("rollout: continue %s iteration %d: %w", in.Continue, in.Iteration, err)
		}
		for j, o := range outs {
			r := &rs[rows[j]]
			r.Tokens, r.LogProbs, r.StopReason = append(r.Tokens, o.Tokens...), append(r.LogProbs, o.LogProbs...), string(o.StopReason)
			if endSegment(r, in, o.StopReason) {
				unfinished++
			}
			r.Completion = shared.enc.Tok.Decode(train.StripStops(r.Tokens, shared.stops))
			tokens += len(o.Tokens)
		}
		activity.RecordHeartbeat(ctx, trainapi.Progress{Step: b + 1, Total: len(batches)})
	}
	secs := time.Since(start).Seconds()
	total, truncated := 0, 0
	for _, r := range rs {
		total += len(r.Tokens)
		if r.StopReason == string(sample.StopLength) {
			truncated++
		}
	}
	out, err := a.storeRollouts(ctx, in, rs, tokens, total, truncated, secs)
	if err != nil {
		return out, err
	}
	out.Unfinished = unfinished
	return out, nil
}

// segmentBatches cuts the unfinished rows of rs (file order) into generation batches: a batch
// holds the rows of one aligned prompt window (contract.BatchPrompts, as whole generations batch)
// with as many tokens so far, so a batch depends on which rows it holds, never on the shards.
func segmentBatches(rs []rollout.Rollout, in rolloutapi.GenerateInput) ([][]int, error) {
	unit := rolloutapi.BatchPrompts(in.Group)
	var out [][]int
	for i, r := range rs {
		if r.StopReason != rollout.StopPartial {
			continue
		}
		if len(r.Tokens) >= in.MaxNewTokens {
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("rollout: continue %s: row %d (%s) is unfinished with %d tokens, max_new_tokens %d",
				in.Continue, i, r.ID, len(r.Tokens), in.MaxNewTokens), "InvalidInput", nil)
		}
		if n := len(out); n > 0 {
			prev := rs[out[n-1][0]]
			if prev.Group/unit == r.Group/unit && len(prev.Tokens) == len(r.Tokens) {
				out[n-1] = append(out[n-1], i)
				continue
			}
		}
		out = append(out, []int{i})
	}
	return out, nil
}

// sampleIndex is row i's index among the samples of its prompt (k of seedFor): rows of a group are
// written together, in sample order.
func sampleIndex(rs []rollout.Rollout, i int) int {
	k := 0
	for j := i - 1; j >= 0 && rs[j].Group == rs[i].Group; j-- {
		k++
	}
	return k
}

// continueSeed seeds a continued row: its sample's seed (seedFor) mixed with how many tokens it has,
// so no two segments of a row draw the same stream, whatever the schedule around them.
func continueSeed(in rolloutapi.GenerateInput, r *rollout.Rollout, k int) uint64 {
	z := seedFor(in.Seed, in.Iteration, r.Group, k) + uint64(len(r.Tokens))*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}
