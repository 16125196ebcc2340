package distill_test

import (
	"math"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"github.com/temperml/temper/algorithms/objective/objectivecfg"
	"github.com/temperml/temper/workers/traintest"
)

// distillEnv is a trainer with a fresh tiny student and two teachers: the student's own weights, and
// a "small" model (another size) with other weights.
type distillEnv struct {
	*traintest.Env
	student, small string
}

func newDistillEnv(t *testing.T) distillEnv {
	e := traintest.New(t)
	tiny := traintest.TinyModel(t)
	small, err := model.Preset("small")
	if err != nil {
		t.Fatal(err)
	}
	small.MaxSeq = 64
	var s, tch trainapi.InitOutput
	e.Must(trainapi.InitName, trainapi.InitInput{Store: e.Store, Run: "r", Phase: "student", Model: modelcfg.Config(tiny), Seed: 3}, &s)
	e.Must(trainapi.InitName, trainapi.InitInput{Store: e.Store, Run: "r", Phase: "teacher", Model: modelcfg.Config(small), Seed: 5}, &tch)
	return distillEnv{Env: e, student: s.Checkpoint, small: tch.Checkpoint}
}

func (d distillEnv) chunk(phase string, steps int, loss objectivecfg.DistillConfig, teacher, targets string) (trainapi.ChunkOutput, error) {
	in := trainapi.DistillChunkInput{
		ChunkHead: trainapi.ChunkHead{Store: d.Store, Run: "r", Phase: phase, From: d.student, Steps: steps, TotalSteps: steps,
			Cursor: data.Cursor{Seed: 1}, Optim: trainapi.Optim{LR: 3e-3, Beta1: 0.9, Beta2: 0.99, Eps: 1e-8, ClipNorm: 1}, FreshOptimizer: true},
		Data:  trainapi.DataSpec{Task: "add2", TrainExamples: 40, HeldoutExamples: 4},
		Batch: trainapi.BatchSpec{Rows: 4, Seq: 24},
		Loss:  loss, Teacher: teacher, Targets: targets,
	}
	var out trainapi.ChunkOutput
	err := d.Run(trainapi.DistillChunkName, in, &out)
	return out, err
}

func (d distillEnv) sha(out trainapi.ChunkOutput) string {
	return traintest.SHA(d.T, out.Checkpoint, trainapi.ModelFile)
}

