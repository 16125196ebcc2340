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
	// Build receives the objective's batch (its Batch type's Tensors, in that order) and returns the
	// loss and metrics by name (a missing name reports 0). It may panic on bad shapes (graph code); the
	// runtime recovers.
	Build func(scope *gm.Scope, cfg model.Config, in []*Node) (loss *Node, metrics map[string]*Node)
}
