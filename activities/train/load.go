package train

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
)

// Load is the one way every role gets a model: a training chunk, evaluation, rollouts, the reward
// role's critic, reference and teacher models, `temper lora merge`. What it reads:
//
//   - a committed checkpoint (file:// or gs://, …/runs/<run>/<phase>/step-NNNNNN/): config.json,
//     model.safetensors (float32), the side files carried along, optimizer.safetensors when asked;
//   - a Hugging Face model directory (a local path, file:// or gs:// prefix holding config.json):
//     model.safetensors or the shards of model.safetensors.index.json, in F32, BF16, F16 or F64;
//   - a LoRA adapter checkpoint (adapter_config.json naming its base, itself a checkpoint or a
//     directory): with LoadOptions.LoRA, base + the adapters kept apart to train on; without, one
//     plain model with the adapters folded in (W + alpha/rank·B·A, on the host).
//
// LoadOptions say what is wanted of it; Loaded carries what was found. Errors about the files'
// content (a config field, a shape, a dtype, a missing shard) are non-retryable (BadInput) and name
// the file and the tensor; failing I/O stays retryable.
type LoadOptions struct {
	// Want: an engine (the default), the config and files only, or the weights on the host.
	Want Want
	// Optim configures the engine's optimizer.
	Optim trainapi.Optim
	// Optimizer loads the checkpoint's optimizer state when it has one that belongs to what is
	// loaded: never from a directory, merged adapters, fresh adapters or a new value head.
	Optimizer bool
	// LoRA, when set, trains adapters: on a plain model fresh ones (A seeded by LoRA.Seed, B = 0, so
	// step 0 computes exactly the base); on an adapter checkpoint its own, which must have the same
	// modules, rank and scale (LoRA's dropout and seed are used). The engine's Caps().Adapters is
	// kept in Loaded.Adapters for WriteModel.
	LoRA *model.LoRA
	// Head says what value head the model gets (HeadAsSaved by default).
	Head Head
	// HeadSeed and HeadLogProb initialise a new value head (score.weight ~ N(0, HeadInitStd²) from
	// PCG(HeadSeed), bias 0, with the generative term's weight 1 when HeadLogProb).
	HeadSeed    uint64
	HeadLogProb bool
}

// Want is what Load hands back.
type Want int

const (
	WantEngine  Want = iota // an engine holding the weights (Loaded.Engine)
	WantConfig              // the config and the files found only: no weights are read
	WantWeights             // the weights on the host (Loaded.Weights; adapters merged), no engine
)

// Head is the value head a load gives the model.
type Head int

const (
	HeadAsSaved  Head = iota // the one the weights hold (score.weight), if any
	HeadRequired             // a reward model: weights without a value head are refused
	HeadAdded                // the weights' own, else a new one (HeadSeed, HeadLogProb)
	HeadCritic               // PPO's critic: the weights' own (a reward model), else the checkpoint's critic.safetensors, else a new one (HeadSeed)
)

// Loaded is a model as Load found it.
type Loaded struct {
	URI string // what was loaded (a checkpoint's canonical URI, or the directory)
	// Config is the architecture, with the value head the engine has.
	Config model.Config
	// Engine holds the weights (WantEngine); the caller closes it.
	Engine Engine
	// Weights are the internal float32 weights (WantWeights).
	Weights map[string][]float32
	// Checkpoint is the checkpoint read (nil for a directory; the adapters' checkpoint for LoRA).
	Checkpoint *ckpt.Checkpoint
	// Adapters is set when LoadOptions.LoRA trains adapters: what WriteModel commits.
	Adapters *Adapters
	// Merged says an adapter checkpoint was read as one plain model.
	Merged bool
	// NewHead says the value head was made here (it has no optimizer state).
	NewHead bool
	// OptimizerLoaded says the engine got the checkpoint's optimizer state.
	OptimizerLoaded bool
	// HF is what the model carries besides its weights to every checkpoint and directory written
	// from it: the original config.json (bookkeeping fields kept), the dtype its weights came in
	// (written back on export), the side files (generation_config.json, tokenizer, chat template).
	HF hf.Meta
	// Generation is generation_config.json as read (nil when there is none).
	Generation *hf.Generation
}

// Close closes the engine, if any.
func (l *Loaded) Close() error {
	if l == nil || l.Engine == nil {
		return nil
	}
	return l.Engine.Close()
}

// Loader loads models for one worker: its checkpoint client and engine factory.
type Loader struct {
	Ckpt      *ckpt.Client
	NewEngine NewEngine
}

