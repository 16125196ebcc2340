package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"
)

// Temper's custom search attributes: every pipeline and phase workflow sets them as it goes, so that a
// visibility query (`temper ls --where`, the Web UI's filter) finds runs by kind and by result, e.g.
// `TemperKind = 'grpo' AND TemperExactMatch > 0.5`. A server must have them registered in the
// namespace: the embedded server of `temper dev` does it at start; on another cluster an operator runs
// `temporal operator search-attribute create` (docs/observability.md). Where they are missing, workflows set none: an
// upsert of an unknown attribute would fail every workflow task, so the pipeline asks the server first
// (SearchAttributesName) and passes the answer to its phases (PhaseInput.Search).
var (
	SARun        = temporal.NewSearchAttributeKeyKeyword("TemperRun")        // the pipeline's workflow ID
	SAPhase      = temporal.NewSearchAttributeKeyKeyword("TemperPhase")      // phase name (a pipeline: the current phase)
	SAKind       = temporal.NewSearchAttributeKeyKeyword("TemperKind")       // phase kind, or "pipeline"
	SAStep       = temporal.NewSearchAttributeKeyInt64("TemperStep")         // optimizer step, or RL iteration
	SAExactMatch = temporal.NewSearchAttributeKeyFloat64("TemperExactMatch") // latest held-out exact match
	SARewardMean = temporal.NewSearchAttributeKeyFloat64("TemperRewardMean") // RL: latest iteration's mean reward
	SABacktrack  = temporal.NewSearchAttributeKeyKeyword("TemperBacktrack")  // RL: none, branched, or b1, b2… (this run is that branch)
	SAWaiting    = temporal.NewSearchAttributeKeyKeyword("TemperWaiting")    // set while a person must act: approval (a gate), paused (a phase)
	SAParent     = temporal.NewSearchAttributeKeyKeyword("TemperParent")     // a forked pipeline: the run it was forked from
)

// TemperWaiting values: a pipeline waits at an approval gate, or a phase is paused.
const (
	WaitingApproval = "approval"
	WaitingPaused   = "paused"
)

// SearchAttributeKeys lists Temper's search attributes, for registration and for the check.
func SearchAttributeKeys() []temporal.SearchAttributeKey {
	return []temporal.SearchAttributeKey{SARun, SAPhase, SAKind, SAStep, SAExactMatch, SARewardMean, SABacktrack, SAWaiting, SAParent}
}

// SearchAttributesName is the local activity, registered by workflow workers, that reports whether the
// namespace has every Temper search attribute registered with its type.
const SearchAttributesName = "temper.SearchAttributes"

// KindPipeline is TemperKind of pipeline workflows.
const KindPipeline = "pipeline"

// searchVersion gates every search-attribute command: histories recorded before them replay unchanged.
const searchVersion = "temper-search-attributes"

// searchEnabled asks the workers whether the server knows Temper's search attributes (a marker in the
// history records the answer). A failure of the check means "no": a run never fails for want of them.
func searchEnabled(ctx workflow.Context) bool {
	if workflow.GetVersion(ctx, searchVersion, workflow.DefaultVersion, 1) < 1 {
		return false
	}
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{MaximumAttempts: 2}})
	var ok bool
	if err := workflow.ExecuteLocalActivity(lctx, SearchAttributesName).Get(ctx, &ok); err != nil {
		workflow.GetLogger(ctx).Warn("search attributes: check failed; this run sets none", "error", err)
		return false
	}
	return ok
}

// upsertSearch sets search attributes when the run has them (PhaseInput.Search); otherwise it does nothing.
func upsertSearch(ctx workflow.Context, enabled bool, updates ...temporal.SearchAttributeUpdate) error {
	if !enabled || len(updates) == 0 || workflow.GetVersion(ctx, searchVersion, workflow.DefaultVersion, 1) < 1 {
		return nil
	}
	return workflow.UpsertTypedSearchAttributes(ctx, updates...)
}

// phaseIdentity is what every phase workflow sets when it starts (every run of it: after
// continue-as-new and in back-tracking branches too).
func phaseIdentity(in PhaseInput, step int) []temporal.SearchAttributeUpdate {
	return []temporal.SearchAttributeUpdate{SARun.ValueSet(in.RunID), SAPhase.ValueSet(in.Phase), SAKind.ValueSet(in.Kind),
		SAStep.ValueSet(int64(step))}
}

// evalUpdates adds held-out exact match when the evaluation measured it.
func evalUpdates(m map[string]float64, updates ...temporal.SearchAttributeUpdate) []temporal.SearchAttributeUpdate {
	if v, ok := m["heldout_exact_match"]; ok {
		updates = append(updates, SAExactMatch.ValueSet(v))
	}
	return updates
}

// TemperBacktrack values besides bN (the run is the Nth back-tracking branch of its phase).
const (
	BacktrackNone     = "none"
	BacktrackBranched = "branched" // this run back-tracked: a branch child (or, in old runs, this run) goes on
)

// rlIdentity is what an RL phase run sets at its start: identity, iteration, its place in the
// back-tracking tree, and the latest held-out exact match it knows.
func rlIdentity(in PhaseInput, st *RLState) []temporal.SearchAttributeUpdate {
	bt := BacktrackNone
	if n := len(st.Branches); n > 0 {
		bt = fmt.Sprintf("b%d", n)
	}
	latest := st.Last
	if latest == nil {
		latest = st.Before
	}
	return evalUpdates(latest, append(phaseIdentity(in, st.Iter), SABacktrack.ValueSet(bt))...)
}

// iterationUpdates is what an RL iteration sets: the iteration, its mean reward and, when it
// evaluated, held-out exact match (both read from the iteration's memo).
func iterationUpdates(iter int, memo map[string]any) []temporal.SearchAttributeUpdate {
	u := []temporal.SearchAttributeUpdate{SAStep.ValueSet(int64(iter))}
	if v, ok := memo["reward_mean"].(float64); ok {
		u = append(u, SARewardMean.ValueSet(v))
	}
	if v, ok := memo["heldout_exact_match"].(float64); ok {
		u = append(u, SAExactMatch.ValueSet(v))
	}
	return u
}
