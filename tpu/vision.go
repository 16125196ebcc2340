package tpu

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX graph code reads best unqualified.
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/imageproc"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/vision"
	"github.com/temperml/temper/algorithms/vision/visioncfg"
)

// VisionOptions configures a VisionRuntime: a vision reward model (the SigLIP tower of
// algorithms/vision with a value head) on the same backends, executor, optimizer and watchdog as
// a decoder's Runtime.
type VisionOptions struct {
	Model     visioncfg.Config `json:"model"`
	Seed      uint64           `json:"seed"` // initialises the weights (vision.InitReward)
	Backend   string           `json:"backend"`
	Executor  string           `json:"executor"`
	Plugin    string           `json:"plugin"`
	Optimizer AdamW            `json:"optimizer"`
	MaxExecs  int              `json:"max_execs"`
	// ExecTimeout bounds one execution (Options.ExecTimeout).
	ExecTimeout time.Duration `json:"exec_timeout"`
}

// VisionRuntime trains and runs a vision reward model. It is a Runtime whose variables are the
// tower's and the value head's (vision.RewardVariables): executions, the watchdog, the compiled-
// executable cache, AdamW (the same update, decay rule Decays) and its saved state are the
// decoder's, so a vision step has the decoder step's guarantees (a non-finite step changes
// nothing; same seed and batches give bit-identical weights on the sequential executor).
type VisionRuntime struct {
	rt  *Runtime
	cfg visioncfg.Config
}

// NewVision creates a VisionRuntime with freshly initialised weights.
func NewVision(o VisionOptions) (vr *VisionRuntime, err error) {
	defer recoverInto("new vision", &err)
	if err := o.Model.Validate(); err != nil {
		return nil, fmt.Errorf("tpu: new vision: %w", err)
	}
	opts := Options{Backend: o.Backend, Executor: o.Executor, Plugin: o.Plugin, Optimizer: o.Optimizer, MaxExecs: o.MaxExecs, ExecTimeout: o.ExecTimeout}
	opts = opts.withDefaults()
	if err := opts.Optimizer.Validate(); err != nil {
		return nil, err
	}
	if opts.Backend != BackendGo && opts.Backend != BackendXLA {
		return nil, fmt.Errorf("tpu: new vision: backend=%q: allowed %q, %q", opts.Backend, BackendGo, BackendXLA)
	}
	if opts.Backend == BackendGo && opts.Executor != ExecutorSequential && opts.Executor != ExecutorParallel {
		return nil, fmt.Errorf("tpu: new vision: executor=%q: allowed %q, %q", opts.Executor, ExecutorSequential, ExecutorParallel)
	}
	backend, err := newBackend(opts)
	if err != nil {
		return nil, err
	}
	r := &Runtime{opts: opts, backend: backend, store: gm.NewStore()}
	r.scope = r.store.RootScope().At("vision")
	r.cache = newExecCache(opts.MaxExecs)
	if err := vision.InitReward(r.scope, o.Model, o.Seed); err != nil {
		backend.Finalize()
		return nil, fmt.Errorf("tpu: new vision: %w", err)
	}
	vs := vision.RewardVariables(o.Model)
	r.specs = make([]model.VarSpec, len(vs))
	r.params = make([]*gm.Variable, len(vs))
	for i, v := range vs {
		r.specs[i] = model.VarSpec{Path: v.Path, Shape: v.Shape}
		if r.params[i] = r.store.GetVariable(gm.JoinPath(r.scope.Scope(), v.Path)); r.params[i] == nil {
			backend.Finalize()
			return nil, fmt.Errorf("tpu: new vision: variable %q missing from the store", v.Path)
		}
	}
	return &VisionRuntime{rt: r, cfg: o.Model}, nil
}

// Config is the tower's configuration.
func (v *VisionRuntime) Config() visioncfg.Config { return v.cfg }

// Close releases everything (Runtime.Close).
func (v *VisionRuntime) Close() error { return v.rt.Close() }

// Stats are the runtime's counters (the cache's hits, misses and compile time).
func (v *VisionRuntime) Stats() Stats { return v.rt.Stats() }

// StepObjective runs one AdamW step of obj on its batch (as Runtime.StepObjective).
func (v *VisionRuntime) StepObjective(obj objective.VisionObjective, b objective.Batch, lr float32) (map[string]float32, error) {
	op := "step " + obj.Name
	if !(lr >= 0) || math.IsInf(float64(lr), 0) {
		return nil, fmt.Errorf("tpu: %s: lr=%g: must be finite and >= 0", op, lr)
	}
	return v.run(op, obj, b, &lr)
}