// Load loads uri with the trainer's checkpoint client and engines (see Loader.Load).
func (a *Activities) Load(ctx context.Context, uri string, o LoadOptions) (*Loaded, error) {
	return Loader{Ckpt: a.Ckpt, NewEngine: a.NewEngine}.Load(ctx, uri, o)
}

// Load reads the model at uri as o asks (see LoadOptions).
func (ld Loader) Load(ctx context.Context, uri string, o LoadOptions) (*Loaded, error) {
	if o.LoRA != nil {
		if err := o.LoRA.Validate(); err != nil {
			return nil, BadInput(fmt.Errorf("train: load %s: lora: %w", uri, err))
		}
	}
	src, err := ld.open(ctx, uri)
	if err != nil {
		return nil, err
	}
	if src.isAdapters() {
		return ld.loadAdapters(ctx, src, o)
	}
	return ld.loadPlain(ctx, src, o, o.LoRA)
}

// source is a checkpoint or a model directory opened for reading.
type source struct {
	uri   string
	ck    *ckpt.Checkpoint // nil for a directory
	files hf.Source
}

func (s *source) isAdapters() bool {
	if s.ck == nil {
		return false
	}
	_, ok := s.ck.Manifest.File(hf.AdapterConfigFile)
	return ok
}

// open finds what uri is: a committed checkpoint, else a directory holding config.json. A
// checkpoint URI that is not committed stays an error (never read as a directory: its files may be
// half deleted).
func (ld Loader) open(ctx context.Context, uri string) (*source, error) {
	ck, err := ld.Ckpt.Read(ctx, uri)
	if err == nil {
		return &source{uri: ck.Ref.URI, ck: ck, files: ckptFiles{ctx, ck}}, nil
	}
	if errors.Is(err, ckpt.ErrNotExist) {
		return nil, fmt.Errorf("train: read checkpoint %s: %w", uri, err)
	}
	st, serr := ld.Ckpt.Store(ctx, uri)
	if serr != nil {
		return nil, fmt.Errorf("train: read checkpoint %s: %w", uri, err)
	}
	if _, serr := st.Stat(ctx, hf.ConfigFile); serr != nil {
		if errors.Is(serr, ckpt.ErrNotExist) {
			return nil, BadInput(fmt.Errorf("train: load %s: neither a committed checkpoint (%v) nor a model directory (no %s)", uri, err, hf.ConfigFile))
		}
		return nil, fmt.Errorf("train: load %s: %w", uri, serr)
	}
	return &source{uri: strings.TrimSuffix(uri, "/") + "/", files: storeFiles{ctx, st}}, nil
}

// ckptFiles reads a checkpoint's files (each verified against the manifest as it streams).
type ckptFiles struct {
	ctx context.Context
	ck  *ckpt.Checkpoint
}

func (c ckptFiles) Open(name string) (io.ReadCloser, error) { return c.ck.Open(c.ctx, name) }
func (c ckptFiles) Has(name string) (bool, error) {
	_, ok := c.ck.Manifest.File(name)
	return ok, nil
}

// storeFiles reads a model directory in a store (local or a bucket).
type storeFiles struct {
	ctx context.Context
	st  ckpt.Store
}

