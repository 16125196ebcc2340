// Package rollout holds the rollout role's activity: Generate samples G completions per prompt from a
// policy checkpoint with the KV cache, records the behaviour log-probs and policy version, and writes
// them as a rollouts object in the store. Sampling is seeded per (iteration, prompt, sample), so a retried
// Generate writes the same file; a Generate may be one shard of an iteration (prompts [PromptLo,
// PromptHi), batched by windows aligned across shards: shard.go), and the shards concatenated are the
// bytes of one unsharded Generate. A worker reads each data spec's prompts once (prompts.go). Generate also regenerates failed samples with the verifier's feedback
// (self-correction), and Keep writes the corrections that passed as prompt/completion data.
package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/reward/sandbox"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/tools/toolclient"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tasks"
)

// Activities holds the rollout role's dependencies.
type Activities struct {
	Ckpt      *ckpt.Client
	NewEngine train.NewEngine
	// Tools runs long-running tools' calls (python) on the tools queue; nil: episodes that call
	// one get an error message back.
	Tools toolclient.Dispatcher
	// Sandbox is the code sandbox agent episodes run in (rollout.agent; nil, or nil returned:
	// none on this worker, and agent episodes are refused saying so). Called when first needed.
	Sandbox func() *sandbox.Sandbox
	prompts promptCache // the data specs' prompt sets, read once per worker (prompts.go)
	engines engineCache // the last policy's engine, shared by its shards on this worker (engines.go)
}

// Prompts returns the prompts of an iteration: fresh draws from a built-in task (never a held-out
// prompt), or a window of the train file.
// It reads the data afresh; Generate draws through the worker's cache instead.
func Prompts(ctx context.Context, cl *ckpt.Client, spec trainapi.DataSpec, seed uint64, iteration, n int) ([]tasks.Example, error) {
	set, err := loadPromptSet(ctx, cl, spec, seed)
	if err != nil {
		return nil, err
	}
	return set.draw(spec, seed, iteration, n), nil
}

// Generate samples the rollouts and writes them to the store.
func (a *Activities) Generate(ctx context.Context, in rolloutapi.GenerateInput) (rolloutapi.GenerateOutput, error) {
	out, err := a.generate(ctx, in)
	return out, train.Permanent(err)
}

