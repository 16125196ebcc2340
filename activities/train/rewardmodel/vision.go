package rewardmodel

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/imageproc"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/vision/visioncfg"
)

// The vision branch of the reward phase: a SigLIP tower with a value head (objective.
// VisionBradleyTerry) trained on image pairs. Its checkpoint is a Hugging Face directory:
// config.json (a siglip_vision_model config whose architectures name ArchVisionReward),
// preprocessor_config.json (SiglipImageProcessor's), model.safetensors (the tower under
// vision_model. plus score.weight and score.bias), optimizer.safetensors and state.json.

// ArchVisionReward is the architectures entry of a vision reward model's config.json.
const ArchVisionReward = "TemperSiglipVisionReward"

// PreprocessorFile is the image processor's configuration in a vision checkpoint.
const PreprocessorFile = "preprocessor_config.json"

// VisionEngine runs a vision reward model; workers supply one backed by tpu.VisionRuntime.
type VisionEngine interface {
	train.WeightIO
	StepObjective(obj objective.VisionObjective, b objective.Batch, lr float32) (map[string]float32, error)
	EvalObjective(obj objective.VisionObjective, b objective.Batch) (map[string]float32, error)
	// Rewards scores preprocessed images, one reward each.
	Rewards(images []imageproc.Pixels) ([]float32, error)
	Close() error
}

// VisionEngineOptions choose a vision engine's tower, initial weights and optimizer.
type VisionEngineOptions struct {
	Model visioncfg.Config
	Seed  uint64
	Optim trainapi.Optim
}

// NewVisionEngine builds a VisionEngine.
type NewVisionEngine func(VisionEngineOptions) (VisionEngine, error)

// Option configures the reward-model activities.
type Option func(*Activities)

// WithVision gives the activities the engine factory of vision reward models; without it a
// vision phase fails with an error saying this worker cannot run them.
func WithVision(f NewVisionEngine) Option { return func(a *Activities) { a.NewVision = f } }

// VisionModel is a loaded vision reward model.
type VisionModel struct {
	Engine    VisionEngine
	Config    visioncfg.Config
	Processor imageproc.Config
	URI       string
}

