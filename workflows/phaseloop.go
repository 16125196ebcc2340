package workflows

import (
	"encoding/json"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/train"
)

// continueAsNew restarts the running phase workflow with st as its resume state.
func continueAsNew(ctx workflow.Context, in PhaseInput, st any) error {
	next := in
	var err error
	if next.Resume, err = json.Marshal(st); err != nil {
		return err
	}
	return workflow.NewContinueAsNewError(ctx, workflow.GetInfo(ctx).WorkflowType.Name, next)
}

// retainAndMemo marks the best checkpoint, prunes older ones beyond keepLast and shows memo in the UI;
// every chunked training phase ends each chunk with it.
func retainAndMemo(ctx, shortCtx workflow.Context, in PhaseInput, keepLast int, best string, memo map[string]any) error {
	if err := workflow.ExecuteActivity(shortCtx, train.RetainName, train.RetainInput{
		Store: in.Store, Run: in.RunID, Phase: in.Phase, KeepLast: keepLast, Best: best,
	}).Get(ctx, nil); err != nil {
		return fmt.Errorf("%s %s: retain: %w", in.Kind, in.Phase, err)
	}
	return workflow.UpsertMemo(ctx, memo)
}