func (a *Activities) generate(ctx context.Context, in rolloutapi.GenerateInput) (rolloutapi.GenerateOutput, error) {
	if in.RetryOf != "" || len(in.RetryOfShards) > 0 {
		retry, err := retriesOf(ctx, a.Ckpt, in)
		if err != nil {
			return rolloutapi.GenerateOutput{}, err
		}
		in.Retry, in.RetryOf, in.RetryOfShards = retry, "", nil
	}
	if in.Agent != nil && (len(in.Tools) > 0 || len(in.Retry) > 0) {
		return rolloutapi.GenerateOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("rollout: generate %s/%s: agent episodes take neither built-in tools nor self-correction retries", in.Run, in.Phase), "InvalidInput", nil)
	}
	if len(in.Tools) > 0 && len(in.Retry) > 0 {
		return rolloutapi.GenerateOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("rollout: generate %s/%s: self-correction retries with tools: episodes correct themselves with the check tool", in.Run, in.Phase), "InvalidInput", nil)
	}
	if in.Group < 1 || (in.Prompts < 1 && len(in.Retry) == 0) || in.MaxNewTokens < 1 {
		return rolloutapi.GenerateOutput{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("rollout: generate %s/%s: prompts %d, group %d, max_new_tokens %d: want > 0", in.Run, in.Phase, in.Prompts, in.Group, in.MaxNewTokens), "InvalidInput", nil)
	}
	if in.SegmentTokens != 0 || in.Continue != "" {
		if err := checkSegment(in); err != nil {
			return rolloutapi.GenerateOutput{}, err
		}
		if in.Continue != "" {
			return a.continueSegment(ctx, in)
		}
	}
	shared, err := a.engines.acquire(ctx, in.Checkpoint, a.loadPolicy)
	if err != nil {
		return rolloutapi.GenerateOutput{}, err
	}
	defer a.engines.release(shared)
	eng, enc, stops := shared.eng, shared.enc, shared.stops
	var rs []rollout.Rollout
	var prompts [][]int
	var seeds []uint64
	var cuts []int // where each generation batch ends
	if len(in.Retry) > 0 {
		for i, r := range in.Retry {
			ex := tasks.Example{Prompt: r.Prompt + r.Completion + "\nfeedback: " + r.Feedback + "\n" + firstPromptLine(r.Prompt)}
			if in.RetryResample {
				ex.Prompt = r.Prompt
			}
			ids, err := enc.PromptIDs(ex)
			if err != nil {
				return rolloutapi.GenerateOutput{}, err
			}
			nr := r
			nr.ID, nr.Attempt, nr.PromptTokens = fmt.Sprintf("%s-r%d", r.ID, r.Attempt+1), r.Attempt+1, ids
			rs = append(rs, nr)
			prompts = append(prompts, ids)
			seeds = append(seeds, seedFor(in.Seed, in.Iteration, 1_000_000+i, r.Attempt+1))
		}
		cuts = flatCuts(len(prompts))
	} else {
		set, err := a.prompts.get(ctx, a.Ckpt, in.Data, in.Seed)
		if err != nil {
			return rolloutapi.GenerateOutput{}, err
		}
		exs, lo, err := promptRange(in, set.draw(in.Data, in.Seed, in.Iteration, in.Prompts))
		if err != nil {
			return rolloutapi.GenerateOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidInput", err)
		}
		cuts = batchCuts(lo, len(exs), in.Group)
		for i, ex := range exs {
			p := lo + i // the prompt's index in the iteration: its group and its samples' seeds
			pex := ex
			if len(in.Tools) > 0 {
				pex = tasks.AsChat(ex) // episodes are chats: as the demonstrations render
			}
			ids, err := enc.PromptIDs(pex)
			if err != nil {
				return rolloutapi.GenerateOutput{}, err
			}
			for k := 0; k < in.Group; k++ {
				rs = append(rs, rollout.Rollout{ID: fmt.Sprintf("%s-%d", ex.ID, k), Group: p, Task: ex.Task, Prompt: ex.Prompt,
					Answer: ex.Answer, PromptTokens: ids})
				prompts = append(prompts, ids)
				seeds = append(seeds, seedFor(in.Seed, in.Iteration, p, k))
			}
		}
	}
	start := time.Now()
	tokens, truncated := 0, 0
	var dropped, failures int
	if in.Agent != nil {
		var done atomic.Int64
		// The heartbeat keeps going while agents run: an attempt may take its whole timeout without a
		// finished episode to report.
		stop := toolclient.KeepBeating(ctx, time.Second, func() {
			activity.RecordHeartbeat(ctx, trainapi.Progress{Step: int(done.Load()), Total: len(prompts)})
		})
		rs, tokens, dropped, failures, err = a.runAgents(ctx, shared, in, rs, seeds, func(n int) { done.Store(int64(n)) })
		stop()
		if err != nil {
			return rolloutapi.GenerateOutput{}, err
		}
	}
	if len(in.Tools) > 0 {
		tokens, truncated, err = runEpisodes(ctx, eng, shared.maxSeq, enc, in, rs, prompts, seeds, cuts, a.Tools, func(done int) {
			activity.RecordHeartbeat(ctx, trainapi.Progress{Step: done, Total: len(prompts)})
		})
		if err != nil {
			return rolloutapi.GenerateOutput{}, err
		}
	}
	unfinished := 0
	for b, hi := range cuts {
		if len(in.Tools) > 0 || in.Agent != nil {
			break
		}
		lo := 0
		if b > 0 {
			lo = cuts[b-1]
		}
		outs, err := eng.Generate(prompts[lo:hi], in.Sampling.Apply(sample.Options{MaxNewTokens: segmentBudget(in, 0), Temperature: in.Temperature, TopP: in.TopP,
			StopTokens: stops, Seeds: seeds[lo:hi]}, enc.Tok.Decode))
		if err != nil {
			return rolloutapi.GenerateOutput{}, fmt.Errorf("rollout: generate %s/%s iteration %d: %w", in.Run, in.Phase, in.Iteration, err)
		}
		for j, o := range outs {
			r := &rs[lo+j]
			r.Tokens, r.LogProbs, r.StopReason, r.PolicyVersion = o.Tokens, o.LogProbs, string(o.StopReason), in.PolicyVersion
			r.Completion = enc.Tok.Decode(train.StripStops(o.Tokens, stops))
			tokens += len(o.Tokens)
			if in.SegmentTokens > 0 && endSegment(r, in, o.StopReason) {
				unfinished++
			} else if o.StopReason == sample.StopLength {
				truncated++
			}
		}
		activity.RecordHeartbeat(ctx, trainapi.Progress{Step: hi, Total: len(prompts)})
	}
	out, err := a.storeRollouts(ctx, in, rs, tokens, tokens, truncated, time.Since(start).Seconds())
	if err != nil {
		return out, err
	}
	out.AgentGroupsDropped, out.AgentFailures, out.Unfinished = dropped, failures, unfinished
	return out, nil
}

