package tpu

import (
	"cmp"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX graph code reads best unqualified.
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/model"
)

// AdamW configures the optimizer (PyTorch's torch.optim.AdamW update, decoupled weight decay).
type AdamW struct {
	Beta1 float64 `json:"beta1"` // 0 → 0.9
	Beta2 float64 `json:"beta2"` // 0 → 0.999
	Eps   float64 `json:"eps"`   // 0 → 1e-8
	// WeightDecay is applied to every weight but RMSNorm scales and biases; 0 means no decay.
	WeightDecay float64 `json:"weight_decay"`
	// ClipNorm caps the global L2 norm of the gradient; 0 → 1.0, negative → no clipping.
	ClipNorm float64 `json:"clip_norm"`
}

func (a AdamW) withDefaults() AdamW {
	a.Beta1 = cmp.Or(a.Beta1, 0.9)
	a.Beta2 = cmp.Or(a.Beta2, 0.999)
	a.Eps = cmp.Or(a.Eps, 1e-8)
	a.ClipNorm = cmp.Or(a.ClipNorm, 1)
	return a
}

// Validate checks the hyperparameters (after defaults).
func (a AdamW) Validate() error {
	a = a.withDefaults()
	switch {
	case !(a.Beta1 > 0 && a.Beta1 < 1):
		return fmt.Errorf("tpu: options: optimizer.beta1=%g: must be in (0, 1)", a.Beta1)
	case !(a.Beta2 > 0 && a.Beta2 < 1):
		return fmt.Errorf("tpu: options: optimizer.beta2=%g: must be in (0, 1)", a.Beta2)
	case !(a.Eps > 0):
		return fmt.Errorf("tpu: options: optimizer.eps=%g: must be > 0", a.Eps)
	case !(a.WeightDecay >= 0) || math.IsInf(a.WeightDecay, 0):
		return fmt.Errorf("tpu: options: optimizer.weight_decay=%g: must be >= 0", a.WeightDecay)
	case math.IsNaN(a.ClipNorm) || math.IsInf(a.ClipNorm, 0):
		return fmt.Errorf("tpu: options: optimizer.clip_norm=%g: must be finite", a.ClipNorm)
	}
	return nil
}

// Decays reports whether weight decay applies to the model variable at path: not to norm
// scales, biases nor the reward's log-prob weight (a scalar gain, like a scale). Biases are
// named "…_bias" or, for the vision tower's LayerNorms and value head, "…/bias" (no decoder
// variable is).
func Decays(path string) bool {
	return !strings.HasSuffix(path, "/scale") && !strings.HasSuffix(path, "_bias") && !strings.HasSuffix(path, "/bias") &&
		path != model.VarValueB && path != model.VarValueLP
}

// StepMetrics describes one training step (or one EvalLoss).
type StepMetrics struct {
	Loss     float32 `json:"loss"`      // weighted mean cross-entropy over the counted targets
	GradNorm float32 `json:"grad_norm"` // global L2 norm before clipping (0 for EvalLoss)
	Tokens   int     `json:"tokens"`    // targets with a non-zero loss weight
	// Seconds is the execution time (compile excluded); FLOPs the model FLOPs of the real tokens.
	Seconds float64 `json:"seconds"`
	FLOPs   float64 `json:"flops"`
}

// adamState holds the AdamW variables, created at the first step (inference never pays for them).
type adamState struct {
	m, v []*gm.Variable // per model variable, same order as Runtime.params
	step *gm.Variable   // int64 scalar: steps applied
}

const (
	optScope = "adamw"
	optM     = "m"
	optV     = "v"
	optStep  = "step"
)

