package lm

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"slices"

	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/tools/toolclient"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/episode"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tools"
)

// Evaluate measures a checkpoint on held-out data: teacher-forced loss and perplexity on the
// completions, exact match of greedy completions (checked by the example's task when it has one, else
// by equality of the first line with the reference), and pass@k with k sampled completions.
func (a *Activities) Evaluate(ctx context.Context, in trainapi.EvalInput) (trainapi.EvalOutput, error) {
	out, err := a.evaluate(ctx, in)
	return out, train.Permanent(err)
}

func (a *Activities) evaluate(ctx context.Context, in trainapi.EvalInput) (trainapi.EvalOutput, error) {
	_, heldout, err := train.Examples(ctx, a.Ckpt, in.Data, in.Seed)
	if err != nil {
		return trainapi.EvalOutput{}, err
	}
	if in.Examples > 0 && in.Examples < len(heldout) {
		heldout = heldout[:in.Examples]
	}
	if len(heldout) == 0 {
		return trainapi.EvalOutput{}, train.BadInput(fmt.Errorf("train: evaluate %s: no held-out examples (set data.heldout_examples or data.heldout)", in.Checkpoint))
	}
	if in.MaxNewTokens <= 0 {
		in.MaxNewTokens = 32
	}
	m, err := a.Load(ctx, in.Checkpoint, train.LoadOptions{})
	if err != nil {
		return trainapi.EvalOutput{}, err
	}
	eng, mcfg := m.Engine, m.Config
	defer eng.Close()
	enc, err := train.EncoderOf(m, train.ChatSpec{})
	if err != nil {
		return trainapi.EvalOutput{}, err
	}
	stops := train.Stops(enc, m.Generation)
	total := 2 * len(heldout)
	if in.PassK > 1 {
		total += len(heldout)
	}
	done := 0
	beat := func(n int) {
		done += n
		activity.RecordHeartbeat(ctx, trainapi.Progress{Step: done, Total: total})
	}

	if len(in.Tools) > 0 {
		if len(in.Verifiers) > 0 {
			return trainapi.EvalOutput{}, train.BadInput(fmt.Errorf("train: evaluate %s: eval.verifiers score single completions, not episodes (eval.tools)", in.Checkpoint))
		}
		return a.evaluateEpisodes(ctx, in, eng, enc, stops, mcfg.MaxSeq, heldout, beat)
	}
	// Loss on the reference completions.
	var nll, tokens float64
	for lo := 0; lo < len(heldout); lo += train.EvalRows {
		hi := min(lo+train.EvalRows, len(heldout))
		b, err := lossBatch(enc, heldout[lo:hi], train.PadID(enc))
		if err != nil {
			return trainapi.EvalOutput{}, train.BadInput(err)
		}
		m, err := eng.EvalLoss(b)
		if err != nil {
			return trainapi.EvalOutput{}, fmt.Errorf("train: evaluate %s: %w", in.Checkpoint, err)
		}
		nll += float64(m.Loss) * float64(m.Tokens)
		tokens += float64(m.Tokens)
		beat(hi - lo)
	}

	prompts := make([][]int, len(heldout))
	for i, ex := range heldout {
		if prompts[i], err = enc.PromptIDs(ex); err != nil {
			return trainapi.EvalOutput{}, train.BadInput(err)
		}
	}
	check := func(i int, toks []int) bool {
		return train.Passes(heldout[i], enc.Tok.Decode(train.StripStops(toks, stops)))
	}
	greedy := in.Sampling.Apply(sample.Options{MaxNewTokens: in.MaxNewTokens, StopTokens: stops}, enc.Tok.Decode)
	correct := 0
	texts := make([]string, len(prompts)) // the greedy completions, for eval verifiers
	for lo := 0; lo < len(prompts); lo += train.EvalRows {
		hi := min(lo+train.EvalRows, len(prompts))
		outs, err := eng.Generate(prompts[lo:hi], greedy)
		if err != nil {
			return trainapi.EvalOutput{}, fmt.Errorf("train: evaluate %s: generate: %w", in.Checkpoint, err)
		}
		for j, o := range outs {
			if check(lo+j, o.Tokens) {
				correct++
			}
			texts[lo+j] = enc.Tok.Decode(train.StripStops(o.Tokens, stops))
		}
		beat(hi - lo)
	}
	metrics := map[string]float64{
		"heldout_n":           float64(len(heldout)),
		"heldout_exact_match": float64(correct) / float64(len(heldout)),
	}
	if err := a.scoreHeldout(ctx, in, heldout, texts, metrics); err != nil {
		return trainapi.EvalOutput{}, err
	}
	if tokens > 0 {
		metrics["heldout_loss"] = nll / tokens
		metrics["heldout_ppl"] = math.Exp(nll / tokens)
	}
	if in.PassK > 1 {
		temp := in.Temperature
		if temp <= 0 {
			temp = 1
		}
		solved := make([]bool, len(prompts))
		for lo := 0; lo < len(prompts); lo += train.EvalRows {
			hi := min(lo+train.EvalRows, len(prompts))
			var batch [][]int
			var seeds []uint64
			for i := lo; i < hi; i++ {
				for k := 0; k < in.PassK; k++ {
					batch = append(batch, prompts[i])
					seeds = append(seeds, in.Seed*1_000_003+uint64(i*in.PassK+k)+1)
				}
			}
			opts := in.Sampling.Apply(sample.Options{MaxNewTokens: in.MaxNewTokens, Temperature: temp, StopTokens: stops, Seeds: seeds}, enc.Tok.Decode)
			outs, err := eng.Generate(batch, opts)
			if err != nil {
				return trainapi.EvalOutput{}, fmt.Errorf("train: evaluate %s: sample: %w", in.Checkpoint, err)
			}
			for j, o := range outs {
				i := lo + j/in.PassK
				if check(i, o.Tokens) {
					solved[i] = true
				}
			}
			beat(hi - lo)
		}
		n := 0
		for _, s := range solved {
			if s {
				n++
			}
		}
		metrics[fmt.Sprintf("heldout_pass@%d", in.PassK)] = float64(n) / float64(len(prompts))
	}
	if err := a.LogEval(ctx, in.Store, in.Log, metrics); err != nil {
		return trainapi.EvalOutput{}, fmt.Errorf("train: evaluate %s: %w", in.Checkpoint, err)
	}
	return trainapi.EvalOutput{Metrics: metrics}, nil
}

