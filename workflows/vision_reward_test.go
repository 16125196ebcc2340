package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/reward"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/rewardmodel"
	"github.com/temperml/temper/algorithms/imageproc"
	"github.com/temperml/temper/algorithms/verify"
	"github.com/temperml/temper/scripts/design"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// countingVision counts the pictures a vision reward model scores.
type countingVision struct {
	rewardmodel.VisionEngine
	calls *atomic.Int64
}

func (c countingVision) Rewards(ims []imageproc.Pixels) ([]float32, error) {
	c.calls.Add(1)
	return c.VisionEngine.Rewards(ims)
}

// Floors of TestVisionRewardPipeline. Measured here (sequential executor, AVX-512 machine): held-out
// pairwise accuracy 0.970 (0.380 before training; 200 pairs, so one standard error is ~0.012), and
// the critic verifier ranks 56/60 rendered held-out pairs right (0.93). The floors sit ~10 standard
// errors lower, at issue 43's acceptance figure for the critic, because machines of another vector
// ISA round differently and so train along another trajectory; with shuffled labels
// (TEMPER_VISION_SHUFFLE=1) the accuracy falls far below them (docs/vision.md).
const (
	visionAccuracyFloor = 0.85
	visionCriticFloor   = 0.80
)

// TestVisionRewardPipeline trains a tiny vision reward model (random-init SigLIP tiny: 32×32
// images, 8-pixel patches) in a real pipeline on the in-process server, on synthetic design
// preference pairs (scripts/design: a column aligned to a grid without overlap against its twin
// with ragged edges or an overlap; 10% label noise in training, clean held-out pairs of other
// layouts), and checks held-out pairwise accuracy against a floor; then the critic verifier with
// render: layout scores held-out layouts through the renderer with the trained checkpoint, and a
// malformed layout gets the layout verifier's feedback with no model call.
//
// TEMPER_VISION_SHUFFLE=1 trains on random labels (noise 0.5): the test must then fail.
// TEMPER_VISION_STEPS and TEMPER_VISION_TRAIN change the run's length and data (measurements).
func TestVisionRewardPipeline(t *testing.T) {
	if testing.Short() && os.Getenv("TEMPER_VISION_PIPELINE") == "" {
		t.Skip("about a minute of training on 2 cores: run without -short, or set TEMPER_VISION_PIPELINE=1")
	}
	knob := func(name string, def int) int {
		if s := os.Getenv(name); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil || v <= 0 {
				t.Fatalf("%s=%q: want a positive integer", name, s)
			}
			return v
		}
		return def
	}
	steps, nTrain := knob("TEMPER_VISION_STEPS", 240), knob("TEMPER_VISION_TRAIN", 800)
	noise := 0.1
	if os.Getenv("TEMPER_VISION_SHUFFLE") != "" {
		noise = 0.5
	}
	dir := t.TempDir()
	trainFile, heldFile := filepath.Join(dir, "train.jsonl"), filepath.Join(dir, "heldout.jsonl")
	if err := design.WritePairs(trainFile, design.Pairs(nTrain, 1, noise), 32, false); err != nil {
		t.Fatal(err)
	}
	heldPairs := design.Pairs(200, 1001, 0)
	if err := design.WritePairs(heldFile, heldPairs, 32, true); err != nil {
		t.Fatal(err)
	}
	env := testenv.Get(t)
	env.Roles(t, workflows.QueueTemper)
	engine := workers.NewVisionEngine(workers.EngineOptions{})
	trainerWorker(t, env, train.Register, func(r train.Registrar, deps *train.Activities) {
		rewardmodel.Register(r, deps, rewardmodel.WithVision(engine))
	})
	cfg := fmt.Sprintf(`{"model":{"vision":{"preset":"tiny"}},"data":{"train":"file://%s","heldout":"file://%s"},
		"batch":{"rows":16},"loss":{"center_coef":0.01},"steps":%d,"chunk_steps":%d,"eval":{"pairs":200},
		"optimizer":{"lr":0.001,"warmup_steps":20,"min_lr_ratio":0.1,"weight_decay":0.01,"beta1":0.9,"beta2":0.99,"eps":1e-8,"clip_norm":1},
		"heartbeat_timeout":"60s"}`, trainFile, heldFile, steps, max(steps/3, 1))
	id := fmt.Sprintf("vision-rm-%d", time.Now().UnixNano())
	run, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: workflows.QueueTemper, WorkflowExecutionTimeout: 20 * time.Minute},
		workflows.PipelineName, workflows.PipelineInput{Name: "vrm", Store: "file://" + t.TempDir(), Seed: 3, Phases: []workflows.PhaseSpec{
			{Name: "critic", Kind: "reward", Config: json.RawMessage(cfg)}}})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	r := out.Phases[0]
	m := r.Metrics
	t.Logf("vision reward phase (%d steps, %d training pairs, noise %.1f, %.0fs): held-out accuracy %.3f (before %.3f), bt_loss %.3f, train accuracy %.3f, %.0f pairs/s",
		steps, nTrain, noise, time.Since(start).Seconds(), m["heldout_pair_accuracy"], m["heldout_pair_accuracy_before"], m["heldout_bt_loss"], m["train_pair_accuracy"], m["pairs_per_s"])
	if r.Kind != "reward" || m["heldout_pairs"] != 200 || m["new_head"] != 1 || m["non_finite_steps"] != 0 {
		t.Fatalf("phase result %+v", r)
	}
	if acc := m["heldout_pair_accuracy"]; acc < visionAccuracyFloor {
		t.Fatalf("held-out pairwise accuracy %.3f < %.2f", acc, visionAccuracyFloor)
	}
	replayAll(t, env.Client, id)

	// The critic verifier on rendered layouts, with the trained checkpoint.
	var calls atomic.Int64
	counted := func(o rewardmodel.VisionEngineOptions) (rewardmodel.VisionEngine, error) {
		e, err := engine(o)
		if err != nil {
			return nil, err
		}
		return countingVision{e, &calls}, nil
	}
	factory := reward.NewCriticFactory(ckpt.New(ckpt.Options{}), nil, reward.WithVisionEngine(counted))
	v, err := factory(json.RawMessage(fmt.Sprintf(`{"checkpoint":%q,"render":"layout","canvas":{"w":100,"h":100}}`, r.Checkpoint)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	right := 0
	const scored = 60
	for _, p := range heldPairs[:scored] {
		good, err := v.Verify(ctx, verify.Sample{Completion: p.Chosen.JSON()})
		if err != nil {
			t.Fatal(err)
		}
		bad, err := v.Verify(ctx, verify.Sample{Completion: "```json\n" + p.Rejected.JSON() + "\n```"})
		if err != nil {
			t.Fatal(err)
		}
		if !(good.Score > 0 && good.Score < 1 && bad.Score > 0 && bad.Score < 1) {
			t.Fatalf("scores %v / %v: want sigmoid(reward) in (0, 1)", good, bad)
		}
		if good.Score > bad.Score {
			right++
		}
	}
	t.Logf("critic verifier: ranks %d of %d held-out pairs right through the renderer", right, scored)
	if float64(right)/scored < visionCriticFloor {
		t.Fatalf("the critic verifier ranks %d/%d held-out rendered pairs right, floor %.2f", right, scored, visionCriticFloor)
	}
	if calls.Load() != 2*scored {
		t.Fatalf("%d model calls for %d pictures", calls.Load(), 2*scored)
	}
	layout, err := verify.NewLayout(json.RawMessage(`{"canvas":{"w":100,"h":100},"ids":["b0"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{`{"boxes": [`, `no layout here`, `{"boxes":[{"id":"a","x":1,"y":1,"w":5,"h":5},{"id":"a","x":9,"y":9,"w":5,"h":5}]}`} {
		got, err := v.Verify(ctx, verify.Sample{Completion: bad})
		if err != nil {
			t.Fatal(err)
		}
		want, err := layout.Verify(ctx, verify.Sample{Completion: bad})
		if err != nil {
			t.Fatal(err)
		}
		if got.Pass || got.Score != 0 || got.Feedback == "" || !strings.HasPrefix(want.Feedback, got.Feedback) {
			t.Errorf("malformed layout %q: critic %+v, layout verifier says %q", bad, got, want.Feedback)
		}
	}
	if calls.Load() != 2*scored {
		t.Fatalf("malformed layouts reached the model: %d calls", calls.Load())
	}
}

// TestVisionCriticParams: the critic's render options are checked by name.
func TestVisionCriticParams(t *testing.T) {
	f := reward.NewCriticFactory(nil, nil)
	for _, c := range []struct{ params, want string }{
		{`{"checkpoint":"file:///x/","render":"layout","canvas":{"w":100,"h":100}}`, ""},
		{`{"checkpoint":"file:///x/","render":"svg","canvas":{"w":100,"h":100}}`, `render="svg": allowed values`},
		{`{"checkpoint":"file:///x/","render":"layout"}`, "canvas"},
		{`{"checkpoint":"file:///x/","canvas":{"w":100,"h":100}}`, "render: layout only"},
	} {
		_, err := f(json.RawMessage(c.params))
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.params, err, c.want)
		}
	}
}

// TestVisionRewardConfig: a reward phase's model.vision is resolved and checked by name.
func TestVisionRewardConfig(t *testing.T) {
	data := `"data":{"train":"file:///t.jsonl","heldout":"file:///h.jsonl"}`
	for _, c := range []struct{ raw, want string }{
		{`{"model":{"vision":{}},` + data + `}`, ""},
		{`{"model":{"vision":{"preset":"small","image_size":48,"patch_size":16}},` + data + `}`, ""},
		{`{"model":{"vision":{"preset":"huge"}},` + data + `}`, "model.vision.preset"},
		{`{"model":{"vision":{"image_size":36}},` + data + `}`, ""},
		{`{"model":{"vision":{"patch_size":64}},` + data + `}`, "patch_size=64"},
		{`{"model":{"vision":{"processor":{"do_resize":true,"size":{"height":64,"width":64},"resample":3,"do_rescale":true,"rescale_factor":0.0039215686,"do_normalize":true,"image_mean":[0.5,0.5,0.5],"image_std":[0.5,0.5,0.5]}}},` + data + `}`, "model.vision.processor.size"},
		{`{"model":{"vision":{}},"data":{"task":"add2"}}`, "data.task"},
		{`{"model":{"vision":{}},"data":{"train":"file:///t.jsonl"}}`, "data.heldout"},
		{`{"model":{"vision":{}},` + data + `,"loss":{"lm_coef":1}}`, "loss.lm_coef"},
		{`{"model":{"vision":{"preset":"tiny","config":{"d_model":8}}},` + data + `}`, "not both"},
		{`{"model":{"vision":{"layers":2}},` + data + `}`, "unknown field"},
	} {
		_, err := workflows.DecodePhaseConfig("reward", json.RawMessage(c.raw), "config")
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: error %v, want one containing %q", c.raw, err, c.want)
		}
	}
	var vs workflows.VisionRewardSpec
	vm, err := vs.Resolve()
	if err != nil || vm.Config.ImageSize != 32 || vm.Processor.Size.Height != 32 {
		t.Fatalf("default vision spec: %+v, %v", vm, err)
	}
}
