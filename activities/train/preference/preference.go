package preference

import (
	"context"
	"fmt"
	"maps"
	"math"
	"slices"

	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/loss/losscfg"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tokenize"
)

// Activities are the preference activities; they share the trainer's dependencies (store client,
// engine factory) and kernel (chunk runner, engine loaders, data readers) with the other families.
type Activities struct{ *train.Activities }

// Register registers the preference activities under their contract names on the trainer queue's worker.
func Register(r train.Registrar, deps *train.Activities) {
	a := &Activities{deps}
	r.RegisterActivityWithOptions(a.PrefChunk, activity.RegisterOptions{Name: trainapi.PrefChunkName})
	r.RegisterActivityWithOptions(a.PrefEvaluate, activity.RegisterOptions{Name: trainapi.PrefEvaluateName})
	r.RegisterActivityWithOptions(a.RefLogProbs, activity.RegisterOptions{Name: trainapi.RefLogProbsName})
	r.RegisterActivityWithOptions(a.PreferencesFromModel, activity.RegisterOptions{Name: trainapi.PreferencesFromModelName})
	r.RegisterActivityWithOptions(a.OnlineDPOStep, activity.RegisterOptions{Name: trainapi.OnlineDPOStepName})
}

// PrefChunk trains in.Steps steps of the preference loss in.Loss from in.From, one example per row
// (train.RunChunk does the rest); its metrics are the objective's (rewards/accuracy, rewards/margin, ...).
func (a *Activities) PrefChunk(ctx context.Context, in trainapi.PrefChunkInput) (trainapi.ChunkOutput, error) {
	op := fmt.Sprintf("train: %s chunk %s/%s", in.Loss.Kind, in.Run, in.Phase)
	if in.Steps <= 0 || in.Batch.Rows <= 0 || in.Batch.Seq < 2 {
		return trainapi.ChunkOutput{}, train.BadInput(fmt.Errorf("%s: steps %d, batch %dx%d: want > 0 and seq ≥ 2", op, in.Steps, in.Batch.Rows, in.Batch.Seq))
	}
	obj, err := objective.Preference(in.Loss)
	if err != nil {
		return trainapi.ChunkOutput{}, train.BadInput(fmt.Errorf("%s: %w", op, err))
	}
	return train.RunChunk(ctx, a.Activities, in.ChunkHead, op, func() (*train.ChunkObjective[[]int], error) {
		items, err := a.prefTrainingItems(ctx, in)
		if err != nil {
			return nil, err
		}
		enc, err := encodeItems(train.Encoder(), items, in.Batch.Seq)
		if err != nil {
			return nil, train.BadInput(err)
		}
		if in.Loss.UsesReference() && in.RefData == "" && in.Reference == "" {
			return nil, train.BadInput(fmt.Errorf("%s: %s needs a reference: set ref_data (precomputed) or reference (on the fly)", op, in.Loss.Kind))
		}
		pol, err := a.Load(ctx, in.From, train.LoadOptions{Optim: in.Optim, Optimizer: !in.FreshOptimizer})
		if err != nil {
			return nil, err
		}
		var refEng train.Engine
		if in.Loss.UsesReference() && in.RefData == "" {
			ref, err := a.Load(ctx, in.Reference, train.LoadOptions{})
			if err != nil {
				pol.Engine.Close()
				return nil, err
			}
			refEng = ref.Engine
		}
		c := train.RowsObjective(pol, obj, "rows", len(items), in.Batch.Rows, func(idx []int) (objective.Batch, error) {
			return prefBatch(in.Loss, items, enc, idx, in.Batch.Seq, refEng)
		})
		if refEng != nil {
			c.Close = func() { refEng.Close() }
		}
		return c, nil
	})
}

