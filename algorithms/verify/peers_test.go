package verify

import (
	"context"
	"encoding/json"
	"testing"
)

// peerCase is one public test case of an established answer grader (see peers_cases_test.go).
type peerCase struct {
	src    string // peer, file and test
	ref    string // the peer's gold answer, given to Temper as the reference
	out    string // the peer's prediction, given to Temper as the completion
	want   bool   // the peer's expected verdict
	params string // the peer's setting mapped onto Temper's params ("" = defaults)
	oos    string // why Temper deliberately differs; "" = in scope
}

// TestPeerAgreement runs the math verifier on the peers' own public cases (Hugging Face
// Math-Verify, hendrycks/math, prm800k, Qwen2.5-Math, open-instruct). In scope it must agree on
// at least 95% of the cases and never accept an answer the peer rejects; out-of-scope cases are
// listed with the reason Temper differs. Run with -v to see the figures.
//
// Sources: Math-Verify's tests/ (parametrized gold/pred/expected, with precision mapped onto
// abs_tolerance), hendrycks/math's math_equivalence_test.py, open-instruct's GSM8KVerifier tests.
// Qwen2.5-Math's cases are the pairs its grader.py prints in _test_math_equal (printed, not
// asserted: the expected verdicts follow that grader's rules, rel_tol 1e-4 mapped onto
// tolerance); prm800k ships no test file, so its cases exercise the rules its grader.py states.
func TestPeerAgreement(t *testing.T) {
	agreeN, inScope, falseAccepts := 0, 0, 0
	for _, c := range peerCases {
		v, err := NewMath(json.RawMessage(c.params))
		if err != nil {
			t.Fatalf("%s: params %s: %v", c.src, c.params, err)
		}
		reference, _ := json.Marshal(map[string]string{"answer": c.ref})
		got, err := v.Verify(context.Background(), Sample{Completion: c.out, Reference: reference})
		if err != nil {
			if c.oos == "" {
				t.Errorf("%s: reference %q: %v", c.src, clip(c.ref, 80), err)
			}
			continue
		}
		if c.oos != "" {
			t.Logf("out of scope: %s: peer %v, Temper %v: %s", c.src, c.want, got.Pass, c.oos)
			continue
		}
		inScope++
		if got.Pass == c.want {
			agreeN++
			continue
		}
		if got.Pass {
			falseAccepts++
			t.Errorf("WRONG ANSWER ACCEPTED: %s\n  ref %q\n  out %q", c.src, clip(c.ref, 200), clip(c.out, 300))
		} else {
			t.Logf("disagree (rejects a right answer): %s\n  ref %q\n  out %q\n  feedback %s", c.src, clip(c.ref, 200), clip(c.out, 300), got.Feedback)
		}
	}
	rate := float64(agreeN) / float64(max(inScope, 1))
	t.Logf("peer agreement: %d/%d in-scope cases (%.1f%%), %d wrong answers accepted, %d out of scope",
		agreeN, inScope, 100*rate, falseAccepts, len(peerCases)-inScope)
	if rate < 0.95 {
		t.Errorf("agreement %.1f%% < 95%%", 100*rate)
	}
	if falseAccepts > 0 {
		t.Errorf("%d wrong answers accepted", falseAccepts)
	}
}
