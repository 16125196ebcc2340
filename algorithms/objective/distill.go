package objective

import (
	"fmt"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/objective/objectivecfg"
)

// Distill is the distillation objective: the student's divergence from a teacher whose distributions
// arrive in its DistillBatch (the teacher is another model, possibly of another size, run beside the
// student or precomputed): with top_k 0 its logits over the student's vocabulary, with top_k k its
// top-k ids and log-probs at τ.
//
// The loss is τ²·(masked mean per-token divergence); the metric named cfg.Metric() is that mean.
func Distill(cfg objectivecfg.DistillConfig) Objective {
	metric := cfg.Metric()
	return Objective{
		Name:    fmt.Sprintf("distill-%s-b%g-t%g-k%d", cfg.Divergence, cfg.Beta, cfg.Temperature, cfg.TopK),
		Metrics: []string{metric},
		Build: func(scope *gm.Scope, mc model.Config, in []*Node) (*Node, map[string]*Node) {
			b := distillIn(in, cfg.TopK > 0)
			student := model.Forward(scope, mc, b.tokens, b.positions, b.valid)
			var l *Node
			var m loss.Metrics
			switch {
			case cfg.TopK > 0:
				l, m = loss.DistillForwardKLTopK(student, b.ids, b.logProbs, b.mask, cfg.Temperature)
			case cfg.Divergence == objectivecfg.DivReverse:
				l, m = loss.DistillReverseKL(student, b.logits, b.mask, cfg.Temperature)
			case cfg.Divergence == objectivecfg.DivJSD:
				l, m = loss.DistillJSD(student, b.logits, b.mask, cfg.Beta, cfg.Temperature)
			default:
				l, m = loss.DistillForwardKL(student, b.logits, b.mask, cfg.Temperature)
			}
			return l, map[string]*Node{metric: m[metric]}
		},
	}
}
