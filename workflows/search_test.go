package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/worker"

	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// findWorkflows polls a visibility query until it returns want workflow IDs (visibility lags the
// history a little) or 20 s pass, and returns the IDs it found with their search attributes.
func findWorkflows(t *testing.T, c client.Client, query string, want int) map[string]map[string]any {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: query, PageSize: 100})
		if err != nil {
			t.Fatalf("list %q: %v", query, err)
		}
		found := map[string]map[string]any{}
		for _, e := range resp.Executions {
			if _, dup := found[e.Execution.WorkflowId]; !dup { // newest run of each workflow first
				found[e.Execution.WorkflowId] = decodeSA(t, e.GetSearchAttributes().GetIndexedFields())
			}
		}
		if len(found) >= want || time.Now().After(deadline) {
			return found
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func decodeSA(t *testing.T, fields map[string]*commonpb.Payload) map[string]any {
	out := map[string]any{}
	for k, p := range fields {
		var v any
		if err := converter.GetDefaultDataConverter().FromPayload(p, &v); err != nil {
			t.Fatalf("search attribute %s: %v", k, err)
		}
		out[k] = v
	}
	return out
}

// TestSearchAttributes runs sft → grpo with a back-track on the embedded server, which registers
// Temper's search attributes at start, and finds the run's workflows by visibility queries on them.
func TestSearchAttributes(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	missing, err := workers.MissingSearchAttributes(context.Background(), env.Client, env.Server.Namespace())
	if err != nil || len(missing) > 0 {
		t.Fatalf("embedded server: missing search attributes %v (%v)", missing, err)
	}
	run := start(t, env.Client, rlPipeline(t, `{"inject_nan_at": 2}`))
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	id := run.GetID()
	em := out.Phases[1].Metrics["heldout_exact_match"]

	// Every workflow of the run carries TemperRun; kinds tell them apart.
	all := findWorkflows(t, env.Client, fmt.Sprintf("TemperRun = '%s'", id), 4)
	var ids []string
	for wid := range all {
		ids = append(ids, wid)
	}
	slices.Sort(ids)
	if want := []string{id, id + ".grpo", id + ".grpo.b1", id + ".sft"}; !slices.Equal(ids, want) {
		t.Fatalf("TemperRun = %s found %v, want %v", id, ids, want)
	}
	check := func(wid, key string, want any) {
		t.Helper()
		got := all[wid][key]
		if g, ok := got.(float64); ok { // JSON numbers
			if w, ok := want.(float64); !ok || g != w {
				t.Errorf("%s %s = %v, want %v", wid, key, got, want)
			}
			return
		}
		if got != want {
			t.Errorf("%s %s = %v, want %v", wid, key, got, want)
		}
	}
	check(id, "TemperKind", workflows.KindPipeline)
	check(id, "TemperPhase", "grpo")
	check(id+".sft", "TemperKind", "sft")
	check(id+".sft", "TemperStep", 6.0)
	check(id+".sft", "TemperExactMatch", out.Phases[0].Metrics["heldout_exact_match"])
	check(id+".grpo", "TemperBacktrack", workflows.BacktrackBranched)
	check(id+".grpo.b1", "TemperBacktrack", "b1")
	check(id+".grpo.b1", "TemperStep", 4.0)
	check(id+".grpo.b1", "TemperExactMatch", em)
	check(id+".grpo.b1", "TemperRewardMean", out.Phases[1].Metrics["last_reward_mean"])
	check(id, "TemperExactMatch", em)

	// The queries `temper ls --kind grpo --where ...` sends: the branch holds the phase's final result.
	q := fmt.Sprintf("TemperRun = '%s' AND TemperKind = 'grpo' AND TemperExactMatch >= %v", id, em)
	if got := findWorkflows(t, env.Client, q, 1); len(got) != 1 || got[id+".grpo.b1"] == nil {
		t.Errorf("%s: found %v, want only the branch %s.grpo.b1", q, keys(got), id)
	}
	q = fmt.Sprintf("TemperRun = '%s' AND TemperExactMatch > %v", id, em+1)
	if got := findWorkflows(t, env.Client, q, 0); len(got) != 0 {
		t.Errorf("%s: found %v, want none", q, keys(got))
	}
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestSearchAttributesUnregistered runs a pipeline in a namespace without Temper's search attributes
// (an external cluster nobody registered them on): the run must complete and set none; registering
// them (what `temper dev` does at start) then makes the namespace complete.
func TestSearchAttributesUnregistered(t *testing.T) {
	env := testenv.Get(t)
	ns := env.Namespace(t, "nosa")
	ctx := context.Background()
	c, err := workers.Dial(env.Server.FrontendAddr(), ns)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ws := startWorkersWhenReady(t, c)
	defer workers.StopAll(ws)
	missing, err := workers.MissingSearchAttributes(ctx, c, ns)
	if err != nil || len(missing) != len(workflows.SearchAttributeKeys()) {
		t.Fatalf("fresh namespace: missing %v (%v), want all %d", missing, err, len(workflows.SearchAttributeKeys()))
	}
	sft := `{"model":{"preset":"tiny"},"data":{"task":"add2","train_examples":64,"heldout_examples":8},
		"batch":{"rows":4,"seq":32},"steps":2,"chunk_steps":2,"eval":{"examples":8,"max_new_tokens":4,"before":false}}`
	run := start(t, c, workflows.PipelineInput{Name: "nosa", Store: "file://" + t.TempDir(), Phases: []workflows.PhaseSpec{
		{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)}}})
	if err := run.Get(ctx, nil); err != nil {
		t.Fatalf("pipeline without registered search attributes: %v", err)
	}
	for _, wid := range []string{run.GetID(), run.GetID() + ".sft"} {
		d, err := c.DescribeWorkflowExecution(ctx, wid, "")
		if err != nil {
			t.Fatal(err)
		}
		for k := range d.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields() {
			if strings.HasPrefix(k, "Temper") {
				t.Errorf("%s set %s on a namespace without it", wid, k)
			}
		}
	}
	if err := workers.EnsureSearchAttributes(ctx, c, ns); err != nil {
		t.Fatal(err)
	}
	if missing, err := workers.MissingSearchAttributes(ctx, c, ns); err != nil || len(missing) > 0 {
		t.Fatalf("after EnsureSearchAttributes: missing %v (%v)", missing, err)
	}
}

// startWorkersWhenReady starts every role's workers on c's namespace, retrying while the server's
// namespace cache has not seen the new namespace yet.
func startWorkersWhenReady(t *testing.T, c client.Client) []worker.Worker {
	t.Helper()
	roles, _ := workers.ParseRoles("all")
	deadline := time.Now().Add(30 * time.Second)
	for {
		ws, err := workers.Start(c, roles, workers.Options{})
		if err == nil {
			return ws
		}
		if time.Now().After(deadline) {
			t.Fatalf("start workers: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