// storeRollouts writes rs as in's rollouts object and returns what every Generate output says of
// it: its URI, the samples, the tokens generated by this call and their rate over secs, and the mean
// length (length tokens over the samples; none when agent groups were all dropped) and the share of
// truncated samples.
func (a *Activities) storeRollouts(ctx context.Context, in rolloutapi.GenerateInput, rs []rollout.Rollout, tokens, length, truncated int, secs float64) (rolloutapi.GenerateOutput, error) {
	var buf bytes.Buffer
	if err := rollout.Write(&buf, rs); err != nil {
		return rolloutapi.GenerateOutput{}, err
	}
	uri, err := put(ctx, a.Ckpt, in.Store, rolloutapi.RolloutsKey(in.Run, in.Phase, in.Iteration, in.Tag), &buf)
	if err != nil {
		return rolloutapi.GenerateOutput{}, err
	}
	out := rolloutapi.GenerateOutput{Rollouts: uri, Samples: len(rs), Tokens: tokens, Seconds: secs}
	if len(rs) > 0 {
		out.MeanLength, out.Truncated = float64(length)/float64(len(rs)), float64(truncated)/float64(len(rs))
	}
	if secs > 0 {
		out.TokensPerS = float64(tokens) / secs
	}
	return out, nil
}

// loadPolicy loads a policy checkpoint for sampling (engineCache.acquire's loader).
func (a *Activities) loadPolicy(ctx context.Context, uri string) (loadedEngine, error) {
	return loadSampler(ctx, train.Loader{Ckpt: a.Ckpt, NewEngine: a.NewEngine}, uri)
}

// retriesOf reads the rollouts in.RetryOf names and returns those in.RetryIndex picks, each with its
// feedback.
func retriesOf(ctx context.Context, cl *ckpt.Client, in rolloutapi.GenerateInput) ([]rollout.Rollout, error) {
	if len(in.RetryIndex) == 0 || len(in.RetryIndex) != len(in.RetryFeedback) {
		return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("rollout: retry of %s: %d indices and %d feedbacks: want the same number, at least one",
			in.RetryOf, len(in.RetryIndex), len(in.RetryFeedback)), "InvalidInput", nil)
	}
	var out []rollout.Rollout
	var err error
	if len(in.RetryOfShards) > 0 {
		var rs []rollout.Rollout
		if rs, err = readShards(ctx, cl, in.RetryOfShards); err == nil {
			out, err = pickFrom(rs, fmt.Sprint(in.RetryOfShards), in.RetryIndex)
		}
	} else {
		out, err = pick(ctx, cl, in.RetryOf, in.RetryIndex)
	}
	for i := range out {
		out[i].Feedback = in.RetryFeedback[i]
	}
	return out, err
}

