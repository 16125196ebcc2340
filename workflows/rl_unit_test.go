package workflows_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/control/controlapi"
	"github.com/temperml/temper/activities/reward/rewardapi"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/workflows"
)

// Workflow unit tests of the RL loop: the workflow runs in the SDK's test environment against
// mocked activities registered under their exported names, which answer from their inputs alone
// after fixed durations on the test clock. Each runs in well under a second.

const (
	rlUnitFrom = "mem://sft/step-000006"
	rlUnitLR   = 0.001
)

// rlUnitConfig is a 4-iteration GRPO phase (two shards when rollout.shards asks); extra is merged over it.
func rlUnitConfig(t *testing.T, extra string) workflows.PhaseInput {
	base := `{"data":{"task":"add2","heldout_examples":16},"iterations":4,"prompts":8,"group":16,"max_new_tokens":4,
		"eval_every":0,"eval":{"examples":16,"max_new_tokens":4,"before":false},"keep_last":1,
		"optimizer":{"lr":0.001,"warmup_steps":0}}`
	return workflows.PhaseInput{RunID: "run", Phase: "grpo", Kind: "grpo", Store: "mem://store", Seed: 3, From: rlUnitFrom,
		Config: mergeConfigs(t, base, extra)}
}

// rlCall is one activity the workflow ran: where, its input, and when on the test clock.
type rlCall struct {
	name       string
	workflow   string // the ID of the workflow that ran it
	in         any
	start, end time.Duration // since the environment started
	done       bool
	afterEnd   bool // completed after the workflow had (nobody waited for it)
}

// rlWorld is a test environment with the RL workflow and mocked activities. exact is the held-out
// exact match of each checkpoint (0 for others); durations are the activities' on the test clock.
type rlWorld struct {
	t     *testing.T
	env   *testsuite.TestWorkflowEnvironment
	t0    time.Time
	exact map[string]float64

	mu    sync.Mutex
	calls []*rlCall
	byKey map[string]*rlCall
}

var rlDurations = map[string]time.Duration{
	rolloutapi.GenerateName: time.Minute, rewardapi.ScoreName: time.Minute, trainapi.PolicyStepName: 10 * time.Minute,
	trainapi.EvaluateName: time.Minute, trainapi.RetainName: 10 * time.Second, rolloutapi.AgentEvalName: time.Minute,
	controlapi.LogName: time.Second,
}

// newRLWorld makes the world; slower replaces some activities' durations.
func newRLWorld(t *testing.T, exact map[string]float64, slower ...map[string]time.Duration) *rlWorld {
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(log.NewStructuredLogger(slog.New(slog.NewTextHandler(io.Discard, nil))))
	w := &rlWorld{t: t, env: suite.NewTestWorkflowEnvironment(), exact: exact, byKey: map[string]*rlCall{}}
	env := w.env
	// The SDK's deadlock detector fails a workflow task that runs a second without yielding; on a
	// loaded machine a cold first task can, and that says nothing about the workflow.
	env.SetWorkerOptions(worker.Options{DeadlockDetectionTimeout: time.Minute})
	w.t0 = env.Now()
	env.SetStartWorkflowOptions(client.StartWorkflowOptions{ID: "run.grpo"})
	env.RegisterWorkflowWithOptions(workflows.RL, workflow.RegisterOptions{Name: "RL-grpo"})
	// Activities are registered under their names (stubs), then mocked: the SDK wants them in that order.
	fns := []struct {
		name string
		fn   any
	}{
		{rolloutapi.GenerateName, w.generate}, {rewardapi.ScoreName, w.score}, {trainapi.PolicyStepName, w.step}, {trainapi.EvaluateName, w.evaluate},
		{rolloutapi.AgentEvalName, w.agentEval},
		{trainapi.RetainName, func(context.Context, trainapi.RetainInput) error { return nil }},
		{rolloutapi.KeepName, func(context.Context, rolloutapi.KeepInput) error { return nil }},
		{controlapi.LogName, func(context.Context, controlapi.LogInput) error { return nil }},
	}
	for _, a := range fns {
		env.RegisterActivityWithOptions(a.fn, activity.RegisterOptions{Name: a.name})
	}
	for _, a := range fns {
		ret := a.fn
		if a.name == trainapi.RetainName || a.name == rolloutapi.KeepName || a.name == controlapi.LogName {
			ret = nil
		}
		d := rlDurations[a.name]
		for _, m := range slower {
			d = max(d, m[a.name])
		}
		env.OnActivity(a.name, mock.Anything, mock.Anything).Return(ret).After(d)
	}
	env.SetOnActivityStartedListener(w.started)
	env.SetOnActivityCompletedListener(func(info *activity.Info, _ converter.EncodedValue, _ error) {
		w.mu.Lock()
		defer w.mu.Unlock()
		c := w.byKey[callKey(info)]
		c.end, c.done, c.afterEnd = env.Now().Sub(w.t0), true, env.IsWorkflowCompleted()
	})
	return w
}

