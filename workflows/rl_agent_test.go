package workflows_test

import (
	"reflect"
	"testing"

	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/internal/config"
)

// TestRLUnitAgent: an agent phase hands its agent to every rollout shard, evaluates through the
// agent on the rollout queue (never the trainer's evaluation), with the rollouts' budget per model
// call, and sums the groups the shards dropped and the attempts that failed into its metrics; a
// phase without an agent reports neither.
func TestRLUnitAgent(t *testing.T) {
	const agentCfg = `{"max_new_tokens":48,"eval_every":2,"rollout":{"shards":2,"agent":{"command":["python3","agent.py"],
		"dir":"scripts/agents/python","retries":2,"timeout":"20s"}}}`
	want := rolloutapi.AgentSpec{Command: []string{"python3", "agent.py"}, Dir: "scripts/agents/python", Retries: 2, Timeout: config.Duration(20e9)}
	w := newRLWorld(t, map[string]float64{"mem://grpo/step-000004": 1})
	out, err := w.run(rlUnitConfig(t, agentCfg))
	if err != nil {
		t.Fatal(err)
	}
	gens := w.of(rolloutapi.GenerateName)
	if len(gens) != 8 {
		t.Fatalf("%d rollout shards, want 2 per iteration", len(gens))
	}
	for _, g := range gens {
		if in := g.in.(rolloutapi.GenerateInput); in.Agent == nil || !reflect.DeepEqual(*in.Agent, want) {
			t.Fatalf("shard input agent %+v, want %+v", in.Agent, want)
		}
	}
	if n := len(w.of(trainapi.EvaluateName)); n != 0 {
		t.Errorf("%d trainer evaluations in an agent phase", n)
	}
	var evals []rolloutapi.AgentEvalInput
	for _, c := range w.of(rolloutapi.AgentEvalName) {
		evals = append(evals, c.in.(rolloutapi.AgentEvalInput))
	}
	if len(evals) != 2 || evals[1].Eval.Checkpoint != out.Checkpoint || evals[1].PolicyVersion != 4 ||
		evals[1].Eval.MaxNewTokens != 48 || evals[1].Eval.Examples != 16 || !reflect.DeepEqual(evals[1].Agent, want) {
		t.Fatalf("agent evaluations %+v: want 2 (iterations 2 and 4), the last of %s at version 4 with 48 tokens per call", evals, out.Checkpoint)
	}
	if m := out.Metrics; m["agent_groups_dropped"] != 8 || m["agent_failures"] != 24 || m["heldout_exact_match"] != 1 {
		t.Errorf("metrics %v: want 8 groups dropped, 24 failed attempts, exact match 1 from the agent's evaluation", m)
	}
	plain := newRLWorld(t, nil)
	out, err = plain.run(rlUnitConfig(t, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := out.Metrics["agent_groups_dropped"]; ok {
		t.Errorf("a phase without an agent reports agent metrics: %v", out.Metrics)
	}
}
