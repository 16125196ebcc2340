package tools

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/reward/sandbox"
	"github.com/temperml/temper/activities/tools/toolclient"
	"github.com/temperml/temper/activities/tools/toolsapi"
	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/algorithms/tools"
)

// Served names the tools a tools worker runs.
var Served = []string{"calc", "python"}

// Activities holds the tools role's dependencies: the registry its calls run in (built without
// Env.Remote, so long-running tools run here).
type Activities struct {
	Registry *tools.Registry
}

// New builds the tools worker's activities: the Served tools, python in sb (nil: every python call
// says there is no sandbox on this worker).
func New(sb *sandbox.Sandbox) (*Activities, error) {
	reg, err := tools.Build(Served, tools.Env{Python: PythonFunc(sb, PythonLimits())})
	if err != nil {
		return nil, err
	}
	return &Activities{Registry: reg}, nil
}

// Registrar is the part of a Temporal worker that registers activities (worker.Worker satisfies it),
// declared here so that this package needs neither the worker package nor the trainer's kernel.
type Registrar interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Register registers tools.Run under its contract name on the tools queue's worker.
func Register(r Registrar, a *Activities) {
	r.RegisterActivityWithOptions(a.Run, activity.RegisterOptions{Name: toolsapi.RunName})
}

// heartbeatEvery is how often a running call heartbeats (well inside toolsapi.DefaultHeartbeat).
const heartbeatEvery = time.Second

// Run runs one call, heartbeating until it returns.
func (a *Activities) Run(ctx context.Context, in toolsapi.RunInput) (toolsapi.RunOutput, error) {
	stop := toolclient.KeepBeating(ctx, heartbeatEvery, func() { activity.RecordHeartbeat(ctx, in.Tool) })
	res := a.Registry.Call(ctx, tokenize.ToolCall{Name: in.Tool, Arguments: in.Args})
	stop()
	if err := ctx.Err(); err != nil {
		return toolsapi.RunOutput{}, fmt.Errorf("tools: run %s: %w", in.Tool, err) // cancelled or timed out: retried
	}
	return toolsapi.RunOutput{Output: res.Output, Error: res.Err, Kind: string(res.Kind), Attempt: activity.GetInfo(ctx).Attempt}, nil
}

// PythonLimits bound one python call in the sandbox: 20 s wall time, the sandbox's defaults
// otherwise (512 MiB, 32 processes, 1 MiB of output, no network).
func PythonLimits() sandbox.Limits { return sandbox.Limits{Timeout: 20 * time.Second} }

// maxPythonOutput bounds what a python call returns to the policy (the episode truncates further).
const maxPythonOutput = 4096

// PythonFunc runs the python tool's code as main.py in sb: its stdout, trailing space trimmed; a
// failure (exit status, timeout, a limit) with the end of stderr as the error.
func PythonFunc(sb *sandbox.Sandbox, lim sandbox.Limits) tools.Func {
	return func(ctx context.Context, args json.RawMessage) (string, error) {
		var a struct {
			Code string `json:"code"`
		}
		if err := json.Unmarshal(args, &a); err != nil {
			return "", err
		}
		if sb == nil || sb.Config().Python == "" {
			return "", errors.New("no code sandbox with a Python interpreter on this tools worker (it needs root on Linux and python3)")
		}
		r, err := sb.Run(ctx, sandbox.Command{Path: sb.Config().Python, Args: []string{"-I", "-B", "main.py"},
			Files: map[string][]byte{"main.py": []byte(a.Code)}, Limits: lim})
		if err != nil {
			return "", fmt.Errorf("sandbox: %w", err)
		}
		out := strings.TrimRight(string(r.Stdout), " \t\r\n")
		if len(out) > maxPythonOutput {
			out = out[:maxPythonOutput]
		}
		if f := r.Failure(); f != "" {
			stderr := strings.TrimSpace(string(r.Stderr))
			if len(stderr) > 600 {
				stderr = "…" + stderr[len(stderr)-600:]
			}
			if stderr != "" {
				f += ": " + stderr
			}
			return "", errors.New(f)
		}
		return out, nil
	}
}