func callKey(info *activity.Info) string {
	return info.WorkflowExecution.ID + "/" + info.WorkflowExecution.RunID + "/" + info.ActivityID
}

func (w *rlWorld) started(info *activity.Info, _ context.Context, args converter.EncodedValues) {
	ins := map[string]func() any{
		rolloutapi.GenerateName: func() any { return new(rolloutapi.GenerateInput) }, rewardapi.ScoreName: func() any { return new(rewardapi.ScoreInput) },
		trainapi.PolicyStepName: func() any { return new(trainapi.PolicyStepInput) }, trainapi.EvaluateName: func() any { return new(trainapi.EvalInput) },
		trainapi.RetainName: func() any { return new(trainapi.RetainInput) }, rolloutapi.KeepName: func() any { return new(rolloutapi.KeepInput) },
		rolloutapi.AgentEvalName: func() any { return new(rolloutapi.AgentEvalInput) },
		controlapi.LogName:       func() any { return new(controlapi.LogInput) },
	}
	in := ins[info.ActivityType.Name]()
	if err := args.Get(in); err != nil {
		w.t.Errorf("%s input: %v", info.ActivityType.Name, err)
	}
	c := &rlCall{name: info.ActivityType.Name, workflow: info.WorkflowExecution.ID, in: reflect.ValueOf(in).Elem().Interface(),
		start: w.env.Now().Sub(w.t0)}
	w.mu.Lock()
	w.calls = append(w.calls, c)
	w.byKey[callKey(info)] = c
	w.mu.Unlock()
}

func (w *rlWorld) generate(_ context.Context, in rolloutapi.GenerateInput) (rolloutapi.GenerateOutput, error) {
	out := rolloutapi.GenerateOutput{Rollouts: fmt.Sprintf("mem://%s/rollouts/iter-%06d-%s-v%d.jsonl", in.Phase, in.Iteration, in.Tag, in.PolicyVersion),
		Samples: (in.PromptHi - in.PromptLo) * in.Group, TokensPerS: 100, Tokens: 50, Seconds: 0.5}
	if in.Agent != nil { // every shard drops one group after three failed attempts
		out.Samples -= in.Group
		out.AgentGroupsDropped, out.AgentFailures = 1, 3
	}
	// A segment of a partial generation (tag ...-gNN): every row runs to max_new_tokens, so rows
	// are unfinished while the segments so far hold fewer tokens.
	var seg int
	if i := strings.LastIndex(in.Tag, "-g"); in.SegmentTokens > 0 && i >= 0 {
		if _, err := fmt.Sscanf(in.Tag[i+2:], "%d", &seg); err == nil && (seg+1)*in.SegmentTokens < in.MaxNewTokens {
			out.Unfinished = out.Samples
		}
	}
	return out, nil
}