// prefTrainingItems returns the chunk's rows: the precomputed reference object's, or the data's.
func (a *Activities) prefTrainingItems(ctx context.Context, in trainapi.PrefChunkInput) ([]prefItem, error) {
	if in.RefData != "" {
		items, err := readRefItems(ctx, a.Ckpt, in.RefData)
		if err != nil {
			return nil, err
		}
		for i, it := range items {
			if it.Ex.Paired() != in.Loss.Paired() {
				return nil, train.BadInput(fmt.Errorf("train: %s line %d does not have the form %s trains on (made for another kind?)", in.RefData, i+1, in.Loss.Kind))
			}
		}
		return items, nil
	}
	trainEx, _, err := PrefExamples(ctx, a.Ckpt, in.Data, in.Cursor.Seed)
	if err != nil {
		return nil, err
	}
	if len(trainEx) == 0 {
		return nil, train.BadInput(fmt.Errorf("train: %s/%s: no training examples", in.Run, in.Phase))
	}
	items, err := prefTrainItems(trainEx, in.Loss.Kind)
	if err != nil {
		return nil, train.BadInput(fmt.Errorf("train: %s/%s: %w", in.Run, in.Phase, err))
	}
	return items, nil
}

// prefBatch builds one step's batch (an objective.PrefBatch, or an objective.KTOBatch for kto) of the
// rows idx, with reference log-probs from refEng when given, else from the items' precomputed ones
// (zeros for the reference-free kinds).
func prefBatch(cfg losscfg.Preference, items []prefItem, enc []encodedItem, idx []int, seq int, refEng train.Scorer) (objective.Batch, error) {
	var sides [2]prefSide
	var refs [2][][]float32
	for s := 0; s < 2; s++ {
		seqs := make([]data.Encoded, len(idx))
		for r, i := range idx {
			seqs[r] = enc[i][s]
		}
		sides[s] = layoutSide(seqs, seq)
		switch {
		case !cfg.UsesReference():
			refs[s] = train.Zeros(len(idx), seq)
		case refEng != nil:
			lp, err := refEng.LogProbs(sides[s].batch())
			if err != nil {
				return nil, fmt.Errorf("reference log-probs: %w", err)
			}
			refs[s] = sides[s].masked(lp)
		default:
			vals := make([][]float32, len(idx))
			for r, i := range idx {
				vals[r] = items[i].Ref[s]
			}
			var err error
			if refs[s], err = sides[s].scatter(vals); err != nil {
				return nil, train.BadInput(fmt.Errorf("precomputed reference log-probs do not match the data: %w", err))
			}
		}
	}
	if cfg.Paired() {
		return objective.PrefBatch{Chosen: sides[0].objective(), Rejected: sides[1].objective(), RefChosen: refs[0], RefRejected: refs[1]}, nil
	}
	des := make([]float32, len(idx))
	for r, i := range idx {
		if items[i].Ex.Desirable() {
			des[r] = 1
		}
	}
	return objective.KTOBatch{Rows: sides[0].objective(), Ref: refs[0], Desirable: des, KL: sides[1].objective(), KLRef: refs[1]}, nil
}

