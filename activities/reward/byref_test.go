package reward

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/reward/rewardapi"
	"github.com/temperml/temper/algorithms/rollout"
)

// TestScoreByReference: with write_verdicts, a rollouts object of any size is scored, its verdicts
// go to a store object beside it (one line per rollout, in order), and the output carries only
// metrics and the first failures; without it the inline bound still holds.
func TestScoreByReference(t *testing.T) {
	dir := t.TempDir()
	n := rewardapi.MaxItems + 500
	rs := make([]rollout.Rollout, n)
	for i := range rs {
		c := "5"
		if i%3 == 1 {
			c = "6" // every third sample fails
		}
		rs[i] = rollout.Rollout{ID: fmt.Sprintf("r%d", i), Task: "add2", Prompt: "2+3=", Answer: "5", Completion: c}
	}
	f, err := os.Create(filepath.Join(dir, "iter-000000-s0000.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rollout.Write(f, rs); err != nil {
		t.Fatal(err)
	}
	f.Close()
	uri := "file://" + dir + "/iter-000000-s0000.jsonl"
	a := NewActivities(nil)
	ctx := context.Background()
	if _, err := a.ScoreItems(ctx, rewardapi.ScoreInput{Rollouts: uri}, nil); !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), "write_verdicts") {
		t.Fatalf("inline verdicts of %d rollouts: %v, want the bound and how to lift it", n, err)
	}
	out, err := a.ScoreItems(ctx, rewardapi.ScoreInput{Rollouts: uri, WriteVerdicts: true, MaxFailed: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Verdicts) != 0 || out.VerdictsURI != "file://"+dir+"/iter-000000-s0000.verdicts.jsonl" || out.VerdictsURI != rewardapi.VerdictsURI(uri) {
		t.Fatalf("verdicts inline %d, uri %s", len(out.Verdicts), out.VerdictsURI)
	}
	wantFailed := []rewardapi.Failed{{Index: 1}, {Index: 4}, {Index: 7}}
	for i, f := range out.Failed {
		if i >= len(wantFailed) || f.Index != wantFailed[i].Index || f.Feedback == "" {
			t.Fatalf("failed %+v, want indices 1, 4, 7 with feedback", out.Failed)
		}
	}
	if len(out.Failed) != 3 || out.Metrics.Items != n || out.Metrics.Judged != n {
		t.Fatalf("failed %d, metrics %+v", len(out.Failed), out.Metrics)
	}
	vf, err := os.Open(filepath.Join(dir, "iter-000000-s0000.verdicts.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer vf.Close()
	sc := bufio.NewScanner(vf)
	lines := 0
	for ; sc.Scan(); lines++ {
		var v rewardapi.ItemVerdict
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		if want := 1.0 - float64(boolInt(lines%3 == 1)); v.ID != rs[lines].ID || v.Score != want {
			t.Fatalf("line %d: %+v, want %s scored %g", lines+1, v, rs[lines].ID, want)
		}
	}
	if lines != n {
		t.Fatalf("%d verdict lines for %d rollouts", lines, n)
	}
	if _, err := a.ScoreItems(ctx, rewardapi.ScoreInput{Items: []rewardapi.Item{{ID: "x"}}, WriteVerdicts: true}, nil); !errors.Is(err, ErrInvalidInput) {
		t.Errorf("write_verdicts without a rollouts object: %v", err)
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
