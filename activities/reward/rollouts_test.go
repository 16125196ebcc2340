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
	want := []float64{1, 0, 0}
	for i, v := range out.Verdicts {
		if v.Score != want[i] || v.Pass != (want[i] == 1) || v.Error != "" {
			t.Errorf("verdict %d: %+v", i, v)
		}
	}
	if out.Verdicts[1].Feedback == "" || out.Metrics.PassRate != 1.0/3 {
		t.Errorf("feedback %q pass rate %v", out.Verdicts[1].Feedback, out.Metrics.PassRate)
	}
}