func (s storeFiles) Open(name string) (io.ReadCloser, error) { return s.st.Get(s.ctx, name) }
func (s storeFiles) Has(name string) (bool, error) {
	_, err := s.st.Stat(s.ctx, name)
	if errors.Is(err, ckpt.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// fail classifies an error of the hf package: the files' content is bad input, I/O is retryable.
func fail(uri string, err error) error {
	err = fmt.Errorf("train: load %s: %w", uri, err)
	if errors.Is(err, hf.ErrFormat) {
		return BadInput(err)
	}
	return err
}

// loadPlain loads a checkpoint or directory holding full weights, with fresh adapters when lora is
// set (then uri is their base).
func (ld Loader) loadPlain(ctx context.Context, src *source, o LoadOptions, lora *model.LoRA) (*Loaded, error) {
	m, err := hf.Inspect(src.files)
	if err != nil {
		return nil, fail(src.uri, err)
	}
	out := &Loaded{URI: src.uri, Config: m.Config, Checkpoint: src.ck, HF: m.Meta, Generation: m.Generation}
	if src.ck != nil {
		// A checkpoint's weights are float32 whatever its model came in; config.json keeps that.
		out.HF.DType = hf.ConfigDType(m.Meta.ConfigJSON)
	}
	parts := m.Parts(src.files)
	head, err := ld.head(src, o, out)
	if err != nil {
		return nil, err
	}
	parts = append(parts, head...)
	if o.Want == WantConfig {
		return out, nil
	}
	var l *model.LoRA
	if lora != nil {
		w := lora.WithDefaults()
		if _, err := w.Modules(out.Config); err != nil {
			return nil, BadInput(fmt.Errorf("train: lora on %s: %w", src.uri, err))
		}
		l = &w
		out.Adapters = &Adapters{LoRA: w, Base: src.uri}
	}
	if err := ld.fill(out, parts, l, o); err != nil {
		return nil, err
	}
	if o.Optimizer && lora == nil && !out.NewHead && o.Want == WantEngine {
		if err := ld.loadOptimizer(ctx, src, out); err != nil {
			out.Close()
			return nil, err
		}
	}
	return out, nil
}

// head applies o.Head to out.Config and returns the tensors to add to the weights.
func (ld Loader) head(src *source, o LoadOptions, out *Loaded) ([]hf.Part, error) {
	cfg := &out.Config
	switch o.Head {
	case HeadAsSaved:
		return nil, nil
	case HeadRequired:
		if !cfg.ValueHead {
			return nil, BadInput(fmt.Errorf("train: %s is not a reward model: its weights have no value head (%s); train one with a reward phase", src.uri, ScoreWeight))
		}
		return nil, nil
	case HeadAdded, HeadCritic:
	default:
		return nil, fmt.Errorf("train: load %s: unknown head mode %d", src.uri, o.Head)
	}
	if cfg.ValueHead {
		return nil, nil
	}
	if o.Head == HeadCritic && src.ck != nil {
		if _, ok := src.ck.Manifest.File(trainapi.CriticFile); ok {
			cfg.ValueHead = true
			return []hf.Part{{Name: src.uri + trainapi.CriticFile, Open: func() (io.ReadCloser, error) { return src.files.Open(trainapi.CriticFile) }}}, nil
		}
	}
	logProb := o.Head == HeadAdded && o.HeadLogProb
	ts, err := ValueHeadTensors(cfg.DModel, o.HeadSeed, logProb)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ts, nil); err != nil {
		return nil, fmt.Errorf("train: new value head for %s: %w", src.uri, err)
	}
	cfg.ValueHead, cfg.RewardLogProb, out.NewHead = true, logProb, true
	return []hf.Part{{Name: "a new value head", Open: func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil }}}, nil
}

// fill reads the weights of parts into out: an engine (with adapters l attached when set) or host
// weights, as o.Want says.
func (ld Loader) fill(out *Loaded, parts []hf.Part, l *model.LoRA, o LoadOptions) error {
	stream, err := hf.Join(parts...)
	if err != nil {
		return fail(out.URI, err)
	}
	defer stream.Close()
	if o.Want == WantWeights {
		w, _, err := hf.ReadWeights(stream, out.Config, out.URI)
		if err != nil {
			return fail(out.URI, err)
		}
		out.Weights = w
		return nil
	}
	var seed uint64
	if out.NewHead || o.Head == HeadCritic {
		seed = o.HeadSeed // as the engines holding a value head were always built
	}
	eng, err := ld.NewEngine(EngineOptions{Model: out.Config, Optim: o.Optim, LoRA: l, Seed: seed})
	if err != nil {
		return err
	}
	if l != nil {
		ae, err := adapterIO(eng, "lora on "+out.URI)
		if err != nil {
			eng.Close()
			return err
		}
		out.Adapters.io = ae
	}
	if err := eng.LoadWeights(stream); err != nil {
		eng.Close()
		return fail(out.URI, err)
	}
	out.Engine = eng
	return nil
}

// loadOptimizer loads the checkpoint's optimizer state into out's engine, when it has one.
func (ld Loader) loadOptimizer(ctx context.Context, src *source, out *Loaded) error {
	if src.ck == nil {
		return nil
	}
	if _, ok := src.ck.Manifest.File(trainapi.OptimizerFile); !ok {
		return nil
	}
	if err := loadFile(ctx, src.ck, trainapi.OptimizerFile, out.Engine.LoadOptimizer); err != nil {
		return err
	}
	out.OptimizerLoaded = true
	return nil
}

