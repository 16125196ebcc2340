package reward

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/rewardmodel"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/verify"
)

// CriticVerifier is the name of the learned critic: a reward model trained by a "reward" phase,
// used as a verifier.
const CriticVerifier = "critic"

// CriticParams configures the "critic" verifier.
type CriticParams struct {
	// Checkpoint is the reward model (file:///… or gs://…), the output of a "reward" phase.
	Checkpoint string `json:"checkpoint"`
	// Threshold: the sample passes when sigmoid(r) >= Threshold; 0 means 0.5 (r >= 0).
	Threshold float64 `json:"threshold,omitempty"`
	// Render "layout" draws the completion (a layout's JSON, algorithms/layoutrender) and scores
	// the picture with a vision reward model (a "reward" phase with model.vision); "" scores the
	// text with a decoder reward model.
	Render string `json:"render,omitempty"`
	// Canvas is the layout's coordinate space (render: layout; required), as the layout verifier's.
	Canvas verify.Size `json:"canvas,omitempty"`
	// Tag: read the layout from inside <tag>…</tag> (render: layout).
	Tag string `json:"tag,omitempty"`
}

// RenderLayout is CriticParams.Render for layouts.
const RenderLayout = "layout"

// DefaultCriticThreshold is the pass threshold when CriticParams.Threshold is 0.
const DefaultCriticThreshold = 0.5

// MaxCriticModels bounds the reward models a worker keeps loaded; the least recently used beyond
// it is closed once no verification is using it.
const MaxCriticModels = 2

// NewCriticFactory returns the factory of "critic": it scores prompt+completion with the reward
// model's value head read at the EOS (as the reward phase trained it) and reports
// Score = sigmoid(r), Pass = Score >= threshold. Models load on first use (through newEngine, the
// trainer's engine factory) and stay cached per checkpoint URI across Score calls. A checkpoint
// that cannot be loaded, or has no value head, makes Verify return an error (the item cannot be
// judged); a sample longer than the model's context fails. With a nil client or engine factory the
// factory still validates params (for config validation) and every Verify reports that this worker
// cannot run reward models.
//
// With render: layout, the completion is drawn by layoutrender at the vision model's input size
// (so the processor's resize is the exact no-op) and scored by the vision reward model at
// Checkpoint (loaded through the CriticOption's engine factory, WithVisionEngine); a layout that
// cannot be drawn gets the layout verifier's feedback, score 0, and no model call.
func NewCriticFactory(cl *ckpt.Client, newEngine train.NewEngine, opts ...CriticOption) verify.Factory {
	cache := newCriticCache(cl, newEngine)
	for _, o := range opts {
		o(cache)
	}
	return func(params json.RawMessage) (verify.Verifier, error) {
		p, err := decodeChecked[CriticParams](CriticVerifier, params)
		if err != nil {
			return nil, err
		}
		if p.Threshold == 0 {
			p.Threshold = DefaultCriticThreshold
		}
		if p.Render == RenderLayout {
			return &layoutCritic{p: p, cache: cache}, nil
		}
		return &critic{p: p, cache: cache}, nil
	}
}

func (p CriticParams) validate() error {
	if !strings.HasPrefix(p.Checkpoint, "file:///") && !strings.HasPrefix(p.Checkpoint, "gs://") {
		return fmt.Errorf("verify: critic params: checkpoint=%q: want the URI of a reward model (file:///… or gs://…)", p.Checkpoint)
	}
	if !(p.Threshold >= 0 && p.Threshold < 1) {
		return fmt.Errorf("verify: critic params: threshold=%g: want 0 <= threshold < 1 (0 means %g)", p.Threshold, DefaultCriticThreshold)
	}
	switch p.Render {
	case "":
		if p.Canvas != (verify.Size{}) || p.Tag != "" {
			return errors.New("verify: critic params: canvas and tag apply to render: layout only")
		}
	case RenderLayout:
		if !(p.Canvas.W > 0 && p.Canvas.H > 0) || math.IsInf(p.Canvas.W, 0) || math.IsInf(p.Canvas.H, 0) {
			return fmt.Errorf("verify: critic params: canvas={w:%g h:%g}: render: layout needs the layout's canvas (finite w > 0 and h > 0)", p.Canvas.W, p.Canvas.H)
		}
	default:
		return fmt.Errorf("verify: critic params: render=%q: allowed values: %q (score the text), %q", p.Render, "", RenderLayout)
	}
	return nil
}

type critic struct {
	p     CriticParams
	cache *criticCache
}

