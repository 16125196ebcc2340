package objective

import (
	"fmt"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/objective/objectivecfg"
)

// DistillConfig (its defaults and validation) lives in objectivecfg so that workflows can carry it.
type DistillConfig = objectivecfg.DistillConfig

// Distill is the distillation objective: the student's divergence from a teacher whose distributions
// arrive as inputs (the teacher is another model, possibly of another size, run beside the student or
// precomputed). Inputs, for rows R of S tokens (logits at position t predict token t+1):
//
//	tokens, positions: [R, S] int32; valid: [R, S] bool (attention may see the token);
//	mask: [R, S] float32, 1 where position t's next-token distribution counts (token t+1 is a
//	completion token);
//	top_k 0:  teacher logits [R, S, V] float32 (V the student's vocabulary)
//	top_k k:  teacher ids [R, S, k] int32, teacher log-probs at τ [R, S, k] float32
//
// The loss is τ²·(masked mean per-token divergence); the metric named cfg.Metric() is that mean.
func Distill(cfg DistillConfig) Objective {
	metric := cfg.Metric()
	return Objective{
		Name:    fmt.Sprintf("distill-%s-b%g-t%g-k%d", cfg.Divergence, cfg.Beta, cfg.Temperature, cfg.TopK),
		Metrics: []string{metric},
		Build: func(scope *gm.Scope, mc model.Config, in []*Node) (*Node, map[string]*Node) {
			want := 5
			if cfg.TopK > 0 {
				want = 6
			}
			if len(in) != want {
				panic(fmt.Sprintf("objective: distill: %d inputs, want %d", len(in), want))
			}
			student := model.Forward(scope, mc, in[0], in[1], in[2])
			var l *Node
			var m loss.Metrics
			switch {
			case cfg.TopK > 0:
				l, m = loss.DistillForwardKLTopK(student, in[4], in[5], in[3], cfg.Temperature)
			case cfg.Divergence == objectivecfg.DivReverse:
				l, m = loss.DistillReverseKL(student, in[4], in[3], cfg.Temperature)
			case cfg.Divergence == objectivecfg.DivJSD:
				l, m = loss.DistillJSD(student, in[4], in[3], cfg.Beta, cfg.Temperature)
			default:
				l, m = loss.DistillForwardKL(student, in[4], in[3], cfg.Temperature)
			}
			return l, map[string]*Node{metric: m[metric]}
		},
	}
}