// IsVision reports whether the checkpoint at uri holds a vision reward model (its config.json is
// a siglip_vision_model's).
func IsVision(ctx context.Context, cl *ckpt.Client, uri string) (bool, error) {
	ck, err := cl.Read(ctx, uri)
	if err != nil {
		return false, err
	}
	if _, ok := ck.Manifest.File(trainapi.ConfigFile); !ok {
		return false, nil // an adapter checkpoint: a decoder's
	}
	js, err := train.ReadAll(ctx, ck, trainapi.ConfigFile)
	if err != nil {
		return false, err
	}
	var head struct {
		ModelType string `json:"model_type"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return false, train.BadInput(fmt.Errorf("train: %s%s: %w", uri, trainapi.ConfigFile, err))
	}
	return head.ModelType == visioncfg.ModelTypeVision, nil
}

// VisionLoad says how to load a vision reward model: the engine's optimizer settings, and whether
// to restore the checkpoint's optimizer state (when it has one).
type VisionLoad struct {
	Optim     trainapi.Optim
	Optimizer bool
}

// LoadVision loads the vision reward model at uri with newEngine.
func LoadVision(ctx context.Context, cl *ckpt.Client, newEngine NewVisionEngine, uri string, o VisionLoad) (*VisionModel, error) {
	if newEngine == nil {
		return nil, errors.New("train: this worker has no engine for vision reward models (workers wire one with rewardmodel.WithVision)")
	}
	ck, err := cl.Read(ctx, uri)
	if err != nil {
		return nil, err
	}
	js, err := train.ReadAll(ctx, ck, trainapi.ConfigFile)
	if err != nil {
		return nil, err
	}
	cfg, err := visioncfg.FromHFConfig(js)
	if err != nil {
		return nil, train.BadInput(fmt.Errorf("train: load %s: %w", uri, err))
	}
	pjs, err := train.ReadAll(ctx, ck, PreprocessorFile)
	if err != nil {
		return nil, err
	}
	proc, err := imageproc.FromHFProcessorConfig(pjs)
	if err != nil {
		return nil, train.BadInput(fmt.Errorf("train: load %s: %w", uri, err))
	}
	if err := checkProcessor(cfg, proc); err != nil {
		return nil, train.BadInput(fmt.Errorf("train: load %s: %w", uri, err))
	}
	eng, err := newEngine(VisionEngineOptions{Model: cfg, Optim: o.Optim})
	if err != nil {
		return nil, err
	}
	m := &VisionModel{Engine: eng, Config: cfg, Processor: proc, URI: uri}
	fail := func(err error) (*VisionModel, error) {
		eng.Close()
		return nil, fmt.Errorf("train: load %s: %w", uri, err)
	}
	w, err := train.ReadAll(ctx, ck, trainapi.ModelFile)
	if err != nil {
		return fail(err)
	}
	if err := eng.LoadWeights(bytes.NewReader(w)); err != nil {
		return fail(err)
	}
	if o.Optimizer {
		if _, ok := ck.Manifest.File(trainapi.OptimizerFile); ok {
			o, err := train.ReadAll(ctx, ck, trainapi.OptimizerFile)
			if err != nil {
				return fail(err)
			}
			if err := eng.LoadOptimizer(bytes.NewReader(o)); err != nil {
				return fail(err)
			}
		}
	}
	return m, nil
}

// checkProcessor: the processor must resize to the tower's square input.
func checkProcessor(cfg visioncfg.Config, p imageproc.Config) error {
	if err := p.Validate(); err != nil {
		return err
	}
	if !p.DoResize || p.Size.Height != cfg.ImageSize || p.Size.Width != cfg.ImageSize {
		return fmt.Errorf("processor size %dx%d (do_resize %v): the tower takes %dx%d images; set processor.size to {height: %d, width: %d}",
			p.Size.Height, p.Size.Width, p.DoResize, cfg.ImageSize, cfg.ImageSize, cfg.ImageSize, cfg.ImageSize)
	}
	return nil
}

// visionConfigHash is state.json's config_hash of a vision reward model.
func visionConfigHash(cfg visioncfg.Config) string {
	b, _ := json.Marshal(cfg)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// processorJSON is SiglipImageProcessor's preprocessor_config.json for p (limits are Temper's, not
// written).
func processorJSON(p imageproc.Config) ([]byte, error) {
	b, err := json.MarshalIndent(map[string]any{
		"image_processor_type": "SiglipImageProcessor", "processor_class": "SiglipProcessor",
		"do_resize": p.DoResize, "size": map[string]int{"height": p.Size.Height, "width": p.Size.Width},
		"resample": p.Resample, "do_rescale": p.DoRescale, "rescale_factor": p.RescaleFactor,
		"do_normalize": p.DoNormalize, "image_mean": p.ImageMean, "image_std": p.ImageStd,
	}, "", "  ")
	return append(b, '\n'), err
}

// writeVision commits a vision reward model: config.json, preprocessor_config.json,
// model.safetensors, the optimizer state when withOptimizer, state.json.
func writeVision(ctx context.Context, w *ckpt.Writer, m *VisionModel, st ckpt.State, withOptimizer bool) error {
	js, err := visioncfg.ToHFConfig(m.Config)
	if err != nil {
		return train.BadInput(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(js, &cfg); err != nil {
		return err
	}
	cfg["architectures"] = []string{ArchVisionReward}
	if js, err = json.MarshalIndent(cfg, "", "  "); err != nil {
		return err
	}
	if err := w.Add(ctx, trainapi.ConfigFile, bytes.NewReader(append(js, '\n'))); err != nil {
		return err
	}
	pjs, err := processorJSON(m.Processor)
	if err != nil {
		return err
	}
	if err := w.Add(ctx, PreprocessorFile, bytes.NewReader(pjs)); err != nil {
		return err
	}
	if err := train.Stream(ctx, w, trainapi.ModelFile, m.Engine.SaveWeights); err != nil {
		return err
	}
	if withOptimizer {
		if err := train.Stream(ctx, w, trainapi.OptimizerFile, m.Engine.SaveOptimizer); err != nil {
			return err
		}
	}
	st.ConfigHash = visionConfigHash(m.Config)
	return w.AddState(ctx, st)
}

// visionInit commits step 0 of a vision reward phase: a seeded tower and value head.
func (a *Activities) visionInit(ctx context.Context, in trainapi.RewardInitInput) (trainapi.RewardInitOutput, error) {
	op := fmt.Sprintf("train: reward init %s/%s (vision)", in.Run, in.Phase)
	if in.From != "" {
		return trainapi.RewardInitOutput{}, train.BadInput(fmt.Errorf("%s: from=%q: starting a vision reward model from a checkpoint is not implemented; leave from out (a seeded tower)", op, in.From))
	}
	if err := in.Vision.Config.Validate(); err != nil {
		return trainapi.RewardInitOutput{}, train.BadInput(fmt.Errorf("%s: model.vision: %w", op, err))
	}
	if err := checkProcessor(in.Vision.Config, in.Vision.Processor); err != nil {
		return trainapi.RewardInitOutput{}, train.BadInput(fmt.Errorf("%s: model.vision: %w", op, err))
	}
	if a.NewVision == nil {
		return trainapi.RewardInitOutput{}, fmt.Errorf("%s: this worker has no engine for vision reward models", op)
	}
	ref, err := a.Ckpt.Save(ctx, in.Store, in.Run, in.Phase, 0, func(w *ckpt.Writer) error {
		eng, err := a.NewVision(VisionEngineOptions{Model: in.Vision.Config, Seed: in.Seed})
		if err != nil {
			return err
		}
		defer eng.Close()
		m := &VisionModel{Engine: eng, Config: in.Vision.Config, Processor: in.Vision.Processor}
		return writeVision(ctx, w, m, ckpt.State{Step: 0, Scalars: map[string]float64{"new_head": 1}}, false)
	})
	if err != nil {
		return trainapi.RewardInitOutput{}, fmt.Errorf("%s: %w", op, err)
	}
	return trainapi.RewardInitOutput{Checkpoint: ref.URI, NewHead: true}, nil
}

// closeOnly is the chunk runner's engine for a vision model: the runner only closes it (the
// objective's Step and Write hold the vision engine itself).
type closeOnly struct {
	train.Engine
	close func() error
}

func (c closeOnly) Close() error { return c.close() }

// visionChunk trains in.Steps Bradley–Terry steps of the vision reward model at in.From.
func (a *Activities) visionChunk(ctx context.Context, in trainapi.RewardChunkInput, op string) (trainapi.ChunkOutput, error) {
	if in.Loss.LMCoef != 0 {
		return trainapi.ChunkOutput{}, train.BadInput(fmt.Errorf("%s: loss.lm_coef=%g: a vision reward model has no language model; set 0", op, in.Loss.LMCoef))
	}
	return train.RunChunk(ctx, a.Activities, in.ChunkHead, op, func() (*train.ChunkObjective[[]int], error) {
		m, err := LoadVision(ctx, a.Ckpt, a.NewVision, in.From, VisionLoad{Optim: in.Optim, Optimizer: !in.FreshOptimizer})
		if err != nil {
			return nil, err
		}
		pairs, err := a.imagePairs(ctx, in.Data.Train, m.Processor, cacheRoot(in.From))
		if err != nil {
			m.Engine.Close()
			return nil, err
		}
		obj := objective.VisionBradleyTerry(in.Loss)
		return &train.ChunkObjective[[]int]{Eng: closeOnly{close: m.Engine.Close}, Unit: "pairs",
			Next: func(cur data.Cursor) ([]int, data.Cursor, error) {
				idx, next := train.NextRows(len(pairs), in.Batch.Rows, cur)
				return idx, next, nil
			},
			Step: func(idx []int, lr float32) (train.StepResult, error) {
				res, err := m.Engine.StepObjective(obj, imagePairBatch(pairs, idx, in.Batch.Rows), lr)
				return visionStep(obj, res, len(idx)), err
			},
			Write: func(ctx context.Context, w *ckpt.Writer, st ckpt.State) error {
				return writeVision(ctx, w, m, st, true)
			},
		}, nil
	})
}

// visionStep is train.ObjectiveStep for a vision objective's metrics.
func visionStep(obj objective.VisionObjective, m map[string]float32, units int) train.StepResult {
	return train.ObjectiveStep(objective.Objective{Name: obj.Name, Metrics: obj.Metrics}, m, units)
}

// visionEvaluate measures a vision reward model on held-out image pairs (RewardEvaluate's metrics
// without the per-kind accuracies).
func (a *Activities) visionEvaluate(ctx context.Context, in trainapi.RewardEvalInput) (trainapi.RewardEvalOutput, error) {
	op := fmt.Sprintf("train: reward evaluate %s", in.Checkpoint)
	if in.Data.Heldout == "" {
		return trainapi.RewardEvalOutput{}, train.BadInput(fmt.Errorf("%s: data.heldout: a vision reward model is evaluated on a held-out JSONL of image pairs; set data.heldout", op))
	}
	if in.Loss.LMCoef != 0 {
		return trainapi.RewardEvalOutput{}, train.BadInput(fmt.Errorf("%s: loss.lm_coef=%g: a vision reward model has no language model; set 0", op, in.Loss.LMCoef))
	}
	m, err := LoadVision(ctx, a.Ckpt, a.NewVision, in.Checkpoint, VisionLoad{})
	if err != nil {
		return trainapi.RewardEvalOutput{}, err
	}
	defer m.Engine.Close()
	pairs, err := a.imagePairs(ctx, in.Data.Heldout, m.Processor, cacheRoot(in.Checkpoint))
	if err != nil {
		return trainapi.RewardEvalOutput{}, err
	}
	if in.Pairs > 0 && in.Pairs < len(pairs) {
		pairs = pairs[:in.Pairs]
	}
	obj := objective.VisionBradleyTerry(in.Loss)
	sums := map[string]float64{}
	for lo := 0; lo < len(pairs); lo += rewardEvalRows {
		hi := min(lo+rewardEvalRows, len(pairs))
		idx := make([]int, hi-lo)
		for i := range idx {
			idx[i] = lo + i
		}
		res, err := m.Engine.EvalObjective(obj, imagePairBatch(pairs, idx, rewardEvalRows))
		if err != nil {
			return trainapi.RewardEvalOutput{}, fmt.Errorf("%s: %w", op, err)
		}
		for _, name := range objective.BTMetrics {
			if name != "pairs" && name != "lm_loss" {
				sums[name] += float64(res[name]) * float64(hi-lo)
			}
		}
		activity.RecordHeartbeat(ctx, trainapi.Progress{Step: hi, Total: len(pairs)})
	}
	n := float64(len(pairs))
	metrics := map[string]float64{"heldout_pairs": n}
	for name, v := range sums {
		key := "heldout_" + name
		if name == "accuracy" {
			key = "heldout_pair_accuracy"
		}
		metrics[key] = v / n
	}
	return trainapi.RewardEvalOutput{Metrics: metrics}, nil
}

// cacheRoot is the directory of the phase whose checkpoint is uri (…/<run>/<phase>/step-N/): its
// preprocessed images live under images/ there.
func cacheRoot(uri string) string {
	s := strings.TrimSuffix(uri, "/")
	if i := strings.LastIndex(s, "/"); i > 0 {
		return s[:i]
	}
	return s
}

// imagePair is a pair's preprocessed images.
type imagePair struct{ chosen, rejected imageproc.Pixels }

// errFetch marks an image that could not be read for a reason a retry may fix (a store error).
var errFetch = errors.New("image store read failed")

// imagePairs reads the image pairs of uri and preprocesses their images with proc, each image
// once per phase: its pixels are cached in the store under root/images/<imageproc.CacheKey>.tpx,
// so a retried or later chunk decodes nothing. Bad data (a malformed line, a missing or
// truncated image, one over the limits) is a non-retryable error naming the file, the line and
// the field; a store error stays retryable.
func (a *Activities) imagePairs(ctx context.Context, uri string, proc imageproc.Config, root string) ([]imagePair, error) {
	if uri == "" {
		return nil, train.BadInput(errors.New("train: vision reward model: data.train: want a JSONL URI of image pairs (built-in tasks have text pairs)"))
	}
	raw, err := train.ReadLines(ctx, a.Ckpt, uri, func(r io.Reader, name string) ([]data.ImagePair, error) {
		return data.ReadImagePairs(r, name, proc.Limits)
	})
	if err != nil {
		return nil, err
	}
	fetch := func(ref imageproc.Ref, maxBytes int64) ([]byte, error) {
		rc, err := a.Ckpt.OpenObject(ctx, ref.String())
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
			return nil, fmt.Errorf("%w: %w", errFetch, err)
		}
		defer rc.Close()
		b, err := io.ReadAll(io.LimitReader(rc, maxBytes+1))
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errFetch, err)
		}
		return b, nil
	}
	seen := map[string]imageproc.Pixels{}
	load := func(p data.ImagePair, part imageproc.Part) (imageproc.Pixels, error) {
		bad := func(err error) error {
			err = fmt.Errorf("%s:%d: %w", uri, p.Line, err)
			if errors.Is(err, errFetch) {
				return err
			}
			return train.BadInput(err)
		}
		b, err := imageproc.Load(part, fetch, proc.Limits)
		if err != nil {
			return imageproc.Pixels{}, bad(err)
		}
		key := imageproc.CacheKey(b, proc)
		if px, ok := seen[key]; ok {
			return px, nil
		}
		name := "images/" + key + ".tpx"
		if u, ok, err := train.ExistingObject(ctx, a.Ckpt, root, name); err != nil {
			return imageproc.Pixels{}, err
		} else if ok {
			cached, err := train.ReadObject(ctx, a.Ckpt, u)
			if err != nil {
				return imageproc.Pixels{}, err
			}
			if px, err := imageproc.UnmarshalPixels(cached); err == nil {
				seen[key] = px
				return px, nil
			}
			// A damaged cache entry is recomputed and overwritten.
		}
		px, err := imageproc.Preprocess(b, proc)
		if err != nil {
			return imageproc.Pixels{}, bad(&imageproc.FieldError{Field: part.Field + ".image", Err: fmt.Errorf("%s: %w", part.Ref, err)})
		}
		if _, err := train.PutObject(ctx, a.Ckpt, root, name, imageproc.MarshalPixels(px)); err != nil {
			return imageproc.Pixels{}, err
		}
		seen[key] = px
		return px, nil
	}
	out := make([]imagePair, len(raw))
	for i, p := range raw {
		if out[i].chosen, err = load(p, p.Chosen); err != nil {
			return nil, err
		}
		if out[i].rejected, err = load(p, p.Rejected); err != nil {
			return nil, err
		}
		if i%64 == 63 {
			activity.RecordHeartbeat(ctx, trainapi.Progress{Step: i + 1, Total: len(raw)})
		}
	}
	return out, nil
}

// imagePairBatch is the ImagePairBatch of pairs idx, padded to rows (padding rows: zero images,
// weight 0).
func imagePairBatch(pairs []imagePair, idx []int, rows int) objective.ImagePairBatch {
	px := pairs[idx[0]].chosen
	plane := px.C * px.H * px.W
	mk := func() objective.Images {
		return objective.Images{Rows: rows, Channels: px.C, Size: px.H, Pixels: make([]float32, rows*plane)}
	}
	b := objective.ImagePairBatch{Chosen: mk(), Rejected: mk(), Weight: make([]float32, rows)}
	for r, i := range idx {
		copy(b.Chosen.Pixels[r*plane:], pairs[i].chosen.Values)
		copy(b.Rejected.Pixels[r*plane:], pairs[i].rejected.Values)
		b.Weight[r] = 1
	}
	return b
}
