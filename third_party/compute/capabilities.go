// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package compute

import (
	"maps"

	"github.com/gomlx/compute/dtypes"
)

// Capabilities holds mappings of what is supported by a backend.
type Capabilities struct {
	// Operations supported by a backend.
	// If not listed, it's assumed to be false, hence not supported.
	Operations map[OpType]bool

	// Functions indicates whether the backend supports functions (top-level functions or closures).
	// Without functions, it's not possible to support Call() op or any other
	// op that takes as input a closure (While, If, etc.)
	Functions bool

	// DTypes list the data types supported by a backend.
	// If not listed, it's assumed to be false, hence not supported.
	DTypes map[dtypes.DType]bool

	// DynamicAxes indicates whether the backend supports named dynamic axes
	// and shape specialization. When true, graph parameters can have symbolic
	// dimensions (shapes.DynamicDim) with named axes, and the backend will
	// lazily specialize execution for each concrete axis binding.
	DynamicAxes bool

	// PreferConstantsForVariables indicates that the backend prefers context variables
	// (model weights) to be embedded as constants in the computation graph rather than
	// passed as parameters (inputs) at execution time. This enables optimizations like
	// weight blob storage and eliminates per-inference data transfer overhead.
	// When true, libraries like onnx-gomlx should use graph.Const() instead of
	// Variable.ValueGraph() for model weights.
	PreferConstantsForVariables bool
}

// Clone makes a deep copy of the Capabilities.
func (c Capabilities) Clone() Capabilities {
	var c2 Capabilities
	c2 = c
	c2.Operations = make(map[OpType]bool, len(c.Operations))
	maps.Copy(c2.Operations, c.Operations)
	c2.DTypes = make(map[dtypes.DType]bool, len(c.DTypes))
	maps.Copy(c2.DTypes, c.DTypes)
	return c2
}
