package distill

import (
	"context"
	"fmt"
	"math"
	"path"
	"sort"

	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/objective/objectivecfg"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tokenize"
)

// Activities are the distillation activities; they share the trainer's dependencies and kernel.
type Activities struct{ *train.Activities }

// Register registers the distillation activities under their contract names on the trainer queue's worker.
func Register(r train.Registrar, deps *train.Activities) {
	a := &Activities{deps}
	r.RegisterActivityWithOptions(a.DistillTargets, activity.RegisterOptions{Name: trainapi.DistillTargetsName})
	r.RegisterActivityWithOptions(a.DistillChunk, activity.RegisterOptions{Name: trainapi.DistillChunkName})
}

// rows is one batch laid out for the objective: [R][S] tokens, positions, attention validity, and the
// mask of positions whose next-token distribution counts.
type rows struct {
	tok, pos [][]int
	valid    [][]bool
	mask     [][]float32
}

func newRows(r, s int) rows {
	out := rows{tok: make([][]int, r), pos: make([][]int, r), valid: make([][]bool, r), mask: train.Zeros(r, s)}
	for i := range r {
		out.tok[i], out.pos[i], out.valid[i] = make([]int, s), make([]int, s), make([]bool, s)
		for t := range s {
			out.tok[i][t], out.pos[i][t] = tokenize.BytePAD, t
		}
	}
	return out
}

// set lays ids out in row r; counted(t) says whether token t is one the student learns to predict
// (so the distribution at t-1 counts).
func (b rows) set(r int, ids []int, counted func(t int) bool) {
	for t, id := range ids {
		b.tok[r][t], b.valid[r][t] = id, true
		if t > 0 && counted(t) {
			b.mask[r][t-1] = 1
		}
	}
}

// batch is the engine batch of b (Targets and LossMask are not read by Logits).
func (b rows) batch() data.TokenBatch {
	return data.TokenBatch{Tokens: b.tok, Targets: b.tok, Positions: b.pos, Valid: b.valid, LossMask: b.mask}
}

// counted returns the number of positions that count.
func (b rows) counted() int {
	n := 0
	for _, r := range b.mask {
		for _, m := range r {
			if m > 0 {
				n++
			}
		}
	}
	return n
}

// encodeAll tokenizes the training examples (one per row); an example longer than seq tokens is a
// non-retryable error naming it.
func encodeAll(exs []tasks.Example, seq int) ([]data.Encoded, error) {
	enc, err := train.Encoder().EncodeAll(exs)
	if err != nil {
		return nil, train.BadInput(err)
	}
	for i, e := range enc {
		if len(e.IDs) > seq {
			return nil, train.BadInput(fmt.Errorf("train: distill: example %d (%s) has %d tokens, batch.seq is %d: raise batch.seq or shorten the data", i, exs[i].ID, len(e.IDs), seq))
		}
	}
	return enc, nil
}

// topK is the k most likely ids of one position's logits (ties: the lower id first) and their
// log-probabilities at temperature tau.
func topK(logits []float32, k int, tau float64) ([]int32, []float32) {
	ids := make([]int, len(logits))
	for i := range ids {
		ids[i] = i
	}
	sort.SliceStable(ids, func(a, b int) bool { return logits[ids[a]] > logits[ids[b]] })
	mx := float64(logits[ids[0]]) / tau
	var z float64
	for _, v := range logits {
		z += math.Exp(float64(v)/tau - mx)
	}
	lz := mx + math.Log(z)
	k = min(k, len(logits))
	outIDs, outLP := make([]int32, k), make([]float32, k)
	for j := range k {
		outIDs[j], outLP[j] = int32(ids[j]), float32(float64(logits[ids[j]])/tau-lz)
	}
	return outIDs, outLP
}

// target is one example's stored teacher targets: per counted position, in order, the teacher's
// top-k ids and log-probs (one JSONL line of the targets object).
type target struct {
	IDs [][]int32   `json:"ids"`
	LP  [][]float32 `json:"lp"`
}

// teacherTargets runs the teacher on b and returns the top-k targets of every row's counted positions.
func teacherTargets(teacher train.LogitReader, b rows, k int, tau float64) ([]target, error) {
	lg, err := teacher.Logits(b.batch())
	if err != nil {
		return nil, err
	}
	out := make([]target, len(b.tok))
	for r := range b.tok {
		for t, m := range b.mask[r] {
			if m > 0 {
				ids, lp := topK(lg.Data[(r*lg.Seq+t)*lg.Vocab:(r*lg.Seq+t+1)*lg.Vocab], k, tau)
				out[r].IDs, out[r].LP = append(out[r].IDs, ids), append(out[r].LP, lp)
			}
		}
	}
	return out, nil
}

