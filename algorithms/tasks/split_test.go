package tasks

import (
	"strings"
	"testing"
)

func TestSplitCheck(t *testing.T) {
	ex := Example{Prompt: "split 57:"}
	for _, c := range []struct {
		completion string
		pass       bool
		feedback   string // a substring of the feedback when it fails
	}{
		{"50+7", true, ""}, {"7+50", true, ""}, {"1+56", true, ""}, {"28+29\nleftover", true, ""},
		{"56+1", true, ""},
		{"57+0", false, "positive"}, {"0+57", false, "positive"}, {"07+50", false, "leading zeros"},
		{"-3+60", false, "positive"}, {"50+8", false, "= 58, not 57"}, {"57", false, "joined by +"},
		{"", false, "joined by +"}, {"5+5+47", false, "positive"}, {"+57", false, "positive"},
		{"99999999999999999999+1", false, "positive"}, {"a+b", false, "positive"}, {" 50+7 ", true, ""},
	} {
		ok, fb := SplitSum{}.Check(ex, c.completion)
		if ok != c.pass || (!ok && !strings.Contains(fb, c.feedback)) {
			t.Errorf("%q: pass %v (%q), want %v (%q)", c.completion, ok, fb, c.pass, c.feedback)
		}
	}
	if ok, fb := (SplitSum{}).Check(Example{Prompt: "57="}, "50+7"); ok || !strings.Contains(fb, "split N:") {
		t.Errorf("a foreign prompt: %v %q", ok, fb)
	}
}

// TestSplitExamples: demonstrations pass their own check, cover the range and split at varied
// points (they must not teach one rule, or the task would not separate imitation from search).
func TestSplitExamples(t *testing.T) {
	task, err := Lookup("split")
	if err != nil {
		t.Fatal(err)
	}
	placeValue, lo, hi := 0, 1000, 0
	exs := Generate(task, 2000, 3, 0)
	for _, ex := range exs {
		if ok, fb := task.Check(ex, ex.Completion); !ok || ex.Answer != ex.Completion {
			t.Fatalf("%+v fails its own check: %s", ex, fb)
		}
		n, _ := splitTarget(ex.Prompt)
		lo, hi = min(lo, int(n)), max(hi, int(n))
		left, right, _ := strings.Cut(ex.Completion, "+")
		a, _ := positive(left)
		b, _ := positive(right)
		if a > 99 || b > 99 {
			t.Fatalf("%+v: parts must be 1-2 digits", ex)
		}
		if tens := n - n%10; a == tens || b == tens {
			placeValue++
		}
	}
	if lo != 10 || hi != 198 {
		t.Errorf("n spans %d..%d, want 10..198", lo, hi)
	}
	if placeValue > len(exs)/20 {
		t.Errorf("%d of %d demonstrations look like place-value splits", placeValue, len(exs))
	}
}

func TestSplitPartialCredit(t *testing.T) {
	ex := Example{Prompt: "split 57:"}
	for _, c := range []struct {
		completion string
		want       float64
	}{
		{"50+7", 0}, {"50+2", 0.25}, {"50+8", 0.25}, {"40+7", 0.25}, {"40+8", 0}, {"90+7", 0.25},
		{"500+7", 0.5 / 3}, {"0+57", 0}, {"57", 0}, {"", 0}, {"x+y", 0},
	} {
		if got := (SplitSum{}).Partial(ex, c.completion); abs(got-c.want) > 1e-12 {
			t.Errorf("%q: partial %g, want %g", c.completion, got, c.want)
		}
	}
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}
