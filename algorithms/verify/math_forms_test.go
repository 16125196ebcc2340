package verify

import (
	"context"
	"encoding/json"
	"testing"
)

// TestMathForms: Temper's own table of equivalent forms that must pass and near misses that
// must fail, beyond the peers' cases.
func TestMathForms(t *testing.T) {
	cases := []struct {
		ref, completion string
		pass            bool
	}{
		{`\frac{\sqrt{3}}{3}`, `\boxed{\frac{1}{\sqrt{3}}}`, true},
		{`\dfrac{5}{2}`, `\boxed{2.5}`, true},
		{`5`, `\boxed{5.0}`, true},
		{`-\frac{1}{2}`, `\boxed{-0.5}`, true},
		{`\frac{-1}{2}`, `\boxed{-\frac{1}{2}}`, true},
		{`2\sqrt{2}`, `\boxed{\sqrt{8}}`, true},
		{`3^{2}`, `9`, true},
		{`x^2+2x+1`, `\boxed{(x+1)^2}`, true},
		{`\frac{1}{x}`, `\boxed{x^{-1}}`, true},
		{`\pi/2`, `\boxed{\frac{\pi}{2}}`, true},
		{`\left(2, 3\right)`, `(2, 3)`, true},
		{`(-\infty, 0)`, `\boxed{(-\infty,0)}`, true},
		{`\text{(A)}`, `\boxed{A}`, true},
		{`A`, `The answer is (A).`, true},
		{`18`, `She has 18 apples left.`, true},
		{`\$18.90`, `\boxed{18.9}`, true},
		{`3.5`, `The answer is $3\frac{1}{2}$.`, true},
		{`2`, `<think>maybe \boxed{3}</think> so \boxed{2}`, true},
		{`5`, `\boxed{x=5}`, true},
		{`y=2x+3`, `\boxed{2x+3}`, true},
		{`\{2,3\}`, `\boxed{3, 2}`, true},
		{`i`, `\boxed{\sqrt{-1}}`, true},
		{`2+3i`, `\boxed{3i+2}`, true},
		{`0.3`, `\boxed{30\%}`, true},
		{`12`, `\boxed{13} ... wait, actually \boxed{12}`, true},
		{`1`, `\boxed{1}\boxed{1}`, true},
		{`\frac{1}{2}`, `\boxed{0.5000001}`, true},
		{`\sin^2 x + \cos^2 x`, `\boxed{1}`, true},
		{`10`, `\boxed{\binom{5}{2}}`, true},
		{`120`, `\boxed{5!}`, true},
		{`\frac{x^2-4}{x-2}`, `\boxed{x+2}`, true},
		{`\sqrt[3]{2}`, `\boxed{2^{1/3}}`, true},
		{`5`, `\boxed{5 \text{ cm}^2}`, true},
		{`30`, `\boxed{\angle ABC = 30^\circ}`, true},
		{`\{1, 2, 3\}`, `\boxed{1, 2, 3}`, true},
		{`(-\infty, 2) \cup (3, \infty)`, `\boxed{x \in (-\infty,2)\cup(3,\infty)}`, true},
		{`\text{no solution}`, `\boxed{\text{No solution}}`, true},
		{`2.5 \times 10^{-3}`, `\boxed{0.0025}`, true},
		{`11`, `\boxed{\binom{5}{2}}`, false},
		{`3, 5`, `\boxed{5, 3}`, false},
		{`7425000`, `\boxed{7,425,001}`, false},
		{`\frac{1}{3}`, `\boxed{0.\overline{3}}`, true},
		{`\arcsin(x)`, `\boxed{\sin^{-1}(x)}`, true},
		{`\sin(2x)`, `\boxed{\sin 2x}`, true},
		{`x^2 + 1`, `\boxed{x² + 1}`, true},
		{`x^3`, `\boxed{x²}`, false},
		{`\sin(x)\cos(x)`, `\boxed{\sin x \cos x}`, true},
		{`\sin(2x)`, `\boxed{x\sin 2}`, false},
		{`\sin^{-1}(x)`, `\boxed{\csc(x)}`, false},
		{`\{1, 3\} \cup \{2, 4\}`, `\boxed{\{1, 2, 3, 4\}}`, true},
		{`\{1, 3\} \cup \{2, 4\}`, `\boxed{\{1, 2, 3\}}`, false},
		{`\frac{1}{6}`, `\boxed{0.1\overline{6}}`, true},
		{`\frac{14}{11}`, `\boxed{1.\overline{27}}`, true},
		{`\frac{1}{3}`, `\boxed{0.\overline{6}}`, false},
		{`4`, `\boxed{3} or possibly, if there is no constraint, \boxed{4}`, false},
		{`5`, `\boxed{5 \text{ or more}}`, false},
		{`5`, `\boxed{5 \text{ incorrect}}`, false},
		{`5:30 \text{ AM}`, `\boxed{5:30 \text{ PM}}`, false},
		{`5`, `I think the answer is $5$, but I am not sure. It might be $6$.`, false},
		{`5`, `The answer is $5$. I hope it is correct. 6 cats agree.`, true},
		{`7425000`, `\boxed{7.425 \times 10^{6}}`, true},
		{`7425000`, `\boxed{7425000.000001}`, true},
		{`x = 1, y = 2`, `\boxed{y = 2, x = 1}`, true},
		{`x = 1, y = 2`, `\boxed{x = 2, y = 1}`, false},
		{`x = 1, y = 2`, `\boxed{y = 1, x = 2}`, false},
		{`5`, `\boxed{-5}`, false},
		{`1/2`, `\boxed{2}`, false},
		{`\frac{\sqrt{3}}{2}`, `\boxed{\frac{\sqrt{2}}{2}}`, false},
		{`x+1`, `\boxed{x-1}`, false},
		{`(2,3)`, `\boxed{(3,2)}`, false},
		{`[1,5]`, `\boxed{(1,5)}`, false},
		{`\{1,2\}`, `\boxed{\{1,2,3\}}`, false},
		{`5`, `\boxed{5, 6}`, false},
		{`5`, `It could be 5 or 6`, false},
		{`5`, `The answer is not 5.`, false},
		{`10`, `\boxed{10\pi}`, false},
		{`10`, `\boxed{10i}`, false},
		{`10`, `\boxed{10x}`, false},
		{`2`, `\boxed{x^2}`, false},
		{`y = 2x+3`, `\boxed{y = 2x - 3}`, false},
		{`x \le 3`, `\boxed{x < 3}`, false},
		{`(-\infty, 3]`, `\boxed{x < 3}`, false},
		{`3`, `\boxed{3 \text{ or } 4}`, false},
		{`3`, `\boxed{30\%}`, false},
		{`\text{Evelyn}`, `\boxed{\text{Carla}}`, false},
		{`12`, `\boxed{12} ... wait, actually \boxed{13}`, false},
		{`7`, `x7`, false},
		{`4`, `\boxed{2+2=5}`, false},
		{`30`, `5 6`, false},
		{`\sqrt{x^2}`, `\boxed{x}`, false},
		{`1`, `\boxed{1 \pm 0.5}`, false},
		{`(1, 2)`, `\boxed{\begin{pmatrix} 1 \\ 2 \end{pmatrix}}`, false},
		{`6`, `The answer is \boxed{6}? No, it is \boxed{7}.`, false},
	}
	v, _ := NewMath(nil)
	for _, c := range cases {
		reference, _ := json.Marshal(map[string]string{"answer": c.ref})
		got, err := v.Verify(context.Background(), Sample{Completion: c.completion, Reference: reference})
		if err != nil {
			t.Errorf("ref %q: %v", c.ref, err)
			continue
		}
		if got.Pass != c.pass {
			t.Errorf("ref %q, completion %q: pass = %v, want %v (feedback %q)", c.ref, c.completion, got.Pass, c.pass, got.Feedback)
		}
	}
}