// TargetsKey is where a phase's teacher targets live, relative to the store root; hash names the
// teacher, data and settings they were made from.
func TargetsKey(run, phase, hash string) string {
	return path.Join("runs", run, phase, "teacher", "targets-"+hash+".jsonl")
}

// DistillTargets computes the teacher's top-k distribution at every completion position of every
// training example once (it holds for every pass over the data) and stores it as one JSONL object, a
// line per example in data order, so that chunks never hold the teacher. The key derives from the
// input, so a retry returns the object an earlier attempt wrote.
func (a *Activities) DistillTargets(ctx context.Context, in trainapi.DistillTargetsInput) (trainapi.DistillTargetsOutput, error) {
	op := fmt.Sprintf("train: distill targets %s/%s", in.Run, in.Phase)
	if in.TopK < 1 || !(in.Temperature > 0) || in.Seq < 2 {
		return trainapi.DistillTargetsOutput{}, train.BadInput(fmt.Errorf("%s: top_k %d, temperature %g, seq %d: want k >= 1, τ > 0, seq >= 2", op, in.TopK, in.Temperature, in.Seq))
	}
	key := TargetsKey(in.Run, in.Phase, train.InputHash(struct {
		Teacher string
		Data    trainapi.DataSpec
		Seq, K  int
		Tau     float64
		Seed    uint64
	}{in.Teacher, in.Data, in.Seq, in.TopK, in.Temperature, in.Seed}))
	if uri, ok, err := train.ExistingObject(ctx, a.Ckpt, in.Store, key); err != nil {
		return trainapi.DistillTargetsOutput{}, err
	} else if ok {
		tg, err := readTargets(ctx, a.Ckpt, uri)
		if err != nil {
			return trainapi.DistillTargetsOutput{}, err
		}
		return trainapi.DistillTargetsOutput{Targets: uri, Examples: len(tg), Resumed: true}, nil
	}
	trainEx, _, err := train.Examples(ctx, a.Ckpt, in.Data, in.Seed)
	if err != nil {
		return trainapi.DistillTargetsOutput{}, err
	}
	enc, err := encodeAll(trainEx, in.Seq)
	if err != nil {
		return trainapi.DistillTargetsOutput{}, err
	}
	teacher, closeT, _, err := a.loadTeacher(ctx, in.Teacher)
	if err != nil {
		return trainapi.DistillTargetsOutput{}, err
	}
	defer closeT()
	var lines []target
	for lo := 0; lo < len(enc); lo += train.EvalRows {
		hi := min(lo+train.EvalRows, len(enc))
		b := newRows(hi-lo, in.Seq)
		for r, e := range enc[lo:hi] {
			b.set(r, e.IDs, func(t int) bool { return e.Loss[t] })
		}
		tg, err := teacherTargets(teacher, b, in.TopK, in.Temperature)
		if err != nil {
			return trainapi.DistillTargetsOutput{}, fmt.Errorf("%s: %w", op, err)
		}
		lines = append(lines, tg...)
		activity.RecordHeartbeat(ctx, trainapi.Progress{Step: hi, Total: len(enc)})
	}
	uri, err := writeTargets(ctx, a.Ckpt, in.Store, key, lines)
	if err != nil {
		return trainapi.DistillTargetsOutput{}, fmt.Errorf("%s: %w", op, err)
	}
	return trainapi.DistillTargetsOutput{Targets: uri, Examples: len(lines)}, nil
}

// loadTeacher loads a teacher checkpoint as a train.LogitReader (no optimizer state).
func (a *Activities) loadTeacher(ctx context.Context, uri string) (train.LogitReader, func(), model.Config, error) {
	if uri == "" {
		return nil, nil, model.Config{}, train.BadInput(fmt.Errorf("train: distill: no teacher checkpoint"))
	}
	m, err := a.Load(ctx, uri, train.LoadOptions{})
	if err != nil {
		return nil, nil, model.Config{}, fmt.Errorf("train: distill: teacher: %w", err)
	}
	eng, cfg := m.Engine, m.Config
	lr := eng.Caps().Logits
	if lr == nil {
		eng.Close()
		return nil, nil, cfg, train.BadInput(fmt.Errorf("train: distill: teacher %s: its engine cannot compute logits (a LoRA checkpoint? merge it first: temper lora merge)", uri))
	}
	return lr, func() { eng.Close() }, cfg, nil
}

// step is one batch of a chunk: the example indices and the cursor before them (which seeds the
// student's samples).
type step struct {
	idx []int
	at  data.Cursor
}

