package train

import (
	"io"

	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/activities/train/contract"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/sample"
)

// Batch is one [rows, seq] batch of host data, aligned for next-token training: Targets[r][t] is the
// token to predict after Tokens[r][t]; LossMask weighs it; Valid marks tokens attention may see. It is
// the runtime's batch type too (data.TokenBatch), so engines take it without conversion.
type Batch = data.TokenBatch

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
	Optim contract.Optim
	// LoRA, when set, asks for an AdapterEngine: adapters attached (B = 0) and the only trainable
	// weights; the base weights stay frozen (see lora.go).
	LoRA *model.LoRA
}

// WeightIO moves a model's weights and optimizer state in and out: all that loading and
// committing a checkpoint need (WriteModel, the loaders).
type WeightIO interface {
	LoadWeights(r io.Reader) error
	SaveWeights(w io.Writer) error
	LoadOptimizer(r io.Reader) error
	SaveOptimizer(w io.Writer) error
}

// Engine runs one model's math: what NewEngine builds and the loaders hand out. *tpu.Runtime
// satisfies it through a thin adapter in workers. Code that uses part of it takes a small interface
// declared beside it instead (WeightIO here; preference's scorer and sampler; policy's
// objectiveStepper and ValueReader), so a test double implements only what is used.
type Engine interface {
	WeightIO
	TrainStep(b Batch, lr float32) (StepMetrics, error)
	EvalLoss(b Batch) (StepMetrics, error)
	Generate(prompts [][]int, opts sample.Options) ([]model.Completion, error)
	// LogProbs returns log p(Targets[r][t]) for every position of b ([rows][seq]).
	LogProbs(b Batch) ([][]float32, error)
	// StepObjective trains one step of a custom objective (preference, policy gradient, reward
	// model); EvalObjective evaluates it without updating. Both return "loss" and the metrics.
	StepObjective(obj objective.Objective, inputs []*tensors.Tensor, lr float32) (map[string]float32, error)
	EvalObjective(obj objective.Objective, inputs []*tensors.Tensor) (map[string]float32, error)
	Close() error
}

// NewEngine builds an Engine; workers supply one backed by tpu.
type NewEngine func(opts EngineOptions) (Engine, error)
