package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// Random perturbations of a correct answer (sign flip, relation or bracket flip, a dropped \pi,
// \sqrt or i, a changed digit) must never be accepted. The seed answers avoid what would make a
// perturbation harmless: a 0 to negate inside a ±, or more significant digits than the default
// relative tolerance (1e-6) can tell apart.
var perturbSeeds = []string{
	`2\pi`, `\sqrt{3}`, `\frac{9}{4}\pi`, `(x-2)(x+2)`, `2-2p`, `\frac{3}{4}i`, `x + y - z + 2 = 0`,
	`x > 5`, `x \geq 3`, `-2 \leq x < 7`, `[-1, 3)`, `(1, 2)`, `(-\infty, -3] \cup [2, \infty)`,
	`\{1, 2\}`, `y = 2x + 1`, `3\sqrt{13}`, `\frac{14}{3}`, `1 \pm \sqrt{19}`, `1.5 \times 10^{3}`,
	`14916`, `25\%`, `\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}`, `x^2 + 2x + 1`, `\frac{x+2}{7}`,
	`2x + 4y - 3 = 0`, `\log_2 8`, `-\frac{10}{9}`, `e^{3}`, `4 - 3i`, `\sin^2(x) + 1`, `(3, \frac{\pi}{2})`,
	`\frac{\sqrt{5}-1}{4}`, `x \neq 3`, `7 = 11a + c`,
}

const (
	pSign = iota // negate one number, or swap one + and -
	pRelation
	pDrop
	pDigit
	pKinds
)

// perturbations lists every variant of a of the given kind, in a fixed order.
func perturbations(a string, kind int) []string {
	var out []string
	add := func(s string) {
		if s != a {
			out = append(out, s)
		}
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		inCommand := i > 0 && isLetterAt(a, i) && commandAt(a, i)
		switch kind {
		case pSign:
			if c >= '1' && c <= '9' && (i == 0 || !digitAt(a, i-1) && a[i-1] != '.') {
				if i > 0 && a[i-1] == '-' {
					add(a[:i-1] + "+" + a[i:])
				} else {
					add(a[:i] + "-" + a[i:])
				}
			}
			if (c == '+' || c == '-') && i > 0 && !strings.HasPrefix(a[i-1:], `\pm`) {
				add(a[:i] + map[byte]string{'+': "-", '-': "+"}[c] + a[i+1:])
			}
		case pRelation:
			for _, sw := range [][2]string{{"<", ">"}, {">", "<"}, {`\leq`, `\geq`}, {`\geq`, `\leq`}, {"=", `\neq`}, {`\neq`, "="},
				{"(", "["}, {"[", "("}, {")", "]"}, {"]", ")"}} {
				if strings.HasPrefix(a[i:], sw[0]) && (sw[0] != "=" || i == 0 || a[i-1] != '\\') {
					add(a[:i] + sw[1] + a[i+len(sw[0]):])
				}
			}
		case pDrop:
			for _, d := range []string{`\pi`, `\sqrt`} {
				if strings.HasPrefix(a[i:], d) && !isLetterAt(a, i+len(d)) {
					add(a[:i] + a[i+len(d):])
				}
			}
			if c == 'i' && !inCommand && !isLetterAt(a, i+1) && (i == 0 || !isLetterAt(a, i-1)) {
				add(a[:i] + a[i+1:])
			}
		case pDigit:
			if c >= '0' && c <= '9' {
				for k := byte(1); k <= 9; k++ {
					add(a[:i] + string('0'+(c-'0'+k)%10) + a[i+1:])
				}
			}
		}
	}
	return out
}

// commandAt reports whether the letter at i belongs to a LaTeX command name (\sin, \pi).
func commandAt(s string, i int) bool {
	for j := i; j >= 0; j-- {
		if s[j] == '\\' {
			return true
		}
		if !isLetterAt(s, j) {
			return false
		}
	}
	return false
}

func perturbCheck(t *testing.T, v Verifier, ref, got string) {
	t.Helper()
	reference, _ := json.Marshal(map[string]string{"answer": ref})
	for _, completion := range []string{`\boxed{` + got + `}`, "The final answer is $" + got + "$."} {
		verdict, err := v.Verify(context.Background(), Sample{Completion: completion, Reference: reference})
		if err != nil {
			t.Fatalf("ref %q: %v", ref, err)
		}
		if verdict.Pass {
			t.Errorf("perturbed answer accepted: ref %q, completion %q", ref, completion)
		}
	}
}

