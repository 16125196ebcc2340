package tpu

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/gobackend"
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/model"
)

// Backend and executor names accepted in Options.
const (
	BackendGo  = "go"
	BackendXLA = "xla"

	// ExecutorSequential runs a graph's ops one after the other (matmuls still use every core):
	// safe, and the default.
	ExecutorSequential = "sequential"
	// ExecutorParallel also runs independent ops concurrently, with an unbounded worker pool
	// (GoMLX's bounded default pool can deadlock when nested matmul tasks fill it): ~30% faster
	// here, not bit-reproducible across runs in principle.
	ExecutorParallel = "parallel"
)

// ResolveBackend resolves the --backend and --plugin flags of the commands that run an engine: the
// backend is go unless xla is asked for or a plugin is named; xla without a plugin means the CPU
// plugin, so that a missing plugin is reported as such (with what to install) rather than as a
// missing flag. A contradiction (go with a plugin) is left for Options.Validate to name.
func ResolveBackend(backend, plugin string) (string, string) {
	if backend == "" {
		backend = BackendGo
		if plugin != "" {
			backend = BackendXLA
		}
	}
	if backend == BackendXLA && plugin == "" {
		plugin = "cpu"
	}
	return backend, plugin
}

// Defaults of Options.
const (
	DefaultExecTimeout = 5 * time.Minute
	DefaultMaxExecs    = 32
)

// ErrStuck is wrapped by the error of an execution that overran Options.ExecTimeout.
var ErrStuck = errors.New("execution stuck")

// ErrClosed is returned by every method of a closed Runtime.
var ErrClosed = errors.New("runtime closed")

// Options configures a Runtime. The zero value of each field means its documented default.
type Options struct {
	// Model is the architecture. Required (model.Preset, or a model directory's config through activities/train's Load).
	Model model.Config `json:"model"`
	// Seed and InitStd initialise the weights (model.InitWeights); InitStd 0 → 0.02.
	Seed    uint64  `json:"seed"`
	InitStd float64 `json:"init_std"`

	// Backend is "go" or "xla"; empty means "xla" when Plugin is set, else "go".
	Backend string `json:"backend"`
	// Executor is the Go backend's op scheduling: "sequential" (default) or "parallel"; the xla
	// backend ignores it.
	Executor string `json:"executor"`
	// Plugin is the PJRT plugin of the xla backend: "cpu", "cuda", "tpu" or a path to a plugin
	// shared library. Required with Backend "xla".
	Plugin string `json:"plugin"`

	// Optimizer is AdamW's configuration (see AdamW for defaults).
	Optimizer AdamW `json:"optimizer"`
	// LoRA, when set, attaches low-rank adapters (model.LoRA; see lora.go): they are then the only
	// trainable parameters (optimizer state included) and the base weights stay frozen.
	LoRA *model.LoRA `json:"lora,omitempty"`

	// Buckets lists the padded batch and sequence sizes; empty lists mean the defaults of Buckets.
	Buckets Buckets `json:"buckets"`
	// MaxExecs bounds the compiled executables kept (least recently used are dropped); 0 → 32.
	MaxExecs int `json:"max_execs"`

	// ExecTimeout bounds one execution: a train step, a forward pass, or a whole Generate call
	// (prefill and every decode step). 0 → 5m; negative → no watchdog.
	ExecTimeout time.Duration `json:"exec_timeout"`
	// PeakGFLOPS is the machine's attainable float32 GFLOP/s to compute MFU against, as
	// `temper bench peak` measures it; 0: no MFU (Stats report 0), since an assumed figure would
	// be another machine's.
	PeakGFLOPS float64 `json:"peak_gflops"`
	// MemoryBudget (bytes; 0: none) bounds the intermediate memory of a step (activations and
	// gradients, as the Go executor estimates it when compiling): a graph over it is built with
	// the model's remat "layer" unless Model.Remat is set (see memory.go). The xla backend has
	// no estimate, so there it changes nothing.
	MemoryBudget int64 `json:"memory_budget,omitempty"`

	// execHook, when set (tests), runs inside the watchdog just before each execution.
	execHook func(op string)
}

func (o Options) withDefaults() Options {
	if o.Backend == "" {
		o.Backend = BackendGo
		if o.Plugin != "" {
			o.Backend = BackendXLA
		}
	}
	if o.Backend == BackendGo && o.Executor == "" {
		o.Executor = ExecutorSequential
	}
	o.MaxExecs = cmp.Or(o.MaxExecs, DefaultMaxExecs)
	o.ExecTimeout = cmp.Or(o.ExecTimeout, DefaultExecTimeout)
	o.Optimizer = o.Optimizer.withDefaults()
	if o.LoRA != nil {
		l := o.LoRA.WithDefaults()
		o.LoRA = &l
	}
	return o
}

