package trainapi

import "github.com/temperml/temper/algorithms/data"

// ChunkHead is what every chunk input shares: the phase's checkpoint to start from, the slice of the
// phase's steps (and so of its LR schedule) the chunk trains, and the data position.
type ChunkHead struct {
	Store string `json:"store"`
	Run   string `json:"run"`
	Phase string `json:"phase"`
	From  string `json:"from"`
	// Step is the phase's step count at From; the chunk commits step Step+Steps.
	Step       int         `json:"step"`
	Steps      int         `json:"steps"`
	TotalSteps int         `json:"total_steps"`
	Cursor     data.Cursor `json:"cursor"`
	Optim      Optim       `json:"optim"`
	// FreshOptimizer ignores From's optimizer state (a phase starting from another phase's model).
	FreshOptimizer bool `json:"fresh_optimizer"`
	// InjectNaNAt (testing) treats the phase's step N (1-based) as the engine treats a non-finite
	// step: its batch is consumed and nothing else changes. The engine's own skip is tested in tpu/.
	InjectNaNAt int `json:"inject_nan_at,omitempty"`
}

// ChunkOutput is the committed checkpoint of any chunk (language model, preference, reward model)
// and what happened on the way. Every value is finite, so Temporal's JSON converter can carry it:
// means are over the chunk's finite steps (0 when there were none) and NonFinite counts the others.
type ChunkOutput struct {
	Checkpoint string      `json:"checkpoint"`
	Step       int         `json:"step"`
	Cursor     data.Cursor `json:"cursor"`
	Loss       float64     `json:"loss"`      // mean over the chunk's finite steps
	LastLoss   float64     `json:"last_loss"` // the final step's (0 when it was not finite)
	GradNorm   float64     `json:"grad_norm"` // mean over the finite steps
	LR         float64     `json:"lr"`        // of the last step
	NonFinite  int         `json:"non_finite"`
	Seconds    float64     `json:"seconds"` // engine time of the chunk's steps
	// Metrics are the chunk means of the objective's own metrics (rewards/margin, accuracy, ...)
	// and its throughput (tokens and tokens_per_s, pairs and pairs_per_s, rows and rows_per_s).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	Resumed bool               `json:"resumed"` // the checkpoint was already committed by an earlier attempt
}

// Checkpoint file names.
const (
	ModelFile     = "model.safetensors"
	OptimizerFile = "optimizer.safetensors"
	ConfigFile    = "config.json" // Hugging Face config of the model
)

// CriticFile holds a PPO policy's value head (score.weight [1, d], score.bias [1]) beside its
// model.safetensors. The head lives in its own file so that model.safetensors stays a plain causal
// LM: rollout, evaluation, later phases and Hugging Face export read a PPO checkpoint like any other,
// and only the PPO trainer puts the critic back on the trunk.
const CriticFile = "critic.safetensors"
