package tasks

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Arithmetic is a family of exact-answer arithmetic tasks. Prompts read "12+345=" and completions are
// the integer result ("357", "-12"): a fixed format a byte-level model can learn.
type Arithmetic struct {
	name      string
	doc       string
	ops       string // operators to draw from
	maxDigits int    // operands have 1..maxDigits digits
	terms     int    // 2: a op b; 3+: a multi-step expression with parentheses
	mulDigits int    // cap on digits of multiplication operands (keeps products short)
	exact     bool   // operands have exactly maxDigits digits (uniform over them), not 1..maxDigits
}

func init() {
	register(Arithmetic{name: "add2", doc: "a+b with 1-2 digit operands (the demo task: learnable in minutes on a CPU)", ops: "+", maxDigits: 2, terms: 2})
	// sum2's operands are uniform over 10..99: add2 draws its digit count first, so a quarter of its
	// draws are the 100 one-digit facts, most of which a 500-prompt held-out split then removes from
	// training altogether (docs/lab-notes/demo-sizing.md).
	register(Arithmetic{name: "sum2", doc: "a+b with two-digit operands, uniform over 10-99 (8,100 problems, none a one-digit fact)", ops: "+", maxDigits: 2, terms: 2, exact: true})
	register(Arithmetic{name: "add", doc: "a+b with 1-3 digit operands", ops: "+", maxDigits: 3, terms: 2})
	register(Arithmetic{name: "addsub", doc: "a+b or a-b with 1-3 digit operands", ops: "+-", maxDigits: 3, terms: 2})
	register(Arithmetic{name: "mul", doc: "a*b with 1-2 digit operands", ops: "*", maxDigits: 2, terms: 2, mulDigits: 2})
	register(Arithmetic{name: "expr3", doc: "three-term expressions with + - * and parentheses, answer only (expr solves them step by step)", ops: "+-*", maxDigits: 2, terms: 3, mulDigits: 1})
}

// Name implements Task.
func (a Arithmetic) Name() string { return a.name }

// Doc implements Task.
func (a Arithmetic) Doc() string { return a.doc }

// operand draws a digit count in 1..maxDigits, then a number with that many digits.
func operand(rng *rand.Rand, maxDigits int) int64 {
	return exactOperand(rng, 1+rng.IntN(maxDigits))
}

// exactOperand is uniform over the numbers of exactly d digits (0..9 for 1, 10..99 for 2).
func exactOperand(rng *rand.Rand, d int) int64 {
	lo, hi := int64(1), int64(10)
	for i := 1; i < d; i++ {
		lo *= 10
		hi *= 10
	}
	if d == 1 {
		lo = 0
	}
	return lo + rng.Int64N(hi-lo)
}

// Example implements Task.
func (a Arithmetic) Example(rng *rand.Rand) Example {
	var expr string
	var val int64
	if a.terms <= 2 {
		op := a.ops[rng.IntN(len(a.ops))]
		digits := a.maxDigits
		if op == '*' && a.mulDigits > 0 {
			digits = a.mulDigits
		}
		draw := operand
		if a.exact {
			draw = exactOperand
		}
		x, y := draw(rng, digits), draw(rng, digits)
		expr, val = fmt.Sprintf("%d%c%d", x, op, y), apply(op, x, y)
	} else {
		// (x op1 y) op2 z or x op1 (y op2 z), chosen at random.
		op1, op2 := a.ops[rng.IntN(len(a.ops))], a.ops[rng.IntN(len(a.ops))]
		dig := func(op byte) int {
			if op == '*' && a.mulDigits > 0 {
				return a.mulDigits
			}
			return a.maxDigits
		}
		x, y, z := operand(rng, dig(op1)), operand(rng, max(dig(op1), dig(op2))), operand(rng, dig(op2))
		if rng.IntN(2) == 0 {
			expr, val = fmt.Sprintf("(%d%c%d)%c%d", x, op1, y, op2, z), apply(op2, apply(op1, x, y), z)
		} else {
			expr, val = fmt.Sprintf("%d%c(%d%c%d)", x, op1, y, op2, z), apply(op1, x, apply(op2, y, z))
		}
	}
	ans := strconv.FormatInt(val, 10)
	return Example{Prompt: expr + "=", Completion: ans, Answer: ans}
}

func apply(op byte, x, y int64) int64 {
	switch op {
	case '+':
		return x + y
	case '-':
		return x - y
	case '*':
		return x * y
	}
	panic("tasks: unknown operator " + string(op)) // unreachable: ops are fixed at registration
}

// Check implements Task: the first line of the completion must be exactly the integer answer.
func (a Arithmetic) Check(ex Example, completion string) (bool, string) {
	got := FirstLine(completion)
	if got == ex.Answer {
		return true, ""
	}
	if got == "" {
		return false, "the answer is missing: write the integer result"
	}
	if _, err := strconv.ParseInt(got, 10, 64); err != nil {
		return false, fmt.Sprintf("%q is not an integer: write only the result, like %s", truncate(got, 20), strings.Repeat("9", len(ex.Answer)))
	}
	return false, fmt.Sprintf("%s is wrong; recompute %s", got, strings.TrimSuffix(ex.Prompt, "="))
}

// Partial implements PartialCredit: for a wrong integer answer of the right sign, half a point times
// the fraction of digit places (right-aligned) it gets right, so 52 for 57 earns 0.25 and 157 for 57
// earns 1/3; an answer that is not a plain integer (no leading zeros or "+"), or has the wrong sign,
// earns 0. It gives RL a gradient on prompts no sample solves yet (a group of eight wrong answers
// scores all zeros with the exact check alone).
func (a Arithmetic) Partial(ex Example, completion string) float64 {
	got := FirstLine(completion)
	if got == ex.Answer {
		return 0 // a correct answer scores 1 through Check, not here
	}
	gotDigits, gotNeg := strings.CutPrefix(got, "-")
	wantDigits, wantNeg := strings.CutPrefix(ex.Answer, "-")
	if gotNeg != wantNeg || !plainDigits(gotDigits) || !plainDigits(wantDigits) {
		return 0
	}
	return placeCredit(gotDigits, wantDigits)
}

// plainDigits reports whether s is an unsigned decimal integer as the tasks write one: digits only,
// no leading zero unless it is "0".
func plainDigits(s string) bool {
	if s == "" || len(s) > 19 || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