// score passes every fourth sample; verdicts go to the store when asked (sharded runs), else inline.
func (w *rlWorld) score(_ context.Context, in rewardapi.ScoreInput) (rewardapi.ScoreOutput, error) {
	out := rewardapi.ScoreOutput{Metrics: rewardapi.Metrics{Items: 8, Judged: 8, Passed: 2, MeanScore: 0.25, PassRate: 0.25}}
	for i := range 8 {
		v := rewardapi.ItemVerdict{ID: fmt.Sprint(i)}
		if v.Pass = i%4 == 0; v.Pass {
			v.Score = 1
		} else {
			v.Feedback = fmt.Sprintf("sample %d is wrong", i)
		}
		if !v.Pass && len(out.Failed) < in.MaxFailed {
			out.Failed = append(out.Failed, rewardapi.Failed{Index: i, Feedback: v.Feedback})
		}
		out.Verdicts = append(out.Verdicts, v)
	}
	if in.WriteVerdicts {
		out.Verdicts, out.VerdictsURI = nil, in.Rollouts+".verdicts"
	}
	return out, nil
}

func (w *rlWorld) step(_ context.Context, in trainapi.PolicyStepInput) (trainapi.PolicyStepOutput, error) {
	m := map[string]float64{"train_tokens_per_s": 10}
	if in.InjectNaN {
		return trainapi.PolicyStepOutput{NonFinite: true, Metrics: m}, nil
	}
	return trainapi.PolicyStepOutput{Checkpoint: fmt.Sprintf("mem://%s/step-%06d", in.Phase, in.Version+1), Version: in.Version + 1, Metrics: m}, nil
}

func (w *rlWorld) evaluate(_ context.Context, in trainapi.EvalInput) (trainapi.EvalOutput, error) {
	return trainapi.EvalOutput{Metrics: map[string]float64{"heldout_exact_match": w.exact[in.Checkpoint]}}, nil
}

func (w *rlWorld) agentEval(_ context.Context, in rolloutapi.AgentEvalInput) (trainapi.EvalOutput, error) {
	return trainapi.EvalOutput{Metrics: map[string]float64{"heldout_exact_match": w.exact[in.Eval.Checkpoint]}}, nil
}

// run executes the phase and returns its result.
func (w *rlWorld) run(in workflows.PhaseInput) (workflows.PhaseOutput, error) {
	w.t.Helper()
	w.env.ExecuteWorkflow("RL-grpo", in)
	if !w.env.IsWorkflowCompleted() {
		w.t.Fatal("workflow did not complete")
	}
	var out workflows.PhaseOutput
	err := w.env.GetWorkflowError()
	if err == nil {
		err = w.env.GetWorkflowResult(&out)
	}
	return out, err
}

// of lists the calls of one activity, in start order.
func (w *rlWorld) of(name string) []*rlCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*rlCall
	for _, c := range w.calls {
		if c.name == name {
			out = append(out, c)
		}
	}
	return out
}

func stepsOf(w *rlWorld) []trainapi.PolicyStepInput {
	var out []trainapi.PolicyStepInput
	for _, c := range w.of(trainapi.PolicyStepName) {
		out = append(out, c.in.(trainapi.PolicyStepInput))
	}
	return out
}

