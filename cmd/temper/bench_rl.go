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
// async. Generation (prompts × group samples of max_new_tokens) and the policy step (epochs over the
// rollouts) are sized to cost about the same, the case async mode is for.
func benchRLPipeline(iterations int) workflows.PipelineInput {
	sft := `{"model":{"preset":"tiny"},"data":{"task":"add2","train_examples":2000,"heldout_examples":50},
		"batch":{"rows":16,"seq":64},"steps":100,"chunk_steps":100,"optimizer":{"lr":0.01},"eval":{"before":false,"examples":50,"max_new_tokens":4}}`
	rl := func(mode string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"data":{"task":"add2","heldout_examples":50},"iterations":%d,"prompts":16,"group":8,
			"max_new_tokens":8,"epochs":4,"minibatch":64,"mode":%q,"eval_every":0,"eval":{"before":false,"examples":50,"max_new_tokens":4}}`, iterations, mode))
	}
	return workflows.PipelineInput{Name: "bench-rl", Seed: 1, Phases: []workflows.PhaseSpec{
		{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)},
		{Name: "sync", Kind: "grpo", From: "sft", Config: rl("sync")},
		{Name: "async", Kind: "grpo", From: "sft", Config: rl("async")},
	}}
}

func runBenchRL(ctx context.Context, iterations int, asJSON bool) error {
	home, err := os.MkdirTemp("", "temper-bench-rl-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	roles, _ := workers.ParseRoles("all")
	st, err := workers.StartStack(workers.StackOptions{Home: home, Ephemeral: true, UIPort: -1, Roles: roles})
	if err != nil {
		return err
	}
	defer st.Close()
	in := benchRLPipeline(iterations)
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
	if asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	fmt.Fprintf(stdout, "GRPO, %d iterations each, measured in one run:\n  sync   %.3f s/iteration\n  async  %.3f s/iteration\n  async/sync = %.2f\n",
		iterations, sync, async, async/sync)
	return nil
}
