package model

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX graph code reads best unqualified.
	"github.com/temperml/temper/algorithms/model/modelcfg"
)

// rematMode is the activation checkpointing of one trunk (Config.Remat), built on GoMLX's
// Node.Checkpoint: the node where a block starts is kept from the forward pass (behind an
// optimization barrier, so that the recomputation is not merged back into the forward), every
// node computed from it up to the block's end is rebuilt in the backward pass from the kept
// input, scheduled only once the gradient reaching the block exists (a scheduling barrier on
// it), so the forward's copies die as soon as the forward has used them. The recomputation
// runs the same ops on the same inputs, so the step's results are bit-identical to no remat.
type rematMode string

// rematOf is cfg's remat for a trunk: none for the KV-cached graphs (they have no backward pass).
func rematOf(cfg Config, kv *kvState) rematMode {
	if kv != nil || cfg.Remat == "" {
		return modelcfg.RematNone
	}
	return rematMode(cfg.Remat)
}

// start marks x as the kept input of a recomputed block of kind k (when remat is k).
func (r rematMode) start(k string, x *Node) *Node {
	if string(r) != k {
		return x
	}
	return x.Checkpoint()
}

// end marks x as the end of a recomputed block of kind k: x is kept, and what is computed from
// it is not recomputed.
func (r rematMode) end(k string, x *Node) *Node {
	if string(r) != k {
		return x
	}
	return x.StopCheckpoint()
}

// keep ends recomputation at x under any remat: x is kept from the forward pass. The blocked
// attention kernel's inputs are kept so that the kernel (the quadratic part of a layer) runs once,
// in the forward, and its backward reads the outputs and log-sum-exps kept from it; they all grow
// linearly with the sequence. Recomputed, it would run twice in the backward pass: GoMLX rebuilds
// a node once as the input of its consumers' gradients (the output projection's) and once more
// for its own gradient.
func (r rematMode) keep(x *Node) *Node {
	if r == modelcfg.RematNone {
		return x
	}
	return x.StopCheckpoint()
}
