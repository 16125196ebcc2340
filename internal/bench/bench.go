package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workflows"
)

// Report is what a benchmark measured.
type Report interface {
	Text(w io.Writer)      // for people
	JSON() ([]byte, error) // for scripts: the `--json` line
}

// dataSeed is the data seed of every phase of `bench rl-vs-sft` and `bench distill`: the same labelled
// set and held-out prompts in every seed. A base or teacher given by URI should have been trained with it.
const dataSeed = 1

// logTo is w, or a sink when the caller wants no progress.
func logTo(w io.Writer) io.Writer {
	if w == nil {
		return io.Discard
	}
	return w
}

// stack is a private embedded server with workers in a temporary home.
type stack struct {
	*workers.Stack
	home string
}

// newStack starts a stack for roles (nil: every role); close removes it and its home.
func newStack(name string, roles []string) (*stack, error) {
	home, err := os.MkdirTemp("", "temper-"+name+"-")
	if err != nil {
		return nil, err
	}
	if roles == nil {
		roles, _ = workers.ParseRoles("all")
	}
	st, err := workers.StartStack(workers.StackOptions{Home: home, Ephemeral: true, UIPort: -1, Roles: roles})
	if err != nil {
		os.RemoveAll(home)
		return nil, err
	}
	return &stack{Stack: st, home: home}, nil
}

func (s *stack) close() {
	s.Stack.Close()
	os.RemoveAll(s.home)
}

// store is the stack's file store, where its runs keep their checkpoints.
func (s *stack) store() string {
	abs, err := filepath.Abs(filepath.Join(s.home, "store"))
	if err != nil {
		abs = filepath.Join(s.home, "store")
	}
	return "file://" + abs
}

// run validates the pipeline, runs it as workflow id and waits for its end.
func (s *stack) run(ctx context.Context, id string, in workflows.PipelineInput) (workflows.PipelineOutput, error) {
	var out workflows.PipelineOutput
	if err := in.Validate(); err != nil {
		return out, err
	}
	r, err := s.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        id,
		TaskQueue: workflows.QueueTemper,
		Memo:      map[string]any{"name": in.Name},
	}, workflows.PipelineName, in)
	if err != nil {
		return out, fmt.Errorf("start pipeline %s: %w", id, err)
	}
	err = r.Get(ctx, &out)
	return out, err
}

// mergeJSON merges the JSON object extra (may be empty) into base, recursively.
func mergeJSON(base, extra string) (json.RawMessage, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(base), &m); err != nil {
		return nil, err
	}
	if strings.TrimSpace(extra) != "" {
		var add map[string]any
		if err := json.Unmarshal([]byte(extra), &add); err != nil {
			return nil, err
		}
		mergeInto(m, add)
	}
	return json.Marshal(m)
}

func mergeInto(dst, src map[string]any) {
	for k, v := range src {
		if sv, ok := v.(map[string]any); ok {
			if dv, ok := dst[k].(map[string]any); ok {
				mergeInto(dv, sv)
				continue
			}
		}
		dst[k] = v
	}
}

// meanStdErr returns the mean of xs and its standard error (sample standard deviation / √n; 0 for
// fewer than two values).
func meanStdErr(xs []float64) (mean, se float64) {
	n := float64(len(xs))
	if n == 0 {
		return math.NaN(), 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= n
	if n < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(ss/(n-1)) / math.Sqrt(n)
}