// TestDistillGKDMixture: GKD's on-policy mixture (λ 0.5, β-skewed JSD) against a teacher of another
// size: half of each batch is the student's own samples, the divergence is positive and finite, a
// rerun from the same input recomputes the same checkpoint bit for bit (the samples' seeds derive from
// the data cursor), and the on-policy rows change the training (λ 0 ends elsewhere). A student
// distilled from itself sees a divergence of 0 on its own samples and on the data alike.
func TestDistillGKDMixture(t *testing.T) {
	d := newDistillEnv(t)
	gkd := objectivecfg.DefaultDistill()
	gkd.Divergence, gkd.Beta, gkd.Lambda, gkd.SampleTokens = objectivecfg.DivJSD, 0.5, 0.5, 6
	out, err := d.chunk("gkd", 2, gkd, d.small, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("gkd: loss %g, metrics %v", out.Loss, out.Metrics)
	if out.Metrics["on_policy_rows"] != 2 || !(out.Metrics["jsd"] > 0) || out.NonFinite != 0 || out.Metrics["tokens"] <= 0 {
		t.Fatalf("gkd chunk: %+v", out)
	}
	// jsd at β 0.5 is bounded by log 2 per token (τ 1: no scaling).
	if out.Metrics["jsd"] > math.Ln2 {
		t.Fatalf("jsd %g > log 2", out.Metrics["jsd"])
	}
	again, err := d.chunk("gkd-again", 2, gkd, d.small, "")
	if err != nil {
		t.Fatal(err)
	}
	if d.sha(again) != d.sha(out) || again.Loss != out.Loss {
		t.Fatalf("rerun differs: loss %g vs %g", again.Loss, out.Loss)
	}
	off := gkd
	off.Lambda = 0
	offOut, err := d.chunk("off-policy", 2, off, d.small, "")
	if err != nil {
		t.Fatal(err)
	}
	if offOut.Metrics["on_policy_rows"] != 0 || d.sha(offOut) == d.sha(out) {
		t.Fatalf("λ 0: on_policy_rows %g, same weights as λ 0.5: %v", offOut.Metrics["on_policy_rows"], d.sha(offOut) == d.sha(out))
	}
	// Self-distillation: the first step's divergence is 0 (the teacher is the student).
	self := gkd
	self.Lambda = 1
	selfOut, err := d.chunk("self", 1, self, d.student, "")
	if err != nil {
		t.Fatal(err)
	}
	if selfOut.Metrics["on_policy_rows"] != 4 || math.Abs(selfOut.Loss) > 1e-6 {
		t.Fatalf("self-distillation on own samples: loss %g, on_policy_rows %g; want 0 and 4", selfOut.Loss, selfOut.Metrics["on_policy_rows"])
	}
}

// TestDistillTargetsMatchOnTheFly: the precomputed top-k targets (DistillTargets, once into the
// store) train exactly what the teacher computed on the fly trains: the same checkpoint bit for bit.
// A retried DistillTargets returns the stored object.
func TestDistillTargetsMatchOnTheFly(t *testing.T) {
	d := newDistillEnv(t)
	top := objectivecfg.DefaultDistill()
	top.TopK, top.Temperature = 8, 2
	in := trainapi.DistillTargetsInput{Store: d.Store, Run: "r", Phase: "pre", Teacher: d.small,
		Data: trainapi.DataSpec{Task: "add2", TrainExamples: 40, HeldoutExamples: 4}, Seq: 24, TopK: 8, Temperature: 2, Seed: 1}
	var tg trainapi.DistillTargetsOutput
	d.Must(trainapi.DistillTargetsName, in, &tg)
	if tg.Examples != 40 || tg.Resumed || !strings.Contains(tg.Targets, "/pre/teacher/targets-") {
		t.Fatalf("targets: %+v", tg)
	}
	var again trainapi.DistillTargetsOutput
	d.Must(trainapi.DistillTargetsName, in, &again)
	if !again.Resumed || again.Targets != tg.Targets {
		t.Fatalf("retried targets: %+v", again)
	}
	pre, err := d.chunk("pre", 2, top, "", tg.Targets)
	if err != nil {
		t.Fatal(err)
	}
	fly, err := d.chunk("fly", 2, top, d.small, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("precomputed loss %g, on the fly %g", pre.Loss, fly.Loss)
	if !(pre.Metrics["forward_kl_topk"] > 0) || pre.Loss != fly.Loss || d.sha(pre) != d.sha(fly) {
		t.Fatalf("precomputed %+v\non the fly %+v", pre, fly)
	}
}

// TestDistillBadInput: mistakes are non-retryable errors that say what to change.
func TestDistillBadInput(t *testing.T) {
	d := newDistillEnv(t)
	big := traintest.TinyModel(t)
	big.Vocab = 272
	var other trainapi.InitOutput
	d.Must(trainapi.InitName, trainapi.InitInput{Store: d.Store, Run: "r", Phase: "vocab", Model: modelcfg.Config(big), Seed: 1}, &other)
	top := objectivecfg.DefaultDistill()
	top.TopK = 4
	mix := top
	mix.Lambda = 0.5
	for _, c := range []struct {
		name             string
		loss             objectivecfg.DistillConfig
		teacher, targets string
		want             string
	}{
		{"vocab", objectivecfg.DefaultDistill(), other.Checkpoint, "", "same tokenizer"},
		{"neither", objectivecfg.DefaultDistill(), "", "", "exactly one of teacher"},
		{"mixture-precomputed", mix, "", "file:///nowhere.jsonl", "loss.lambda 0"},
		{"bad-divergence", objectivecfg.DistillConfig{Divergence: "kl", Temperature: 1}, d.small, "", `loss.divergence: "kl": allowed values`},
	} {
		_, err := d.chunk(c.name, 1, c.loss, c.teacher, c.targets)
		if err == nil || !strings.Contains(err.Error(), c.want) || !traintest.IsInvalidInput(err) {
			t.Errorf("%s: error %v, want a non-retryable one containing %q", c.name, err, c.want)
		}
	}
}

// noLogits is an engine whose Caps offer no logits.
type noLogits struct{ train.Engine }

func (e noLogits) Caps() train.Caps {
	c := e.Engine.Caps()
	c.Logits = nil
	return c
}

// TestDistillTeacherWithoutLogits: a teacher is asked for its logits when it is loaded; an engine that
// cannot read them is refused then, a non-retryable error, not a failure at the first step.
func TestDistillTeacherWithoutLogits(t *testing.T) {
	d := newDistillEnv(t)
	d.Deps.NewEngine = func(o train.EngineOptions) (train.Engine, error) {
		eng, err := traintest.NewEngine(o)
		return noLogits{eng}, err
	}
	_, err := d.chunk("no-logits", 1, objectivecfg.DefaultDistill(), d.small, "")
	if err == nil || !strings.Contains(err.Error(), "cannot compute logits") || !traintest.IsInvalidInput(err) {
		t.Fatalf("a teacher without logits: %v", err)
	}
}