// DistillChunk trains in.Steps distillation steps of the student in.From (train.RunChunk does the
// rest). Each batch takes rows examples in the seeded data order; the first round(λ·rows) of them are
// replaced by the student's own sample for the same prompt. Its metrics are the divergence's chunk
// mean, on_policy_rows, and tokens / tokens_per_s (counted positions; seconds are the student's
// optimizer steps only, the phase's train_seconds include the teacher and sampling).
func (a *Activities) DistillChunk(ctx context.Context, in trainapi.DistillChunkInput) (trainapi.ChunkOutput, error) {
	op := fmt.Sprintf("train: distill chunk %s/%s", in.Run, in.Phase)
	if err := in.Batch.Validate(); err != nil {
		return trainapi.ChunkOutput{}, train.BadInput(fmt.Errorf("%s: %w", op, err))
	}
	if err := in.Loss.Validate(); err != nil {
		return trainapi.ChunkOutput{}, train.BadInput(fmt.Errorf("%s: loss.%w", op, err))
	}
	if (in.Teacher == "") == (in.Targets == "") {
		return trainapi.ChunkOutput{}, train.BadInput(fmt.Errorf("%s: set exactly one of teacher (on the fly) and targets (precomputed)", op))
	}
	if in.Targets != "" && (in.Loss.TopK < 1 || in.Loss.Lambda > 0) {
		return trainapi.ChunkOutput{}, train.BadInput(fmt.Errorf("%s: precomputed targets hold top-k teacher distributions of the data: want loss.top_k >= 1 and loss.lambda 0", op))
	}
	R, S := in.Batch.Rows, in.Batch.Seq
	nOn := in.Loss.OnPolicyRows(R)
	return train.RunChunk(ctx, a.Activities, in.ChunkHead, op, func() (*train.ChunkObjective[step], error) {
		trainEx, _, err := train.Examples(ctx, a.Ckpt, in.Data, in.Cursor.Seed)
		if err != nil {
			return nil, err
		}
		enc, err := encodeAll(trainEx, S)
		if err != nil {
			return nil, err
		}
		var stored []target
		if in.Targets != "" {
			if stored, err = readTargets(ctx, a.Ckpt, in.Targets); err != nil {
				return nil, err
			}
			if len(stored) != len(enc) {
				return nil, train.BadInput(fmt.Errorf("%s: targets %s have %d examples, the data %d: were they made from other data?", op, in.Targets, len(stored), len(enc)))
			}
		}
		m, err := a.Load(ctx, in.From, train.LoadOptions{Optim: in.Optim, Optimizer: !in.FreshOptimizer})
		if err != nil {
			return nil, err
		}
		eng, cfg := m.Engine, m.Config
		var teacher train.LogitReader
		closeT := func() {}
		if in.Teacher != "" {
			var tcfg model.Config
			if teacher, closeT, tcfg, err = a.loadTeacher(ctx, in.Teacher); err != nil {
				eng.Close()
				return nil, err
			}
			if tcfg.Vocab != cfg.Vocab {
				closeT()
				eng.Close()
				return nil, train.BadInput(fmt.Errorf("%s: teacher %s has vocabulary %d, the student %d: distillation needs the same tokenizer", op, in.Teacher, tcfg.Vocab, cfg.Vocab))
			}
		}
		obj := objective.Distill(in.Loss)
		prompts := make([][]int, len(trainEx))
		for i, ex := range trainEx {
			if prompts[i], err = train.Encoder().PromptIDs(ex); err != nil {
				closeT()
				eng.Close()
				return nil, train.BadInput(err)
			}
		}
		return &train.ChunkObjective[step]{Eng: eng, Cfg: cfg, Unit: "tokens", Close: closeT,
			Next: func(cur data.Cursor) (step, data.Cursor, error) {
				idx, next := train.NextRows(len(enc), R, cur)
				return step{idx: idx, at: cur}, next, nil
			},
			Step: func(s step, lr float32) (train.StepResult, error) {
				b := newRows(R, S)
				for r, i := range s.idx[nOn:] {
					e := enc[i]
					b.set(nOn+r, e.IDs, func(t int) bool { return e.Loss[t] })
				}
				if nOn > 0 {
					if err := onPolicyRows(eng, b, s, prompts, in.Loss, nOn, S); err != nil {
						return train.StepResult{}, err
					}
				}
				batch := objective.DistillBatch{Tokens: b.tok, Positions: b.pos, Valid: b.valid, Mask: b.mask}
				switch {
				case stored != nil:
					if err := topKTargets(&batch, s.idx, stored, in.Loss.TopK); err != nil {
						return train.StepResult{}, train.BadInput(fmt.Errorf("targets %s: %w", in.Targets, err))
					}
				case in.Loss.TopK > 0:
					tg, err := teacherTargets(teacher, b, in.Loss.TopK, in.Loss.Temperature)
					if err != nil {
						return train.StepResult{}, fmt.Errorf("teacher: %w", err)
					}
					if err := topKTargets(&batch, nil, tg, in.Loss.TopK); err != nil {
						return train.StepResult{}, fmt.Errorf("teacher: %w", err)
					}
				default:
					lg, err := teacher.Logits(b.batch())
					if err != nil {
						return train.StepResult{}, fmt.Errorf("teacher: %w", err)
					}
					if lg.Batch != R || lg.Seq != S || lg.Vocab != cfg.Vocab {
						return train.StepResult{}, fmt.Errorf("teacher logits %dx%dx%d, want %dx%dx%d", lg.Batch, lg.Seq, lg.Vocab, R, S, cfg.Vocab)
					}
					batch.Logits, batch.Width = lg.Data, lg.Vocab
				}
				m, err := eng.StepObjective(obj, batch, lr)
				res := train.ObjectiveStep(obj, m, b.counted())
				res.Metrics["on_policy_rows"] = float64(nOn)
				return res, err
			},
			Write: func(ctx context.Context, w *ckpt.Writer, st ckpt.State) error {
				return train.WriteModel(ctx, w, m, st, true)
			},
		}, nil
	})
}