// TestRLUnitBacktrack: a non-finite step, or an evaluation that falls beyond the tolerance, leaves
// the policy for the last good checkpoint: the parent drains what it has in flight, and the rest
// of the phase runs as the child workflow run.grpo.b1 from that checkpoint, at half the learning
// rate, in the branch directory grpo.b1.
func TestRLUnitBacktrack(t *testing.T) {
	for _, c := range []struct {
		name, extra string
		exact       map[string]float64
		from        string // the policy the branch starts from
		fresh       bool   // and whether its optimizer starts fresh (the phase's start has none)
		final       string
		slower      map[string]time.Duration
	}{
		{"nan", `{"inject_nan_at":2}`, nil, rlUnitFrom, true, "mem://grpo.b1/step-000002", nil},
		// The next iteration's shards are still generating when the step fails: the parent waits for them.
		{"nan-async-sharded", `{"inject_nan_at":2,"mode":"async","rollout":{"shards":2}}`, nil, rlUnitFrom, true, "mem://grpo.b1/step-000002",
			map[string]time.Duration{rolloutapi.GenerateName: 15 * time.Minute}},
		{"regression", `{"eval_every":1}`, map[string]float64{"mem://grpo/step-000001": 0.5, "mem://grpo/step-000002": 0.3,
			"mem://grpo.b1/step-000002": 0.5, "mem://grpo.b1/step-000003": 0.5},
			"mem://grpo/step-000001", false, "mem://grpo.b1/step-000003", nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newRLWorld(t, c.exact, c.slower)
			out, err := w.run(rlUnitConfig(t, c.extra))
			if err != nil {
				t.Fatal(err)
			}
			if m := out.Metrics; m["backtracks"] != 1 || m["iterations"] != 4 || out.Checkpoint != c.final {
				t.Fatalf("ended on %s with %v: want one back-track over 4 iterations, ending on %s", out.Checkpoint, m, c.final)
			}
			branch := branchInputs[trainapi.PolicyStepInput](t, w)
			if len(branch) == 0 {
				t.Fatal("no policy step ran in the branch child run.grpo.b1")
			}
			if b := branch[0]; b.Policy != c.from || b.Phase != "grpo.b1" || b.FreshOptimizer != c.fresh || b.Optim.LR != rlUnitLR || b.LRScale != 0.5 {
				t.Errorf("branch's first step: policy %s in %s, fresh optimizer %v, lr %g × %g; want %s in grpo.b1, %v, %g × 0.5",
					b.Policy, b.Phase, b.FreshOptimizer, b.Optim.LR, b.LRScale, c.from, c.fresh, rlUnitLR)
			}
		})
	}
}

// TestRLUnitKeepBest: every evaluation that is no worse than the best so far makes its version the
// best, which retain marks and keeps; a fall within the tolerance does not. A fall beyond it at the
// last iteration ends the phase on the best version, evaluated again, without a branch.
func TestRLUnitKeepBest(t *testing.T) {
	v := func(n int) string { return fmt.Sprintf("mem://grpo/step-%06d", n) }
	for _, c := range []struct {
		name     string
		v4       float64 // held-out exact match of the last version
		best     []string
		keep     []int
		final    string
		backtrks float64
		evals    []string
	}{
		{"better-last", 0.6, []string{v(1), v(2), v(2), v(4)}, []int{2, 2, 2, 1}, v(4), 0, []string{v(1), v(2), v(3), v(4)}},
		{"regression-last", 0.2, []string{v(1), v(2), v(2)}, []int{2, 2, 2}, v(2), 1, []string{v(1), v(2), v(3), v(4), v(2)}},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newRLWorld(t, map[string]float64{v(1): 0.3, v(2): 0.5, v(3): 0.45, v(4): c.v4})
			out, err := w.run(rlUnitConfig(t, `{"eval_every":1}`))
			if err != nil {
				t.Fatal(err)
			}
			var best []string
			var keep []int
			for _, r := range w.of(trainapi.RetainName) {
				best, keep = append(best, r.in.(trainapi.RetainInput).Best), append(keep, r.in.(trainapi.RetainInput).KeepLast)
			}
			var evals []string
			for _, e := range w.of(trainapi.EvaluateName) {
				evals = append(evals, e.in.(trainapi.EvalInput).Checkpoint)
			}
			if !slices.Equal(best, c.best) || !slices.Equal(keep, c.keep) {
				t.Errorf("retains kept best %v, keep_last %v; want %v, %v", best, keep, c.best, c.keep)
			}
			if !slices.Equal(evals, c.evals) {
				t.Errorf("evaluated %v, want %v", evals, c.evals)
			}
			if out.Checkpoint != c.final || out.Metrics["backtracks"] != c.backtrks || out.Metrics["heldout_exact_match"] != w.exact[c.final] {
				t.Errorf("ended on %s with %v; want %s, %v back-tracks, its exact match", out.Checkpoint, out.Metrics, c.final, c.backtrks)
			}
		})
	}
}

