package bench

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"

	"github.com/temperml/temper/workflows"
)

// TestRLvsSFTPipelineAndReport: the bench's phases validate (with and without a base checkpoint and
// with user overrides), bad overrides are errors, and the report reads curves as "the last
// evaluation at or before each minute" and picks the arm with the higher mean final exact match.
func TestRLvsSFTPipelineAndReport(t *testing.T) {
	o := RLvsSFTOptions{Task: "add2", SFTExamples: 500, SFTSteps: 100, Pretrain: 100, Seconds: 150, Seeds: 2, Algo: "grpo",
		RLConfig: `{"optimizer":{"lr":0.0002}}`, Heldout: 300}
	for _, from := range []string{"", "file:///tmp/x/step-000001/"} {
		phases, err := RLvsSFTPhases(o, from)
		if err != nil {
			t.Fatal(err)
		}
		in := workflows.PipelineInput{Name: "b", Phases: phases}
		if err := in.Validate(); err != nil {
			t.Fatalf("from %q: %v", from, err)
		}
		if n := len(phases); (from == "" && n != 4) || (from != "" && n != 2) {
			t.Fatalf("from %q: %d phases", from, n)
		}
		if !strings.Contains(string(phases[len(phases)-1].Config), `"lr":0.0002`) {
			t.Errorf("RL override lost: %s", phases[len(phases)-1].Config)
		}
		// Every phase holds out the same prompts (same data seed, same count) and evaluates on all of
		// them: a phase that held out fewer, or drew them with another seed, would train on prompts
		// the arms are scored on.
		for _, p := range phases {
			var c struct {
				Data struct {
					Seed    uint64 `json:"seed"`
					Heldout int    `json:"heldout_examples"`
				} `json:"data"`
				Eval struct {
					Examples int `json:"examples"`
				} `json:"eval"`
			}
			if err := json.Unmarshal(p.Config, &c); err != nil {
				t.Fatal(err)
			}
			if c.Data.Seed != dataSeed || c.Data.Heldout != 300 || c.Eval.Examples != 300 {
				t.Errorf("from %q, phase %s: data seed %d, %d held out, %d evaluated; want %d, 300, 300",
					from, p.Name, c.Data.Seed, c.Data.Heldout, c.Eval.Examples, dataSeed)
			}
		}
	}
	// PPO gets the settings that beat continued SFT (value coefficient 0.1, a KL term, lr 5e-4);
	// --rl-config still wins over them.
	po := o
	po.Algo, po.RLConfig = "ppo", `{"loss":{"kl_beta":0.02}}`
	pp, err := RLvsSFTPhases(po, "file:///tmp/x/step-000001/")
	if err != nil {
		t.Fatal(err)
	}
	if c := string(pp[1].Config); !strings.Contains(c, `"value_coef":0.1`) || !strings.Contains(c, `"kl_beta":0.02`) || !strings.Contains(c, `"lr":0.0005`) {
		t.Errorf("ppo arm config %s", c)
	}
	if err := (&workflows.PipelineInput{Name: "b", Phases: pp}).Validate(); err != nil {
		t.Errorf("ppo phases: %v", err)
	}
	if c := string(phasesOf(t, o)[1].Config); strings.Contains(c, "value_coef") {
		t.Errorf("grpo arm got ppo settings: %s", c)
	}
	// Sampling budgets follow the task's longest answer (split: "99+99" and EOS), and the
	// pretraining text can come from another task.
	so := o
	so.Task, so.PretrainOn = "split", "add2"
	phases, err := RLvsSFTPhases(so, "")
	if err != nil {
		t.Fatal(err)
	}
	if pre, rl := string(phases[0].Config), string(phases[3].Config); !strings.Contains(pre, `"task":"add2"`) ||
		!strings.Contains(rl, `"max_new_tokens":6`) || !strings.Contains(rl, `"max_new_tokens":7`) || !strings.Contains(string(phases[1].Config), `"task":"split"`) {
		t.Errorf("split phases: pretrain %s / rl %s", pre, rl)
	}
	for _, bad := range []RLvsSFTOptions{{Task: "nope"}, {Task: "split", PretrainOn: "nope"}} {
		if _, err := RLvsSFTPhases(bad, ""); err == nil || !strings.Contains(err.Error(), "allowed") {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	o.SFTConfig = `{"steps":`
	if _, err := RLvsSFTPhases(o, ""); err == nil {
		t.Error("a malformed --sft-config must be an error")
	}
	curve := []workflows.CurvePoint{{Seconds: 0, ExactMatch: 0.1}, {Seconds: 50, ExactMatch: 0.2}, {Seconds: 130, ExactMatch: 0.3}}
	for _, c := range []struct{ t, want float64 }{{0, 0.1}, {60, 0.2}, {120, 0.2}, {math.Inf(1), 0.3}} {
		if got := emAt(curve, c.t); got != c.want {
			t.Errorf("emAt(%v) = %v, want %v", c.t, got, c.want)
		}
	}
	if !math.IsNaN(emAt(curve[1:], 10)) {
		t.Error("before the first evaluation there is no value")
	}
	// The last minute of a 150 s budget starts at 90 s: grpo's points at 100 and 140 s count, the one
	// at 80 s does not (and the start, step 0, never does).
	rlCurve := []workflows.CurvePoint{{ExactMatch: 0.1}, {Seconds: 80, Step: 10, ExactMatch: 0.9}, {Seconds: 100, Step: 20, ExactMatch: 0.5},
		{Seconds: 140, Step: 30, ExactMatch: 0.7}}
	curve[1].Step, curve[2].Step = 100, 200
	arms := []RLvsSFTArm{
		{Seed: 1, Arm: "sft_more", Curve: curve, Final: 0.3}, {Seed: 1, Arm: "grpo", Curve: rlCurve, Final: 0.4},
		{Seed: 2, Arm: "sft_more", Curve: curve, Final: 0.2}, {Seed: 2, Arm: "grpo", Curve: rlCurve, Final: 0.2},
	}
	s := summarizeRLvsSFT(arms, o)
	if s.Winner != "grpo" || math.Abs(s.Margin-0.05) > 1e-12 || s.Start != 0.1 {
		t.Errorf("summary %+v", s)
	}
	// Standard errors by hand: grpo finals 0.4, 0.2 (sd 0.1414, / √2 = 0.1); sft_more 0.3, 0.2
	// (0.05); paired differences 0.1, 0.0: mean 0.05, standard error 0.05, one standard error from 0.
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"grpo stderr", s.StdErr["grpo"], 0.1}, {"sft_more stderr", s.StdErr["sft_more"], 0.05},
		{"diff", s.Diff, 0.05}, {"diff stderr", s.DiffStdErr, 0.05}, {"diff t", s.DiffT, 1}} {
		if math.Abs(c.got-c.want) > 1e-12 {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	if s.Paired != 2 {
		t.Errorf("paired seeds %d, want 2", s.Paired)
	}
	if m, se := meanStdErr([]float64{0.5}); m != 0.5 || se != 0 {
		t.Errorf("one value: mean %v stderr %v, want 0.5, 0", m, se)
	}
	if math.Abs(s.LastMinute["grpo"]-0.6) > 1e-12 || math.Abs(s.LastMinute["sft_more"]-0.3) > 1e-12 {
		t.Errorf("last-minute means %v, want grpo 0.6, sft_more 0.3", s.LastMinute)
	}
	if tie := summarizeRLvsSFT(arms[:1], o); tie.Winner != "sft_more" || tie.Paired != 0 {
		t.Errorf("one arm only: %+v", tie)
	}
	if tie := summarizeRLvsSFT([]RLvsSFTArm{{Arm: "sft_more", Final: 0.2}, {Arm: "grpo", Final: 0.2}}, o); tie.Winner != "tie" || tie.Margin != 0 {
		t.Errorf("equal finals: %+v", tie)
	}
	var b bytes.Buffer
	(&RLvsSFTReport{Arms: arms, Summary: s, o: o}).Text(&b)
	if !strings.Contains(b.String(), "grpo 0.300 ± 0.100, sft_more 0.250 ± 0.050 (± one standard error) → grpo by 0.050") ||
		!strings.Contains(b.String(), "paired difference grpo − sft_more over 2 seed(s): +0.050 ± 0.050 (1.0 standard errors from 0)") || !strings.Contains(b.String(), "evaluations: grpo 0.600, sft_more 0.300") {
		t.Errorf("report:\n%s", b.String())
	}
}

// TestBenchRLPipelineIsValid: `temper bench rl`'s pipeline validates, overrides apply (the deep arm
// keeps its own async settings), and a malformed override is an error rather than a silent default.
func TestBenchRLPipelineIsValid(t *testing.T) {
	in, err := RLPipeline(3, `{"prompts":4}`)
	if err != nil {
		t.Fatal(err)
	}
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}
	if len(in.Phases) != 4 || !strings.Contains(string(in.Phases[2].Config), `"prompts":4`) || !strings.Contains(string(in.Phases[2].Config), `"mode":"async"`) {
		t.Fatalf("phases %+v", in.Phases)
	}
	// The deep arm is deep whatever the override; the others keep max_staleness 1.
	if d := string(in.Phases[3].Config); in.Phases[3].Name != "deep" || !strings.Contains(d, `"max_staleness":4`) || !strings.Contains(d, `"partial":true`) ||
		!strings.Contains(d, `"prompts":4`) || strings.Contains(string(in.Phases[2].Config), `"partial"`) {
		t.Fatalf("deep arm %s (async arm %s): want max_staleness 4, partial, the override", d, in.Phases[2].Config)
	}
	if _, err := RLPipeline(3, `{"prompts":`); err == nil {
		t.Error("a malformed override must be an error")
	}
}

func phasesOf(t *testing.T, o RLvsSFTOptions) []workflows.PhaseSpec {
	t.Helper()
	p, err := RLvsSFTPhases(o, "x")
	if err != nil {
		t.Fatal(err)
	}
	return p
}