// loadAdapters loads an adapter checkpoint: base + adapters to train on (o.LoRA), or merged.
func (ld Loader) loadAdapters(ctx context.Context, src *source, o LoadOptions) (*Loaded, error) {
	raw, err := readFile(src.files, hf.AdapterConfigFile)
	if err != nil {
		return nil, fmt.Errorf("train: load %s: %w", src.uri, err)
	}
	l, base, err := hf.ReadAdapterConfig(raw)
	if err != nil {
		return nil, BadInput(fmt.Errorf("train: %s%s: %w", src.uri, hf.AdapterConfigFile, err))
	}
	if base == "" {
		return nil, BadInput(fmt.Errorf("train: %s%s: base_model_name_or_path is empty", src.uri, hf.AdapterConfigFile))
	}
	bsrc, err := ld.open(ctx, base)
	if err != nil {
		return nil, fmt.Errorf("train: read base %s of %s: %w", base, src.uri, err)
	}
	if bsrc.isAdapters() {
		return nil, BadInput(fmt.Errorf("train: base %s of %s holds adapters itself; stacked adapters are not supported (merge it first: temper lora merge)", base, src.uri))
	}
	if o.LoRA != nil {
		return ld.continueAdapters(ctx, src, bsrc, l, o)
	}
	// Merged: the base's weights and the adapters folded in on the host, read as one plain model.
	// The value head is decided as for the adapter checkpoint itself (which has no critic file).
	bo := o
	bo.Want, bo.Optimizer, bo.Head = WantWeights, false, HeadAsSaved
	if o.Want == WantConfig {
		bo.Want = WantConfig
	}
	out, err := ld.loadPlain(ctx, bsrc, bo, nil)
	if err != nil {
		return nil, err
	}
	if _, err := l.Modules(out.Config); err != nil {
		return nil, BadInput(fmt.Errorf("train: %s%s: %w", src.uri, hf.AdapterConfigFile, err))
	}
	if o.Want == WantConfig {
		out.URI, out.Checkpoint, out.Merged = src.uri, src.ck, true
		if _, err := ld.head(src, o, out); err != nil {
			return nil, err
		}
		return out, nil
	}
	var adapters map[string][]float32
	if err := loadFile(ctx, src.ck, hf.AdapterWeightsFile, func(r io.Reader) error {
		adapters, err = hf.ReadAdapters(r, out.Config, l)
		return err
	}); err != nil {
		return nil, fail(src.uri, err)
	}
	merged, err := model.MergeLoRA(out.Config, l, out.Weights, adapters)
	if err != nil {
		return nil, fmt.Errorf("train: merge %s: %w", src.uri, err)
	}
	out.URI, out.Checkpoint, out.Merged, out.Weights = src.uri, src.ck, true, nil
	lm := out.Config
	head, err := ld.head(src, o, out)
	if err != nil {
		return nil, err
	}
	if o.Want == WantWeights && len(head) == 0 {
		out.Weights = merged
		return out, nil
	}
	part := hf.Part{Name: src.uri + " merged with its base " + base, Open: func() (io.ReadCloser, error) {
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(hf.WriteWeights(pw, lm, merged, safetensors.F32)) }()
		return pr, nil
	}}
	if err := ld.fill(out, append([]hf.Part{part}, head...), nil, o); err != nil {
		return nil, err
	}
	return out, nil
}

// continueAdapters loads base + an adapter checkpoint's adapters (+ its optimizer state when
// asked) to go on training them with o.LoRA, which must describe the same adapters.
func (ld Loader) continueAdapters(ctx context.Context, src, bsrc *source, l model.LoRA, o LoadOptions) (*Loaded, error) {
	bo := o
	bo.Optimizer = false
	probe := bo
	probe.Want = WantConfig
	cfgOnly, err := ld.loadPlain(ctx, bsrc, probe, nil)
	if err != nil {
		return nil, err
	}
	if !model.SameAdapters(cfgOnly.Config, l, *o.LoRA) {
		return nil, BadInput(fmt.Errorf("train: %s holds adapters %+v, the phase asks for %+v: start the phase from the base %s or keep the same rank, alpha and targets",
			src.uri, l, o.LoRA.WithDefaults(), bsrc.uri))
	}
	out, err := ld.loadPlain(ctx, bsrc, bo, o.LoRA)
	if err != nil {
		return nil, err
	}
	if o.Want != WantEngine {
		return out, nil
	}
	if err := loadFile(ctx, src.ck, hf.AdapterWeightsFile, out.Adapters.io.LoadAdapters); err != nil {
		out.Close()
		return nil, fail(src.uri, err)
	}
	out.URI, out.Checkpoint = src.uri, src.ck
	out.Adapters.Base = bsrc.uri
	if o.Optimizer {
		if err := ld.loadOptimizer(ctx, src, out); err != nil {
			out.Close()
			return nil, err
		}
	}
	return out, nil
}

// readFile reads a whole (small) file of a source.
func readFile(src hf.Source, name string) ([]byte, error) {
	rc, err := src.Open(name)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(rc)
	if cerr := rc.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b, nil
}

