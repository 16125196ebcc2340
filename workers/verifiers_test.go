package workers

import (
	"slices"
	"testing"

	"github.com/temperml/temper/algorithms/verify"
	"github.com/temperml/temper/workflows"
)

// TestWorkerVerifiersListed: the verifiers a reward worker adds to the built-ins are exactly the ones
// the workflow layer lets a pipeline's reward spec name (workflows.WorkerVerifiers), so a pipeline
// using "task", "code" or "critic" is not refused at submit, and a new worker-side verifier cannot be
// forgotten there.
func TestWorkerVerifiersListed(t *testing.T) {
	ra, err := NewRewardActivities(Options{}, false)
	if err != nil {
		t.Fatal(err)
	}
	builtin := verify.Builtins().Names()
	var added []string
	for _, n := range ra.Registry().Names() {
		if !slices.Contains(builtin, n) {
			added = append(added, n)
		}
	}
	want := slices.Sorted(slices.Values(workflows.WorkerVerifiers))
	if slices.Sort(added); !slices.Equal(added, want) {
		t.Fatalf("reward worker adds %v to the built-ins; workflows.WorkerVerifiers lists %v", added, want)
	}
}
