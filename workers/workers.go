package workers

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/control"
	"github.com/temperml/temper/activities/control/controlapi"
	"github.com/temperml/temper/activities/demo"
	"github.com/temperml/temper/activities/demo/demoapi"
	"github.com/temperml/temper/activities/reward"
	"github.com/temperml/temper/activities/reward/sandbox"
	"github.com/temperml/temper/activities/rollout"
	"github.com/temperml/temper/activities/tools"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/distill"
	"github.com/temperml/temper/activities/train/lm"
	"github.com/temperml/temper/activities/train/policy"
	"github.com/temperml/temper/activities/train/preference"
	"github.com/temperml/temper/activities/train/rewardmodel"
	"github.com/temperml/temper/internal/config"
	"github.com/temperml/temper/workflows"
)

// ParseRoles turns "trainer,rollout" (or "all") into a list of roles, naming a misspelt one.
func ParseRoles(s string) ([]string, error) {
	if s == "" || s == "all" {
		return slices.Clone(workflows.Roles), nil
	}
	var out []string
	for _, r := range strings.Split(s, ",") {
		r = strings.TrimSpace(r)
		if !slices.Contains(workflows.Roles, r) {
			msg := fmt.Sprintf("unknown role %q", r)
			if c := config.Closest(r, workflows.Roles); c != "" {
				msg += fmt.Sprintf("; did you mean %q?", c)
			}
			return nil, &config.FieldError{Path: "roles", Msg: msg + " (allowed: " + strings.Join(workflows.Roles, ", ") + ", all)"}
		}
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out, nil
}

// roles is what each role's worker registers (besides <role>.Ping): the names are the contract
// packages' constants, which stored histories hold, so they never change here.
var roles = map[string]func(r worker.Registry, opts Options) error{
	workflows.QueueTemper: func(r worker.Registry, _ Options) error {
		RegisterWorkflows(r)
		r.RegisterActivityWithOptions(func(context.Context) (string, error) { return DefaultStoreURI(), nil },
			activity.RegisterOptions{Name: workflows.DefaultStoreName})
		return nil
	},
	workflows.QueueTrainer: func(r worker.Registry, opts Options) error {
		r.RegisterActivityWithOptions(demo.Activities{}.Tick, activity.RegisterOptions{Name: demoapi.TickName})
		// Held-out evaluations with eval.verifiers score as the reward role does (no code sandbox here).
		ra, err := NewRewardActivities(opts, false)
		if err != nil {
			return err
		}
		RegisterTrainer(r, &train.Activities{Ckpt: ckpt.New(ckpt.Options{}), NewEngine: NewTrainEngine(opts.Engine), Tools: ToolDispatcher{},
			Verifiers: ra.Registry()}, rewardmodel.WithVision(NewVisionEngine(opts.Engine)))
		ctl := &control.Activities{Ckpt: ckpt.New(ckpt.Options{})}
		r.RegisterActivityWithOptions(ctl.Log, activity.RegisterOptions{Name: controlapi.LogName})
		return nil
	},
	workflows.QueueRollout: func(r worker.Registry, opts Options) error {
		rollout.Register(r, &rollout.Activities{Ckpt: ckpt.New(ckpt.Options{}), NewEngine: NewTrainEngine(opts.Engine), Tools: ToolDispatcher{}, Sandbox: rewardSandbox})
		return nil
	},
	workflows.QueueReward: func(r worker.Registry, opts Options) error {
		ra, err := NewRewardActivities(opts, true)
		if err != nil {
			return err
		}
		reward.Register(r, ra)
		return nil
	},
	workflows.QueueTools: func(r worker.Registry, _ Options) error {
		ta, err := tools.New(rewardSandbox())
		if err != nil {
			return err
		}
		tools.Register(r, ta)
		return nil
	},
}

// Register puts a role's workflows or activities on a registry. Every role also answers <role>.Ping so
// `temper status` can tell whether a queue has live workers.
func Register(role string, r worker.Registry, opts Options) error {
	register, ok := roles[role]
	if !ok {
		return fmt.Errorf("workers: register: unknown role %q", role)
	}
	if err := register(r, opts); err != nil {
		return err
	}
	r.RegisterActivityWithOptions(demo.Activities{}.Ping, activity.RegisterOptions{Name: demoapi.PingName(role)})
	return nil
}

// RegisterWorkflows registers Pipeline and every phase kind's workflow; replayers use it too.
func RegisterWorkflows(r worker.WorkflowRegistry) {
	r.RegisterWorkflowWithOptions(workflows.Pipeline, workflow.RegisterOptions{Name: workflows.PipelineName})
	r.RegisterWorkflowWithOptions(workflows.ToolCall, workflow.RegisterOptions{Name: workflows.ToolCallName})
	for _, k := range workflows.PhaseKinds() {
		r.RegisterWorkflowWithOptions(k.Workflow, workflow.RegisterOptions{Name: k.WorkflowName})
	}
}

// NewRewardActivities builds the reward activities as a reward worker runs them: the built-in verifiers,
// "task", "code" on this process's sandbox (withSandbox; without it "code" explains why it is
// unavailable) and the learned critic. `temper score` uses it so that a spec tried there behaves as in a
// run.
func NewRewardActivities(opts Options, withSandbox bool) (*reward.Activities, error) {
	var sb *sandbox.Sandbox
	if withSandbox {
		sb = rewardSandbox()
	}
	ra := reward.NewActivities(sb)
	// The learned critic: a reward model trained by a "reward" phase, usable as a verifier.
	if err := ra.Registry().Register(reward.CriticVerifier, reward.NewCriticFactory(ra.Ckpt, NewTrainEngine(opts.Engine), reward.WithVisionEngine(NewVisionEngine(opts.Engine)))); err != nil {
		return nil, fmt.Errorf("workers: register critic verifier: %w", err)
	}
	// The process reward model: a "prm" phase's model scoring every step of a completion.
	if err := ra.Registry().Register(reward.PRMVerifier, reward.NewPRMFactory(ra.Ckpt, NewTrainEngine(opts.Engine))); err != nil {
		return nil, fmt.Errorf("workers: register prm verifier: %w", err)
	}
	return ra, nil
}

var (
	sandboxOnce sync.Once
	sandboxInst *sandbox.Sandbox
)

// rewardSandbox starts the code sandbox once per process. Without one (not root, not Linux) the
// "code" verifier reports why on use; every other verifier works.
func rewardSandbox() *sandbox.Sandbox {
	sandboxOnce.Do(func() {
		sb, err := sandbox.New(sandbox.Config{})
		if err != nil {
			fmt.Fprintf(os.Stderr, "temper: reward worker: code sandbox unavailable: %v\n", err)
			return
		}
		sandboxInst = sb
	})
	return sandboxInst
}

// Options tunes the workers of one process.
type Options struct {
	// TrainerSlots bounds concurrent trainer activities; 1 means one at a time per accelerator.
	TrainerSlots int
	// RolloutSlots bounds concurrent rollout activities (default 1: one shard at a time per
	// accelerator, so that an iteration's shards spread over the rollout workers).
	RolloutSlots int
	// Engine configures the tpu runtimes of the trainer's activities.
	Engine EngineOptions
	// Metrics, when set, records Temper's series for every activity these workers run.
	Metrics *Metrics
}

// Start creates, registers and starts one worker per role on c. The caller stops them with StopAll.
func Start(c client.Client, roles []string, opts Options) ([]worker.Worker, error) {
	var ws []worker.Worker
	for _, role := range roles {
		wo := worker.Options{}
		if ic := opts.Metrics.interceptor(); ic != nil {
			wo.Interceptors = append(wo.Interceptors, ic)
		}
		switch role {
		case workflows.QueueTrainer:
			wo.MaxConcurrentActivityExecutionSize = max(1, opts.TrainerSlots)
		case workflows.QueueRollout:
			wo.MaxConcurrentActivityExecutionSize = max(1, opts.RolloutSlots)
		}
		w := worker.New(c, role, wo)
		if err := Register(role, w, opts); err != nil {
			StopAll(ws)
			return nil, err
		}
		if role == workflows.QueueTemper {
			w.RegisterActivityWithOptions(searchAttributesCheck(c), activity.RegisterOptions{Name: workflows.SearchAttributesName})
			w.RegisterActivityWithOptions(forwardControl(c), activity.RegisterOptions{Name: workflows.ForwardName})
		}
		if err := w.Start(); err != nil {
			StopAll(ws)
			return nil, fmt.Errorf("workers: start %s worker: %w", role, err)
		}
		ws = append(ws, w)
	}
	return ws, nil
}

// StopAll stops workers in reverse order.
func StopAll(ws []worker.Worker) {
	for i := len(ws) - 1; i >= 0; i-- {
		ws[i].Stop()
	}
}

// trainerFamilies register the trainer role's activities: the shared kernel's (Retain) and each
// family's, under their contract names. A new family adds its Register here (the reward-model
// family takes options: RegisterTrainer).
var trainerFamilies = []func(train.Registrar, *train.Activities){
	train.Register, lm.Register, preference.Register, policy.Register, distill.Register,
}

// RegisterTrainer registers every trainer family's activities on r. rm configures the reward-model
// family; without it vision reward models run on the default engine.
func RegisterTrainer(r train.Registrar, deps *train.Activities, rm ...rewardmodel.Option) {
	if len(rm) == 0 {
		rm = []rewardmodel.Option{rewardmodel.WithVision(NewVisionEngine(EngineOptions{}))}
	}
	for _, register := range trainerFamilies {
		register(r, deps)
	}
	rewardmodel.Register(r, deps, rm...)
}