// loadFile streams one checkpoint file into fn, surfacing a checksum mismatch found at the end.
func loadFile(ctx context.Context, ck *ckpt.Checkpoint, name string, fn func(io.Reader) error) error {
	rc, err := ck.Open(ctx, name)
	if err != nil {
		return err
	}
	defer rc.Close()
	if err := fn(rc); err != nil {
		return fmt.Errorf("train: load %s from %s: %w", name, ck.Ref.URI, err)
	}
	return rc.Close()
}

// ckptSink writes the files of a checkpoint being committed.
type ckptSink struct {
	ctx context.Context
	w   *ckpt.Writer
}

func (s ckptSink) Create(name string) (io.WriteCloser, error) { return s.w.Create(s.ctx, name) }

// WriteModel commits what m's engine holds (what Load returned, or a new model: &Loaded{Engine,
// Config}) and st into a checkpoint. A full model: config.json (hf.ConfigJSON: the architecture
// and, from the model m was loaded from, its bookkeeping fields and dtype), the side files m was
// loaded with, model.safetensors (float32: bit-exact resumption), the optimizer state when
// withOptimizer, state.json. Adapters being trained (m.Adapters): adapter_config.json naming their
// base, adapter_model.safetensors, the optimizer state and state.json, never the base's weights.
func WriteModel(ctx context.Context, w *ckpt.Writer, m *Loaded, st ckpt.State, withOptimizer bool) error {
	if m.Adapters != nil {
		return writeAdapters(ctx, w, m, st)
	}
	if err := WriteModelFiles(ctx, w, m); err != nil {
		return err
	}
	if err := Stream(ctx, w, trainapi.ModelFile, m.Engine.SaveWeights); err != nil {
		return err
	}
	if withOptimizer {
		if err := Stream(ctx, w, trainapi.OptimizerFile, m.Engine.SaveOptimizer); err != nil {
			return err
		}
	}
	return w.AddState(ctx, st)
}

// WriteModelFiles adds m's config.json (the causal LM's: a value head lives in the weights) and the
// side files it was loaded with to a checkpoint: what a full model's checkpoint holds besides its
// tensors and state.
func WriteModelFiles(ctx context.Context, w *ckpt.Writer, m *Loaded) error {
	cfg := m.Config
	cfg.ValueHead, cfg.RewardLogProb = false, false
	js, err := hf.ConfigJSON(cfg, m.HF.ConfigJSON, m.HF.DType)
	if err != nil {
		return err
	}
	if err := w.Add(ctx, trainapi.ConfigFile, bytes.NewReader(js)); err != nil {
		return err
	}
	for _, name := range m.HF.Files {
		rc, err := m.HF.From.Open(name)
		if err != nil {
			return fmt.Errorf("train: copy %s of %s: %w", name, m.URI, err)
		}
		err = w.Add(ctx, name, rc)
		if cerr := rc.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("train: copy %s of %s: %w", name, m.URI, err)
		}
	}
	return nil
}

// writeAdapters commits the adapters being trained (see WriteModel).
func writeAdapters(ctx context.Context, w *ckpt.Writer, m *Loaded, st ckpt.State) error {
	ae := m.Adapters.io
	if ae == nil {
		return fmt.Errorf("train: write adapters: the engine (%T) holds no LoRA adapters", m.Engine)
	}
	js, err := hf.AdapterConfigJSON(m.Config, m.Adapters.LoRA, m.Adapters.Base)
	if err != nil {
		return err
	}
	if err := w.Add(ctx, hf.AdapterConfigFile, bytes.NewReader(js)); err != nil {
		return err
	}
	if err := Stream(ctx, w, hf.AdapterWeightsFile, ae.SaveAdapters); err != nil {
		return err
	}
	if err := Stream(ctx, w, trainapi.OptimizerFile, m.Engine.SaveOptimizer); err != nil {
		return err
	}
	return w.AddState(ctx, st)
}

// WriteDir writes m (loaded with WantWeights) as a Hugging Face model directory into dst: what
// `temper lora merge` and exports write (hf.WriteDir: the dtype the model came in unless opt says
// otherwise, sharded above opt.MaxShardSize, config.json and side files carried along).
func WriteDir(dst hf.Sink, m *Loaded, opt hf.WriteOptions) error {
	if m.Weights == nil {
		return fmt.Errorf("train: write dir of %s: no host weights (load with WantWeights)", m.URI)
	}
	cfg := m.Config
	if err := hf.WriteDir(dst, cfg, m.Weights, m.HF, opt); err != nil {
		return fmt.Errorf("train: write dir of %s: %w", m.URI, err)
	}
	return nil
}
