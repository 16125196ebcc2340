package reward

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/temperml/temper/algorithms/rollout"
)

// TestScoreRolloutsFileWithTaskVerifier scores a rollouts object from a local store with the default
// spec (the task's own checker).
func TestScoreRolloutsFileWithTaskVerifier(t *testing.T) {
	dir := t.TempDir()
	rs := []rollout.Rollout{
		{ID: "a", Task: "add2", Prompt: "2+3=", Answer: "5", Completion: "5"},
		{ID: "b", Task: "add2", Prompt: "2+3=", Answer: "5", Completion: "6"},
		{ID: "c", Task: "add2", Prompt: "2+3=", Answer: "5", Completion: ""},
		// split's verifier gives partial credit: 52 agrees with 57 in the tens place only.
		{ID: "d", Task: "split", Prompt: "split 57:", Answer: "20+37", Completion: "50+2"},
		{ID: "e", Task: "split", Prompt: "split 57:", Answer: "20+37", Completion: "50+7"},
	}
	f, err := os.Create(filepath.Join(dir, "r.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rollout.Write(f, rs); err != nil {
		t.Fatal(err)
	}
	f.Close()
	out, err := NewActivities(nil).ScoreItems(context.Background(), ScoreInput{Rollouts: "file://" + dir + "/r.jsonl"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{1, 0, 0, 0.25, 1}
	for i, v := range out.Verdicts {
		if v.Score != want[i] || v.Pass != (want[i] == 1) || v.Error != "" {
			t.Errorf("verdict %d: %+v", i, v)
		}
	}
	if out.Verdicts[1].Feedback == "" || out.Verdicts[3].Feedback == "" || out.Metrics.PassRate != 2.0/5 {
		t.Errorf("feedback %q pass rate %v", out.Verdicts[1].Feedback, out.Metrics.PassRate)
	}
}