// pick reads the rollouts object at uri and returns its rollouts idx (file order), in idx's order.
func pick(ctx context.Context, cl *ckpt.Client, uri string, idx []int) ([]rollout.Rollout, error) {
	rs, err := readRollouts(ctx, cl, uri)
	if err != nil {
		return nil, err
	}
	return pickFrom(rs, uri, idx)
}

// readRollouts reads one rollouts object.
func readRollouts(ctx context.Context, cl *ckpt.Client, uri string) ([]rollout.Rollout, error) {
	return train.ReadRollouts(ctx, cl, uri)
}

// pickFrom returns rollouts idx of rs (read from name), in idx's order.
func pickFrom(rs []rollout.Rollout, name string, idx []int) ([]rollout.Rollout, error) {
	out := make([]rollout.Rollout, len(idx))
	for i, j := range idx {
		if j < 0 || j >= len(rs) {
			return nil, temporal.NewNonRetryableApplicationError(
				fmt.Sprintf("rollout: %s: index %d, the file has %d rollouts", name, j, len(rs)), "InvalidInput", nil)
		}
		out[i] = rs[j]
	}
	return out, nil
}

// CorrectionsKey is where an iteration's kept corrections live, relative to the store root.
func CorrectionsKey(run, phase string, iteration, round int) string {
	return path.Join("runs", run, phase, "corrections", fmt.Sprintf("iter-%06d-retry%d.jsonl", iteration, round))
}

// Keep writes the chosen rollouts as examples: the original prompt (without the feedback it was
// regenerated with) and the corrected completion, so an SFT phase can train on what the verifier
// accepted. Rewriting the same iteration and round replaces the object (retries are idempotent).
func (a *Activities) Keep(ctx context.Context, in rolloutapi.KeepInput) (rolloutapi.KeepOutput, error) {
	rs, err := pick(ctx, a.Ckpt, in.Rollouts, in.Index)
	if err != nil {
		return rolloutapi.KeepOutput{}, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for _, r := range rs {
		if err := enc.Encode(tasks.Example{ID: r.ID, Task: r.Task, Prompt: r.Prompt, Completion: r.Completion, Answer: r.Answer}); err != nil {
			return rolloutapi.KeepOutput{}, err
		}
	}
	uri, err := put(ctx, a.Ckpt, in.Store, CorrectionsKey(in.Run, in.Phase, in.Iteration, in.Round), &buf)
	if err != nil {
		return rolloutapi.KeepOutput{}, err
	}
	return rolloutapi.KeepOutput{Examples: uri, Count: len(in.Index)}, nil
}

// put writes one object of the store and returns its URI.
func put(ctx context.Context, cl *ckpt.Client, store, key string, buf *bytes.Buffer) (string, error) {
	uri, err := cl.PutObject(ctx, store, key, buf)
	if err != nil {
		return "", fmt.Errorf("rollout: %w", err)
	}
	return uri, nil
}

// seedFor gives every sample its own seed, independent of batching.
func seedFor(seed uint64, iteration, prompt, k int) uint64 {
	return seed*0x9e3779b97f4a7c15 ^ uint64(iteration)<<40 ^ uint64(prompt)<<16 ^ uint64(k)
}

// firstPromptLine repeats the question after the feedback, so the model answers it again.
func firstPromptLine(p string) string {
	if i := strings.LastIndexByte(strings.TrimSuffix(p, "\n"), '\n'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// Register registers the rollout activities under their contract names on the rollout queue's worker.
func Register(r train.Registrar, a *Activities) {
	r.RegisterActivityWithOptions(a.Generate, activity.RegisterOptions{Name: rolloutapi.GenerateName})
	r.RegisterActivityWithOptions(a.AgentEval, activity.RegisterOptions{Name: rolloutapi.AgentEvalName})
	r.RegisterActivityWithOptions(a.Keep, activity.RegisterOptions{Name: rolloutapi.KeepName})
	r.RegisterActivityWithOptions(a.Search, activity.RegisterOptions{Name: rolloutapi.SearchName})
	r.RegisterActivityWithOptions(a.SearchData, activity.RegisterOptions{Name: rolloutapi.SearchDataName})
}
