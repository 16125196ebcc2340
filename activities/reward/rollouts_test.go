package reward

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/temperml/temper/activities/reward/rewardapi"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/verify"
)

// TestScoreRolloutsFileWithTaskVerifier scores a rollouts object from a local store with the default
// spec (the task's own checker).
func TestScoreRolloutsFileWithTaskVerifier(t *testing.T) {
	dir := t.TempDir()
	rs := []rollout.Rollout{
		{ID: "a", Task: "add2", Prompt: "2+3=", Answer: "5", Completion: "5"},
		{ID: "b", Task: "add2", Prompt: "2+3=", Answer: "5", Completion: "6"},
		{ID: "c", Task: "add2", Prompt: "2+3=", Answer: "5", Completion: ""},
		// split defines partial credit (52 agrees with 57 in the tens place only), scored when asked.
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
	out, err := NewActivities(nil).ScoreItems(context.Background(), rewardapi.ScoreInput{Rollouts: "file://" + dir + "/r.jsonl"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []float64{1, 0, 0, 0, 1}
	for i, v := range out.Verdicts {
		if v.Score != want[i] || v.Pass != (want[i] == 1) || v.Error != "" {
			t.Errorf("verdict %d: %+v", i, v)
		}
	}
	if out.Verdicts[1].Feedback == "" || out.Verdicts[3].Feedback == "" || out.Metrics.PassRate != 2.0/5 {
		t.Errorf("feedback %q pass rate %v", out.Verdicts[1].Feedback, out.Metrics.PassRate)
	}
	// Partial credit is asked for in the verifier's params.
	out, err = NewActivities(nil).ScoreItems(context.Background(), rewardapi.ScoreInput{Rollouts: "file://" + dir + "/r.jsonl",
		Spec: verify.Spec{Verifiers: []verify.Component{{Name: TaskVerifier, Params: json.RawMessage(`{"partial":true}`)}}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, w := range []float64{1, 0, 0, 0.25, 1} {
		if v := out.Verdicts[i]; v.Score != w || v.Pass != (w == 1) {
			t.Errorf("partial: verdict %d: %+v, want score %g", i, v, w)
		}
	}
}
