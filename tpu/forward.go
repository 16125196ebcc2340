package tpu

import (
	"fmt"

	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX graph code reads best unqualified.
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/algorithms/model"
)

// Logits holds next-token logits [Batch, Seq, Vocab], flat row-major.
type Logits struct {
	Batch, Seq, Vocab int
	Data              []float32
}

// At returns the logits of row b, position t.
func (l Logits) At(b, t int) []float32 {
	k := (b*l.Seq + t) * l.Vocab
	return l.Data[k : k+l.Vocab]
}

// Logits runs the forward pass on b (Targets and LossMask are ignored).
func (r *Runtime) Logits(b Batch) (Logits, error) {
	const op = "logits"
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usable(op); err != nil {
		return Logits{}, err
	}
	p, err := r.pad(b, false)
	if err != nil {
		return Logits{}, fmt.Errorf("tpu: %s: %w", op, err)
	}
	var out Logits
	var sec float64
	err = r.guard(op, func() error {
		// logits: tokens, positions [b, t] int32, valid [b, t] bool → [b, t, vocab]
		outs, s, err := r.run(CacheKey{"logits", p.shape()}, func(in []*Node) []*Node {
			return []*Node{model.Forward(r.scope, r.cfg, in[0], in[1], in[2])}
		}, []shapes.Shape{i32(p), i32(p), boolean(p)}, p.tokens(), p.positions(), p.validMask())
		if err != nil {
			return err
		}
		defer finalize(outs)
		sec = s
		all, err := tensors.CopyFlatData[float32](outs[0])
		if err != nil {
			return err
		}
		v := r.cfg.Vocab
		out = Logits{Batch: p.b, Seq: p.t, Vocab: v, Data: make([]float32, p.b*p.t*v)}
		for i := range p.b {
			copy(out.Data[i*p.t*v:(i+1)*p.t*v], all[i*p.pt*v:(i*p.pt+p.t)*v])
		}
		return nil
	})
	if err != nil {
		return Logits{}, err
	}
	r.record(&r.stats.Eval, p.b*p.t, sec, p.flops(r.cfg, false))
	return out, nil
}

// LogProbs returns log p(Targets[i][t] | Tokens[i][:t+1]) for every position, [batch][seq].
func (r *Runtime) LogProbs(b Batch) ([][]float32, error) {
	const op = "logprobs"
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usable(op); err != nil {
		return nil, err
	}
	p, err := r.pad(b, true)
	if err != nil {
		return nil, fmt.Errorf("tpu: %s: %w", op, err)
	}
	// logprobs: tokens, targets, positions [b, t] int32, valid [b, t] bool → [b, t]
	return r.perToken(op, p, func(in []*Node) []*Node {
		logits := model.Forward(r.scope, r.cfg, in[0], in[2], in[3])
		return []*Node{model.TokenLogProbs(logits, in[1])}
	}, []shapes.Shape{i32(p), i32(p), i32(p), boolean(p)}, p.tokens(), p.targets(), p.positions(), p.validMask())
}

// perToken runs graphFn (cached under op and p's shape), whose one output is [b, t] over the padded
// batch p, and returns it unpadded as [batch][seq], recording the time as evaluation. The caller holds
// r.mu.
func (r *Runtime) perToken(op string, p padded, graphFn func(in []*Node) []*Node, in []shapes.Shape, args ...any) ([][]float32, error) {
	var out [][]float32
	var sec float64
	err := r.guard(op, func() error {
		outs, s, err := r.run(CacheKey{op, p.shape()}, graphFn, in, args...)
		if err != nil {
			return err
		}
		defer finalize(outs)
		sec = s
		all, err := tensors.CopyFlatData[float32](outs[0])
		if err != nil {
			return err
		}
		out = make([][]float32, p.b)
		for i := range out {
			out[i] = append([]float32(nil), all[i*p.pt:i*p.pt+p.t]...)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	r.record(&r.stats.Eval, p.b*p.t, sec, p.flops(r.cfg, false))
	return out, nil
}

// EvalLoss computes the masked cross-entropy of b without updating anything (GradNorm is 0).
func (r *Runtime) EvalLoss(b Batch) (StepMetrics, error) {
	const op = "eval loss"
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usable(op); err != nil {
		return StepMetrics{}, err
	}
	p, err := r.pad(b, true)
	if err != nil {
		return StepMetrics{}, fmt.Errorf("tpu: %s: %w", op, err)
	}
	var m StepMetrics
	err = r.guard(op, func() error {
		// loss: tokens, targets [b, t] int32, mask [b, t] float32, positions [b, t] int32, valid → []
		outs, sec, err := r.run(CacheKey{"loss", p.shape()}, func(in []*Node) []*Node {
			logits := model.Forward(r.scope, r.cfg, in[0], in[3], in[4])
			return []*Node{model.CrossEntropy(logits, in[1], in[2])}
		}, []shapes.Shape{i32(p), i32(p), f32(p), i32(p), boolean(p)},
			p.tokens(), p.targets(), p.lossMask(), p.positions(), p.validMask())
		if err != nil {
			return err
		}
		defer finalize(outs)
		m = StepMetrics{Loss: tensors.ToScalar[float32](outs[0]), Tokens: p.counted, Seconds: sec,
			FLOPs: p.flops(r.cfg, false)}
		return nil
	})
	if err != nil {
		return StepMetrics{}, err
	}
	r.record(&r.stats.Eval, p.b*p.t, m.Seconds, m.FLOPs)
	return m, nil
}