// PrefEvaluate measures a checkpoint on held-out preference pairs (unpaired held-out examples are paired
// by prompt, tasks.PairUp). Metrics, as means over the pairs:
//
//	heldout_pref_accuracy       fraction with log πθ(chosen|x) > log πθ(rejected|x): how often the model
//	                            prefers the verified-correct answer
//	heldout_pref_accuracy_norm  the same with per-token (length-normalised) log-probs
//	heldout_logp_chosen, heldout_logp_rejected  mean log πθ(y|x)
//	heldout_reward_chosen, heldout_reward_rejected, heldout_reward_margin, heldout_reward_accuracy
//	                            the kind's implicit reward: β·log πθ/πref (dpo, kto; ipo per token when
//	                            average_log_probs), β·mean log πθ (simpo), the log-odds (orpo)
//	heldout_kl_ref              mean log πθ(chosen|x) − log πref(chosen|x) (a drift indicator)
//	heldout_kl_sampled          mean log πθ(y|x) − log πref(y|x) over y ~ πθ: an unbiased estimate of
//	                            the sequence-level KL(πθ‖πref) (with KLTokens > 0)
//	heldout_pairs               number of pairs
//
// The policy and the reference are loaded one after the other, never together.
func (a *Activities) PrefEvaluate(ctx context.Context, in trainapi.PrefEvalInput) (trainapi.EvalOutput, error) {
	op := fmt.Sprintf("train: preference evaluate %s", in.Checkpoint)
	if err := in.Loss.Validate(); err != nil {
		return trainapi.EvalOutput{}, train.BadInput(fmt.Errorf("%s: %w", op, err))
	}
	_, heldout, err := PrefExamples(ctx, a.Ckpt, in.Data, in.Seed)
	if err != nil {
		return trainapi.EvalOutput{}, err
	}
	pairs := tasks.PairUp(heldout)
	if in.Examples > 0 && in.Examples < len(pairs) {
		pairs = pairs[:in.Examples]
	}
	if len(pairs) == 0 {
		return trainapi.EvalOutput{}, train.BadInput(fmt.Errorf("%s: no held-out pairs (set data.heldout_examples or data.heldout)", op))
	}
	items := make([]prefItem, len(pairs))
	for i, p := range pairs {
		items[i] = prefItem{Ex: p}
	}
	enc, err := encodeItems(train.Encoder(), items, 0)
	if err != nil {
		return trainapi.EvalOutput{}, train.BadInput(err)
	}
	useRef := in.Reference != ""
	sampleKL := useRef && in.KLTokens > 0
	total := 2 * len(items) // policy + reference passes over the pairs
	if sampleKL {
		total += 2 * len(items)
	}
	done := 0
	beat := func(n int) {
		done += n
		activity.RecordHeartbeat(ctx, trainapi.Progress{Step: done, Total: total})
	}

	pm, err := a.Load(ctx, in.Checkpoint, train.LoadOptions{})
	if err != nil {
		return trainapi.EvalOutput{}, err
	}
	eng := pm.Engine
	pol, err := seqLogProbs(ctx, eng, enc, beat)
	if err != nil {
		eng.Close()
		return trainapi.EvalOutput{}, fmt.Errorf("%s: %w", op, err)
	}
	var samples []data.Encoded
	var polSamples [][]float32
	if sampleKL {
		if samples, err = sampleCompletions(eng, train.Encoder(), pairs, in.KLTokens, in.Seed); err != nil {
			eng.Close()
			return trainapi.EvalOutput{}, fmt.Errorf("%s: %w", op, err)
		}
		if polSamples, err = countedLogProbs(ctx, eng, samples, beat); err != nil {
			eng.Close()
			return trainapi.EvalOutput{}, fmt.Errorf("%s: %w", op, err)
		}
	}
	eng.Close()

	var ref [][2][]float32
	var refSamples [][]float32
	if useRef {
		rm, err := a.Load(ctx, in.Reference, train.LoadOptions{})
		if err != nil {
			return trainapi.EvalOutput{}, err
		}
		reng := rm.Engine
		defer reng.Close()
		if ref, err = seqLogProbs(ctx, reng, enc, beat); err != nil {
			return trainapi.EvalOutput{}, fmt.Errorf("%s: reference: %w", op, err)
		}
		if sampleKL {
			if refSamples, err = countedLogProbs(ctx, reng, samples, beat); err != nil {
				return trainapi.EvalOutput{}, fmt.Errorf("%s: reference: %w", op, err)
			}
		}
	}
	m := prefMetrics(in.Loss, pol, ref, polSamples, refSamples)
	for _, k := range slices.Sorted(maps.Keys(m)) {
		if math.IsNaN(m[k]) || math.IsInf(m[k], 0) {
			delete(m, k) // JSON payloads cannot carry NaN or Inf
		}
	}
	return trainapi.EvalOutput{Metrics: m}, nil
}