// EvalObjective computes obj's loss and metrics without updating anything.
func (v *VisionRuntime) EvalObjective(obj objective.VisionObjective, b objective.Batch) (map[string]float32, error) {
	return v.run("eval "+obj.Name, obj, b, nil)
}

func (v *VisionRuntime) run(op string, obj objective.VisionObjective, b objective.Batch, lr *float32) (map[string]float32, error) {
	build := func(in []*Node) (*Node, map[string]*Node) { return obj.Build(v.rt.scope, v.cfg, in) }
	return v.rt.runLoss(op, "vision-", lossGraph{name: obj.Name, metrics: obj.Metrics, build: build}, b, lr)
}

// Rewards scores images (each [channels, image_size, image_size], imageproc.Preprocess with the
// model's processor config): one reward per image. Batches are padded to a power of two (zero
// images, results dropped), so varied counts reuse a few executables.
func (v *VisionRuntime) Rewards(images []imageproc.Pixels) ([]float32, error) {
	const op = "vision rewards"
	c := v.cfg
	if len(images) == 0 {
		return nil, fmt.Errorf("tpu: %s: no images", op)
	}
	rows := 1
	for rows < len(images) {
		rows *= 2
	}
	plane := c.Channels * c.ImageSize * c.ImageSize
	flat := make([]float32, rows*plane)
	for i, im := range images {
		if im.C != c.Channels || im.H != c.ImageSize || im.W != c.ImageSize || len(im.Values) != plane {
			return nil, fmt.Errorf("tpu: %s: image %d is %dx%dx%d (%d values), want %dx%dx%d: preprocess with size %d",
				op, i, im.C, im.H, im.W, len(im.Values), c.Channels, c.ImageSize, c.ImageSize, c.ImageSize)
		}
		copy(flat[i*plane:], im.Values)
	}
	r := v.rt
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []float32
	err := r.guard(op, func() error {
		outs, _, err := r.run(CacheKey{"vision-rewards", fmt.Sprintf("%dx%dx%dx%d", rows, c.Channels, c.ImageSize, c.ImageSize)},
			func(in []*Node) []*Node { return []*Node{vision.Reward(r.scope, v.cfg, in[0])} },
			[]shapes.Shape{shapes.Make(dtypes.Float32, rows, c.Channels, c.ImageSize, c.ImageSize)},
			tensors.FromFlatDataAndDimensions(flat, rows, c.Channels, c.ImageSize, c.ImageSize))
		if err != nil {
			return err
		}
		defer finalize(outs)
		all, err := tensors.CopyFlatData[float32](outs[0])
		if err != nil {
			return err
		}
		out = all[:len(images)]
		return nil
	})
	return out, err
}

// ExportWeights copies the tower's and the head's weights to the host (internal paths).
func (v *VisionRuntime) ExportWeights() (w map[string][]float32, err error) {
	r := v.rt
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usable("export weights"); err != nil {
		return nil, err
	}
	defer recoverInto("export weights", &err)
	return vision.ExportReward(r.scope, v.cfg)
}

// SaveWeights writes the reward model's model.safetensors (vision.WriteRewardHF, F32).
func (v *VisionRuntime) SaveWeights(w io.Writer) error {
	ws, err := v.ExportWeights()
	if err != nil {
		return err
	}
	if err := vision.WriteRewardHF(w, v.cfg, ws); err != nil {
		return fmt.Errorf("tpu: save vision weights: %w", err)
	}
	return nil
}

// LoadWeights reads a reward model's model.safetensors (vision.ReadRewardHF: the tower under any
// known prefix, in any float dtype, and score.weight/score.bias).
func (v *VisionRuntime) LoadWeights(rd io.Reader) (err error) {
	data, err := io.ReadAll(rd)
	if err != nil {
		return fmt.Errorf("tpu: load vision weights: %w", err)
	}
	ws, err := vision.ReadRewardHF(v.cfg, bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return fmt.Errorf("tpu: load vision weights: %w", err)
	}
	r := v.rt
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usable("load vision weights"); err != nil {
		return err
	}
	defer recoverInto("load vision weights", &err)
	if err := vision.ImportReward(r.scope, v.cfg, ws); err != nil {
		return fmt.Errorf("tpu: load vision weights: %w", err)
	}
	return nil
}

// SaveOptimizer and LoadOptimizer move AdamW's state (Runtime's format, keyed by variable path).
func (v *VisionRuntime) SaveOptimizer(w io.Writer) error { return v.rt.SaveOptimizer(w) }

// LoadOptimizer: see SaveOptimizer.
func (v *VisionRuntime) LoadOptimizer(r io.Reader) error { return v.rt.LoadOptimizer(r) }