// TestPerturbationsRejected runs every single perturbation of every seed answer (a
// deterministic table, part of -short), after checking that the seed itself passes.
func TestPerturbationsRejected(t *testing.T) {
	v, _ := NewMath(nil)
	n := 0
	for _, a := range perturbSeeds {
		reference, _ := json.Marshal(map[string]string{"answer": a})
		ok, err := v.Verify(context.Background(), Sample{Completion: `\boxed{` + a + `}`, Reference: reference})
		if err != nil || !ok.Pass {
			t.Fatalf("seed %q does not pass unperturbed: %+v %v", a, ok, err)
		}
		for kind := 0; kind < pKinds; kind++ {
			for _, p := range perturbations(a, kind) {
				perturbCheck(t, v, a, p)
				n++
			}
		}
	}
	t.Logf("%d perturbed answers rejected", n)
	if n < 500 {
		t.Errorf("only %d perturbations: the table lost its seeds", n)
	}
}

// perturbTemplates build a correct answer from three nonzero integers (a, b, c in 1..99) in the
// shapes the issue names; a single perturbation of any of them changes its value or relation.
var perturbTemplates = []func(a, b, c int) string{
	func(a, b, c int) string { return fmt.Sprintf(`\frac{%d}{%d}\pi`, a, b+a) },
	func(a, b, c int) string { return fmt.Sprintf(`%d\sqrt{%d}`, a, nonSquare(b)) },
	func(a, b, c int) string { return fmt.Sprintf(`x^2 + %dx + %d`, a, b) },
	func(a, b, c int) string { return fmt.Sprintf(`(%d, %d)`, a, b) },
	func(a, b, c int) string { return fmt.Sprintf(`x > %d`, a) },
	func(a, b, c int) string { return fmt.Sprintf(`x \leq -%d`, a) },
	func(a, b, c int) string { return fmt.Sprintf(`[%d, %d)`, a, a+b) },
	func(a, b, c int) string { return fmt.Sprintf(`%d - %di`, a, b) },
	func(a, b, c int) string { return fmt.Sprintf(`%dx + %dy = %d`, a, b, c) },
	func(a, b, c int) string { return fmt.Sprintf(`y = %dx - %d`, a, b) },
	func(a, b, c int) string { return fmt.Sprintf(`\{%d, %d\}`, a, a+b) },
	func(a, b, c int) string { return fmt.Sprintf(`-\frac{%d}{%d}`, a, a+b) },
	func(a, b, c int) string { return fmt.Sprintf(`%d \pm \sqrt{%d}`, a, nonSquare(b)) },
	func(a, b, c int) string { return fmt.Sprintf(`%d.%d \times 10^{%d}`, a, b, c%9+1) },
}

// nonSquare maps n to a number >= 2 that is not a perfect square, so \sqrt never simplifies.
func nonSquare(n int) int {
	n++
	for r := 1; r*r <= n; r++ {
		if r*r == n {
			return n + 1
		}
	}
	return n
}

// checkTemplate builds the answer of template tmpl from a, b, c, checks that it passes, and
// that perturbation pick of the given kind does not.
func checkTemplate(t *testing.T, v Verifier, tmpl, a, b, c, kind, pick int) {
	t.Helper()
	small := func(x int) int { // 1..99
		if x < 0 {
			x = -x
		}
		return x%99 + 1
	}
	answer := perturbTemplates[tmpl%len(perturbTemplates)](small(a), small(b), small(c))
	reference, _ := json.Marshal(map[string]string{"answer": answer})
	ok, err := v.Verify(context.Background(), Sample{Completion: `\boxed{` + answer + `}`, Reference: reference})
	if err != nil || !ok.Pass {
		t.Fatalf("template answer %q does not pass unperturbed: %+v %v", answer, ok, err)
	}
	ps := perturbations(answer, kind%pKinds)
	if len(ps) == 0 {
		return
	}
	perturbCheck(t, v, answer, ps[pick%len(ps)])
}

// TestPerturbedTemplatesRejected is the fuzz target's deterministic twin for -short: 2,000
// seeded draws of template, integers and perturbation.
func TestPerturbedTemplatesRejected(t *testing.T) {
	v, _ := NewMath(nil)
	r := rand.New(rand.NewPCG(22, 1))
	for range 2000 {
		checkTemplate(t, v, r.IntN(len(perturbTemplates)), r.IntN(200)-100, r.IntN(200)-100, r.IntN(200)-100, r.IntN(pKinds), r.IntN(1000))
	}
}

// FuzzPerturbations lets the fuzzer build the correct answer (template and integers) and pick
// the perturbation. Run longer with: go test -run XXX -fuzz FuzzPerturbations ./algorithms/verify/
func FuzzPerturbations(f *testing.F) {
	for i := range perturbTemplates {
		f.Add(uint8(i), int8(i+1), int8(2*i+3), int8(7-i), uint8(i%pKinds), uint16(i*7))
	}
	v, _ := NewMath(nil)
	f.Fuzz(func(t *testing.T, tmpl uint8, a, b, c int8, kind uint8, pick uint16) {
		checkTemplate(t, v, int(tmpl), int(a), int(b), int(c), int(kind), int(pick))
	})
}