// TestRLUnitAsyncOverlap: in async mode iteration k+1's shards are generated with policy k while
// step k trains, each is scored as soon as it exists (beside the step, not after it: the step takes
// ten times as long), and step k+1 corrects the stale rollouts with truncated importance sampling.
func TestRLUnitAsyncOverlap(t *testing.T) {
	w := newRLWorld(t, nil)
	out, err := w.run(rlUnitConfig(t, `{"mode":"async","rollout":{"shards":2}}`))
	if err != nil {
		t.Fatal(err)
	}
	if out.Metrics["version"] != 4 {
		t.Fatalf("async run: %v", out.Metrics)
	}
	steps := w.of(trainapi.PolicyStepName)
	for k := 1; k < len(steps); k++ {
		prev, s := steps[k-1], steps[k].in.(trainapi.PolicyStepInput)
		gens, scores := 0, 0
		for _, g := range w.of(rolloutapi.GenerateName) {
			if in := g.in.(rolloutapi.GenerateInput); in.Iteration == k {
				gens++
				if in.PolicyVersion != k-1 || g.start > prev.start {
					t.Errorf("iteration %d generated with version %d from %v; want version %d, from when step %d starts (%v) at the latest",
						k, in.PolicyVersion, g.start, k-1, k-1, prev.start)
				}
			}
		}
		for _, sc := range w.of(rewardapi.ScoreName) {
			if strings.Contains(sc.in.(rewardapi.ScoreInput).Rollouts, fmt.Sprintf("/iter-%06d-", k)) {
				scores++
				if sc.end > prev.end {
					t.Errorf("a shard of iteration %d scored from %v to %v: not beside step %d (%v to %v)", k, sc.start, sc.end, k-1, prev.start, prev.end)
				}
			}
		}
		if gens != 2 || scores != 2 {
			t.Errorf("iteration %d: %d generations and %d scores, want 2 shards", k, gens, scores)
		}
		if s.Loss.TISThreshold != 2 || len(s.Shards) != 2 || !strings.HasSuffix(s.Shards[0].Rollouts, fmt.Sprintf("-v%d.jsonl", k-1)) {
			t.Errorf("step %d trains on %v with tis_threshold %g; want the shards of version %d, corrected (2)", k, s.Shards, s.Loss.TISThreshold, k-1)
		}
	}
}

// TestRLUnitContinueAsNew: a run that continues as new after iteration 2 hands over its state (with
// the next iteration's rollouts when async), and the next run, from that input alone, ends the phase
// exactly as an uninterrupted run does: the same generations, steps and evaluations, the same result.
func TestRLUnitContinueAsNew(t *testing.T) {
	for _, mode := range []string{"sync", "async"} {
		t.Run(mode, func(t *testing.T) {
			in := rlUnitConfig(t, fmt.Sprintf(`{"mode":%q,"eval_every":2,"rollout":{"shards":2}}`, mode))
			exact := map[string]float64{"mem://grpo/step-000002": 0.5, "mem://grpo/step-000004": 0.6}
			run := continueAfterStep2(t, in, exact)
			st := run.next.RL
			if st == nil || st.Iter != 2 || st.Version != 2 || st.Policy != "mem://grpo/step-000002" || st.Good != st.Policy || st.GoodScore != 0.5 ||
				st.RewardSum != 0.5 || len(st.Curve) != 1 {
				t.Fatalf("carried state %+v", st)
			}
			if pending := len(st.PendingShards); (mode == "async") != (pending == 2 && st.PendingVersion == 1) {
				t.Fatalf("carried %d pending shards of version %d", pending, st.PendingVersion)
			}

			run.finish(t)
		})
	}
}

// continuedRun is one RL phase run twice: once uninterrupted (whole), once continuing as new while
// its second step trains (first), and the input that continue-as-new hands to the next run.
type continuedRun struct {
	exact map[string]float64
	whole *rlWorld
	want  workflows.PhaseOutput
	first *rlWorld
	next  workflows.PhaseInput
}

