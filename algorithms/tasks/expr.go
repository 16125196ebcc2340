package tasks

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Scratchpad is the `expr` task: an arithmetic expression solved one step per line. The prompt is
// the expression and "=", e.g. "(12+7)*3-4="; every line of the completion rewrites the previous
// expression with exactly one operation done (the leftmost one whose operands are both numbers),
// and the last line is the result:
//
//	((2+7)*3)-4=       prompt
//	(9*3)-4            step 1
//	27-4               step 2
//	23                 step 3 (the answer)
//
// Every line is checkable on its own (CheckStep), so a verifier can tell where a solution went
// wrong; Check passes only a completion whose every line is right. Expressions are printed with
// parentheses around every operation but the outermost, so reading needs no precedence rules; a
// subtraction never goes below zero and a multiplication's right operand is one digit, so the
// numbers stay short enough for a byte-level model.
type Scratchpad struct {
	name     string
	doc      string
	minOps   int
	maxOps   int
	maxDigit int // leaves have 1..maxDigit digits
}

func init() {
	// One-digit leaves: the intermediate results still need carries and two-digit products, but a
	// tiny byte-level model learns the format and some of the arithmetic in minutes on a CPU, which
	// is what a base for search must do (a base that solves nothing gives search nothing to find).
	register(Scratchpad{name: "expr", doc: "multi-step expressions (2-3 operations of + - * on one-digit numbers) solved one rewrite per line; every line is checked", minOps: 2, maxOps: 3, maxDigit: 1})
}

// Name implements Task.
func (s Scratchpad) Name() string { return s.name }

// Doc implements Task.
func (s Scratchpad) Doc() string { return s.doc }

// exprNode is a binary expression tree; a leaf has op 0.
type exprNode struct {
	op          byte
	val         int64
	left, right *exprNode
}

func (n *exprNode) leaf() bool { return n.op == 0 }

func (n *exprNode) eval() int64 {
	if n.leaf() {
		return n.val
	}
	return apply(n.op, n.left.eval(), n.right.eval())
}

// String prints n with parentheses around every operation but the outermost.
func (n *exprNode) String() string { return n.format(true) }

func (n *exprNode) format(top bool) string {
	if n.leaf() {
		return strconv.FormatInt(n.val, 10)
	}
	s := n.left.format(false) + string(n.op) + n.right.format(false)
	if !top {
		s = "(" + s + ")"
	}
	return s
}

// reduce does the leftmost operation whose operands are both numbers; false when n is a number.
func (n *exprNode) reduce() bool {
	if n.leaf() {
		return false
	}
	if n.left.leaf() && n.right.leaf() {
		n.val, n.op, n.left, n.right = apply(n.op, n.left.val, n.right.val), 0, nil, nil
		return true
	}
	return n.left.reduce() || n.right.reduce()
}

// gen draws an expression with ops operations.
func (s Scratchpad) gen(rng *rand.Rand, ops int) *exprNode {
	if ops == 0 {
		return &exprNode{val: operand(rng, s.maxDigit)}
	}
	op := "+-*"[rng.IntN(3)]
	if op == '*' {
		return &exprNode{op: op, left: s.gen(rng, ops-1), right: &exprNode{val: operand(rng, 1)}}
	}
	k := rng.IntN(ops)
	n := &exprNode{op: op, left: s.gen(rng, k), right: s.gen(rng, ops-1-k)}
	if op == '-' && n.left.eval() < n.right.eval() {
		n.left, n.right = n.right, n.left // never below zero: every number stays a plain digit string
	}
	return n
}

// Example implements Task.
func (s Scratchpad) Example(rng *rand.Rand) Example {
	ops := s.minOps + rng.IntN(s.maxOps-s.minOps+1)
	n := s.gen(rng, ops)
	prompt := n.String() + "="
	steps, _ := ExprSteps(prompt) // the expression was just printed: it parses
	return Example{Prompt: prompt, Completion: strings.Join(steps, "\n"), Answer: steps[len(steps)-1]}
}

// ExprSteps returns the lines of the solution of an expression prompt ("…="): one rewrite per line,
// the result last.
func ExprSteps(prompt string) ([]string, error) {
	n, err := parseExpr(strings.TrimSuffix(strings.TrimSpace(prompt), "="))
	if err != nil {
		return nil, err
	}
	var steps []string
	for n.reduce() {
		steps = append(steps, n.String())
	}
	if len(steps) == 0 {
		steps = []string{n.String()}
	}
	return steps, nil
}

