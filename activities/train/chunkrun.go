package train

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"

	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/schedule"
)

// StepResult is one optimizer step of an objective.
type StepResult struct {
	Loss, GradNorm, Seconds float64
	Units                   int                // what the objective counts: trained tokens, pairs, rows
	Metrics                 map[string]float64 // averaged over the chunk's finite steps
}

// ChunkObjective is all an objective supplies to the chunk runner: its engine (loaded with From's
// weights and, unless FreshOptimizer, optimizer state), how to take the next batch from a cursor,
// one step on a batch, and how to write the trained model into the checkpoint.
type ChunkObjective[B any] struct {
	Eng   Engine
	Cfg   model.Config
	Unit  string // names the throughput metrics: unit and unit_per_s
	Next  func(cur data.Cursor) (B, data.Cursor, error)
	Step  func(b B, lr float32) (StepResult, error)
	Write func(ctx context.Context, w *ckpt.Writer, st ckpt.State) error
	Close func() // releases what open loaded besides eng (a reference engine); may be nil
}

// RowsObjective is the chunk objective of the loaded model m trained with obj on n in-memory rows,
// rows of them a step in the seeded per-epoch order (NextRows): batch makes a step's batch of the
// row indices it is given. Its checkpoint is m with its optimizer state (WriteModel).
func RowsObjective(m *Loaded, obj objective.Objective, unit string, n, rows int, batch func(idx []int) (objective.Batch, error)) *ChunkObjective[[]int] {
	return &ChunkObjective[[]int]{Eng: m.Engine, Cfg: m.Config, Unit: unit,
		Next: func(cur data.Cursor) ([]int, data.Cursor, error) {
			idx, next := NextRows(n, rows, cur)
			return idx, next, nil
		},
		Step: func(idx []int, lr float32) (StepResult, error) {
			b, err := batch(idx)
			if err != nil {
				return StepResult{}, err
			}
			res, err := m.Engine.StepObjective(obj, b, lr)
			return ObjectiveStep(obj, res, len(idx)), err
		},
		Write: func(ctx context.Context, w *ckpt.Writer, st ckpt.State) error {
			return WriteModel(ctx, w, m, st, true)
		},
	}
}

// LR is the learning rate of step (0-based) of a phase of total steps on o's schedule: linear
// warmup over o.WarmupSteps, then cosine decay to o.LR·o.MinLRRatio at total (algorithms/schedule).
// Every kind's rate is computed here, in the trainer, from the schedule and the position its
// workflow passes: a chunk's many steps need their rates where they are taken, and a workflow
// then only says where in the phase a step is (and, for RL, back-tracking's scale), never a rate.
func LR(o trainapi.Optim, step, total int) float64 {
	return schedule.WarmupCosine{Peak: o.LR, Warmup: o.WarmupSteps, Total: total, MinRatio: o.MinLRRatio}.At(step)
}

// PolicyLR is the learning rate of an RL policy step: LR at in.Iteration of in.Iterations, times
// in.LRScale (back-tracking lowers it; 0 means 1). An input without Iterations carries the rate its
// workflow computed (in.LR), as workflows did before and histories recorded.
func PolicyLR(in trainapi.PolicyStepInput) float64 {
	if in.Iterations <= 0 {
		return in.LR
	}
	scale := in.LRScale
	if scale == 0 {
		scale = 1
	}
	return LR(in.Optim, in.Iteration, in.Iterations) * scale
}

