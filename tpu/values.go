package tpu

import (
	"fmt"

	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX graph code reads best unqualified.
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/algorithms/model"
)

// Values returns the value head's output at every position of b, [batch][seq]: a PPO trainer reads
// its critic's V(s_t) with it before an iteration's updates (Targets and LossMask are ignored). The
// model must have a value head (model.Config.ValueHead).
func (r *Runtime) Values(b Batch) ([][]float32, error) {
	const op = "values"
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usable(op); err != nil {
		return nil, err
	}
	if !r.cfg.ValueHead {
		return nil, fmt.Errorf("tpu: %s: the model has no value head (model.Config.ValueHead)", op)
	}
	p, err := r.pad(b, false)
	if err != nil {
		return nil, fmt.Errorf("tpu: %s: %w", op, err)
	}
	var out [][]float32
	var sec float64
	err = r.guard(op, func() error {
		// values: tokens, positions [b, t] int32, valid [b, t] bool → [b, t]
		outs, s, err := r.run(CacheKey{"values", p.shape()}, func(in []*Node) []*Node {
			return []*Node{model.Values(r.scope, r.cfg, in[0], in[1], in[2])}
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
