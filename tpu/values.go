package tpu

import (
	"fmt"

	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX graph code reads best unqualified.

	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/model"
)

// Values returns the value head's output at every position of b, [batch][seq]: a PPO trainer reads
// its critic's V(s_t) with it before an iteration's updates (Targets and LossMask are ignored). The
// model must have a value head (model.Config.ValueHead).
func (r *Runtime) Values(b data.TokenBatch) ([][]float32, error) {
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
	// values: tokens, positions [b, t] int32, valid [b, t] bool → [b, t]
	return r.perToken(op, p, func(in []*Node) []*Node {
		return []*Node{model.Values(r.scope, r.cfg, in[0], in[1], in[2])}
	}, []shapes.Shape{i32(p), i32(p), boolean(p)}, p.tokens(), p.positions(), p.validMask())
}