// metricPrefix marks objective metrics among a checkpoint's state scalars.
const metricPrefix = "metric/"

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// RunChunk is the one chunk runner: it returns the checkpoint of step in.Step+in.Steps if an earlier
// attempt committed it, else opens the objective, trains in.Steps steps on the warmup-cosine
// schedule (heartbeating after each), counts non-finite steps without averaging them, and commits
// weights, optimizer state and state.json (step, cursor, config hash, the output's scalars). Given
// the same input it recomputes the same checkpoint bit for bit, so a retry is safe.
func RunChunk[B any](ctx context.Context, a *Activities, in trainapi.ChunkHead, op string, open func() (*ChunkObjective[B], error)) (trainapi.ChunkOutput, error) {
	if in.Steps <= 0 {
		return trainapi.ChunkOutput{}, BadInput(fmt.Errorf("%s: steps %d: want > 0", op, in.Steps))
	}
	end := in.Step + in.Steps
	if uri, st, ok, err := a.Committed(ctx, in.Store, in.Run, in.Phase, end); err != nil {
		return trainapi.ChunkOutput{}, err
	} else if ok {
		return committedChunk(uri, st), nil
	}
	obj, err := open()
	if err != nil {
		return trainapi.ChunkOutput{}, err
	}
	defer obj.Eng.Close()
	if obj.Close != nil {
		defer obj.Close()
	}
	out := trainapi.ChunkOutput{Step: end, Cursor: in.Cursor, Metrics: map[string]float64{}}
	var lossSum, normSum float64
	var units int
	sums := map[string]float64{}
	var log []ckpt.MetricsRecord // the phase's metrics log, one record per step
	for i := 0; i < in.Steps; i++ {
		if err := ctx.Err(); err != nil {
			return trainapi.ChunkOutput{}, fmt.Errorf("%s at step %d: %w", op, in.Step+i, err)
		}
		b, next, err := obj.Next(out.Cursor)
		if err != nil {
			return trainapi.ChunkOutput{}, fmt.Errorf("%s step %d: %w", op, in.Step+i, err)
		}
		out.Cursor = next
		out.LR = LR(in.Optim, in.Step+i, in.TotalSteps)
		var r StepResult
		if in.InjectNaNAt == in.Step+i+1 {
			r = StepResult{Loss: math.NaN(), GradNorm: math.NaN()}
		} else if r, err = obj.Step(b, float32(out.LR)); err != nil {
			return trainapi.ChunkOutput{}, fmt.Errorf("%s step %d: %w", op, in.Step+i, err)
		}
		if finite(r.Loss) && finite(r.GradNorm) {
			lossSum += r.Loss
			normSum += r.GradNorm
			for k, v := range r.Metrics {
				sums[k] += v
			}
		} else {
			out.NonFinite++
		}
		log = append(log, stepRecord(in.Step+i+1, out.LR, r, obj.Unit))
		out.LastLoss = r.Loss
		out.Seconds += r.Seconds
		units += r.Units
		beat := trainapi.Progress{Step: in.Step + i + 1, Total: in.TotalSteps}
		if finite(r.Loss) {
			beat.Loss = r.Loss // a NaN would make the heartbeat unencodable (the SDK panics)
		}
		activity.RecordHeartbeat(ctx, beat)
	}
	if ok := float64(in.Steps - out.NonFinite); ok > 0 {
		out.Loss, out.GradNorm = lossSum/ok, normSum/ok
		for k, v := range sums {
			if m := v / ok; finite(m) {
				out.Metrics[k] = m
			}
		}
	}
	if !finite(out.LastLoss) {
		out.LastLoss = 0 // JSON payloads cannot carry NaN; NonFinite counts such steps
	}
	if obj.Unit != "" {
		out.Metrics[obj.Unit] = float64(units)
		if out.Seconds > 0 {
			out.Metrics[obj.Unit+"_per_s"] = float64(units) / out.Seconds
		}
	}
	st := ckpt.State{
		Step:       int64(end),
		Cursor:     ckpt.Cursor{Epoch: int64(out.Cursor.Epoch), Index: int64(out.Cursor.Index), Seed: out.Cursor.Seed},
		ConfigHash: ConfigHash(obj.Cfg),
		Scalars: map[string]float64{"loss": out.Loss, "last_loss": out.LastLoss, "grad_norm": out.GradNorm, "lr": out.LR,
			"non_finite": float64(out.NonFinite), "seconds": out.Seconds},
	}
	for name, v := range out.Metrics {
		st.Scalars[metricPrefix+name] = v
	}
	uri, err := a.Commit(ctx, CommitAt{Store: in.Store, Run: in.Run, Phase: in.Phase, Step: end}, op, log, func(w *ckpt.Writer) error {
		return obj.Write(ctx, w, st)
	})
	if err != nil {
		return trainapi.ChunkOutput{}, err
	}
	out.Checkpoint = uri
	return out, nil
}

// CommitAt names a checkpoint: the phase's directory and the step (an RL phase's policy version).
type CommitAt struct {
	Store, Run, Phase string
	Step              int
}

// Committed returns the checkpoint an earlier attempt committed at step of the phase and its state,
// or ok false when there is none: how a retried activity finds its own output instead of training
// again. The chunk runner and the policy step both begin with it.
func (a *Activities) Committed(ctx context.Context, store, run, phase string, step int) (uri string, st ckpt.State, ok bool, err error) {
	ref, err := a.Ckpt.Lookup(ctx, store, run, phase, int64(step))
	if errors.Is(err, ckpt.ErrNotExist) {
		return "", ckpt.State{}, false, nil
	} else if err != nil {
		return "", ckpt.State{}, false, err
	}
	ck, err := a.Ckpt.Read(ctx, ref.URI)
	if err != nil {
		return "", ckpt.State{}, false, err
	}
	if st, err = ck.ReadState(ctx); err != nil {
		return "", ckpt.State{}, false, err
	}
	return ref.URI, st, true, nil
}

// Commit appends log to the phase's metrics log, then commits the checkpoint at (write adds its
// files and state.json) and returns its URI. The log goes first: a retry after a crash in between
// recomputes and rewrites the same records, whereas a commit without its log would be returned as
// is by Committed and its records lost. op prefixes the errors.
func (a *Activities) Commit(ctx context.Context, at CommitAt, op string, log []ckpt.MetricsRecord, write func(w *ckpt.Writer) error) (string, error) {
	if err := a.Ckpt.AppendMetrics(ctx, at.Store, at.Run, at.Phase, log); err != nil {
		return "", fmt.Errorf("%s metrics log: %w", op, err)
	}
	ref, err := a.Ckpt.Save(ctx, at.Store, at.Run, at.Phase, int64(at.Step), write)
	if err != nil {
		return "", fmt.Errorf("%s commit step %d: %w", op, at.Step, err)
	}
	return ref.URI, nil
}

// committedChunk rebuilds a ChunkOutput from the state of a checkpoint an earlier attempt committed.
func committedChunk(uri string, st ckpt.State) trainapi.ChunkOutput {
	s := st.Scalars
	out := trainapi.ChunkOutput{
		Checkpoint: uri, Step: int(st.Step), Resumed: true,
		Cursor: data.Cursor{Epoch: int(st.Cursor.Epoch), Index: int(st.Cursor.Index), Seed: st.Cursor.Seed},
		Loss:   s["loss"], LastLoss: s["last_loss"], GradNorm: s["grad_norm"], LR: s["lr"],
		NonFinite: int(s["non_finite"]), Seconds: s["seconds"], Metrics: map[string]float64{},
	}
	for k, v := range s {
		if name, ok := strings.CutPrefix(k, metricPrefix); ok {
			out.Metrics[name] = v
		}
	}
	return out
}