// Validate checks the options (after defaults) and names the first bad field.
func (o Options) Validate() error {
	o = o.withDefaults()
	if err := o.Model.Validate(); err != nil {
		return fmt.Errorf("tpu: options: %w", err)
	}
	switch o.Backend {
	case BackendGo:
		if o.Plugin != "" {
			return fmt.Errorf("tpu: options: plugin=%q applies to the xla backend only", o.Plugin)
		}
		if o.Executor != ExecutorSequential && o.Executor != ExecutorParallel {
			return fmt.Errorf("tpu: options: executor=%q: allowed %q, %q", o.Executor, ExecutorSequential, ExecutorParallel)
		}
	case BackendXLA:
		if o.Plugin == "" {
			return fmt.Errorf("tpu: options: backend xla needs plugin (cpu, cuda, tpu or a plugin path)")
		}
		if o.Executor != "" && o.Executor != ExecutorSequential && o.Executor != ExecutorParallel {
			return fmt.Errorf("tpu: options: executor=%q: allowed %q, %q (go backend only)", o.Executor, ExecutorSequential, ExecutorParallel)
		}
	default:
		return fmt.Errorf("tpu: options: backend=%q: allowed %q, %q", o.Backend, BackendGo, BackendXLA)
	}
	if o.MaxExecs < 0 {
		return fmt.Errorf("tpu: options: max_execs=%d: must be >= 0", o.MaxExecs)
	}
	if o.MemoryBudget < 0 {
		return fmt.Errorf("tpu: options: memory_budget=%d: must be >= 0 bytes (0: none)", o.MemoryBudget)
	}
	if !(o.PeakGFLOPS >= 0) || math.IsInf(o.PeakGFLOPS, 0) {
		return fmt.Errorf("tpu: options: peak_gflops=%g: must be a GFLOP/s figure > 0, or 0 for no MFU", o.PeakGFLOPS)
	}
	if err := o.Optimizer.Validate(); err != nil {
		return err
	}
	if o.LoRA != nil {
		if _, err := o.LoRA.Modules(o.Model); err != nil {
			return fmt.Errorf("tpu: options: %w", err)
		}
	}
	return o.Buckets.Validate()
}

// Runtime owns a backend, one model's weights and optimizer state, and the compiled executables.
type Runtime struct {
	opts    Options
	cfg     model.Config
	backend compute.Backend
	store   *gm.Store
	scope   *gm.Scope       // model variables
	params  []*gm.Variable  // trainable: every model variable, or the LoRA adapters only
	specs   []model.VarSpec // of params, same order

	mu     sync.Mutex // serializes executions and guards everything below
	closed bool
	broken error // set when an execution overran or lost the weights: the runtime is unusable
	cache  *execCache
	opt    *adamState
	gen    *model.Generator

	statsMu sync.Mutex
	stats   Stats
}

// New creates a Runtime for opts.Model with freshly initialised weights.
func New(opts Options) (rt *Runtime, err error) {
	defer recoverInto("new", &err)
	opts = opts.withDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	backend, err := newBackend(opts)
	if err != nil {
		return nil, err
	}
	r := &Runtime{opts: opts, cfg: opts.Model, backend: backend, store: gm.NewStore()}
	r.scope = r.store.RootScope().At("model")
	r.cache = newExecCache(opts.MaxExecs)
	r.stats.PeakGFLOPS = opts.PeakGFLOPS
	if err := model.InitWeights(r.scope, r.cfg, opts.Seed, opts.InitStd); err != nil {
		backend.Finalize()
		return nil, fmt.Errorf("tpu: new: %w", err)
	}
	if err := r.bindParams(); err != nil {
		backend.Finalize()
		return nil, err
	}
	return r, nil
}

// bindParams looks up the trainable variables: the model variables in model.Config.Variables
// order, or with Options.LoRA the adapters (attached here) in LoRA.Variables order.
func (r *Runtime) bindParams() error {
	specs := r.cfg.Variables()
	if r.opts.LoRA != nil {
		var err error
		if specs, err = r.attachLoRA(); err != nil {
			return err
		}
	}
	params := make([]*gm.Variable, len(specs))
	for i, v := range specs {
		vr := r.store.GetVariable(gm.JoinPath(r.scope.Scope(), v.Path))
		if vr == nil {
			return fmt.Errorf("tpu: model variable %q missing from the store", v.Path)
		}
		params[i] = vr
	}
	r.params, r.specs = params, specs
	return nil
}

// newBackend builds the backend opts asks for.
func newBackend(opts Options) (b compute.Backend, err error) {
	defer recoverInto("new backend", &err)
	switch opts.Backend {
	case BackendGo:
		if opts.Executor == ExecutorSequential {
			backend, err := gobackend.New("ops_sequential")
			if err != nil {
				return nil, fmt.Errorf("tpu: new backend go (sequential): %w", err)
			}
			return backend, nil
		}
		backend, err := gobackend.New("")
		if err != nil {
			return nil, fmt.Errorf("tpu: new backend go (parallel): %w", err)
		}
		if err := setUnboundedParallelism(backend); err != nil {
			// Fall back to the config string (it prints a line on stdout).
			backend.Finalize()
			if backend, err = gobackend.New("parallelism=-1"); err != nil {
				return nil, fmt.Errorf("tpu: new backend go (parallel): %w", err)
			}
		}
		return backend, nil
	case BackendXLA:
		return newXLABackend(opts.Plugin)
	}
	return nil, fmt.Errorf("tpu: new backend: unknown backend %q", opts.Backend)
}