// ensureOptimizer creates zero moments and step 0 if they do not exist yet (r.mu held).
func (r *Runtime) ensureOptimizer() error {
	if r.opt != nil {
		return nil
	}
	root := r.store.RootScope().At(optScope)
	st := &adamState{}
	for _, kind := range []string{optM, optV} {
		for _, spec := range r.specs {
			s, name := model.SubScope(root.At("%s", kind), spec.Path)
			v, err := s.CreateVariable(name, tensors.FromShape(shapes.Make(dtypes.Float32, spec.Shape...)))
			if err != nil {
				return fmt.Errorf("create optimizer variable %s/%s: %w", kind, spec.Path, err)
			}
			v.SetTrainable(false)
			if kind == optM {
				st.m = append(st.m, v)
			} else {
				st.v = append(st.v, v)
			}
		}
	}
	step, err := root.CreateVariable(optStep, tensors.FromScalar(int64(0)))
	if err != nil {
		return fmt.Errorf("create optimizer step: %w", err)
	}
	step.SetTrainable(false)
	st.step = step
	r.opt = st
	return nil
}

// trainGraph is the whole training step.
//
//	in: tokens, targets [b, t] int32; loss mask [b, t] float32; positions [b, t] int32;
//	    valid [b, t] bool; lr [] float32
//	out: loss [], grad norm [] (before clipping)
//
// Weights, moments and step are updated through their variables (model.Exec writes them back);
// when the loss or the gradient norm is not finite they keep their values.
func (r *Runtime) trainGraph(in []*Node) []*Node {
	tok, tgt, mask, pos, valid, lr := in[0], in[1], in[2], in[3], in[4], in[5]
	r.markTraining(tok.Graph())
	logits := model.Forward(r.scope, r.cfg, tok, pos, valid)
	loss := model.CrossEntropy(logits, tgt, mask)

	gnorm := r.adamUpdate(loss, lr)
	return []*Node{loss, gnorm}
}

// adamUpdate differentiates loss with respect to every trainable variable (r.params: the model
// weights, or only the LoRA adapters), clips the gradient by global norm and applies one AdamW
// update to them and their moments through their variables. It returns the gradient norm before
// clipping. When the loss or the norm is not finite nothing changes.
func (r *Runtime) adamUpdate(loss, lr *Node) *Node {
	g := loss.Graph()
	o := r.opts.Optimizer
	specs := r.specs
	ws := make([]*Node, len(r.params))
	for i, p := range r.params {
		ws[i] = p.NodeValue(g)
	}
	grads := Gradient(loss, ws...)
	var sumSq *Node
	for _, gr := range grads {
		s := ReduceAllSum(Square(gr))
		if sumSq == nil {
			sumSq = s
		} else {
			sumSq = Add(sumSq, s)
		}
	}
	gnorm := Sqrt(sumSq)
	ok := LogicalAnd(IsFinite(loss), IsFinite(gnorm))
	// A non-finite step must change nothing. Rather than selecting old or new values for every
	// weight and both moments (three more passes over the parameters), the gradient is zeroed (one
	// select) and the scalars are gated: β1, β2 become 1, their complements and the learning rate
	// 0, so each update below is an exact identity (x·1 + 0·0 = x; w·1 − finite·0 = w).
	f32 := dtypes.Float32
	zero, one := ScalarZero(g, f32), ScalarOne(g, f32)
	gate := func(v float64, off *Node) *Node { return Where(ok, Scalar(g, f32, v), off) }
	beta1, comp1 := gate(o.Beta1, one), gate(1-o.Beta1, zero)
	beta2, comp2 := gate(o.Beta2, one), gate(1-o.Beta2, zero)
	lrOK := Where(ok, lr, zero)
	var scale *Node
	if o.ClipNorm > 0 {
		scale = MinScalar(Div(Scalar(g, f32, o.ClipNorm), AddScalar(gnorm, 1e-6)), 1.0)
	}

	step := r.opt.step.NodeValue(g)
	tf := ConvertDType(AddScalar(step, 1), f32)
	bc1 := OneMinus(Pow(Scalar(g, f32, o.Beta1), tf)) // 1-β1^t
	sqrtBC2 := Sqrt(OneMinus(Pow(Scalar(g, f32, o.Beta2), tf)))
	// torch: w -= lr/bc1 · m/(√v/√bc2 + ε), computed as (lr·√bc2/bc1) · m/(√v + ε·√bc2): one
	// pass fewer over the parameters.
	stepSize := Div(Mul(lrOK, sqrtBC2), bc1)
	epsScaled := MulScalar(sqrtBC2, o.Eps)
	decay := OneMinus(MulScalar(lrOK, o.WeightDecay))

	for i, p := range r.params {
		gr := grads[i]
		if scale != nil {
			gr = Mul(gr, scale)
		}
		gr = Where(ok, gr, zero)
		m, v, w := r.opt.m[i].NodeValue(g), r.opt.v[i].NodeValue(g), ws[i]
		m2 := Add(Mul(m, beta1), Mul(gr, comp1))
		v2 := Add(Mul(v, beta2), Mul(Square(gr), comp2))
		w2 := w
		if o.WeightDecay > 0 && Decays(specs[i].Path) {
			w2 = Mul(w2, decay)
		}
		w2 = Sub(w2, Mul(Div(m2, Add(Sqrt(v2), epsScaled)), stepSize))
		p.SetNodeValue(w2)
		r.opt.m[i].SetNodeValue(m2)
		r.opt.v[i].SetNodeValue(v2)
	}
	r.opt.step.SetNodeValue(Add(step, ConvertDType(ok, dtypes.Int64)))
	return gnorm
}

