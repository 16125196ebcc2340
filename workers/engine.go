package workers

import (
	"time"

	"io"

	"github.com/temperml/temper/activities/rollout/gateway"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/safetensors"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/tpu"
)

// EngineOptions tune the tpu runtimes that back the trainer's engines.
type EngineOptions struct {
	Backend  string // "go" (default) or "xla"
	Executor string // "sequential" (default, bit-reproducible) or "parallel"
	Plugin   string // PJRT plugin for xla
	// MemoryBudget (bytes; 0: none) is tpu.Options.MemoryBudget: a step whose estimated
	// intermediate memory exceeds it recomputes activations per layer (model.remat unset only).
	MemoryBudget int64
	// ExecTimeout is the watchdog of one execution (tpu.Options.ExecTimeout; 0: tpu's default,
	// negative: none): a benchmark of a real-size model on a shared machine outlasts the default.
	ExecTimeout time.Duration
}

// NewTrainEngine returns the train.NewEngine that workers give the trainer activities: one tpu runtime
// per call, sequential executor by default so that retried chunks recompute bit-identical weights.
func NewTrainEngine(eo EngineOptions) train.NewEngine {
	return func(o train.EngineOptions) (train.Engine, error) {
		rt, err := tpu.New(tpu.Options{
			Model: o.Model, Seed: o.Seed, LoRA: o.LoRA, Backend: eo.Backend, Executor: eo.Executor, Plugin: eo.Plugin, ExecTimeout: eo.ExecTimeout,
			MemoryBudget: eo.MemoryBudget,
			Optimizer:    tpu.AdamW{Beta1: o.Optim.Beta1, Beta2: o.Optim.Beta2, Eps: o.Optim.Eps, WeightDecay: o.Optim.WeightDecay, ClipNorm: o.Optim.ClipNorm},
		})
		if err != nil {
			return nil, err
		}
		return engine{rt}, nil
	}
}

var (
	_ train.AdapterIO   = engine{}
	_ train.ValueReader = engine{}
	_ train.LogitReader = engine{}
	_ gateway.Decoders  = engine{}
)

// engine adapts *tpu.Runtime to train.Engine: the batch is the same type; the metrics have the same fields.
type engine struct{ rt *tpu.Runtime }

// Caps offers the adapters of a runtime built with LoRA and the value head of a model that has one;
// every runtime reads logits.
func (e engine) Caps() train.Caps {
	c := train.Caps{Logits: e}
	if _, ok := e.rt.LoRA(); ok {
		c.Adapters = e
	}
	if e.rt.Config().ValueHead {
		c.Values = e
	}
	return c
}

func (e engine) LoadWeights(r io.Reader) error   { return e.rt.LoadWeights(r) }
func (e engine) SaveWeights(w io.Writer) error   { return e.rt.SaveWeights(w, safetensors.F32) }
func (e engine) LoadOptimizer(r io.Reader) error { return e.rt.LoadOptimizer(r) }
func (e engine) SaveOptimizer(w io.Writer) error { return e.rt.SaveOptimizer(w) }
func (e engine) Close() error                    { return e.rt.Close() }
func (e engine) SaveAdapters(w io.Writer) error  { return e.rt.SaveAdapters(w) }
func (e engine) LoadAdapters(r io.Reader) error  { return e.rt.LoadAdapters(r) }

// NewDecoder starts a continuous batch of the runtime's model: an agent episode's gateway serves the
// policy through it (it makes engine a gateway.Decoders).
func (e engine) NewDecoder() (gateway.Decoder, error) {
	d, err := e.rt.NewDecoder()
	if err != nil {
		return nil, err
	}
	return d, nil
}

// LoRA reports the adapters attached to the runtime (tests tell an adapter engine from a merged one).
func (e engine) LoRA() (model.LoRA, bool) { return e.rt.LoRA() }

func (e engine) TrainStep(b data.TokenBatch, lr float32) (train.StepMetrics, error) {
	m, err := e.rt.TrainStep(b, lr)
	return train.StepMetrics(m), err
}

func (e engine) EvalLoss(b data.TokenBatch) (train.StepMetrics, error) {
	m, err := e.rt.EvalLoss(b)
	return train.StepMetrics(m), err
}

func (e engine) Generate(prompts [][]int, opts sample.Options) ([]model.Completion, error) {
	return e.rt.Generate(prompts, opts)
}

func (e engine) LogProbs(b data.TokenBatch) ([][]float32, error) { return e.rt.LogProbs(b) }

// Logits reads the full next-token logits (a distillation teacher's).
func (e engine) Logits(b data.TokenBatch) (train.Logits, error) {
	l, err := e.rt.Logits(b)
	return train.Logits(l), err
}

// Values reads the value head at every position (PPO's critic).
func (e engine) Values(b data.TokenBatch) ([][]float32, error) { return e.rt.Values(b) }

func (e engine) StepObjective(obj objective.Objective, b objective.Batch, lr float32) (map[string]float32, error) {
	return e.rt.StepObjective(obj, b, lr)
}

func (e engine) EvalObjective(obj objective.Objective, b objective.Batch) (map[string]float32, error) {
	return e.rt.EvalObjective(obj, b)
}
