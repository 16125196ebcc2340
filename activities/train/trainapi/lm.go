package trainapi

import (
	"fmt"
	"path"
	"strings"

	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/verify"
	"github.com/temperml/temper/internal/config"
)

// Activity names, registered by workers on the trainer queue.
const (
	InitName     = "train.Init"
	ChunkName    = "train.Chunk"
	EvaluateName = "train.Evaluate"
)

// DataSpec says where examples come from: a built-in task generated from a seed, or JSONL files in the
// store (file:// or gs://).
type DataSpec struct {
	Task            string `json:"task,omitempty" help:"built-in task (temper data tasks); generated from the seed, no files needed"`
	TrainExamples   int    `json:"train_examples,omitempty" default:"2000" help:"examples drawn for training (built-in task)"`
	HeldoutExamples int    `json:"heldout_examples,omitempty" default:"200" help:"held-out examples, disjoint from training (built-in task)"`
	Train           string `json:"train,omitempty" help:"JSONL file URI (file:///... or gs://...) instead of a task"`
	Heldout         string `json:"heldout,omitempty" help:"held-out JSONL file URI"`
	Text            bool   `json:"text,omitempty" help:"train on prompt+completion as plain text (pretraining: every token counts)"`
	Seed            uint64 `json:"seed,omitempty" help:"data seed; 0 uses the pipeline seed"`
	ToolDemos       bool   `json:"tool_demos,omitempty" help:"agentic task (bigmul, smallmul, facts, route, add2check, addcheck): train on its tool-use demonstrations (multi-turn messages with the tool calls and their results; loss on the assistant's turns only) instead of direct answers"`
}

// Validate names the bad field.
func (d DataSpec) Validate() error {
	var agentic func(tasks.Task) error
	if d.ToolDemos {
		if d.Task == "" {
			return &config.FieldError{Path: "data.tool_demos", Msg: "needs an agentic built-in task (data.task); a file of demonstrations goes in data.train"}
		}
		agentic = func(t tasks.Task) error {
			if _, ok := t.(tasks.Agentic); !ok {
				return &config.FieldError{Path: "data.tool_demos", Msg: fmt.Sprintf("task %q has no tool-use demonstrations (agentic tasks: %s)", t.Name(), strings.Join(tasks.AgenticNames(), ", "))}
			}
			return nil
		}
	}
	return checkSource(d.Task, d.Train, d.Heldout, d.TrainExamples, d.HeldoutExamples, "data.train_examples", agentic)
}

// BatchSpec is the packed batch shape.
type BatchSpec struct {
	Rows int `json:"rows" default:"16" help:"rows per batch"`
	Seq  int `json:"seq" default:"64" help:"tokens per row (examples are packed)"`
}

// Validate names the bad field.
func (b BatchSpec) Validate() error { return checkBatch(b.Rows, "batch.seq", b.Seq) }

// Optim configures AdamW and the learning-rate schedule.
type Optim struct {
	LR          float64 `json:"lr" default:"0.003" help:"peak learning rate"`
	WarmupSteps int     `json:"warmup_steps" default:"20" help:"linear warmup steps"`
	MinLRRatio  float64 `json:"min_lr_ratio" default:"0.1" help:"cosine decays to lr*min_lr_ratio at the last step"`
	WeightDecay float64 `json:"weight_decay" default:"0.01" help:"decoupled weight decay (not on norms and biases)"`
	Beta1       float64 `json:"beta1" default:"0.9"`
	Beta2       float64 `json:"beta2" default:"0.99"`
	Eps         float64 `json:"eps" default:"1e-8"`
	ClipNorm    float64 `json:"clip_norm" default:"1" help:"global gradient-norm clip; negative disables"`
}

// Validate names the bad field.
func (o Optim) Validate() error {
	switch {
	case !(o.LR > 0 && o.LR < 10):
		return &config.FieldError{Path: "optimizer.lr", Msg: fmt.Sprintf("%g: want 0 < lr < 10", o.LR)}
	case o.WarmupSteps < 0:
		return &config.FieldError{Path: "optimizer.warmup_steps", Msg: "must be >= 0"}
	case o.MinLRRatio < 0 || o.MinLRRatio > 1:
		return &config.FieldError{Path: "optimizer.min_lr_ratio", Msg: "want 0..1"}
	case o.WeightDecay < 0:
		return &config.FieldError{Path: "optimizer.weight_decay", Msg: "must be >= 0"}
	case o.Beta1 <= 0 || o.Beta1 >= 1 || o.Beta2 <= 0 || o.Beta2 >= 1:
		return &config.FieldError{Path: "optimizer.beta1", Msg: "betas must be in (0, 1)"}
	}
	return nil
}

// InitInput asks for a fresh, seeded model committed as step 0 of a phase.
type InitInput struct {
	Store string          `json:"store"`
	Run   string          `json:"run"`
	Phase string          `json:"phase"`
	Model modelcfg.Config `json:"model"`
	Seed  uint64          `json:"seed"`
}

// InitOutput is the step-0 checkpoint.
type InitOutput struct {
	Checkpoint string `json:"checkpoint"`
}

// ChunkInput trains Steps next-token steps from From.
type ChunkInput struct {
	ChunkHead
	Data  DataSpec  `json:"data"`
	Batch BatchSpec `json:"batch"`
	// LoRA, when set, trains adapters on a frozen base instead of every weight (see lora.go).
	LoRA *modelcfg.LoRA `json:"lora,omitempty"`
}

