package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workflows"
)

// benchRLPipeline trains a small SFT model, then runs the same GRPO phase twice from it: sync and
// async. Async mode only pays off when rollout and training cost about the same, so the phase is sized
// for that on this CPU backend, where a policy step costs ~3× generating the same tokens (backward
// pass, old log-probs): hot sampling (temperature 5, 48 new tokens) makes every rollout long, and a
// rare reward ("starts with 9") with dynamic sampling drops the groups whose rewards are all equal, as
// DAPO's over-sampling does, so the trainer sees a fraction of the generated rows. The report shows
// the per-step waits, so the balance is visible. extra (JSON) overrides any field.
func benchRLPipeline(iterations int, extra string) (workflows.PipelineInput, error) {
	sft := `{"model":{"preset":"tiny"},"data":{"task":"add2","train_examples":2000,"heldout_examples":50},
		"batch":{"rows":16,"seq":64},"steps":100,"chunk_steps":100,"optimizer":{"lr":0.01},"eval":{"before":false,"examples":50,"max_new_tokens":4}}`
	in := workflows.PipelineInput{Name: "bench-rl", Seed: 1, Phases: []workflows.PhaseSpec{{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)}}}
	for _, mode := range []string{"sync", "async"} {
		c, err := mergeJSONConfig(fmt.Sprintf(`{"data":{"task":"add2","heldout_examples":50},"iterations":%d,"prompts":32,"group":8,
			"max_new_tokens":48,"temperature":5,"epochs":1,"minibatch":0,"loss":{"kl_beta":0},"dynamic_sampling":true,
			"reward":{"verifiers":[{"name":"format","params":{"regex":["^9"]}}]},
			"mode":%q,"eval_every":0,"eval":{"before":false,"examples":50,"max_new_tokens":4}}`, iterations, mode), extra)
		if err != nil {
			return in, usageErr("--rl-config: %v", err)
		}
		in.Phases = append(in.Phases, workflows.PhaseSpec{Name: mode, Kind: "grpo", From: "sft", Config: c})
	}
	return in, nil
}

// benchStack starts a private embedded server with workers for every role in a temporary home (the
// benchmarks' runs never mix with the user's); stop removes both.
func benchStack(name string) (st *workers.Stack, home string, stop func(), err error) {
	home, err = os.MkdirTemp("", "temper-"+name+"-")
	if err != nil {
		return nil, "", nil, err
	}
	roles, _ := workers.ParseRoles("all")
	st, err = workers.StartStack(workers.StackOptions{Home: home, Ephemeral: true, UIPort: -1, Roles: roles})
	if err != nil {
		os.RemoveAll(home)
		return nil, "", nil, err
	}
	return st, home, func() { st.Close(); os.RemoveAll(home) }, nil
}

func runBenchRL(ctx context.Context, iterations int, extra string, asJSON bool) error {
	st, home, stop, err := benchStack("bench-rl")
	if err != nil {
		return err
	}
	defer stop()
	in, err := benchRLPipeline(iterations, extra)
	if err != nil {
		return err
	}
	in.Store = defaultStore(home)
	if err := in.Validate(); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "bench rl: sft, then %d GRPO iterations sync and %d async from the same checkpoint\n", iterations, iterations)
	run, err := startPipeline(ctx, st.Client, fmt.Sprintf("bench-rl-%d", time.Now().Unix()), in)
	if err != nil {
		return err
	}
	var out workflows.PipelineOutput
	if err := run.Get(ctx, &out); err != nil {
		return err
	}
	sync, async := out.Phases[1].Metrics["seconds_per_iteration"], out.Phases[2].Metrics["seconds_per_iteration"]
	rep := map[string]float64{"iterations": float64(iterations), "sync_seconds_per_iteration": sync,
		"async_seconds_per_iteration": async, "async_over_sync": async / sync}
	for i, mode := range []string{"sync", "async"} {
		for _, k := range []string{"seconds_generate_wait", "seconds_score", "seconds_policy_step"} {
			rep[mode+"_"+k] = out.Phases[1+i].Metrics[k]
		}
	}
	if asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	fmt.Fprintf(stdout, "GRPO, %d iterations each, measured in one run (per iteration: waiting on generation, scoring, policy step):\n", iterations)
	for _, mode := range []string{"sync", "async"} {
		fmt.Fprintf(stdout, "  %-6s %.3f s/iteration (generate %.3f, score %.3f, policy step %.3f)\n", mode, rep[mode+"_seconds_per_iteration"],
			rep[mode+"_seconds_generate_wait"], rep[mode+"_seconds_score"], rep[mode+"_seconds_policy_step"])
	}
	fmt.Fprintf(stdout, "  async/sync = %.2f\n", async/sync)
	return nil
}
