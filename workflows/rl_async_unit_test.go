package workflows_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train/trainapi"
)

// Workflow unit tests of deep async (max_staleness N > 1, partial generations): the schedule of
// generations, its bound, continue-as-new carrying the queue, and a back-track draining it.

// deepCase is a deep async config over 7 iterations.
type deepCase struct {
	name, extra string
	n           int
	partial     bool
	shards      int
}

var deepCases = []deepCase{
	{"n2-whole", `{"mode":"async","max_staleness":2,"iterations":7}`, 2, false, 1},
	{"n4-whole-sharded", `{"mode":"async","max_staleness":4,"iterations":7,"rollout":{"shards":2}}`, 4, false, 2},
	{"n4-partial", `{"mode":"async","max_staleness":4,"partial":true,"iterations":7,"max_new_tokens":8,"segment_tokens":2}`, 4, true, 1},
	{"n2-partial-sharded", `{"mode":"async","max_staleness":2,"partial":true,"iterations":7,"max_new_tokens":8,"rollout":{"shards":2}}`, 2, true, 2},
}

// TestRLUnitDeepSchedule: iteration j starts generating at iteration j−N with the policy of then
// (iterations up to N with v0), never more than N iterations are in flight beside a step and
// exactly that many while iterations remain; with partial, an iteration's segments continue under
// each newer policy in turn, each continuing the one before, and its last rows are finished under
// the policy of its own step. Each step trains its iteration's last objects, corrected. The
// schedule does not depend on how long generations take: with generations slower than the steps
// the same calls run.
func TestRLUnitDeepSchedule(t *testing.T) {
	for _, c := range deepCases {
		t.Run(c.name, func(t *testing.T) {
			w := newRLWorld(t, nil)
			out, err := w.run(rlUnitConfig(t, c.extra))
			if err != nil {
				t.Fatal(err)
			}
			if out.Metrics["version"] != 7 || out.Metrics["iterations"] != 7 {
				t.Fatalf("deep run: %v", out.Metrics)
			}
			gens := w.of(rolloutapi.GenerateName)
			steps := w.of(trainapi.PolicyStepName)
			for k, sc := range steps {
				inFlight := map[int]bool{}
				for _, g := range gens {
					if in := g.in.(rolloutapi.GenerateInput); in.Iteration > k && g.start <= sc.start {
						inFlight[in.Iteration] = true
					}
				}
				if want := min(c.n, 6-k); len(inFlight) != want {
					t.Errorf("step %d: %d iterations generating ahead (%v), want %d", k, len(inFlight), inFlight, want)
				}
			}
			for j := range 7 {
				first := max(0, j-c.n)
				for s := range c.shards {
					var calls []rolloutapi.GenerateInput
					for _, g := range gens {
						if in := g.in.(rolloutapi.GenerateInput); in.Iteration == j && strings.HasPrefix(in.Tag, rolloutapi.ShardTag(s)) {
							calls = append(calls, in)
						}
					}
					checkCalls(t, j, s, first, c.partial && j > 0, calls)
					step := steps[j].in.(trainapi.PolicyStepInput)
					if last := calls[len(calls)-1]; step.Shards[s].Rollouts != deepURI(last) {
						t.Errorf("step %d trains shard %d on %s, want %s", j, s, step.Shards[s].Rollouts, deepURI(last))
					}
				}
				if step := steps[j].in.(trainapi.PolicyStepInput); step.Version != j || (step.Loss.TISThreshold == 2) != (j > 0) {
					t.Errorf("step %d: version %d, tis_threshold %g; want %d, corrected from step 1 on", j, step.Version, step.Loss.TISThreshold, j)
				}
			}

			slow := newRLWorld(t, nil, map[string]time.Duration{rolloutapi.GenerateName: 25 * time.Minute})
			if _, err := slow.run(rlUnitConfig(t, c.extra)); err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{rolloutapi.GenerateName, trainapi.PolicyStepName} {
				if got, want := inputsOf(slow.of(name)), inputsOf(w.of(name)); !slices.Equal(got, want) {
					t.Errorf("%s inputs with slow generations:\n%s\nwith fast ones:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
			}
		})
	}
}

// checkCalls checks the generation calls of shard s of iteration j (start order): one whole
// generation with version first, or (partial) segments under versions first, first+1, ..., at
// most j, each continuing the one before, the last one finishing the rows.
func checkCalls(t *testing.T, j, s, first int, partial bool, calls []rolloutapi.GenerateInput) {
	t.Helper()
	if len(calls) == 0 {
		t.Fatalf("iteration %d shard %d: no generation", j, s)
	}
	if !partial {
		if c := calls[0]; len(calls) != 1 || c.PolicyVersion != first || c.SegmentTokens != 0 || c.Continue != "" {
			t.Errorf("iteration %d shard %d: %d calls, the first %+v; want one whole generation with version %d", j, s, len(calls), c, first)
		}
		return
	}
	for i, c := range calls {
		cont := ""
		if i > 0 {
			cont = deepURI(calls[i-1])
		}
		if c.PolicyVersion != first+i || c.PolicyVersion > j || c.Continue != cont || c.Tag != fmt.Sprintf("%s-g%02d", rolloutapi.ShardTag(s), i) {
			t.Errorf("iteration %d shard %d segment %d: version %d, continues %q, tag %s; want version %d (<= %d), continuing %q",
				j, s, i, c.PolicyVersion, c.Continue, c.Tag, first+i, j, cont)
		}
		if last := i == len(calls)-1; last != (c.SegmentTokens == 0 || (i+1)*c.SegmentTokens >= c.MaxNewTokens) {
			t.Errorf("iteration %d shard %d segment %d of %d: budget %d of %d tokens; want every row finished by the last segment only", j, s, i, len(calls), c.SegmentTokens, c.MaxNewTokens)
		}
		if (c.SegmentTokens == 0) != (c.PolicyVersion == j && i > 0) {
			t.Errorf("iteration %d shard %d segment %d: budget %d under version %d; only the step's own version finishes the rows (budget 0)", j, s, i, c.SegmentTokens, c.PolicyVersion)
		}
	}
}

// deepURI is the rollouts object the mocked generation writes for in.
func deepURI(in rolloutapi.GenerateInput) string {
	return fmt.Sprintf("mem://%s/rollouts/iter-%06d-%s-v%d.jsonl", in.Phase, in.Iteration, in.Tag, in.PolicyVersion)
}

// TestRLUnitDeepContinueAsNew: a run that continues as new after iteration 2 carries its queue
// (iterations 2 to 1+N, partial ones with their segments so far) and the next run, from that input
// alone, issues the same calls as an uninterrupted run and ends the phase the same way.
func TestRLUnitDeepContinueAsNew(t *testing.T) {
	for _, c := range deepCases {
		t.Run(c.name, func(t *testing.T) {
			in := rlUnitConfig(t, strings.Replace(c.extra, `{`, `{"eval_every":2,`, 1))
			exact := map[string]float64{"mem://grpo/step-000002": 0.5, "mem://grpo/step-000004": 0.6, "mem://grpo/step-000006": 0.6}
			run := continueAfterStep2(t, in, exact)
			st := run.next.RL
			var iters []int
			for _, f := range st.Flights {
				iters = append(iters, f.Iter)
				if len(f.Shards) != c.shards || f.Version != max(0, f.Iter-c.n) || (c.partial && f.Segments != 2-f.Version) {
					t.Errorf("carried flight %+v: want %d shards of version %d", f, c.shards, max(0, f.Iter-c.n))
				}
			}
			if st.Iter != 2 || !slices.Equal(iters, seq(2, 1+c.n)) || len(st.PendingShards) != 0 {
				t.Fatalf("carried iteration %d with flights %v (pending %d); want 2 with %v", st.Iter, iters, len(st.PendingShards), seq(2, 1+c.n))
			}
			run.finish(t)
		})
	}
}

func seq(lo, hi int) []int {
	var out []int
	for i := lo; i <= hi; i++ {
		out = append(out, i)
	}
	return out
}

// TestRLUnitDeepBacktrack: a non-finite step with N iterations generating ahead (slower than the
// step) waits for all of them before the branch, whose first iteration generates afresh, whole,
// with the restored checkpoint's version; the branch then fills its own queue.
func TestRLUnitDeepBacktrack(t *testing.T) {
	for _, c := range deepCases {
		t.Run(c.name, func(t *testing.T) {
			w := newRLWorld(t, nil, map[string]time.Duration{rolloutapi.GenerateName: 15 * time.Minute})
			out, err := w.run(rlUnitConfig(t, strings.Replace(c.extra, `{`, `{"inject_nan_at":2,`, 1)))
			if err != nil {
				t.Fatal(err)
			}
			if m := out.Metrics; m["backtracks"] != 1 || m["iterations"] != 7 {
				t.Fatalf("%v: want one back-track over 7 iterations", m)
			}
			branch := branchInputs[rolloutapi.GenerateInput](t, w)
			if len(branch) == 0 {
				t.Fatal("no generation in the branch")
			}
			if g := branch[0]; g.Iteration != 2 || g.PolicyVersion != 0 || g.SegmentTokens != 0 || g.Continue != "" || g.Checkpoint != rlUnitFrom {
				t.Errorf("branch's first generation %+v: want iteration 2 (the failed step counts) whole from %s (version 0)", g, rlUnitFrom)
			}
		})
	}
}

// TestRLUnitDeepMaxSeconds: when max_seconds ends the phase with iterations still generating ahead,
// the phase waits for them before it ends: no activity of the phase is left running. (Whole
// generations: a partial run waits for its segments at every iteration anyway.)
func TestRLUnitDeepMaxSeconds(t *testing.T) {
	for _, c := range deepCases {
		if c.partial {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			// Generations slower than the steps: those ahead are still running when the time is up.
			w := newRLWorld(t, nil, map[string]time.Duration{rolloutapi.GenerateName: 25 * time.Minute})
			out, err := w.run(rlUnitConfig(t, strings.Replace(c.extra, `{`, `{"max_seconds":3500,`, 1)))
			if err != nil {
				t.Fatal(err)
			}
			if n := out.Metrics["iterations"]; n < 1 || n >= 7 {
				t.Fatalf("ran %v iterations: want max_seconds to end the phase early", n)
			}
			steps := w.of(trainapi.PolicyStepName)
			lastStep, ahead := steps[len(steps)-1].end, 0
			for _, call := range w.calls {
				if !call.done || call.afterEnd {
					t.Errorf("%s (%+v) still running when the phase ended", call.name, call.in)
				}
				if g, ok := call.in.(rolloutapi.GenerateInput); ok && g.Iteration >= len(steps) && call.end > lastStep {
					ahead++
				}
			}
			if ahead == 0 {
				t.Fatal("no generation ahead was running when the last step ended: the test says nothing")
			}
		})
	}
}
