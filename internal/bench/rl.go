package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/internal/usage"
	"github.com/temperml/temper/workflows"
)

// RLOptions size `temper bench rl`.
type RLOptions struct {
	Iterations int       // GRPO iterations per mode
	RLConfig   string    // JSON merged into the GRPO phases' config (deep's own settings win there)
	Log        io.Writer // progress
}

// RLReport is `bench rl`'s result: seconds per iteration of each mode and, per iteration, the waits on
// generation, scoring and the policy step, and the train–inference mismatch of each mode's rollouts
// over the whole phase (sync: fresh rollouts; async and deep: fresh, the first iteration's, and stale),
// keyed as the JSON output names them.
type RLReport struct {
	Iterations int
	Values     map[string]float64
}

// RLPipeline trains a small SFT model, then runs the same GRPO phase three times from it: sync,
// async (one-step-off) and deep (async, max_staleness 4, partial generations: deepArm). Async mode
// only pays off when rollout and training cost about the same, so the phase is sized for that on
// this CPU backend, where a policy step costs ~3× generating the same tokens (backward pass, old
// log-probs): hot sampling (temperature 5, 48 new tokens) makes every rollout long, and a
// rare reward ("starts with 9") with dynamic sampling drops the groups whose rewards are all equal, as
// DAPO's over-sampling does, so the trainer sees a fraction of the generated rows. The report shows
// the per-step waits, so the balance is visible. extra (JSON) overrides any field of the GRPO phases,
// except deep's own settings in the deep arm: a field only async takes (max_staleness, partial)
// would make the sync arm invalid, so deep async is measured by its own arm, never through extra.
func RLPipeline(iterations int, extra string) (workflows.PipelineInput, error) {
	sft := `{"model":{"preset":"tiny"},"data":{"task":"add2","train_examples":2000,"heldout_examples":50},
		"batch":{"rows":16,"seq":64},"steps":100,"chunk_steps":100,"optimizer":{"lr":0.01},"eval":{"before":false,"examples":50,"max_new_tokens":4}}`
	in := workflows.PipelineInput{Name: "bench-rl", Seed: 1, Phases: []workflows.PhaseSpec{{Name: "sft", Kind: "sft", Config: json.RawMessage(sft)}}}
	for _, mode := range rlModes {
		c, err := mergeJSON(fmt.Sprintf(`{"data":{"task":"add2","heldout_examples":50},"iterations":%d,"prompts":32,"group":8,
			"max_new_tokens":48,"temperature":5,"epochs":1,"minibatch":0,"loss":{"kl_beta":0},"dynamic_sampling":true,
			"reward":{"verifiers":[{"name":"format","params":{"regex":["^9"]}}]},
			"mode":%q,"eval_every":0,"eval":{"before":false,"examples":50,"max_new_tokens":4}}`, iterations, mode), extra)
		if err == nil && mode == "deep" { // its mode, "deep", is deepArm's async
			c, err = mergeJSON(string(c), deepArm)
		}
		if err != nil {
			return in, usage.Errorf("--rl-config: %v", err)
		}
		in.Phases = append(in.Phases, workflows.PhaseSpec{Name: mode, Kind: "grpo", From: "sft", Config: c})
	}
	return in, nil
}

// rlModes are bench rl's arms, in phase order (after the SFT phase); each phase is named after its arm.
var rlModes = []string{"sync", "async", "deep"}

// deepArm is what makes the deep arm deep: four iterations generating ahead, generations that
// continue under newer weights (docs/async.md).
const deepArm = `{"mode":"async","max_staleness":4,"partial":true}`

// RL runs RLPipeline in one run on a private stack and reports sync against async and deep async.
func RL(ctx context.Context, o RLOptions) (*RLReport, error) {
	in, err := RLPipeline(o.Iterations, o.RLConfig)
	if err != nil {
		return nil, err
	}
	return runRL(ctx, o, in)
}

