package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/demo/demoapi"
	"github.com/temperml/temper/internal/config"
)

// DemoConfig configures the placeholder "demo" phase: a heartbeating activity that sleeps per step.
type DemoConfig struct {
	Steps            int             `json:"steps" default:"20" help:"steps to run"`
	StepDuration     config.Duration `json:"step_duration" default:"250ms" help:"time per step"`
	HeartbeatTimeout config.Duration `json:"heartbeat_timeout" default:"5s" help:"a worker silent this long is presumed dead and the step retried elsewhere"`
	FailAtStep       int             `json:"fail_at_step,omitempty" default:"0" help:"inject one failure at this step (testing retries)"`
}

// Validate checks ranges.
func (c *DemoConfig) Validate() error {
	switch {
	case c.Steps <= 0 || c.Steps > 1_000_000:
		return &config.FieldError{Path: "steps", Msg: fmt.Sprintf("%d: want 1..1000000", c.Steps)}
	case c.StepDuration < 0:
		return &config.FieldError{Path: "step_duration", Msg: "must not be negative"}
	case c.HeartbeatTimeout.D() < time.Second:
		return &config.FieldError{Path: "heartbeat_timeout", Msg: "want at least 1s"}
	}
	return nil
}

func init() {
	RegisterPhase(PhaseKind{
		Kind:         "demo",
		WorkflowName: "Demo",
		Doc:          "placeholder phase: a heartbeating activity on the trainer queue that sleeps per step",
		NewConfig: func() PhaseConfig {
			return &DemoConfig{Steps: 20, StepDuration: config.Duration(250 * time.Millisecond), HeartbeatTimeout: config.Duration(5 * time.Second)}
		},
		Workflow: Demo,
	})
}

// Demo runs the demo.Tick activity once on the trainer queue.
func Demo(ctx workflow.Context, in PhaseInput) (PhaseOutput, error) {
	c, err := DecodePhaseConfig(in.Kind, in.Config, "config")
	if err != nil {
		return PhaseOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
	}
	cfg := c.(*DemoConfig)
	actx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		TaskQueue:           QueueTrainer,
		StartToCloseTimeout: time.Duration(cfg.Steps)*cfg.StepDuration.D()*2 + time.Minute,
		HeartbeatTimeout:    cfg.HeartbeatTimeout.D(),
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    10 * time.Second,
		},
	})
	var out demoapi.TickOutput
	err = workflow.ExecuteActivity(actx, demoapi.TickName, demoapi.TickInput{
		RunID: in.RunID, Phase: in.Phase, Store: in.Store, From: in.From,
		Steps: cfg.Steps, StepDuration: cfg.StepDuration.D(), FailAtStep: cfg.FailAtStep,
	}).Get(ctx, &out)
	if err != nil {
		return PhaseOutput{}, fmt.Errorf("demo %s/%s: %w", in.RunID, in.Phase, err)
	}
	return PhaseOutput{Checkpoint: out.Checkpoint, Metrics: map[string]float64{
		"steps": float64(out.Steps), "resumed_from": float64(out.ResumedFrom), "attempts": float64(out.Attempts),
	}}, nil
}
