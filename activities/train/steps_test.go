package train_test

import (
	"fmt"
	"testing"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/tasks"
)

// TestStepRowsUnlabelled: the prm verifier encodes a completion's steps without labels; StepRows
// keeps them unlabelled (it panicked slicing the nil labels, so every prm verdict was an error),
// and cuts labelled ones with their steps.
func TestStepRowsUnlabelled(t *testing.T) {
	exs := []tasks.StepExample{
		{Prompt: "1+2=", Steps: []string{"3", "done", "more"}},
		{Prompt: "1+2=", Steps: []string{"3", "done", "more"}, Labels: []bool{true, false, false}},
	}
	rows, err := train.StepRows(exs, 64, 2)
	if err != nil {
		t.Fatal(err)
	}
	if rows[0].Labels != nil || len(rows[0].Ends) != 2 || fmt.Sprint(rows[1].Labels) != "[true false]" || len(rows[1].Ends) != 2 {
		t.Fatalf("rows %+v", rows)
	}
}