// onPolicyRows replaces rows 0..n-1 of b with the student's samples for the prompts of s.idx[:n]:
// prompt then sampled tokens (EOS kept), truncated to seq; the sampled tokens count. Seeds derive
// from the batch's cursor and row, so a retry samples the same tokens.
func onPolicyRows(eng train.Sampler, b rows, s step, prompts [][]int, cfg objectivecfg.DistillConfig, n, seq int) error {
	ps := make([][]int, n)
	seeds := make([]uint64, n)
	base := sample.SplitMix64(s.at.Seed ^ sample.SplitMix64(uint64(s.at.Epoch)<<32|uint64(s.at.Index)))
	longest := 0
	for r := range n {
		ps[r] = prompts[s.idx[r]]
		seeds[r] = sample.SplitMix64(base + uint64(r))
		longest = max(longest, len(ps[r]))
	}
	maxNew := min(cfg.SampleTokens, seq-longest)
	if maxNew < 1 {
		return train.BadInput(fmt.Errorf("a prompt of %d tokens leaves no room to sample in batch.seq %d", longest, seq))
	}
	outs, err := eng.Generate(ps, sample.Options{MaxNewTokens: maxNew, Temperature: cfg.SampleTemperature,
		StopTokens: []int{tokenize.ByteEOS}, Seeds: seeds})
	if err != nil {
		return fmt.Errorf("student samples: %w", err)
	}
	for r, o := range outs {
		ids := append(append([]int(nil), ps[r]...), o.Tokens...)
		pl := len(ps[r])
		b.set(r, ids[:min(len(ids), seq)], func(t int) bool { return t >= pl })
	}
	return nil
}

// topKTargets sets the batch's teacher to top-k targets: ids and log-probs [R, S, k] at its counted
// positions. tg holds one target per row; with idx set, tg is the stored per-example targets and row r
// reads tg[idx[r]] (only data rows: precomputed targets have no on-policy rows). A target whose
// positions disagree with the row's is an error.
func topKTargets(b *objective.DistillBatch, idx []int, tg []target, k int) error {
	R, S := len(b.Tokens), len(b.Tokens[0])
	ids, lp := make([]int32, R*S*k), make([]float32, R*S*k)
	for r := range R {
		ex := r
		if idx != nil {
			ex = idx[r]
		}
		t := tg[ex]
		j := 0
		for p, m := range b.Mask[r] {
			if m == 0 {
				continue
			}
			if j >= len(t.IDs) || len(t.IDs[j]) != k || len(t.LP[j]) != k {
				return fmt.Errorf("example %d: targets do not match its completion (%d positions of %d ids stored, want top_k %d)", ex, len(t.IDs), k, k)
			}
			copy(ids[(r*S+p)*k:], t.IDs[j])
			copy(lp[(r*S+p)*k:], t.LP[j])
			j++
		}
		if j != len(t.IDs) {
			return fmt.Errorf("example %d: %d target positions stored, its completion has %d", ex, len(t.IDs), j)
		}
	}
	b.IDs, b.LogProbs, b.Width = ids, lp, k
	return nil
}
