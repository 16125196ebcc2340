package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/temperml/temper/activities/reward/sandbox"
	"github.com/temperml/temper/activities/tools/toolsapi"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// TestToolCall runs python calls as ToolCall workflows on a real tools worker: a program's output
// comes back, a failing program is a result with its error (the workflow succeeds), a call started
// again under the same ID (a retried episode) returns the first run's result without running the
// program again, and a bad argument is refused by the tools worker's schema check.
func TestToolCall(t *testing.T) {
	if sb, err := sandbox.New(sandbox.Config{BaseDir: t.TempDir()}); err != nil || sb.Config().Python == "" {
		t.Skipf("no code sandbox with python here: %v", err)
	}
	env := testenv.Get(t)
	env.Roles(t, workflows.QueueTemper, workflows.QueueTools)
	d := workers.ToolDispatcher{Client: env.Client}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	prefix := fmt.Sprintf("toolcall-%d", time.Now().UnixNano())
	call := func(id, code string) toolsapi.RunOutput {
		t.Helper()
		args, _ := json.Marshal(map[string]string{"code": code})
		out, err := d.Call(ctx, id, toolsapi.CallInput{RunInput: toolsapi.RunInput{Tool: "python", Args: args}})
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		return out
	}
	if out := call(prefix+".ok", "print(6*7)"); out.Output != "42" || out.Error != "" || out.Attempt != 1 {
		t.Fatalf("print(6*7): %+v", out)
	}
	if out := call(prefix+".fail", "import sys\nprint('oops', file=sys.stderr)\nsys.exit(3)"); !strings.Contains(out.Error, "exit status 3: oops") || out.Kind != "failed" {
		t.Fatalf("failing program: %+v", out)
	}
	// The same ID again, with a program that would print something else: the finished call's result.
	if out := call(prefix+".ok", "print(7*7)"); out.Output != "42" {
		t.Fatalf("same ID again: %+v, want the first run's 42", out)
	}
	out, err := d.Call(ctx, prefix+".bad", toolsapi.CallInput{RunInput: toolsapi.RunInput{Tool: "python", Args: json.RawMessage(`{"code":""}`)}})
	if err != nil || out.Kind != "arguments" || !strings.Contains(out.Error, "code") {
		t.Fatalf("empty code: %+v, %v", out, err)
	}
	// The call is visible as its own workflow with its activity.
	desc, err := env.Client.DescribeWorkflowExecution(ctx, prefix+".ok", "")
	if err != nil || desc.WorkflowExecutionInfo.Type.Name != workflows.ToolCallName {
		t.Fatalf("describe: %v %v", desc, err)
	}
}
