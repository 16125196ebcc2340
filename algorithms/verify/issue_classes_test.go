package verify

import (
	"context"
	"encoding/json"
	"testing"
)

// TestIssueClasses holds one case per class of wrong verdict reported in issue 22 (each seen on
// a peer's own case or a one-character edit of one). Every case gave the opposite verdict before
// the typed answer values; see the issue for the list.
func TestIssueClasses(t *testing.T) {
	cases := []struct {
		class      string
		ref        string
		completion string
		params     string
		pass       bool
	}{
		// Non-numeric answers were reduced to the one number inside.
		{"pm vs number", "2021", `\boxed{\pm 2021}`, "", false},
		{"number vs pm", `\pm 2021`, `\boxed{2021}`, "", false},
		{"pm as a set", `\pm 2021`, `\boxed{\{-2021, 2021\}}`, "", true},
		{"relation flip", "x > 5", `\boxed{x < 5}`, "", false},
		{"relation flip strict", "x > 5", `\boxed{x < 5}`, `{"strict": true}`, false},
		{"leq vs geq", `x \geq 3`, `\boxed{x \leq 3}`, "", false},
		{"dropped pi", `2\pi`, `\boxed{2}`, "", false},
		{"dropped sqrt", `\sqrt{3}`, `\boxed{3}`, "", false},
		{"dropped pi after frac", `\frac{9}{4}\pi`, `\boxed{\frac{9}{4}}`, "", false},
		{"square vs product", `(x-2)(x+2)`, `\boxed{(x-2)^2}`, "", false},
		{"sign inside expression", `2-2p`, `\boxed{2+2p}`, "", false},
		{"dropped i", `\frac{3}{4}i`, `\boxed{\frac{3}{4}}`, "", false},
		// "The value after the last =".
		{"other plane", `x + y - z + 2 = 0`, `\boxed{5x - 7y + 11z + 4 = 0}`, "", false},
		{"bare 0 for an equation", `a + 3z = 0`, `\boxed{0}`, "", false},
		{"7 = 11a+c is not 11", `7 = 11a+c`, `\boxed{11}`, "", false},
		{"equation right side only", `7 = 11a+c`, `\boxed{11a+c}`, "", false},
		// The untagged last-number scan.
		{"sign before frac", "10/9", `So the ratio is -\frac{10}{9}`, "", false},
		{"digit glued to letters", "2", "AZYUK2A", "", false},
		{"number inside a bracket", "1", "$-[0,1)$", "", false},
		{"hedge in prose", "6", "I get 5, or maybe 6", "", false},
		{"hedge after the answer is", "6", "The answer is 5, or maybe 6.", "", false},
		// Right answers that were rejected.
		{`\frac13`, "1/3", `$\frac13 $`, "", true},
		{`\cfrac`, "1/3", `$\cfrac{1}{3}$`, "", true},
		{"latex thousands in prose", "14916", `so the smallest is $14{,}916$.`, "", true},
		{"space thousands", "1000", "1 000", "", true},
		{"scientific in prose", "1500", `The mass is $1.5 \times 10^{3}$ grams.`, "", true},
		{`\sqrt 2`, `\sqrt{2}+\sqrt{5}`, `The answer is $\boxed{\sqrt 2+\sqrt 5}$`, "", true},
		{`\frac94\pi`, `\frac{9}{4}\pi`, `\boxed{\frac94\pi}`, "", true},
		{"boxed word in prose", "7", `I put the result in \boxed form: \boxed{7}.`, "", true},
		{"self-correction", "2", `\boxed{1} ... no, it's \boxed{2}`, "", true},
		{"self-correction is not the first", "1", `\boxed{1} ... no, it's \boxed{2}`, "", false},
		{"final answer is picks the last", "10455", `\boxed{255} so far. Final Answer: The final answer is $10,455$.`, "", true},
		// Tuples, intervals, sets, equations and inequalities.
		{"tuple", "(1, 2)", `\boxed{(1,2)}`, "", true},
		{"tuple order", "(1, 2)", `\boxed{(2,1)}`, "", false},
		{"interval ends", "[0,1)", `\boxed{(0,1)}`, "", false},
		{"interval", `[0,1)`, `\boxed{[0, 1)}`, "", true},
		{"union", `(-\infty, -3] \cup [2, \infty)`, `\boxed{(-\infty,-3]\cup[2,\infty)}`, "", true},
		{"set order", `\{1, 2\}`, `\boxed{\{2, 1\}}`, "", true},
		{"line as equation", `2x+4y-3=0`, `\boxed{y=-\frac{1}{2}x+\frac{3}{4}}`, "", true},
		{"inequality turned around", `x \geq 5`, `\boxed{5 \leq x}`, "", true},
		{"inequality negated", `x < 1`, `\boxed{-x > -1}`, "", true},
		{"inequality as interval", `x \geq 5`, `\boxed{[5, \infty)}`, "", true},
	}
	for _, c := range cases {
		t.Run(c.class, func(t *testing.T) {
			v, err := NewMath(json.RawMessage(c.params))
			if err != nil {
				t.Fatal(err)
			}
			reference, _ := json.Marshal(map[string]string{"answer": c.ref})
			got, err := v.Verify(context.Background(), Sample{Completion: c.completion, Reference: reference})
			if err != nil {
				t.Fatalf("reference %q: %v", c.ref, err)
			}
			if got.Pass != c.pass {
				t.Errorf("ref %q, completion %q: pass = %v, want %v (feedback %q)", c.ref, c.completion, got.Pass, c.pass, got.Feedback)
			}
		})
	}
}