// continueAfterStep2 runs in uninterrupted, then again with the server suggesting continue-as-new
// while the second step trains (the first run is the uninterrupted one until then: the same times on
// the test clock), and returns both runs with the input the interrupted one handed over.
func continueAfterStep2(t *testing.T, in workflows.PhaseInput, exact map[string]float64) continuedRun {
	t.Helper()
	c := continuedRun{exact: exact, whole: newRLWorld(t, exact)}
	var err error
	if c.want, err = c.whole.run(in); err != nil {
		t.Fatal(err)
	}
	c.first = newRLWorld(t, exact)
	step2 := c.whole.of(trainapi.PolicyStepName)[1]
	c.first.env.RegisterDelayedCallback(func() { c.first.env.SetContinueAsNewSuggested(true) }, (step2.start+step2.end)/2)
	_, err = c.first.run(in)
	var can *workflow.ContinueAsNewError
	if !errors.As(err, &can) {
		t.Fatalf("first run ended with %v, want continue-as-new", err)
	}
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &c.next); err != nil {
		t.Fatal(err)
	}
	return c
}

// finish runs the handed-over input to the end and checks that the two runs together equal the
// uninterrupted one: the same result, and the same generations, steps and evaluations.
func (c continuedRun) finish(t *testing.T) {
	t.Helper()
	second := newRLWorld(t, c.exact)
	got, err := second.run(c.next)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(untimed(got), untimed(c.want)) {
		t.Errorf("continued run ended with %+v\nuninterrupted run with %+v", untimed(got), untimed(c.want))
	}
	for _, name := range []string{rolloutapi.GenerateName, trainapi.PolicyStepName, trainapi.EvaluateName} {
		if got, want := inputsOf(append(c.first.of(name), second.of(name)...)), inputsOf(c.whole.of(name)); !slices.Equal(got, want) {
			t.Errorf("%s inputs across the two runs:\n%s\nuninterrupted:\n%s", name, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
	}
}

// branchInputs checks that nothing of the parent (run.grpo) was still running when w's branch child
// (run.grpo.b1) began its work, and that nothing ran in another workflow; it returns the inputs of type
// T of the branch's calls, in order.
func branchInputs[T any](t *testing.T, w *rlWorld) []T {
	t.Helper()
	var parentEnd time.Duration
	var branch []T
	for _, call := range w.calls {
		switch call.workflow {
		case "run.grpo":
			if !call.done {
				t.Errorf("parent's %s (%+v) still running when it branched", call.name, call.in)
			}
			parentEnd = max(parentEnd, call.end)
		case "run.grpo.b1":
			if call.start < parentEnd {
				t.Errorf("branch's %s started at %v, before the parent's work ended (%v)", call.name, call.start, parentEnd)
			}
			if in, ok := call.in.(T); ok {
				branch = append(branch, in)
			}
		default:
			t.Errorf("%s ran in workflow %q", call.name, call.workflow)
		}
	}
	return branch
}

// inputsOf lists the calls' inputs as JSON, sorted: the shards of an iteration start together, in
// any order.
func inputsOf(calls []*rlCall) []string {
	var out []string
	for _, c := range calls {
		b, _ := json.Marshal(c.in)
		out = append(out, string(b))
	}
	slices.Sort(out)
	return out
}

// untimed drops what depends on when things ran (the continued run waits less: its first rollouts
// were generated by the run before it).
func untimed(out workflows.PhaseOutput) workflows.PhaseOutput {
	m := map[string]float64{}
	for k, v := range out.Metrics {
		if !strings.Contains(k, "seconds") {
			m[k] = v
		}
	}
	out.Metrics = m
	for i := range out.Curve {
		out.Curve[i].Seconds = 0
	}
	return out
}

// TestRLUnitAsyncCorrection: async stale rollouts get the automatic tis_threshold 2 only when the loss
// chose no correction; a correction.mode (none included) or a tis_threshold of the user's reaches the
// policy step as set, never beside the automatic one (which the step would refuse as a conflict).
func TestRLUnitAsyncCorrection(t *testing.T) {
	for _, c := range []struct {
		name, loss string
		tis        float64
		mode       string
	}{
		{"unset", `{}`, 2, ""},
		{"tis_threshold", `{"tis_threshold":3}`, 3, ""},
		{"mis", `{"correction":{"mode":"mis"}}`, 0, "mis"},
		{"icepop", `{"correction":{"mode":"icepop","low":0.4,"high":4}}`, 0, "icepop"},
		{"none", `{"correction":{"mode":"none"}}`, 0, "none"},
	} {
		t.Run(c.name, func(t *testing.T) {
			w := newRLWorld(t, nil)
			if _, err := w.run(rlUnitConfig(t, `{"mode":"async","loss":`+c.loss+`}`)); err != nil {
				t.Fatal(err)
			}
			steps := stepsOf(w)
			if len(steps) < 2 {
				t.Fatalf("%d policy steps", len(steps))
			}
			for k, s := range steps[1:] { // step 0 trains on fresh rollouts
				if s.Loss.TISThreshold != c.tis || s.Loss.Correction.Mode != c.mode {
					t.Errorf("step %d: tis_threshold %g, correction.mode %q; want %g, %q", k+1, s.Loss.TISThreshold, s.Loss.Correction.Mode, c.tis, c.mode)
				}
				if err := s.Loss.Validate(); err != nil {
					t.Errorf("step %d: the policy step would refuse its loss: %v", k+1, err)
				}
			}
		})
	}
}

// TestRLUnitSampling: the sampling block reaches every rollout generation and evaluation; unset,
// their inputs carry none (as before the block existed).
func TestRLUnitSampling(t *testing.T) {
	for _, c := range []struct {
		extra string
		want  *sample.Controls
	}{
		{`{}`, nil},
		{`{"sampling":{"top_p":0.9,"min_p":0.05,"repetition_penalty":1.2,"stop":["\n"]}}`,
			&sample.Controls{TopP: 0.9, MinP: 0.05, RepetitionPenalty: 1.2, Stop: []string{"\n"}}},
	} {
		w := newRLWorld(t, nil)
		if _, err := w.run(rlUnitConfig(t, c.extra)); err != nil {
			t.Fatal(err)
		}
		gens, evals := w.of(rolloutapi.GenerateName), w.of(trainapi.EvaluateName)
		if len(gens) == 0 || len(evals) == 0 {
			t.Fatalf("%s: %d generations, %d evaluations", c.extra, len(gens), len(evals))
		}
		for _, g := range gens {
			if got := g.in.(rolloutapi.GenerateInput).Sampling; !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s: generation samples with %+v, want %+v", c.extra, got, c.want)
			}
		}
		for _, e := range evals {
			if got := e.in.(trainapi.EvalInput).Sampling; !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s: evaluation samples with %+v, want %+v", c.extra, got, c.want)
			}
		}
	}
}