// parseExpr reads what exprNode.String prints: numbers, + - *, parentheses; operators of one level
// associate to the left and * binds tighter, as usual (printed expressions never rely on it).
func parseExpr(s string) (*exprNode, error) {
	p := exprParser{s: s}
	n, err := p.sum()
	if err == nil && p.i < len(s) {
		err = fmt.Errorf("unexpected %q at %d", s[p.i], p.i)
	}
	if err != nil {
		return nil, fmt.Errorf("tasks: expr %q: %w", s, err)
	}
	return n, nil
}

type exprParser struct {
	s string
	i int
}

func (p *exprParser) sum() (*exprNode, error) {
	n, err := p.product()
	for err == nil && p.i < len(p.s) && (p.s[p.i] == '+' || p.s[p.i] == '-') {
		op := p.s[p.i]
		p.i++
		var r *exprNode
		if r, err = p.product(); err == nil {
			n = &exprNode{op: op, left: n, right: r}
		}
	}
	return n, err
}

func (p *exprParser) product() (*exprNode, error) {
	n, err := p.atom()
	for err == nil && p.i < len(p.s) && p.s[p.i] == '*' {
		p.i++
		var r *exprNode
		if r, err = p.atom(); err == nil {
			n = &exprNode{op: '*', left: n, right: r}
		}
	}
	return n, err
}

func (p *exprParser) atom() (*exprNode, error) {
	if p.i < len(p.s) && p.s[p.i] == '(' {
		p.i++
		n, err := p.sum()
		if err != nil {
			return nil, err
		}
		if p.i >= len(p.s) || p.s[p.i] != ')' {
			return nil, fmt.Errorf("missing ) at %d", p.i)
		}
		p.i++
		return n, nil
	}
	j := p.i
	for j < len(p.s) && p.s[j] >= '0' && p.s[j] <= '9' && j-p.i < 12 {
		j++
	}
	if j == p.i {
		if p.i >= len(p.s) {
			return nil, fmt.Errorf("number expected at end")
		}
		return nil, fmt.Errorf("number expected at %d, got %q", p.i, p.s[p.i])
	}
	v, err := strconv.ParseInt(p.s[p.i:j], 10, 64)
	if err != nil {
		return nil, err
	}
	p.i = j
	return &exprNode{val: v}, nil
}

// completionLines splits a completion into its lines, trimmed, without trailing blank lines.
func completionLines(completion string) []string {
	lines := strings.Split(completion, "\n")
	for i := range lines {
		lines[i] = strings.TrimSpace(lines[i])
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// Stepwise is a task whose solutions are lines each checkable on its own: a search can drop a
// wrong line at once instead of finishing the solution to find out.
type Stepwise interface {
	CheckStep(ex Example, done []string, step string) (bool, string)
}

// CheckStep says whether step is the right next line after the lines done of ex's solution: the
// per-line verifier. A line after the result is wrong.
func (s Scratchpad) CheckStep(ex Example, done []string, step string) (bool, string) {
	want, err := ExprSteps(ex.Prompt)
	if err != nil {
		return false, err.Error()
	}
	i := len(done)
	step = strings.TrimSpace(step)
	switch {
	case i >= len(want):
		return false, fmt.Sprintf("line %d: %q after the result %s: stop after the result", i+1, truncate(step, 20), want[len(want)-1])
	case step != want[i]:
		prev := strings.TrimSuffix(ex.Prompt, "=")
		if i > 0 {
			prev = want[i-1]
		}
		return false, fmt.Sprintf("line %d: %q is not %s with its leftmost ready operation done", i+1, truncate(step, 20), prev)
	}
	return true, ""
}

// Check implements Task: every line must be the right rewrite of the one before and the last line
// the result; the feedback names the first wrong line.
func (s Scratchpad) Check(ex Example, completion string) (bool, string) {
	lines := completionLines(completion)
	if len(lines) == 0 {
		return false, "the solution is missing: rewrite the expression one operation per line, the result last"
	}
	for i, l := range lines {
		if ok, fb := s.CheckStep(ex, lines[:i], l); !ok {
			return false, fb
		}
	}
	if want := ex.Answer; lines[len(lines)-1] != want {
		return false, fmt.Sprintf("the solution stops at line %d before the result", len(lines))
	}
	return true, ""
}

// Mistake implements Mistaker: the right steps with a slip in the result (Arithmetic's mistakes),
// so a rejected completion differs from the chosen one only where the solution went wrong.
func (s Scratchpad) Mistake(ex Example, rng *rand.Rand) string {
	steps := completionLines(ex.Completion)
	if len(steps) == 0 {
		return ex.Answer + "0"
	}
	steps[len(steps)-1] = Arithmetic{}.Mistake(Example{Prompt: ex.Prompt, Answer: ex.Answer}, rng)
	return strings.Join(steps, "\n")
}
