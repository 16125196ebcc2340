package tools

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/reward/sandbox"
	"github.com/temperml/temper/activities/tools/toolsapi"
	"github.com/temperml/temper/algorithms/tools"
)

// The names and I/O types live in contract (workflows import it); these aliases keep callers short.
type (
	RunInput   = toolsapi.RunInput
	RunOutput  = toolsapi.RunOutput
	CallInput  = toolsapi.CallInput
	CallOutput = toolsapi.CallOutput
)

// Names: see contract.
const (
	RunName          = toolsapi.RunName
	CallWorkflowName = toolsapi.CallWorkflowName
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

// heartbeatEvery is how often a running call heartbeats (well inside toolsapi.DefaultHeartbeat).
const heartbeatEvery = time.Second

// Run runs one call, heartbeating until it returns.
func (a *Activities) Run(ctx context.Context, in RunInput) (RunOutput, error) {
	stop := KeepBeating(ctx, heartbeatEvery, func() { activity.RecordHeartbeat(ctx, in.Tool) })
	res := a.Registry.Call(ctx, tools.Call{Name: in.Tool, Arguments: in.Args})
	stop()
	if err := ctx.Err(); err != nil {
		return RunOutput{}, fmt.Errorf("tools: run %s: %w", in.Tool, err) // cancelled or timed out: retried
	}
	return RunOutput{Output: res.Output, Error: res.Err, Kind: string(res.Kind), Attempt: activity.GetInfo(ctx).Attempt}, nil
}

// KeepBeating calls beat every period until the returned stop is called or ctx ends.
func KeepBeating(ctx context.Context, period time.Duration, beat func()) (stop func()) {
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				beat()
			}
		}
	}()
	return func() { close(done); <-finished }
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

// Dispatcher runs one call as the ToolCall workflow id on the tools queue (starting it, or finding
// the one already started or finished under that id) and returns its result. workers implement it
// over a Temporal client.
type Dispatcher interface {
	Call(ctx context.Context, id string, in CallInput) (CallOutput, error)
}

// CallID names one call for its ToolCall workflow: place (the caller's run, phase, iteration,
// episode and turn) and a digest of tool and arguments, so that the same place with other
// arguments (a re-run pipeline ID, say) is another call.
func CallID(place, tool string, args json.RawMessage) string {
	h := sha256.Sum256(append([]byte(tool+"\x00"), args...))
	return place + "." + tool + "-" + hex.EncodeToString(h[:6])
}

// Remote returns the tools.Env.Remote of a role that plays episodes: every call of a long-running
// tool runs through d under the workflow ID CallID(place(ctx), ...), calling beat every few seconds
// while it waits (the caller's own heartbeat). d nil: such calls fail, saying that no tools queue is
// configured here.
func Remote(d Dispatcher, place func(ctx context.Context) string, beat func()) func(tools.Tool) tools.Func {
	return func(t tools.Tool) tools.Func {
		return func(ctx context.Context, args json.RawMessage) (string, error) {
			if d == nil {
				return "", fmt.Errorf("no tools queue configured in this worker to run %s on", t.Name)
			}
			if beat != nil {
				stop := KeepBeating(ctx, 2*time.Second, beat)
				defer stop()
			}
			out, err := d.Call(ctx, CallID(place(ctx), t.Name, args), CallInput{RunInput: RunInput{Tool: t.Name, Args: args}})
			if err != nil {
				return "", err
			}
			if out.Error != "" {
				return "", errors.New(strings.TrimPrefix(out.Error, t.Name+": ")) // the registry prefixes the name again
			}
			return out.Output, nil
		}
	}
}
