package tpu

import (
	"fmt"
	"math"
	"strings"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/algorithms/objective"
)

// StepObjective runs one optimizer step of obj on its batch b (host tensors, no padding applied: the
// caller keeps shapes in a few buckets to bound compilation). It returns "loss", "grad_norm" and the
// objective's metrics. A non-finite loss or gradient changes nothing (as TrainStep).
func (r *Runtime) StepObjective(obj objective.Objective, b objective.Batch, lr float32) (map[string]float32, error) {
	op := "step " + obj.Name
	if !(lr >= 0) || math.IsInf(float64(lr), 0) {
		return nil, fmt.Errorf("tpu: %s: lr=%g: must be finite and >= 0", op, lr)
	}
	return r.runObjective(op, obj, b, &lr)
}

// EvalObjective computes obj's loss and metrics on its batch b without updating anything.
func (r *Runtime) EvalObjective(obj objective.Objective, b objective.Batch) (map[string]float32, error) {
	return r.runObjective("eval "+obj.Name, obj, b, nil)
}

func (r *Runtime) runObjective(op string, obj objective.Objective, b objective.Batch, lr *float32) (map[string]float32, error) {
	build := func(in []*Node) (*Node, map[string]*Node) { return obj.Build(r.scope, r.cfg, in) }
	return r.runLoss(op, "", lossGraph{name: obj.Name, metrics: obj.Metrics, build: build, training: true}, b, lr)
}

// lossGraph is what runLoss needs of an objective: its name (part of the cache key), its metric
// names in reporting order, its graph with the model's configuration bound, and whether the graph
// is marked as training (the decoder's: remat and blocked attention read it).
type lossGraph struct {
	name     string
	metrics  []string
	build    func(in []*Node) (loss *Node, metrics map[string]*Node)
	training bool
}

// runLoss runs one AdamW step of g on batch b (lr != nil) or evaluates it (lr nil), for the decoder
// and the vision tower alike; kind prefixes the cache key ("vision-" for the tower).
func (r *Runtime) runLoss(op, kind string, g lossGraph, b objective.Batch, lr *float32) (map[string]float32, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usable(op); err != nil {
		return nil, err
	}
	if g.name == "" || g.build == nil {
		return nil, fmt.Errorf("tpu: %s: objective needs a name and a build function", op)
	}
	inputs, err := batchTensors(b)
	if err != nil {
		return nil, fmt.Errorf("tpu: %s: %w", op, err)
	}
	in := make([]shapes.Shape, len(inputs))
	args := make([]any, len(inputs))
	var key strings.Builder
	key.WriteString(g.name)
	for i, t := range inputs {
		in[i], args[i] = t.Shape(), t
		fmt.Fprintf(&key, ";%s", t.Shape())
	}
	train := lr != nil
	if train {
		in = append(in, shapes.Make(dtypes.Float32))
		args = append(args, tensors.FromScalar(*lr))
	}
	n := len(inputs)
	graphFn := func(nodes []*Node) []*Node {
		if g.training && train && n > 0 {
			r.markTraining(nodes[0].Graph())
		}
		loss, metrics := g.build(nodes[:n])
		if loss.Shape().Rank() != 0 {
			panic(fmt.Sprintf("objective %s: loss has shape %s, want a scalar", g.name, loss.Shape()))
		}
		outs := []*Node{loss}
		if train {
			outs = append(outs, r.adamUpdate(loss, nodes[n]))
		} else {
			outs = append(outs, ScalarZero(loss.Graph(), loss.DType()))
		}
		for _, name := range g.metrics {
			m, ok := metrics[name]
			if !ok {
				m = ScalarZero(loss.Graph(), loss.DType())
			}
			outs = append(outs, ConvertDType(m, loss.DType()))
		}
		return outs
	}
	if train {
		kind += "step"
	} else {
		kind += "eval"
	}
	out := map[string]float32{}
	err = r.guard(op, func() error {
		if train {
			if err := r.ensureOptimizer(); err != nil {
				return err
			}
		}
		outs, sec, err := r.run(CacheKey{kind + ":" + g.name, key.String()}, graphFn, in, args...)
		if err != nil {
			return err
		}
		defer finalize(outs)
		out["loss"] = tensors.ToScalar[float32](outs[0])
		if train {
			out["grad_norm"] = tensors.ToScalar[float32](outs[1])
		}
		for i, name := range g.metrics {
			out[name] = tensors.ToScalar[float32](outs[2+i])
		}
		out["seconds"] = float32(sec)
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// batchTensors lays b out; a batch whose rows are ragged or empty panics while packing them, which
// the runtime reports as an error (host code does not panic).
func batchTensors(b objective.Batch) (ts []*tensors.Tensor, err error) {
	if b == nil {
		return nil, fmt.Errorf("no batch")
	}
	defer func() {
		if p := recover(); p != nil {
			ts, err = nil, fmt.Errorf("batch %T: %v", b, p)
		}
	}()
	return b.Tensors(), nil
}
