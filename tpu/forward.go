package tpu

import (
	"fmt"

	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX graph code reads best unqualified.
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/algorithms/data"
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
func (r *Runtime) Logits(b data.TokenBatch) (Logits, error) {
	const op = "logits"
	r.mu.Lock()
	defer r.mu.Unlock()
	p, err := r.usablePadded(op, b, false)
	if err != nil {
		return Logits{}, err
	}
	// logits: tokens, positions [b, t] int32, valid [b, t] bool → [b, t, vocab]
	v := r.cfg.Vocab
	out := Logits{Batch: p.b, Seq: p.t, Vocab: v, Data: make([]float32, p.b*p.t*v)}
	err = r.evaluate(op, p, func(in []*Node) []*Node {
		return []*Node{model.Forward(r.scope, r.cfg, in[0], in[1], in[2])}
	}, []shapes.Shape{i32(p), i32(p), boolean(p)}, func(all []float32) {
		for i := range p.b {
			copy(out.Data[i*p.t*v:(i+1)*p.t*v], all[i*p.pt*v:(i*p.pt+p.t)*v])
		}
	}, p.tokens(), p.positions(), p.validMask())
	if err != nil {
		return Logits{}, err
	}
	return out, nil
}

// usablePadded checks that the runtime can serve op and pads b (with its targets when targets). The
// caller holds r.mu.
func (r *Runtime) usablePadded(op string, b data.TokenBatch, targets bool) (padded, error) {
	if err := r.usable(op); err != nil {
		return padded{}, err
	}
	p, err := r.pad(b, targets)
	if err != nil {
		return padded{}, fmt.Errorf("tpu: %s: %w", op, err)
	}
	return p, nil
}

// LogProbs returns log p(Targets[i][t] | Tokens[i][:t+1]) for every position, [batch][seq].
func (r *Runtime) LogProbs(b data.TokenBatch) ([][]float32, error) {
	const op = "logprobs"
	r.mu.Lock()
	defer r.mu.Unlock()
	p, err := r.usablePadded(op, b, true)
	if err != nil {
		return nil, err
	}
	// logprobs: tokens, targets, positions [b, t] int32, valid [b, t] bool → [b, t]
	return r.perToken(op, p, func(in []*Node) []*Node {
		logits := model.Forward(r.scope, r.cfg, in[0], in[2], in[3])
		return []*Node{model.TokenLogProbs(logits, in[1])}
	}, []shapes.Shape{i32(p), i32(p), i32(p), boolean(p)}, p.tokens(), p.targets(), p.positions(), p.validMask())
}

// perToken runs graphFn (see evaluate), whose one output is [b, t] over the padded batch p, and
// returns it unpadded as [batch][seq]. The caller holds r.mu.
func (r *Runtime) perToken(op string, p padded, graphFn func(in []*Node) []*Node, in []shapes.Shape, args ...any) ([][]float32, error) {
	out := make([][]float32, p.b)
	err := r.evaluate(op, p, graphFn, in, func(all []float32) {
		for i := range out {
			out[i] = append([]float32(nil), all[i*p.pt:i*p.pt+p.t]...)
		}
	}, args...)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// evaluate runs graphFn (cached under op and p's shape) on args, hands its first output's flat data
// (padded rows) to unpad, and records the time as evaluation. The caller holds r.mu.
func (r *Runtime) evaluate(op string, p padded, graphFn func(in []*Node) []*Node, in []shapes.Shape, unpad func(all []float32), args ...any) error {
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
		unpad(all)
		return nil
	})
	if err != nil {
		return err
	}
	r.record(&r.stats.Eval, p.b*p.t, sec, p.flops(r.cfg, false))
	return nil
}

// EvalLoss computes the masked cross-entropy of b without updating anything (GradNorm is 0).
func (r *Runtime) EvalLoss(b data.TokenBatch) (StepMetrics, error) {
	const op = "eval loss"
	r.mu.Lock()
	defer r.mu.Unlock()
	p, err := r.usablePadded(op, b, true)
	if err != nil {
		return StepMetrics{}, err
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