// TrainStep runs one optimizer step on b with learning rate lr: forward, masked cross-entropy,
// gradients, clipping and AdamW, as one executable per (batch, seq) bucket.
func (r *Runtime) TrainStep(b data.TokenBatch, lr float32) (StepMetrics, error) {
	const op = "train step"
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usable(op); err != nil {
		return StepMetrics{}, err
	}
	if !(lr >= 0) || math.IsInf(float64(lr), 0) {
		return StepMetrics{}, fmt.Errorf("tpu: %s: lr=%g: must be finite and >= 0", op, lr)
	}
	p, err := r.pad(b, true)
	if err != nil {
		return StepMetrics{}, fmt.Errorf("tpu: %s: %w", op, err)
	}
	var m StepMetrics
	err = r.guard(op, func() error {
		if err := r.ensureOptimizer(); err != nil {
			return err
		}
		outs, sec, err := r.run(CacheKey{"train", p.shape()}, r.trainGraph,
			[]shapes.Shape{i32(p), i32(p), f32(p), i32(p), boolean(p), shapes.Make(dtypes.Float32)},
			p.tokens(), p.targets(), p.lossMask(), p.positions(), p.validMask(), tensors.FromScalar(lr))
		if err != nil {
			return err
		}
		defer finalize(outs)
		m = StepMetrics{Loss: tensors.ToScalar[float32](outs[0]), GradNorm: tensors.ToScalar[float32](outs[1]),
			Tokens: p.counted, Seconds: sec, FLOPs: p.flops(r.cfg, true)}
		return nil
	})
	if err != nil {
		return StepMetrics{}, err
	}
	r.record(&r.stats.Train, p.b*p.t, m.Seconds, m.FLOPs)
	return m, nil
}

func i32(p padded) shapes.Shape     { return shapes.Make(dtypes.Int32, p.pb, p.pt) }
func f32(p padded) shapes.Shape     { return shapes.Make(dtypes.Float32, p.pb, p.pt) }
func boolean(p padded) shapes.Shape { return shapes.Make(dtypes.Bool, p.pb, p.pt) }

func finalize(ts []*tensors.Tensor) {
	for _, t := range ts {
		_ = t.FinalizeAll()
	}
}

// run fetches (compiling on a miss) the executable of key and calls it; it returns the outputs
// and the execution time (compile excluded). Call inside guard.
func (r *Runtime) run(key CacheKey, graphFn func(in []*Node) []*Node, in []shapes.Shape, args ...any) ([]*tensors.Tensor, float64, error) {
	exec, err := r.cache.get(key, func() (*gm.Exec, error) {
		e, _, err := r.compile(graphFn, in, false) // memory.go: remat when over Options.MemoryBudget
		return e, err
	})
	if err != nil {
		return nil, 0, err
	}
	start := time.Now()
	outs, err := exec.Call(args...)
	if err != nil {
		return nil, 0, fmt.Errorf("execute %s: %w", key, err)
	}
	return outs, time.Since(start).Seconds(), nil
}