// lossBatch puts one example per row, right-padded, with the loss on its trained tokens.
func lossBatch(enc data.Encoder, exs []tasks.Example, pad int) (data.TokenBatch, error) {
	var seqs []data.Encoded
	longest := 2
	for _, ex := range exs {
		e, err := enc.Encode(ex)
		if err != nil {
			return data.TokenBatch{}, fmt.Errorf("train: encode %s: %w", ex.ID, err)
		}
		seqs = append(seqs, e)
		longest = max(longest, len(e.IDs))
	}
	var b data.TokenBatch
	n := longest - 1
	for _, e := range seqs {
		tok, tgt := make([]int, n), make([]int, n)
		mask, pos, valid := make([]float32, n), make([]int, n), make([]bool, n)
		for t := 0; t < n; t++ {
			pos[t] = t
			tok[t], tgt[t] = pad, pad
			if t+1 < len(e.IDs) {
				tok[t], tgt[t], valid[t] = e.IDs[t], e.IDs[t+1], true
				if e.Loss[t+1] {
					mask[t] = 1
				}
			}
		}
		b.Tokens, b.Targets = append(b.Tokens, tok), append(b.Targets, tgt)
		b.LossMask, b.Positions, b.Valid = append(b.LossMask, mask), append(b.Positions, pos), append(b.Valid, valid)
	}
	return b, nil
}

// firstCheckedAnswer is the answer of ep's first well-formed check call, if it made one.
func firstCheckedAnswer(ep episode.Episode) (string, bool) {
	for _, c := range ep.Calls {
		if c.Name != "check" || c.Result.Kind == tools.ErrArguments || c.Result.Kind == tools.ErrUnknownTool {
			continue
		}
		var a struct {
			Answer string `json:"answer"`
		}
		if json.Unmarshal([]byte(c.Args), &a) == nil {
			return a.Answer, true
		}
	}
	return "", false
}

