package verify

import (
	"context"
	"encoding/json"
	"math/big"
	"strings"
	"testing"
)

func ref(t *testing.T, v any) json.RawMessage {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustVerify(t *testing.T, v Verifier, completion string, reference json.RawMessage) Verdict {
	t.Helper()
	got, err := v.Verify(context.Background(), Sample{Completion: completion, Reference: reference})
	if err != nil {
		t.Fatalf("Verify(%q): unexpected error %v", completion, err)
	}
	return got
}

func TestEvalExpr(t *testing.T) {
	cases := []struct {
		in   string
		want string // big.Rat string, "" = error
	}{
		{"1/2", "1/2"},
		{"0.5", "1/2"},
		{`\frac{1}{2}`, "1/2"},
		{`\dfrac{3}{4}`, "3/4"},
		{`\frac12`, "1/2"},
		{`\frac{\frac{1}{2}}{2}`, "1/4"},
		{"1,234,567", "1234567"},
		{"1,23", ""},
		{"(1+2)*3", "9"},
		{"2^10", "1024"},
		{"2^-2", "1/4"},
		{"-3 - -3", "0"},
		{"6.02e23", "602000000000000000000000"},
		{"1.5e-3", "3/2000"},
		{`3 \times 4`, "12"},
		{`12 \div 4`, "3"},
		{`2 \cdot 5`, "10"},
		{".25", "1/4"},
		{"1/0", ""},
		{"0^-1", ""},
		{"2^0.5", ""},
		{"1e999999999", ""},
		{"9^9^9^9", ""},
		{strings.Repeat("9", 401), ""},
		{strings.Repeat("(", 100) + "1" + strings.Repeat(")", 100), ""},
		{"nan", ""},
		{"inf", ""},
		{`\infty`, ""},
		{"", ""},
		{"1 2", ""},
	}
	for _, c := range cases {
		v, _, err := evalExpr(c.in, modeMath)
		if c.want == "" {
			if err == nil {
				t.Errorf("evalExpr(%q) = %v, want error", c.in, v)
			}
			continue
		}
		if err != nil {
			t.Errorf("evalExpr(%q): %v", c.in, err)
			continue
		}
		want, _ := new(big.Rat).SetString(c.want)
		if v.Cmp(want) != 0 {
			t.Errorf("evalExpr(%q) = %s, want %s", c.in, v.RatString(), c.want)
		}
	}
}

func TestMath(t *testing.T) {
	v, err := NewMath(nil)
	if err != nil {
		t.Fatal(err)
	}
	tight, err := NewMath(json.RawMessage(`{"tolerance": 1e-9}`))
	if err != nil {
		t.Fatal(err)
	}
	strict, err := NewMath(json.RawMessage(`{"strict": true}`))
	if err != nil {
		t.Fatal(err)
	}
	loose, err := NewMath(json.RawMessage(`{"tolerance": 0.01}`))
	if err != nil {
		t.Fatal(err)
	}
	valueOnly, err := NewMath(json.RawMessage(`{"percent": "value"}`))
	if err != nil {
		t.Fatal(err)
	}
	lenient, err := NewMath(json.RawMessage(`{"percent": "lenient"}`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		v          Verifier
		answer     any
		completion string
		pass       bool
		feedback   string // substring of the feedback, when set
	}{
		// Equivalent forms.
		{"half decimal", v, "1/2", "<answer>0.5</answer>", true, ""},
		{"half frac", v, "0.5", `<answer>\frac{1}{2}</answer>`, true, ""},
		{"half dfrac", v, "1/2", `The answer is $\dfrac{1}{2}$.`, true, ""},
		{"half slash", v, `\frac{1}{2}`, "#### 1/2", true, ""},
		{"numeric reference", v, 0.5, "<answer>1/2</answer>", true, ""},
		{"integer", v, "42", "So the total is 42.", true, ""},
		{"thousands", v, "1234567", `\boxed{1,234,567}`, true, ""},
		{"latex thousands", v, "1234", `\boxed{1{,}234}`, true, ""},
		{"dollars", v, "5", `\boxed{\$5.00}`, true, ""},
		{"units", v, "12", `<answer>12 \text{ cm}</answer>`, true, ""},
		{"assignment", v, "3", "<answer>x = 3</answer>", true, ""},
		{"expression", v, "7", "<answer>(1+2)*2+1</answer>", true, ""},
		{"negative", v, "-3", "<answer>−3</answer>", true, ""},
		{"nested boxed", v, "1/2", `\boxed{\frac{1}{\boxed{2}}}`, true, ""},
		{"boxed in tag", v, "9", `<answer>so \boxed{9}</answer>`, true, ""},
		{"percent either", v, "0.25", "<answer>25%</answer>", true, ""},
		// A completion's % means /100: "25%" cannot pass for both 25 and 0.25.
		{"percent either 2", v, "25", `<answer>25\%</answer>`, false, "not correct"},
		{"percent reference", v, `25\%`, `<answer>25</answer>`, true, ""},
		{"percent reference fraction", v, `25\%`, `<answer>0.25</answer>`, true, ""},
		{"percent both", v, `25\%`, `<answer>25\%</answer>`, true, ""},
		{"percent lenient", lenient, "25", `<answer>25\%</answer>`, true, ""},
		{"percent value", valueOnly, "25", "<answer>25%</answer>", false, "not correct"},
		{"percent value ok", valueOnly, "0.25", "<answer>25%</answer>", true, ""},
		{"sci", v, "1500", "<answer>1.5e3</answer>", true, ""},
		{"times ten", v, "1500", `<answer>1.5 \times 10^{3}</answer>`, true, ""},
		{"degrees", v, "90", `<answer>90^\circ</answer>`, true, ""},
		{"case insensitive tag", v, "4", "<ANSWER>4</ANSWER>", true, ""},
		{"repeated same", v, "4", "<answer>4</answer> again <answer>4.0</answer>", true, ""},
		{"rounded within default", v, "1/3", "<answer>0.3333333</answer>", true, ""},
		{"loose tolerance", loose, "3.14159", "<answer>3.14</answer>", true, ""},
		{"text answer", v, `\infty`, `\boxed{\infty}`, true, ""},
		{"text answer spaces", v, "x^2 + 1", `\boxed{x^2+1}`, true, ""},
		// Near misses.
		{"tight near miss", tight, "0.5", "<answer>0.5001</answer>", false, "not correct"},
		{"default near miss", v, "0.5", "<answer>0.5001</answer>", false, "not correct"},
		{"12 vs 120", v, "12", "<answer>120</answer>", false, "not correct"},
		{"120 vs 12", v, "120", "<answer>12</answer>", false, "not correct"},
		{"1.2 vs 12", v, "12", "<answer>1.2</answer>", false, "not correct"},
		{"rounded too far", v, "1/3", "<answer>0.33</answer>", false, "not correct"},
		{"sign", v, "3", "<answer>-3</answer>", false, "not correct"},
		{"text vs number", v, `\infty`, `\boxed{5}`, false, "not correct"},
		// Adversarial.
		{"hedged tags", v, "3", "<answer>3</answer><answer>4</answer>", false, "different"},
		{"hedged boxed", v, "3", `\boxed{3} or \boxed{4}`, false, "different"},
		{"hedged hashes", v, "3", "#### 3\n#### 4", false, "different"},
		{"or inside tag", v, "3", "<answer>3 or 4</answer>", false, "not correct"},
		{"empty", v, "3", "", false, "empty output"},
		{"whitespace", v, "3", "  \n ", false, "empty output"},
		{"empty tag", v, "3", "<answer> </answer>", false, "empty final answer"},
		{"unclosed tag", v, "3", "<answer>3", false, "never closed"},
		{"nested tags", v, "3", "<answer><answer>3</answer></answer>", false, "opened twice"},
		{"nan", v, "3", "<answer>NaN</answer>", false, "not correct"},
		{"inf", v, "3", "<answer>Inf</answer>", false, "not correct"},
		{"huge", v, "3", "<answer>1" + strings.Repeat("0", 100000) + "</answer>", false, ""},
		{"huge exponent", v, "3", "<answer>1e99999999</answer>", false, "too large"},
		{"huge power", v, "3", "<answer>10^10^10</answer>", false, "too large"},
		{"div zero", v, "3", "<answer>1/0</answer>", false, "division by zero"},
		{"unbalanced boxed", v, "3", `\boxed{3`, false, "unbalanced"},
		{"no number", v, "3", "I do not know.", false, "no final answer"},
		{"strict needs tag", strict, "42", "the answer is 42", false, "no final answer"},
		{"strict with boxed", strict, "42", `\boxed{42}`, true, ""},
		{"last number wins", v, "7", "3 apples and then 7", true, ""},
		// "3-4" is one formula (or a range), not the number 4.
		{"last number subtraction", v, "4", "pages 3-4", false, "not correct"},
		{"last formula", v, "2x+1", "so we get 2x+1", true, ""},
		{"not the last number of a formula", v, "1", "so we get 2x+1", false, "not correct"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := mustVerify(t, c.v, c.completion, ref(t, map[string]any{"answer": c.answer}))
			if got.Pass != c.pass {
				t.Fatalf("pass = %v, want %v (feedback %q)", got.Pass, c.pass, got.Feedback)
			}
			if c.pass && got.Score != 1 || !c.pass && got.Score != 0 {
				t.Errorf("score = %v", got.Score)
			}
			if c.feedback != "" && !strings.Contains(got.Feedback, c.feedback) {
				t.Errorf("feedback %q does not contain %q", got.Feedback, c.feedback)
			}
			if !c.pass && c.answer != nil {
				if s, ok := c.answer.(string); ok && len(s) > 1 && strings.Contains(got.Feedback, s) && !strings.Contains(c.completion, s) {
					t.Errorf("feedback %q leaks the reference %q", got.Feedback, s)
				}
			}
		})
	}
}

func TestMathReferenceErrors(t *testing.T) {
	v, _ := NewMath(nil)
	for _, r := range []string{`{}`, `{"answer": ""}`, `[1]`, `{"answer": {"x": 1}}`, `{"answer": "1/0"}`} {
		if _, err := v.Verify(context.Background(), Sample{Completion: "1", Reference: json.RawMessage(r)}); err == nil {
			t.Errorf("reference %s: want error", r)
		}
	}
	for _, p := range []string{`{"tolerence": 1}`, `{"percent": "both"}`, `{"tag": "a b"}`, `{"abs_tolerance": -1}`} {
		_, err := NewMath(json.RawMessage(p))
		if err == nil {
			t.Errorf("params %s: want error", p)
			continue
		}
		t.Logf("params %s: %v", p, err)
	}
	_, err := NewMath(json.RawMessage(`{"tolerence": 1}`))
	if err == nil || !strings.Contains(err.Error(), "tolerance") || !strings.Contains(err.Error(), "allowed") {
		t.Errorf("unknown field error should list allowed fields: %v", err)
	}
}
