package control

import (
	"context"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/control/controlapi"
)

// TestLog: records go to their run and phase's log as control records; a retried Log leaves the
// same records.
func TestLog(t *testing.T) {
	ctx := context.Background()
	a := &Activities{Ckpt: ckpt.New(ckpt.Options{})}
	root := "file://" + t.TempDir()
	in := controlapi.LogInput{Store: root, Records: []controlapi.Record{
		{Run: "r", Phase: "grpo", Step: 10, Seq: 1, Time: 5, Event: "set", Label: "set optimizer.lr 0.0003→0.0001", Values: map[string]float64{"optimizer.lr": 1e-4}},
		{Run: "r", Phase: "grpo", Step: 10, Seq: 2, Time: 6, Event: "pause", Label: "pause", Note: "lunch"},
		{Run: "r", Phase: "dpo", Step: 0, Seq: 1, Time: 7, Event: "approve", Label: "approve"},
	}}
	for range 2 {
		if err := a.Log(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		phase  string
		events []string
	}{{"grpo", []string{"set", "pause"}}, {"dpo", []string{"approve"}}} {
		recs, err := a.Ckpt.ReadMetrics(ctx, root, "r", c.phase)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != len(c.events) {
			t.Fatalf("%s: %+v, want %v", c.phase, recs, c.events)
		}
		for i, r := range recs {
			if r.Kind != ckpt.RecordControl || r.Event != c.events[i] {
				t.Errorf("%s record %d: %+v, want a %s control record", c.phase, i, r, c.events[i])
			}
		}
	}
	recs, _ := a.Ckpt.ReadMetrics(ctx, root, "r", "grpo")
	if recs[0].Metrics["optimizer.lr"] != 1e-4 || recs[1].Note != "lunch" || recs[0].Step != 10 {
		t.Errorf("grpo log %+v", recs)
	}
}