// setUnboundedParallelism does what the "parallelism=-1" config does, without the line the Go
// backend prints on stdout (which would corrupt a CLI's JSON output).
func setUnboundedParallelism(b compute.Backend) error {
	v := reflect.ValueOf(b)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("unexpected backend type %T", b)
	}
	w := v.Elem().FieldByName("Workers")
	if !w.IsValid() {
		return fmt.Errorf("backend %T has no Workers field", b)
	}
	m := w.MethodByName("SetMaxParallelism")
	if !m.IsValid() {
		return fmt.Errorf("backend %T workers have no SetMaxParallelism", b)
	}
	m.Call([]reflect.Value{reflect.ValueOf(-1)})
	if !strings.Contains(b.Description(), "parallelism=-1") {
		return fmt.Errorf("backend %T did not take parallelism -1: %s", b, b.Description())
	}
	return nil
}

// Config returns the model configuration.
func (r *Runtime) Config() model.Config { return r.cfg }

// Options returns the options the Runtime runs with (defaults filled in).
func (r *Runtime) Options() Options { return r.opts }

// BackendName describes the backend, e.g. "go (sequential)".
func (r *Runtime) BackendName() string {
	if r.opts.Backend == BackendGo {
		return fmt.Sprintf("%s (%s)", BackendGo, r.opts.Executor)
	}
	return fmt.Sprintf("%s (%s)", r.opts.Backend, r.opts.Plugin)
}

// Close releases the executables, the weights and the backend. It waits for a running execution
// (but not for a stuck one).
func (r *Runtime) Close() (err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	defer recoverInto("close", &err)
	if r.closed {
		return nil
	}
	r.closed = true
	if r.broken != nil {
		// A stuck goroutine may still use the buffers: leave them to the garbage collector.
		return nil
	}
	r.cache.clear()
	r.gen = nil
	r.store.Finalize()
	r.backend.Finalize()
	return nil
}

// usable reports why the runtime cannot run anything (must hold r.mu).
func (r *Runtime) usable(op string) error {
	if r.closed {
		return fmt.Errorf("tpu: %s: %w", op, ErrClosed)
	}
	if r.broken != nil {
		return fmt.Errorf("tpu: %s: runtime unusable after an earlier failure: %w", op, r.broken)
	}
	if r.params == nil {
		return fmt.Errorf("tpu: %s: no weights loaded", op)
	}
	return nil
}

// guard runs fn (one execution, compile included) on its own goroutine under the watchdog, with
// panics recovered into errors naming op; r.mu must be held.
func (r *Runtime) guard(op string, fn func() error) error {
	if err := r.usable(op); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		var err error
		defer func() {
			if p := recover(); p != nil {
				err = panicError(p)
			}
			done <- err
		}()
		if r.opts.execHook != nil {
			r.opts.execHook(op)
		}
		err = fn()
	}()
	finished := func(err error) error {
		r.syncCacheStats()
		if err == nil {
			return nil
		}
		if lost := r.lostVariable(); lost != "" {
			// model.Exec donates the buffers of the variables a graph updates: an execution that
			// fails after that leaves them empty.
			r.broken = fmt.Errorf("variable %s lost its value in the failed %s (%v); load the weights into a new Runtime", lost, op, err)
		}
		return fmt.Errorf("tpu: %s: %w", op, err)
	}
	if r.opts.ExecTimeout < 0 {
		return finished(<-done)
	}
	timer := time.NewTimer(r.opts.ExecTimeout)
	defer timer.Stop()
	select {
	case err := <-done:
		return finished(err)
	case <-timer.C:
		hint := "the Go executor looks deadlocked: create a new Runtime with Executor \"sequential\""
		if r.opts.Backend == BackendGo && r.opts.Executor == ExecutorSequential {
			hint = "the sequential executor should not deadlock, so the graph is probably just slow: raise Options.ExecTimeout"
		}
		r.broken = fmt.Errorf("%w: %s still running after %s on backend %s; %s; this Runtime can no longer be used",
			ErrStuck, op, r.opts.ExecTimeout, r.BackendName(), hint)
		return fmt.Errorf("tpu: %s: %w", op, r.broken)
	}
}

// lostVariable names a model or optimizer variable without a value ("" if none).
func (r *Runtime) lostVariable() string {
	vars := slices.Clone(r.params)
	if r.opt != nil {
		vars = append(append(append(vars, r.opt.m...), r.opt.v...), r.opt.step)
	}
	for _, v := range vars {
		if !v.HasValue() {
			return v.Path()
		}
	}
	return ""
}

// panicError turns a recovered panic value into an error.
func panicError(p any) error {
	if e, ok := p.(error); ok {
		return fmt.Errorf("panic: %w", e)
	}
	return fmt.Errorf("panic: %v", p)
}

// recoverInto turns a panic into *err (for host code calling GoMLX outside guard).
func recoverInto(op string, err *error) {
	if p := recover(); p != nil {
		*err = fmt.Errorf("tpu: %s: %w", op, panicError(p))
	}
}
