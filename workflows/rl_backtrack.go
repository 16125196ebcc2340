package workflows

import (
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// backTrack leaves the current policy for the last good checkpoint: it drains the work in flight on
// the policy it leaves, records the branch (LR and KL scaled) and, while iterations remain, runs
// them as the child workflow Root.bN, whose result is the phase's (end). Without iterations left the
// loop ends here; forgetLast (a regression; a non-finite step from "rl-nan-last" on) then drops the
// last evaluation so that the restored checkpoint is evaluated for the result.
func (r *rlRun) backTrack(reason string, forgetLast bool) (out PhaseOutput, end bool, err error) {
	r.src.drop(r)
	if err := r.awaitRetain(); err != nil {
		return PhaseOutput{}, true, err
	}
	if err := r.recordBranch(reason); err != nil {
		return PhaseOutput{}, true, err
	}
	if r.spent() {
		if forgetLast || r.forgetsAfterNonFinite() {
			r.st.Last = nil
		}
		return PhaseOutput{}, false, nil
	}
	out, err = r.branch()
	if err == errInPlace {
		return PhaseOutput{}, false, nil
	}
	return out, true, err
}

// recordBranch restores the last good checkpoint into the state, in a new branch directory, with
// the learning rate and the KL coefficient scaled; a marker in the history records the decision and
// the memo and the search attributes show it. Past backtrack.budget it fails the phase.
func (r *rlRun) recordBranch(reason string) error {
	st, in, cfg := &r.st, r.in, r.cfg
	if len(st.Branches) >= cfg.Backtrack.Budget {
		return temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s %s: back-tracking budget (%d) exhausted: %s", in.Kind, in.Phase, cfg.Backtrack.Budget, reason), "BacktrackBudget", nil)
	}
	st.LRScale *= cfg.Backtrack.LRFactor
	st.KLScale *= cfg.Backtrack.KLFactor
	b := Branch{Iteration: st.Iter, Reason: reason, FromVersion: st.Version, ToVersion: st.GoodVersion, Checkpoint: st.Good,
		LRScale: st.LRScale, KLScale: st.KLScale}
	var recorded Branch
	if err := workflow.SideEffect(r.ctx, func(workflow.Context) any { return b }).Get(&recorded); err != nil {
		return err
	}
	st.Branches = append(st.Branches, recorded)
	st.Policy, st.Version = st.Good, st.GoodVersion
	st.Dir = fmt.Sprintf("%s.b%d", in.Phase, len(st.Branches))
	st.FreshOptimizer = st.Good == in.From
	st.Pending, st.PendingShards = nil, nil
	workflow.GetLogger(r.ctx).Warn("back-tracking", "reason", reason, "to_version", st.GoodVersion, "lr_scale", st.LRScale)
	if err := workflow.UpsertMemo(r.ctx, map[string]any{"branches": len(st.Branches), "last_branch": reason}); err != nil {
		return err
	}
	return upsertSearch(r.ctx, in.Search, SABacktrack.ValueSet(BacktrackBranched))
}

// branch runs the rest of the phase, from the restored checkpoint, as a child workflow Root.bN of
// the same type (the Web UI shows the branch tree; each branch has its own history) and returns its
// result. Runs from before branch children go on in place (errInPlace).
func (r *rlRun) branch() (PhaseOutput, error) {
	if !r.branchesAsChildren() {
		return PhaseOutput{}, errInPlace
	}
	next := r.in
	next.RL = &r.st
	id := fmt.Sprintf("%s.b%d", r.st.Root, len(r.st.Branches))
	cctx := workflow.WithChildOptions(r.ctx, workflow.ChildWorkflowOptions{WorkflowID: id})
	r.steer.elsewhere = id // the branch steers the rest of the phase
	var out PhaseOutput
	err := workflow.ExecuteChildWorkflow(cctx, workflow.GetInfo(r.ctx).WorkflowType.Name, next).Get(r.ctx, &out)
	return out, err
}
