package reward

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	"github.com/temperml/temper/activities/train/rewardmodel"
	"github.com/temperml/temper/algorithms/imageproc"
	"github.com/temperml/temper/algorithms/layoutrender"
	"github.com/temperml/temper/algorithms/verify"
)

// CriticOption configures the critic verifier's factory.
type CriticOption func(*criticCache)

// WithVisionEngine gives the critic the engine factory of vision reward models (render: layout).
func WithVisionEngine(f rewardmodel.NewVisionEngine) CriticOption {
	return func(c *criticCache) { c.newVision = f }
}

// layoutCritic is the critic with render: layout.
type layoutCritic struct {
	p     CriticParams
	cache *criticCache
}

// Verify draws the completion and scores the picture. A layout that cannot be drawn is a failing
// verdict (score 0, the least a sigmoid score comes near) with the layout verifier's feedback,
// and the model is not called; Partial[verify.AestheticDrawn] counts such layouts, as
// "aesthetic"'s does.
func (c *layoutCritic) Verify(ctx context.Context, s verify.Sample) (verify.Verdict, error) {
	if c.cache.cl == nil || c.cache.newVision == nil {
		return verify.Verdict{}, errors.New("verify: critic: this worker has no engine to run vision reward models (workers wire one)")
	}
	m, err := c.cache.vision.get(ctx, c.cache, c.p.Checkpoint)
	if err != nil {
		return verify.Verdict{}, err
	}
	size := m.Config.ImageSize
	res, err := layoutrender.Render(s.Completion, layoutrender.Options{Canvas: c.p.Canvas, Width: size, Height: size, Tag: c.p.Tag})
	var le *layoutrender.LayoutError
	if errors.As(err, &le) {
		return verify.Verdict{Feedback: le.Feedback, Partial: map[string]float64{verify.AestheticDrawn: 0}}, nil
	} else if err != nil {
		return verify.Verdict{}, fmt.Errorf("verify: critic: render: %w", err)
	}
	px, err := imageproc.Process(imageproc.FromImage(res.Image), m.Processor)
	if err != nil {
		return verify.Verdict{}, fmt.Errorf("verify: critic: preprocess the rendered layout: %w", err)
	}
	r, err := m.Engine.Rewards([]imageproc.Pixels{px})
	if err != nil {
		return verify.Verdict{}, fmt.Errorf("verify: critic %s: %w", c.p.Checkpoint, err)
	}
	if math.IsNaN(float64(r[0])) {
		return verify.Verdict{}, fmt.Errorf("verify: critic %s: reward is NaN", c.p.Checkpoint)
	}
	score := 1 / (1 + math.Exp(-float64(r[0])))
	v := verify.Verdict{Score: score, Pass: score >= c.p.Threshold, Partial: map[string]float64{verify.AestheticDrawn: 1}}
	if !v.Pass {
		v.Feedback = fmt.Sprintf("the learned critic rates this design %.2f, below %.2f", score, c.p.Threshold)
	}
	return v, nil
}

// drawableLayout is "aesthetic"'s drawable check: why layoutrender would refuse the completion
// (its feedback, as the critic gives it), or nil.
func drawableLayout(completion, tag string) error {
	err := layoutrender.Check(completion, tag)
	var le *layoutrender.LayoutError
	if errors.As(err, &le) {
		return errors.New(le.Feedback)
	}
	return err
}

// visionCache keeps vision reward models loaded per checkpoint URI, at most MaxCriticModels (the
// oldest loaded is dropped; a VisionRuntime's methods are safe for concurrent use and a closed one
// answers with an error, which fails only the verification that raced with its eviction).
type visionCache struct {
	mu     sync.Mutex
	models map[string]*rewardmodel.VisionModel
	order  []string
}

func (v *visionCache) get(ctx context.Context, c *criticCache, uri string) (*rewardmodel.VisionModel, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if m, ok := v.models[uri]; ok {
		return m, nil
	}
	m, err := rewardmodel.LoadVision(ctx, c.cl, c.newVision, uri, rewardmodel.VisionLoad{})
	if err != nil {
		return nil, fmt.Errorf("verify: critic: %w", err)
	}
	if v.models == nil {
		v.models = map[string]*rewardmodel.VisionModel{}
	}
	v.models[uri] = m
	v.order = append(v.order, uri)
	for len(v.order) > max(c.max, 1) {
		old := v.order[0]
		v.order = v.order[1:]
		v.models[old].Engine.Close()
		delete(v.models, old)
	}
	return m, nil
}