// Verify scores one sample. It is safe for concurrent use (the engine serializes executions).
func (c *critic) Verify(ctx context.Context, s verify.Sample) (verify.Verdict, error) {
	if err := c.cache.usable(CriticVerifier); err != nil {
		return verify.Verdict{}, err
	}
	m, err := c.cache.acquire(ctx, c.p.Checkpoint)
	if err != nil {
		return verify.Verdict{}, err
	}
	defer c.cache.release(m)
	ex := tasks.Example{Prompt: s.Prompt, Completion: s.Completion}
	if s.Prompt == "" {
		ex = tasks.Example{Text: s.Completion} // [BOS] completion EOS, as a prompt-less pair would be
	}
	if ex.Text == "" && ex.Prompt == "" {
		return verify.Verdict{Feedback: "empty output"}, nil
	}
	enc, err := train.Encoder().Encode(ex)
	if err != nil {
		return verify.Verdict{}, fmt.Errorf("verify: critic: encode: %w", err)
	}
	if len(enc.IDs) > m.cfg.MaxSeq {
		return verify.Verdict{Feedback: fmt.Sprintf("too long for the learned critic (%d tokens, at most %d)", len(enc.IDs), m.cfg.MaxSeq)}, nil
	}
	seq := 8
	for seq < len(enc.IDs) {
		seq *= 2
	}
	seq = min(seq, m.cfg.MaxSeq)
	obj := objective.RewardScores(1)
	out, err := m.eng.EvalObjective(obj, train.SequenceInputs([][]int{enc.IDs}, [][]bool{enc.Loss}, 1, seq))
	if err != nil {
		return verify.Verdict{}, fmt.Errorf("verify: critic %s: %w", c.p.Checkpoint, err)
	}
	r := float64(out[obj.Metrics[0]])
	if math.IsNaN(r) {
		return verify.Verdict{}, fmt.Errorf("verify: critic %s: reward is NaN", c.p.Checkpoint)
	}
	score := 1 / (1 + math.Exp(-r))
	v := verify.Verdict{Score: score, Pass: score >= c.p.Threshold}
	if !v.Pass {
		v.Feedback = fmt.Sprintf("the learned critic rates this %.2f, below %.2f", score, c.p.Threshold)
	}
	return v, nil
}

// decodeChecked decodes and validates the params of the verifier name.
func decodeChecked[P interface{ validate() error }](name string, params json.RawMessage) (P, error) {
	var p P
	if err := verify.DecodeParams(name, params, &p); err != nil {
		return p, err
	}
	return p, p.validate()
}

// criticCache keeps reward-model engines loaded per checkpoint URI.
type criticCache struct {
	cl        *ckpt.Client
	newEngine train.NewEngine
	newVision rewardmodel.NewVisionEngine
	max       int
	vision    visionCache

	mu     sync.Mutex
	models map[string]*criticModel
	tick   int64
}

type criticModel struct {
	uri   string
	ready chan struct{} // closed once eng/cfg/err are set
	eng   train.Engine
	cfg   model.Config
	err   error

	refs    int   // guarded by criticCache.mu
	used    int64 // guarded by criticCache.mu
	evicted bool  // guarded by criticCache.mu: close when refs drops to 0
}

// newCriticCache returns an empty cache of up to MaxCriticModels models loaded through newEngine.
func newCriticCache(cl *ckpt.Client, newEngine train.NewEngine) *criticCache {
	return &criticCache{cl: cl, newEngine: newEngine, max: MaxCriticModels, models: map[string]*criticModel{}}
}

// usable says why the verifier name cannot load models on this worker, or nil when it can.
func (c *criticCache) usable(name string) error {
	if c.cl == nil || c.newEngine == nil {
		return fmt.Errorf("verify: %s: this worker has no engine to run reward models (workers wire one)", name)
	}
	return nil
}

// acquire returns the loaded model of uri, loading it on first use (concurrent callers wait for
// one load); release must follow.
func (c *criticCache) acquire(ctx context.Context, uri string) (*criticModel, error) {
	c.mu.Lock()
	c.tick++
	m, ok := c.models[uri]
	loader := !ok
	if loader {
		m = &criticModel{uri: uri, ready: make(chan struct{})}
		c.models[uri] = m
	}
	m.refs++
	m.used = c.tick
	c.mu.Unlock()
	if loader {
		var ld *train.Loaded
		if ld, m.err = (train.Loader{Ckpt: c.cl, NewEngine: c.newEngine}).Load(ctx, uri, train.LoadOptions{Head: train.HeadRequired}); m.err == nil {
			m.eng, m.cfg = ld.Engine, ld.Config
		}
		close(m.ready)
		c.mu.Lock()
		if m.err != nil {
			delete(c.models, uri) // the next use tries again
		} else {
			c.evictLocked()
		}
		c.mu.Unlock()
	} else {
		select {
		case <-m.ready:
		case <-ctx.Done():
			c.release(m)
			return nil, fmt.Errorf("verify: critic: waiting for %s: %w", uri, ctx.Err())
		}
	}
	if m.err != nil {
		c.release(m)
		return nil, fmt.Errorf("verify: critic: %w", m.err)
	}
	return m, nil
}

func (c *criticCache) release(m *criticModel) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m.refs--
	if m.refs == 0 && m.evicted && m.eng != nil {
		m.eng.Close()
		m.eng = nil
	}
}

// evictLocked drops the least recently used loaded models beyond max.
func (c *criticCache) evictLocked() {
	for len(c.models) > c.max {
		var lru *criticModel
		for _, m := range c.models {
			select {
			case <-m.ready:
			default:
				continue // still loading
			}
			if lru == nil || m.used < lru.used {
				lru = m
			}
		}
		if lru == nil {
			return
		}
		delete(c.models, lru.uri)
		lru.evicted = true
		if lru.refs == 0 && lru.eng != nil {
			lru.eng.Close()
			lru.eng = nil
		}
	}
}