// TestRLUnitNaNAtLastIteration: a non-finite step at the last iteration back-tracks to the best
// version without a branch, and the result reports that version's evaluation, not the last one
// taken before the step (version 3's, of a policy the phase has left).
func TestRLUnitNaNAtLastIteration(t *testing.T) {
	v := func(n int) string { return fmt.Sprintf("mem://grpo/step-%06d", n) }
	w := newRLWorld(t, map[string]float64{v(1): 0.5, v(2): 0.45, v(3): 0.42})
	out, err := w.run(rlUnitConfig(t, `{"eval_every":1,"inject_nan_at":4}`))
	if err != nil {
		t.Fatal(err)
	}
	var evals []string
	for _, e := range w.of(trainapi.EvaluateName) {
		evals = append(evals, e.in.(trainapi.EvalInput).Checkpoint)
	}
	if want := []string{v(1), v(2), v(3), v(1)}; !slices.Equal(evals, want) {
		t.Errorf("evaluated %v, want %v (the restored version last)", evals, want)
	}
	if m := out.Metrics; out.Checkpoint != v(1) || m["backtracks"] != 1 || m["heldout_exact_match"] != 0.5 {
		t.Errorf("ended on %s with exact match %v, %v back-tracks; want %s, 0.5 (its own), 1", out.Checkpoint, m["heldout_exact_match"], m["backtracks"], v(1))
	}
}
