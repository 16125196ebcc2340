package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/temperml/temper/workflows"
)

// TestDistillBenchPipelineAndReport: the bench's teacher and arms validate (with a user override of
// the distill arm), every phase trains and evaluates on data seed 1's labelled and held-out sets, both
// arms are bounded by the same training time, and the report pairs the arms per seed.
func TestDistillBenchPipelineAndReport(t *testing.T) {
	o := DistillOptions{Task: "add2", Examples: 500, Heldout: 300, TeacherSteps: 100, TeacherData: 2000, TeacherPreset: "small", StudentPreset: "tiny",
		Seconds: 120, Seeds: 2, DistillConfig: `{"loss":{"divergence":"jsd","lambda":0.5}}`}
	tp, arms, err := DistillPhases(o, "teacher")
	if err != nil {
		t.Fatal(err)
	}
	in := workflows.PipelineInput{Name: "b", Phases: append([]workflows.PhaseSpec{tp}, arms...)}
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, p := range in.Phases {
		var c struct {
			Model struct {
				Preset string `json:"preset"`
			} `json:"model"`
			Data struct {
				Seed    uint64 `json:"seed"`
				Train   int    `json:"train_examples"`
				Heldout int    `json:"heldout_examples"`
			} `json:"data"`
			Eval struct {
				Examples int `json:"examples"`
			} `json:"eval"`
			MaxSeconds float64 `json:"max_seconds"`
		}
		if err := json.Unmarshal(p.Config, &c); err != nil {
			t.Fatal(err)
		}
		wantPreset, wantSeconds, wantTrain := "tiny", 120.0, 500
		if p.Name == "teacher" {
			wantPreset, wantSeconds, wantTrain = "small", 0, 2000
		}
		if c.Data.Seed != dataSeed || c.Data.Train != wantTrain || c.Data.Heldout != 300 || c.Eval.Examples != 300 || c.Model.Preset != wantPreset || c.MaxSeconds != wantSeconds {
			t.Errorf("phase %s: %+v", p.Name, c)
		}
	}
	if !strings.Contains(string(arms[1].Config), `"lambda":0.5`) || !strings.Contains(string(arms[1].Config), `"teacher":"teacher"`) {
		t.Errorf("distill arm: %s", arms[1].Config)
	}
	o.DistillConfig = `{"loss":`
	if _, _, err := DistillPhases(o, "t"); err == nil || !strings.Contains(err.Error(), "--distill-config") {
		t.Errorf("bad override: %v", err)
	}
	s := summarizeDistill([]DistillArm{{Seed: 1, Arm: "sft", Final: 0.5}, {Seed: 1, Arm: "distill", Final: 0.6},
		{Seed: 2, Arm: "sft", Final: 0.4}, {Seed: 2, Arm: "distill", Final: 0.3}})
	if s.Paired != 2 || s.Wins != 1 || math.Abs(s.Diff) > 1e-12 || math.Abs(s.SFT-0.45) > 1e-12 || math.Abs(s.Distill-0.45) > 1e-12 || !(s.DiffErr > 0.09) {
		t.Errorf("summary %+v", s)
	}
	var b bytes.Buffer
	(&DistillReport{Summary: s}).Text(&b)
	if !strings.Contains(b.String(), "distill higher in 1 of 2 seed(s)") {
		t.Errorf("report:\n%s", b.String())
	}
}