// prefMetrics computes PrefEvaluate's metrics from the counted-token log-probs of each pair under the
// policy (pol) and the reference (ref, nil without one), and of the policy's samples under both.
func prefMetrics(cfg losscfg.Preference, pol, ref [][2][]float32, polS, refS [][]float32) map[string]float64 {
	n := float64(len(pol))
	m := map[string]float64{"heldout_pairs": n}
	beta := cfg.BetaOrDefault()
	var acc, accNorm, lc, lr, klRef float64
	var rc, rr, margin, racc float64
	rewards := ref != nil || !cfg.UsesReference()
	for i, p := range pol {
		sc, sr := sum32(p[0]), sum32(p[1])
		ac, ar := mean32(p[0]), mean32(p[1])
		lc += sc / n
		lr += sr / n
		if sc > sr {
			acc += 1 / n
		}
		if ac > ar {
			accNorm += 1 / n
		}
		if ref != nil {
			klRef += (sc - sum32(ref[i][0])) / n
		}
		if !rewards {
			continue
		}
		var c, r float64
		switch cfg.Kind {
		case losscfg.PrefSimPO:
			c, r = beta*ac, beta*ar
		case losscfg.PrefORPO:
			c, r = logOdds(ac), logOdds(ar)
		case losscfg.PrefIPO:
			if cfg.AverageLogProbs {
				c, r = beta*(ac-mean32(ref[i][0])), beta*(ar-mean32(ref[i][1]))
			} else {
				c, r = beta*(sc-sum32(ref[i][0])), beta*(sr-sum32(ref[i][1]))
			}
		default: // dpo, kto
			c, r = beta*(sc-sum32(ref[i][0])), beta*(sr-sum32(ref[i][1]))
		}
		rc += c / n
		rr += r / n
		margin += (c - r) / n
		if c > r {
			racc += 1 / n
		}
	}
	m["heldout_pref_accuracy"], m["heldout_pref_accuracy_norm"] = acc, accNorm
	m["heldout_logp_chosen"], m["heldout_logp_rejected"] = lc, lr
	if rewards {
		m["heldout_reward_chosen"], m["heldout_reward_rejected"] = rc, rr
		m["heldout_reward_margin"], m["heldout_reward_accuracy"] = margin, racc
	}
	if ref != nil {
		m["heldout_kl_ref"] = klRef
	}
	if len(polS) > 0 && len(refS) == len(polS) {
		var kl float64
		for i := range polS {
			kl += (sum32(polS[i]) - sum32(refS[i])) / float64(len(polS))
		}
		m["heldout_kl_sampled"] = kl
	}
	return m
}

// logOdds is log(p/(1−p)) from lp = log p, with lp capped below 0 as loss.LogOdds does.
func logOdds(lp float64) float64 {
	lp = math.Min(lp, -1e-7)
	return lp - math.Log(-math.Expm1(lp))
}

func sum32(x []float32) float64 {
	var s float64
	for _, v := range x {
		s += float64(v)
	}
	return s
}

func mean32(x []float32) float64 {
	if len(x) == 0 {
		return 0
	}
	return sum32(x) / float64(len(x))
}

// countedLogProbs scores sequences one per row (batches of train.EvalRows) and returns the log-probs of each
// one's counted tokens.
func countedLogProbs(ctx context.Context, eng train.Scorer, seqs []data.Encoded, beat func(n int)) ([][]float32, error) {
	out := make([][]float32, 0, len(seqs))
	for lo := 0; lo < len(seqs); lo += train.EvalRows {
		hi := min(lo+train.EvalRows, len(seqs))
		side := layoutSide(seqs[lo:hi], longest(seqs[lo:hi]))
		lp, err := eng.LogProbs(side.batch())
		if err != nil {
			return nil, err
		}
		out = append(out, side.counted(lp)...)
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if beat != nil {
			beat(hi - lo)
		}
	}
	return out, nil
}

// sampleCompletions draws one completion (temperature 1, seeded per prompt) for each pair's prompt and
// returns prompt+completion with the completion's tokens counted.
func sampleCompletions(eng train.Sampler, enc data.Encoder, pairs []tasks.PrefExample, maxNew int, seed uint64) ([]data.Encoded, error) {
	prompts := make([][]int, len(pairs))
	seeds := make([]uint64, len(pairs))
	for i, p := range pairs {
		ids, err := enc.PromptIDs(p.AsExample(""))
		if err != nil {
			return nil, err
		}
		prompts[i], seeds[i] = ids, seed*1_000_003+uint64(i)+11
	}
	var out []data.Encoded
	for lo := 0; lo < len(prompts); lo += train.EvalRows {
		hi := min(lo+train.EvalRows, len(prompts))
		outs, err := eng.Generate(prompts[lo:hi], sample.Options{MaxNewTokens: maxNew, Temperature: 1,
			StopTokens: []int{tokenize.ByteEOS}, Seeds: seeds[lo:hi]})
		if err != nil {
			return nil, fmt.Errorf("sample: %w", err)
		}
		for j, o := range outs {
			p := prompts[lo+j]
			e := data.Encoded{IDs: append(append([]int(nil), p...), o.Tokens...), Loss: make([]bool, len(p)+len(o.Tokens))}
			for t := len(p); t < len(e.Loss); t++ {
				e.Loss[t] = true
			}
			out = append(out, e)
		}
	}
	return out, nil
}
