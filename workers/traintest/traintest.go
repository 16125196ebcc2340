// Package traintest runs the trainer families' activities in Temporal's activity test environment
// (heartbeats work) on the engine workers give them, for the families' tests. It lives beside
// workers because it wires the real engine (tpu), which the activities packages never import.
package traintest

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/safetensors"
	"github.com/temperml/temper/workers"
)

// Env is one test's trainer: every family registered under its contract names, a file store in
// the test's temporary directory.
type Env struct {
	T     *testing.T
	Deps  *train.Activities // shared by every family; a test may swap NewEngine
	Env   *testsuite.TestActivityEnvironment
	Store string
}

// NewEngine is the workers' default engine (pure-Go backend, sequential executor).
func NewEngine(o train.EngineOptions) (train.Engine, error) {
	return workers.NewTrainEngine(workers.EngineOptions{})(o)
}

// New registers every trainer family on a fresh activity test environment.
func New(t *testing.T) *Env {
	var ts testsuite.WorkflowTestSuite
	deps := &train.Activities{Ckpt: ckpt.New(ckpt.Options{}), NewEngine: NewEngine}
	env := ts.NewTestActivityEnvironment()
	workers.RegisterTrainer(env, deps)
	env.SetTestTimeout(time.Hour)
	return &Env{T: t, Deps: deps, Env: env, Store: "file://" + t.TempDir()}
}

// Run executes the activity registered as name and decodes its result into out.
func (e *Env) Run(name string, in, out any) error {
	e.T.Helper()
	v, err := e.Env.ExecuteActivity(name, in)
	if err != nil {
		return err
	}
	return v.Get(out)
}

// Must is Run that fails the test on an error.
func (e *Env) Must(name string, in, out any) {
	e.T.Helper()
	if err := e.Run(name, in, out); err != nil {
		e.T.Fatalf("%s: %v", name, err)
	}
}

// SlowSteps is an engine whose optimizer steps take at least D: one step over a large batch on a
// loaded machine.
type SlowSteps struct {
	train.Engine
	D time.Duration
}

func (s SlowSteps) StepObjective(obj objective.Objective, b objective.Batch, lr float32) (map[string]float32, error) {
	time.Sleep(s.D)
	return s.Engine.StepObjective(obj, b, lr)
}

// RunSlowOnce runs the trainer activity registered as name once (no retries) from a test workflow
// whose activity options set heartbeat as the heartbeat timeout, on e's engines made SlowSteps of
// slow, and decodes its result into out: Temporal times the attempt out when the activity stops
// heartbeating for longer than heartbeat (an activity environment alone has no heartbeat timeout).
func (e *Env) RunSlowOnce(name string, heartbeat, slow time.Duration, in, out any) error {
	e.T.Helper()
	deps := *e.Deps
	deps.NewEngine = func(o train.EngineOptions) (train.Engine, error) {
		eng, err := e.Deps.NewEngine(o)
		return SlowSteps{eng, slow}, err
	}
	var ts testsuite.WorkflowTestSuite
	env := ts.NewTestWorkflowEnvironment()
	env.SetTestTimeout(10 * time.Minute)
	workers.RegisterTrainer(env, &deps)
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context, in json.RawMessage) (json.RawMessage, error) {
		ctx = workflow.WithActivityOptions(ctx, workflow.ActivityOptions{StartToCloseTimeout: 10 * time.Minute, HeartbeatTimeout: heartbeat,
			RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 1}})
		var out json.RawMessage
		err := workflow.ExecuteActivity(ctx, name, in).Get(ctx, &out)
		return out, err
	}, workflow.RegisterOptions{Name: "once"})
	env.ExecuteWorkflow("once", in)
	if !env.IsWorkflowCompleted() {
		return errors.New("traintest: the workflow did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		return err
	}
	return env.GetWorkflowResult(out)
}

// TinyModel is the "tiny" preset with 64-token sequences.
func TinyModel(t *testing.T) model.Config {
	t.Helper()
	cfg, err := model.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxSeq = 64
	return cfg
}

// WeightsOf reads a checkpoint's weights by Hugging Face name.
func WeightsOf(t *testing.T, uri string) map[string][]float32 {
	t.Helper()
	ck, err := ckpt.New(ckpt.Options{}).Read(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := ck.Open(context.Background(), trainapi.ModelFile)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	f, err := safetensors.Read(rc)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]float32{}
	for _, tn := range f.Tensors {
		if out[tn.Name], err = tn.ToFloat32(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// SHA is the manifest's sha256 of file name in checkpoint uri.
func SHA(t *testing.T, uri, name string) string {
	t.Helper()
	ck, err := ckpt.New(ckpt.Options{}).Read(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	f, ok := ck.Manifest.File(name)
	if !ok {
		t.Fatalf("%s has no %s", uri, name)
	}
	return f.SHA256
}

// IsInvalidInput reports a non-retryable application error (bad input or config).
func IsInvalidInput(err error) bool {
	var app *temporal.ApplicationError
	return errors.As(err, &app) && app.NonRetryable()
}
