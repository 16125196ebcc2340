// Package objective defines training objectives as GoMLX graph builders over a model and a step's
// inputs, so that any loss of algorithms/loss can be trained by the runtime (tpu.Runtime.StepObjective)
// without the runtime knowing about it. Each builder documents its inputs' order, shapes and dtypes.
package objective

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/model"
)

// Objective is a scalar loss over the model (its variables under scope) and the step's inputs, with
// named scalar metrics.
type Objective struct {
	// Name keys compiled executables together with the input shapes: two objectives that build
	// different graphs must have different names (include hyperparameters baked into the graph).
	Name string
	// Metrics names the scalar metrics Build returns, in reporting order.
	Metrics []string
	// Build receives the inputs in the documented order and returns the loss and metrics by name (a
	// missing name reports 0). It may panic on bad shapes (graph code); the runtime recovers.
	Build func(scope *gm.Scope, cfg model.Config, in []*Node) (loss *Node, metrics map[string]*Node)
}
