package tpu

import (
	"fmt"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX graph code reads best unqualified.
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/model/modelcfg"
)

// memoryEstimator is what a compiled executable of the Go backend (Temper's compute fork) says
// about its memory: the largest total of intermediate values live at once when it runs
// sequentially in its schedule. Other backends do not have it.
type memoryEstimator interface{ EstimatedTemporaryMemory() int64 }

// MemoryPlan is how a compiled step computes and what it is estimated to hold.
type MemoryPlan struct {
	// Remat is the model's remat the executable was built with ("none" when unset and under budget).
	Remat string `json:"remat"`
	// EstimateBytes is the executor's estimate of the intermediate values live at once (the
	// activations and gradients of a training step; weights, optimizer state and inputs not
	// included); -1 on backends without an estimate, or when nothing asked for it.
	EstimateBytes int64 `json:"estimate_bytes"`
}

// compile builds and compiles graphFn for the input shapes. With Options.MemoryBudget set and the
// model's Remat unset, a graph whose estimated memory exceeds the budget is built again with remat
// "layer", which is kept if its estimate is lower (a graph without a backward pass gains nothing).
// The graph functions read the model config from r.cfg, which holds the config being built while
// they run (r.mu is held).
func (r *Runtime) compile(graphFn func(in []*Node) []*Node, in []shapes.Shape, estimate bool) (*gm.Exec, MemoryPlan, error) {
	budget := r.opts.MemoryBudget > 0 && r.cfg.Remat == ""
	e, plan, err := r.compileWith(r.cfg, graphFn, in, estimate || budget)
	if err != nil || !budget || plan.EstimateBytes <= r.opts.MemoryBudget {
		return e, plan, err
	}
	cfg := r.cfg.Clone()
	cfg.Remat = modelcfg.RematLayer
	e2, plan2, err := r.compileWith(cfg, graphFn, in, true)
	if err != nil {
		e.Finalize()
		return nil, MemoryPlan{}, err
	}
	if plan2.EstimateBytes < plan.EstimateBytes {
		e.Finalize()
		return e2, plan2, nil
	}
	e2.Finalize()
	return e, plan, nil
}

// compileWith compiles graphFn with the model config cfg, and estimates its memory if asked (a
// walk over the schedule).
func (r *Runtime) compileWith(cfg model.Config, graphFn func(in []*Node) []*Node, in []shapes.Shape, estimate bool) (*gm.Exec, MemoryPlan, error) {
	saved := r.cfg
	r.cfg = cfg
	defer func() { r.cfg = saved }()
	plan := MemoryPlan{Remat: cfg.Remat, EstimateBytes: -1}
	if plan.Remat == "" {
		plan.Remat = modelcfg.RematNone
	}
	e, err := gm.NewExec(r.backend, r.store, func(_ *gm.Scope, nodes []*Node) []*Node { return graphFn(nodes) })
	if err != nil {
		return nil, plan, err
	}
	e.SetMaxCache(1)
	g, err := e.Compile(in...)
	if err != nil {
		e.Finalize()
		return nil, plan, err
	}
	if est, ok := g.Executable().(memoryEstimator); ok && estimate {
		plan.EstimateBytes = est.EstimatedTemporaryMemory()
	}
	return e, plan, nil
}

// TrainStepMemory compiles (without running) the training step of a batch bucket of rows × seq
// tokens and says how it would compute: the remat the memory budget picks and the executor's
// estimate of the step's intermediate memory. Nothing is allocated but the graph.
func (r *Runtime) TrainStepMemory(rows, seq int) (plan MemoryPlan, err error) {
	const op = "train step memory"
	r.mu.Lock()
	defer r.mu.Unlock()
	if rows <= 0 || seq <= 0 {
		return MemoryPlan{}, fmt.Errorf("tpu: %s: rows=%d seq=%d: must be > 0", op, rows, seq)
	}
	err = r.guard(op, func() error {
		if err := r.ensureOptimizer(); err != nil {
			return err
		}
		b := func(d dtypes.DType) shapes.Shape { return shapes.Make(d, rows, seq) }
		e, p, err := r.compile(r.trainGraph, []shapes.Shape{b(dtypes.Int32), b(dtypes.Int32), b(dtypes.Float32),
			b(dtypes.Int32), b(dtypes.Bool), shapes.Make(dtypes.Float32)}, true)
		if err != nil {
			return err
		}
		e.Finalize()
		plan = p
		return nil
	})
	return plan, err
}