// evalDigest names one evaluation (checkpoint, data, seed, sampling) in its tool calls' IDs.
func evalDigest(in trainapi.EvalInput) string {
	b, _ := json.Marshal(in) // plain data: always marshals
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// evaluateEpisodes is Evaluate with tools: greedy episodes (and, for pass@k, k sampled ones) on
// every held-out prompt, exact match on the final answer, and the episodes' tool use.
func (a *Activities) evaluateEpisodes(ctx context.Context, in trainapi.EvalInput, eng train.Engine, enc data.Encoder, stops []int, maxContext int, heldout []tasks.Example, beat func(int)) (trainapi.EvalOutput, error) {
	cfg := train.EpisodeConfig(enc, in.MaxTurns, in.MaxNewTokens, 0, maxContext)
	if err := cfg.Validate(); err != nil {
		return trainapi.EvalOutput{}, train.BadInput(fmt.Errorf("train: evaluate %s: %w", in.Checkpoint, err))
	}
	prompts := make([][]int, len(heldout))
	for i, ex := range heldout {
		var err error
		if prompts[i], err = enc.PromptIDs(tasks.AsChat(ex)); err != nil {
			return trainapi.EvalOutput{}, train.BadInput(err)
		}
	}
	// play runs the episodes of prompts idx (k each), returning which passed per prompt and sums.
	var calls, errs, turns, answered, played float64
	var checked, firstPassed float64 // greedy episodes that called check; whose first answer passed
	play := func(k int, temp float64) ([]bool, error) {
		solved := make([]bool, len(heldout))
		for lo := 0; lo < len(heldout); lo += train.EvalRows {
			hi := min(lo+train.EvalRows, len(heldout))
			var batch [][]int
			var seeds []uint64
			var owner []int
			for i := lo; i < hi; i++ {
				for j := 0; j < k; j++ {
					batch, owner = append(batch, prompts[i]), append(owner, i)
					seeds = append(seeds, in.Seed*1_000_003+uint64(i*k+j)+1)
				}
			}
			place := func(ctx context.Context) string { // a call's place: the evaluation, episode and turn
				j, _ := episode.Index(ctx)
				turn, _ := episode.Turn(ctx)
				return fmt.Sprintf("eval-%s.k%d.p%d.s%d.t%d", evalDigest(in), k, owner[j], j-(owner[j]-lo)*k, turn)
			}
			reg, err := train.ToolRegistry(in.Tools, func(j int) tasks.Example { return heldout[owner[j]] },
				toolclient.Remote(a.Tools, place, func() { beat(0) }))
			if err != nil {
				return nil, train.BadInput(fmt.Errorf("train: evaluate %s: %w", in.Checkpoint, err))
			}
			opts := in.Sampling.Apply(sample.Options{Temperature: temp, StopTokens: stops, Seeds: seeds}, enc.Tok.Decode)
			eps, err := episode.Run(ctx, eng, enc.Tok, reg, batch, opts, cfg)
			if err != nil {
				return nil, fmt.Errorf("train: evaluate %s: episodes: %w", in.Checkpoint, err)
			}
			for j, ep := range eps {
				if train.Passes(heldout[owner[j]], ep.Final) && ep.End == episode.EndAnswer {
					solved[owner[j]] = true
				}
				played++
				turns += float64(ep.Turns)
				calls += float64(len(ep.Calls))
				errs += float64(ep.ToolErrors)
				if ep.End == episode.EndAnswer {
					answered++
				}
				if k == 1 {
					first, ok := firstCheckedAnswer(ep)
					if ok {
						checked++
					} else {
						first, ok = ep.Final, ep.End == episode.EndAnswer
					}
					if ok && train.Passes(heldout[owner[j]], first) {
						firstPassed++
					}
				}
			}
			beat(hi - lo)
		}
		return solved, nil
	}
	count := func(xs []bool) float64 {
		n := 0
		for _, x := range xs {
			if x {
				n++
			}
		}
		return float64(n) / float64(len(xs))
	}
	greedy, err := play(1, 0)
	if err != nil {
		return trainapi.EvalOutput{}, err
	}
	metrics := map[string]float64{
		"heldout_n":           float64(len(heldout)),
		"heldout_exact_match": count(greedy),
		"heldout_turns":       turns / played, "heldout_tool_calls": calls / played,
		"heldout_tool_errors": errs / played, "heldout_answered": answered / played,
	}
	if slices.Contains(in.Tools, "check") {
		// Self-correction inside the episode: the first answer an episode proposed (its first
		// check, or its final answer if it never checked) against the final one (exact match).
		metrics["heldout_checked"] = checked / float64(len(heldout))
		metrics["heldout_first_answer_exact_match"] = firstPassed / float64(len(heldout))
	}
	if in.PassK > 1 {
		temp := in.Temperature
		if temp <= 0 {
			temp = 1
		}
		solved, err := play(in.PassK, temp)
		if err != nil {
			return trainapi.EvalOutput{}, err
		}
		metrics[fmt.Sprintf("heldout_pass@%d", in.PassK)] = count(solved)
	}
	if err := a.LogEval(ctx, in.Store, in.Log, metrics); err != nil {
		return trainapi.EvalOutput{}, fmt.Errorf("train: evaluate %s: %w", in.Checkpoint, err)
	}
	return trainapi.EvalOutput{Metrics: metrics}, nil
}