// EvalInput evaluates a checkpoint on held-out data.
type EvalInput struct {
	Store      string   `json:"store"`
	Checkpoint string   `json:"checkpoint"`
	Data       DataSpec `json:"data"`
	// Examples caps how many held-out examples are used (0: all).
	Examples     int     `json:"examples"`
	MaxNewTokens int     `json:"max_new_tokens"`
	PassK        int     `json:"pass_k"`
	Temperature  float64 `json:"temperature"`
	Seed         uint64  `json:"seed"`
	// Sampling, when set, are the sampling controls of the generations (greedy exact match: the
	// repetition penalty and the stop strings; pass@k: all of them); nil: none.
	Sampling *sample.Controls `json:"sampling,omitempty"`
	// Log, when set, appends the metrics to the phase's metrics log.
	Log *LogAt `json:"log,omitempty"`
	// Tools, when set, evaluates agentic episodes: each held-out prompt is posed as the user's
	// message and the policy may call these tools for up to MaxTurns turns of MaxNewTokens tokens;
	// exact match checks the episode's final answer (no teacher-forced loss).
	Tools    []string `json:"tools,omitempty"`
	MaxTurns int      `json:"max_turns,omitempty"`
	// Verifiers, when set, score each greedy completion (metrics heldout_score and
	// heldout_score_<label>), and, with Log, the completions and their verdicts are kept in the
	// store at EvalSamplesKey: an evaluation-only yardstick that the reward never sees.
	Verifiers []verify.Component `json:"verifiers,omitempty"`
}

// EvalSamplesKey is where an evaluation with verifiers keeps its greedy completions (EvalSample
// lines) in the store: runs/RUN/PHASE/evals/step-NNNNNN.jsonl.
func EvalSamplesKey(run, phase string, step int) string {
	return path.Join("runs", run, phase, "evals", fmt.Sprintf("step-%06d.jsonl", step))
}

// EvalSample is one held-out greedy completion of an evaluation with verifiers, and its verdict.
type EvalSample struct {
	Index      int                `json:"index"`
	Prompt     string             `json:"prompt"`
	Completion string             `json:"completion"`
	Score      float64            `json:"score"`
	Partial    map[string]float64 `json:"partial,omitempty"`
}

// EvalOutput holds scalar metrics, named as they appear in pipeline results.
type EvalOutput struct {
	Metrics map[string]float64 `json:"metrics"`
}

// Progress is the heartbeat detail of Chunk and Evaluate (`temper run --wait` draws it).
type Progress struct {
	Step  int     `json:"step"`
	Total int     `json:"total"`
	Loss  float64 `json:"loss,omitempty"`
}

// RetainName marks the best checkpoint and prunes old ones.
const RetainName = "train.Retain"

// RetainInput keeps the newest KeepLast checkpoints of a phase plus every one marked best.
type RetainInput struct {
	Store    string `json:"store"`
	Run      string `json:"run"`
	Phase    string `json:"phase"`
	KeepLast int    `json:"keep_last"`
	Best     string `json:"best,omitempty"` // marked best first, so it survives
}

// checkDataURIs names data.train or data.heldout when it is set to something other than a file:// or
// gs:// URI (whether the object exists is the precheck's and the reader's business).
func checkDataURIs(trainURI, heldoutURI string) error {
	for _, f := range []struct{ path, uri string }{{"data.train", trainURI}, {"data.heldout", heldoutURI}} {
		if f.uri != "" && !strings.HasPrefix(f.uri, "file:///") && !strings.HasPrefix(f.uri, "gs://") {
			return &config.FieldError{Path: f.path, Msg: fmt.Sprintf("%q: want file:///abs/file.jsonl or gs://bucket/file.jsonl", f.uri)}
		}
	}
	return nil
}

// checkSource validates a data source that is a built-in task or JSONL files, not both: the task
// must exist (and pass taskOK, when given) and draw trainN > 0 and heldN >= 0 examples (countPath
// names the field); the files must be file:// or gs:// URIs.
func checkSource(task, trainURI, heldoutURI string, trainN, heldN int, countPath string, taskOK func(tasks.Task) error) error {
	switch {
	case task == "" && trainURI == "":
		return &config.FieldError{Path: "data", Msg: "set task (one of " + strings.Join(tasks.Names(), ", ") + ") or train (a JSONL URI)"}
	case task != "" && trainURI != "":
		return &config.FieldError{Path: "data", Msg: "set task or train, not both"}
	case task == "":
		return checkDataURIs(trainURI, heldoutURI)
	}
	t, err := tasks.Lookup(task)
	if err != nil {
		return &config.FieldError{Path: "data.task", Msg: err.Error()}
	}
	if taskOK != nil {
		if err := taskOK(t); err != nil {
			return err
		}
	}
	if trainN <= 0 || heldN < 0 {
		return &config.FieldError{Path: countPath, Msg: fmt.Sprintf("%d train / %d held-out: want > 0 and >= 0", trainN, heldN)}
	}
	return nil
}

// checkBatch validates a batch shape: 1..4096 rows of 2..8192 tokens (seqPath names the field).
func checkBatch(rows int, seqPath string, seq int) error {
	switch {
	case rows < 1 || rows > 4096:
		return &config.FieldError{Path: "batch.rows", Msg: fmt.Sprintf("%d: want 1..4096", rows)}
	case seq < 2 || seq > 8192:
		return &config.FieldError{Path: seqPath, Msg: fmt.Sprintf("%d: want 2..8192", seq)}
	}
	return nil
}

// LogAt says where an evaluation records its metrics: the metrics log of Run/Phase (ckpt.MetricsLogKey)
// at Step, the phase's step or RL iteration whose checkpoint was evaluated. Nil records nothing.
type LogAt struct {
	Run   string `json:"run"`
	Phase string `json:"phase"`
	Step  int    `json:"step"`
}
