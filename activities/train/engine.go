package train

import (
	"io"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/sample"
)

// StepMetrics describes one training step or one loss evaluation.
type StepMetrics struct {
	Loss     float32
	GradNorm float32
	Tokens   int
	Seconds  float64
	FLOPs    float64
}

// EngineOptions choose the model and optimizer of an Engine.
type EngineOptions struct {
	Model model.Config
	Seed  uint64 // initialises the weights
	Optim trainapi.Optim
	// LoRA, when set, attaches adapters (B = 0) as the only trainable weights; the base weights stay
	// frozen and the engine's Caps().Adapters moves the adapters (see lora.go).
	LoRA *model.LoRA
}

// The engine seam, in the parts its consumers use: each activity takes the smallest part it needs,
// so that a test double implements only that part.

// WeightIO moves a model's weights and optimizer state in and out: all that loading and
// committing a checkpoint need (WriteModel, the loaders).
type WeightIO interface {
	LoadWeights(r io.Reader) error
	SaveWeights(w io.Writer) error
	LoadOptimizer(r io.Reader) error
	SaveOptimizer(w io.Writer) error
}

// Stepper trains and evaluates an objective on its own batch type (preference, policy gradient,
// PPO, reward model, distillation). Both return "loss", the objective's metrics and "seconds";
// StepObjective also "grad_norm". A non-finite step changes nothing.
type Stepper interface {
	StepObjective(obj objective.Objective, b objective.Batch, lr float32) (map[string]float32, error)
	EvalObjective(obj objective.Objective, b objective.Batch) (map[string]float32, error)
}

// LMTrainer is next-token training, the language-model family's step, bucketed and counted in FLOPs.
type LMTrainer interface {
	TrainStep(b data.TokenBatch, lr float32) (StepMetrics, error)
	EvalLoss(b data.TokenBatch) (StepMetrics, error)
}

// Scorer reads log p(Targets[r][t]) at every position of b ([rows][seq]): old, reference and
// held-out log-probs.
type Scorer interface {
	LogProbs(b data.TokenBatch) ([][]float32, error)
}

// Sampler generates completions: evaluation, rollouts, on-policy distillation.
type Sampler interface {
	Generate(prompts [][]int, opts sample.Options) ([]model.Completion, error)
}

// Engine runs one model's math: what NewEngine builds and the loaders hand out. *tpu.Runtime
// satisfies it through a thin adapter in workers.
type Engine interface {
	WeightIO
	Stepper
	LMTrainer
	Scorer
	Sampler
	// Caps reports what the engine can do beyond Engine, fixed when it was built (EngineOptions,
	// the model's heads): the loaders ask once and hand on the capability, or refuse the checkpoint.
	Caps() Caps
	Close() error
}

// Caps are an engine's optional capabilities; a nil field is one it lacks.
type Caps struct {
	// Adapters moves the LoRA adapters alone (PEFT adapter_model.safetensors): engines built with
	// EngineOptions.LoRA, whose SaveWeights/LoadWeights still move the base weights.
	Adapters AdapterIO
	// Values reads the value head: models with one (model.Config.ValueHead), PPO's critic.
	Values ValueReader
	// Logits reads the full next-token distributions: a distillation teacher.
	Logits LogitReader
}

// AdapterIO moves LoRA adapters in and out.
type AdapterIO interface {
	SaveAdapters(w io.Writer) error
	LoadAdapters(r io.Reader) error
}

// ValueReader reads a model's value head at every position of b, [rows][seq] (Targets and LossMask
// are ignored): PPO's critic V(s_t) before an iteration's updates, for GAE.
type ValueReader interface {
	Values(b data.TokenBatch) ([][]float32, error)
}

// Logits is a model's next-token logits [Batch, Seq, Vocab], flat row-major (tpu.Logits' layout).
type Logits struct {
	Batch, Seq, Vocab int
	Data              []float32
}

// LogitReader reads the full next-token logits of a batch (Targets and LossMask ignored).
type LogitReader interface {
	Logits(b data.TokenBatch) (Logits, error)
}

// NewEngine builds an Engine; workers supply one backed by tpu.
type NewEngine func(opts EngineOptions) (Engine, error)
