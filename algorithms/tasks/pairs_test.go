package tasks

import (
	"reflect"
	"testing"
)

func TestMistakeKind(t *testing.T) {
	for _, c := range []struct {
		prompt, answer, rejected, want string
	}{
		{"12+34=", "46", "47", MistakeUnits},
		{"12+34=", "46", "45", MistakeUnits},
		{"12+34=", "46", "64", MistakeSwap},
		{"18+25=", "43", "33", MistakeNoCarry}, // 8+5=13 → 3, 1+2 → 3 without the carry
		{"18+25=", "43", "53", MistakeCarry},
		{"99+1=", "100", "110", MistakeCarry},
		{"95+10=", "105", "5", MistakeNoCarry}, // 5+0=5, 9+1=10 → 0: "05"
		{"95+10=", "105", "15", MistakeLength},
		{"95+10=", "105", "1055", MistakeLength},
		{"3-5=", "-2", "2", MistakeSign},
		{"3-5=", "-2", "-3", MistakeUnits},
		{"7*8=", "56", "65", MistakeSwap},
		{"7*8=", "56", "55", MistakeUnits},
		{"7*8=", "56", "72", MistakeOther},
		{"12+34=", "46", "forty-six", MistakeNotInt},
		{"12+34=", "46", "47\nbecause", MistakeUnits}, // the first line is the answer, as checkers read it
		{"route this", `{"engine":"image"}`, "x", MistakeNotArith},
		{"11+11=", "22", "22", MistakeOther}, // not a mistake: classified, never a panic
		{"10+1=", "11", "11", MistakeOther},
	} {
		if got := MistakeKind(c.prompt, c.answer, c.rejected); got != c.want {
			t.Errorf("MistakeKind(%q, %q, %q) = %q, want %q", c.prompt, c.answer, c.rejected, got, c.want)
		}
	}
}

// TestSyntheticRewardPairs checks the properties the reward phase relies on, for the tasks its
// acceptance run uses: the set is a function of the seed, held-out prompts never occur in training,
// every rejected answer is wrong by the task's own checker, every chosen one right, and the
// mistakes are a mix of kinds (not only units-digit slips a model could catch by looking at one
// digit).
func TestSyntheticRewardPairs(t *testing.T) {
	for _, name := range []string{"add2", "add"} {
		task, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		tr, he, err := PrefSplit(task, 2000, 300, 7)
		if err != nil {
			t.Fatal(err)
		}
		tr2, he2, _ := PrefSplit(task, 2000, 300, 7)
		if !reflect.DeepEqual(tr, tr2) || !reflect.DeepEqual(he, he2) {
			t.Fatalf("%s: the same seed gave different pairs", name)
		}
		tr3, _, _ := PrefSplit(task, 2000, 300, 8)
		if reflect.DeepEqual(tr, tr3) {
			t.Fatalf("%s: seeds 7 and 8 gave the same pairs", name)
		}
		if len(tr) != 2000 || len(he) != 300 {
			t.Fatalf("%s: %d train / %d held-out pairs, want 2000 / 300", name, len(tr), len(he))
		}
		trainPrompts := map[string]bool{}
		for _, p := range tr {
			trainPrompts[p.Prompt] = true
		}
		kinds := map[string]int{}
		for i, p := range append(append(tr[:0:0], tr...), he...) {
			ex := p.AsExample(p.Chosen)
			if ok, _ := task.Check(ex, p.Chosen); !ok {
				t.Fatalf("%s pair %d: chosen %q fails the checker for %q", name, i, p.Chosen, p.Prompt)
			}
			if ok, _ := task.Check(ex, p.Rejected); ok {
				t.Fatalf("%s pair %d: rejected %q passes the checker for %q", name, i, p.Rejected, p.Prompt)
			}
			if err := p.Check(); err != nil || !p.Paired() {
				t.Fatalf("%s pair %d: %+v: %v", name, i, p, err)
			}
			if i >= len(tr) {
				if trainPrompts[p.Prompt] {
					t.Fatalf("%s: held-out prompt %q also in training", name, p.Prompt)
				}
				kinds[MistakeKind(p.Prompt, p.Answer, p.Rejected)]++
			}
		}
		t.Logf("%s held-out mistakes: %v", name, kinds)
		for _, k := range []string{MistakeUnits, MistakeCarry, MistakeSwap} {
			if kinds[k] < len(he)/20 {
				t.Errorf("%s: only %d of %d held-out mistakes are %q: %v", name, kinds[k], len(he), k, kinds)
			}
		}
		if kinds[MistakeNotInt]+kinds[MistakeNotArith] > 0 {
			t.Errorf("%s: rejected answers must be integers: %v", name, kinds)
		}
	}
}
