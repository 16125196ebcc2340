package report

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestExactMatchLine(t *testing.T) {
	got := ExactMatchLine([]PhaseResult{
		{Name: "pretrain", Metrics: map[string]float64{"heldout_exact_match_before": 0, "heldout_exact_match": 0.045}},
		{Name: "noeval", Metrics: map[string]float64{"steps": 3}},
		{Name: "sft", Metrics: map[string]float64{"heldout_exact_match_before": 0.045, "heldout_exact_match": 0.12}},
	})
	if want := "held-out exact match: start 0.000 → pretrain 0.045 → sft 0.120"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if ExactMatchLine(nil) != "" {
		t.Error("no phases: no line")
	}
}

// TestPrintResultDigits: text output rounds metrics to 4 significant digits (whole numbers stay whole,
// non-finite values stay readable); --json keeps every digit.
func TestPrintResultDigits(t *testing.T) {
	r := Result{RunID: "r", Status: "completed", ElapsedSeconds: 1, Phases: []PhaseResult{{Name: "sft", Kind: "sft",
		Metrics: map[string]float64{"heldout_loss": 1.8422898054122925, "steps": 1500, "lr": 0.00012345678, "tokens_per_s": 12345.678, "bad": math.NaN()}}}}
	var text bytes.Buffer
	WriteResult(&text, r, false)
	for _, want := range []string{"heldout_loss             1.842\n", "steps                    1500\n", "lr                       0.0001235\n", "tokens_per_s             12346\n", "bad                      NaN\n"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text output lacks %q:\n%s", want, text.String())
		}
	}
	delete(r.Phases[0].Metrics, "bad") // JSON has no NaN
	var js bytes.Buffer
	WriteResult(&js, r, true)
	var back Result
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if got := back.Phases[0].Metrics["heldout_loss"]; got != 1.8422898054122925 {
		t.Errorf("json heldout_loss %v, want full precision", got)
	}
}