// runRL runs in, an RLPipeline, on a private stack.
func runRL(ctx context.Context, o RLOptions, in workflows.PipelineInput) (*RLReport, error) {
	st, err := newStack("bench-rl", nil)
	if err != nil {
		return nil, err
	}
	defer st.close()
	in.Store = st.store()
	if err := in.Validate(); err != nil {
		return nil, err
	}
	fmt.Fprintf(logTo(o.Log), "bench rl: sft, then %d GRPO iterations each sync, async and deep async from the same checkpoint\n", o.Iterations)
	out, err := st.run(ctx, fmt.Sprintf("bench-rl-%d", time.Now().Unix()), in)
	if err != nil {
		return nil, err
	}
	rep := &RLReport{Iterations: o.Iterations, Values: map[string]float64{"iterations": float64(o.Iterations)}}
	cl := ckpt.New(ckpt.Options{})
	for i, mode := range rlModes {
		for _, k := range []string{"seconds_per_iteration", "seconds_generate_wait", "seconds_score", "seconds_policy_step"} {
			rep.Values[mode+"_"+k] = out.Phases[1+i].Metrics[k]
		}
		recs, err := cl.ReadMetrics(ctx, in.Store, out.RunID, mode)
		if err != nil {
			return nil, fmt.Errorf("bench rl: metrics of phase %s: %w", mode, err)
		}
		for _, f := range []string{"fresh", "stale"} {
			s := phaseMismatch(recs, "mismatch_"+f+"_")
			if s.Tokens == 0 {
				continue
			}
			for k, v := range s.Metrics(mode + "_" + f + "_mismatch_") {
				rep.Values[k] = v
			}
		}
	}
	v := rep.Values
	v["async_over_sync"] = v["async_seconds_per_iteration"] / v["sync_seconds_per_iteration"]
	v["deep_over_sync"] = v["deep_seconds_per_iteration"] / v["sync_seconds_per_iteration"]
	return rep, nil
}

// phaseMismatch merges the mismatch figures (named prefix+loss.MismatchNames) of a phase's policy
// steps back into one measurement over all their tokens: means weighted by each step's tokens, the
// maximum of the maxima.
func phaseMismatch(recs []ckpt.MetricsRecord, prefix string) loss.MismatchStats {
	var all loss.MismatchStats
	for _, r := range recs {
		n := r.Metrics[prefix+loss.MismatchTokens]
		if r.Kind != ckpt.RecordTrain || n <= 0 {
			continue
		}
		all = all.Merge(loss.MismatchStats{Tokens: int(n), SumAbs: r.Metrics[prefix+loss.MismatchAbsMean] * n,
			MaxAbs: r.Metrics[prefix+loss.MismatchAbsMax], SumK3: r.Metrics[prefix+loss.MismatchK3] * n,
			Out: int(math.Round(r.Metrics[prefix+loss.MismatchOutFrac] * n))})
	}
	return all
}

func (r *RLReport) JSON() ([]byte, error) { return json.Marshal(r.Values) }

func (r *RLReport) Text(w io.Writer) {
	v := r.Values
	fmt.Fprintf(w, "GRPO, %d iterations each, measured in one run (per iteration: waiting on generation, scoring, policy step; deep: async, max_staleness 4, partial):\n", r.Iterations)
	for _, mode := range rlModes {
		fmt.Fprintf(w, "  %-6s %.3f s/iteration (generate %.3f, score %.3f, policy step %.3f)\n", mode, v[mode+"_seconds_per_iteration"],
			v[mode+"_seconds_generate_wait"], v[mode+"_seconds_score"], v[mode+"_seconds_policy_step"])
	}
	fmt.Fprintf(w, "  async/sync = %.2f, deep/sync = %.2f\n", v["async_over_sync"], v["deep_over_sync"])
	fmt.Fprintf(w, "train–inference mismatch, |log π_trainer − log π_behaviour| per sampled token over the phase (k3: KL estimate; out: ratio outside [0.5, 2]):\n")
	for _, m := range []struct{ key, label string }{{"sync_fresh", "sync"}, {"async_fresh", "async, fresh"}, {"async_stale", "async, stale"},
		{"deep_fresh", "deep, fresh"}, {"deep_stale", "deep, stale"}} {
		p := m.key + "_mismatch_"
		if v[p+loss.MismatchTokens] == 0 {
			continue
		}
		fmt.Fprintf(w, "  %-13s mean %.3g  max %.3g  k3 %.3g  out %.3g  (%d tokens)\n", m.label, v[p+loss.MismatchAbsMean],
			v[p+loss.MismatchAbsMax], v[p+loss.MismatchK3], v[p+loss.MismatchOutFrac], int(v[p+loss.MismatchTokens]))
	}
}
