package verify

import (
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/big"
	"math/cmplx"
	"strings"
)

// An expression answer is parsed into a small tree and compared in two ways: exactly, over
// big.Rat, when it holds only numbers and + - * / and integer powers; otherwise by evaluating
// both sides in complex128 at a few fixed pseudo-random points (one value per symbol name,
// derived from the name by a hash, so the result never depends on map order or a clock).

// node kinds
const (
	nNum  = iota // val
	nSym         // name ("x", "a_1", "\alpha", "f(x)")
	nAdd         // kids[0] + kids[1]
	nSub         // kids[0] - kids[1]
	nMul         // kids[0] * kids[1]
	nDiv         // kids[0] / kids[1]
	nPow         // kids[0] ^ kids[1]
	nNeg         // -kids[0]
	nPM          // kids[0] ± kids[1] (or ±kids[1] when kids[0] is nil); idx numbers the ± signs
	nFunc        // name(kids[0]), name in funcs; kids[1] optional (log base, root index)
	nPi
	nE
	nI
	nInf
	nAbs
	nFact
)

type node struct {
	kind int
	val  *big.Rat
	name string
	kids []*node
	idx  int
}

var errNoExpr = errors.New("not an expression")

// funcs are the named functions an answer may use, LaTeX or plain.
var funcs = map[string]func(complex128) complex128{
	"sin": cmplx.Sin, "cos": cmplx.Cos, "tan": cmplx.Tan,
	"sec":    func(z complex128) complex128 { return 1 / cmplx.Cos(z) },
	"csc":    func(z complex128) complex128 { return 1 / cmplx.Sin(z) },
	"cot":    func(z complex128) complex128 { return 1 / cmplx.Tan(z) },
	"arcsin": cmplx.Asin, "arccos": cmplx.Acos, "arctan": cmplx.Atan,
	"sinh": cmplx.Sinh, "cosh": cmplx.Cosh, "tanh": cmplx.Tanh,
	"ln": cmplx.Log, "log": cmplx.Log, "exp": cmplx.Exp, "sqrt": cmplx.Sqrt,
}

// greek letters read as symbols.
var greek = map[string]bool{
	"alpha": true, "beta": true, "gamma": true, "delta": true, "epsilon": true, "varepsilon": true,
	"zeta": true, "eta": true, "theta": true, "vartheta": true, "iota": true, "kappa": true,
	"lambda": true, "mu": true, "nu": true, "xi": true, "rho": true, "sigma": true, "tau": true,
	"phi": true, "varphi": true, "chi": true, "psi": true, "omega": true, "Gamma": true,
	"Delta": true, "Theta": true, "Lambda": true, "Xi": true, "Sigma": true, "Phi": true,
	"Psi": true, "Omega": true,
}

// englishWords are two-letter words that are never a product of two symbols.
var englishWords = map[string]bool{"or": true, "is": true, "no": true, "of": true, "in": true, "to": true,
	"be": true, "at": true, "it": true, "if": true, "so": true, "as": true, "on": true, "an": true, "by": true,
	"we": true, "do": true, "go": true, "he": true, "me": true, "my": true, "up": true, "us": true, "am": true,
	"Or": true, "Is": true, "No": true, "If": true, "So": true, "As": true, "It": true, "In": true}

// xparser parses one expression (no relations, no top-level commas).
type xparser struct {
	s      string
	i      int
	depth  int
	npm    int
	syms   bool // a symbol was read
	inTerm bool // reading the right operand of a product or quotient
}

// parseExpr parses s as a whole expression.
func parseExpr(s string) (*node, *xparser, error) {
	if len(s) > maxExprBytes {
		return nil, nil, fmt.Errorf("expression longer than %d bytes", maxExprBytes)
	}
	p := &xparser{s: s}
	n, err := p.sum()
	if err != nil {
		return nil, p, err
	}
	p.space()
	if p.i != len(p.s) {
		return nil, p, fmt.Errorf("%w: unexpected %q", errNoExpr, clip(p.s[p.i:], 12))
	}
	if p.npm > 3 {
		return nil, p, fmt.Errorf("%w: too many ±", errNoExpr)
	}
	return n, p, nil
}

func (p *xparser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

func (p *xparser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return fmt.Errorf("nesting deeper than %d", maxDepth)
	}
	return nil
}

// cmd reports whether the LaTeX command name is at the cursor (not followed by a letter).
func (p *xparser) cmd(name string) bool {
	return strings.HasPrefix(p.s[p.i:], name) && !isLetterAt(p.s, p.i+len(name))
}

// sum := term (('+'|'-'|'±') term)*
func (p *xparser) sum() (*node, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	var v *node
	p.space()
	if p.pm() { // leading ±
		r, err := p.term()
		if err != nil {
			return nil, err
		}
		v = &node{kind: nPM, kids: []*node{nil, r}, idx: p.npm}
		p.npm++
	} else {
		var err error
		if v, err = p.term(); err != nil {
			return nil, err
		}
	}
	for {
		p.space()
		if p.i >= len(p.s) {
			return v, nil
		}
		kind := -1
		switch {
		case p.s[p.i] == '+':
			kind, p.i = nAdd, p.i+1
		case p.s[p.i] == '-':
			kind, p.i = nSub, p.i+1
		case p.pm():
			kind = nPM
		}
		if kind < 0 {
			return v, nil
		}
		r, err := p.term()
		if err != nil {
			return nil, err
		}
		v = &node{kind: kind, kids: []*node{v, r}}
		if kind == nPM {
			v.idx = p.npm
			p.npm++
		}
	}
}

func (p *xparser) pm() bool {
	for _, t := range []string{`\pm`, "±", "+-"} {
		if strings.HasPrefix(p.s[p.i:], t) && (t != `\pm` || !isLetterAt(p.s, p.i+3)) {
			p.i += len(t)
			return true
		}
	}
	return false
}

// term := unary (('*'|'/'|implicit) unary)*
func (p *xparser) term() (*node, error) {
	v, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		p.space()
		if p.i >= len(p.s) {
			return v, nil
		}
		kind := nMul
		switch c := p.s[p.i]; {
		case c == '*':
			p.i++
		case c == '/':
			kind = nDiv
			p.i++
		case p.cmd(`\times`):
			p.i += len(`\times`)
		case p.cmd(`\cdot`):
			p.i += len(`\cdot`)
		case p.cmd(`\div`):
			kind = nDiv
			p.i += len(`\div`)
		case p.startsFactor():
			// implicit multiplication: 2x, 2\pi, (x-2)(x+2), 3\sqrt{13}
		default:
			return v, nil
		}
		p.inTerm = true // a mixed number only starts a term: 11/10 4/9 is not 11/(10 4/9)
		r, err := p.unary()
		p.inTerm = false
		if err != nil {
			return nil, err
		}
		v = &node{kind: kind, kids: []*node{v, r}}
	}
}

// startsFactor reports whether a factor (not an operator) starts at the cursor.
func (p *xparser) startsFactor() bool {
	c := p.s[p.i]
	switch {
	case c >= '0' && c <= '9', c == '.':
		// "5 6" is two numbers, not 30.
		j := p.i - 1
		for j >= 0 && p.s[j] == ' ' {
			j--
		}
		return j < 0 || !(digitAt(p.s, j) || p.s[j] == '.')
	case c == '(', c == '[', c == '{':
		return true
	case (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
		return true
	case c == '\\':
		for _, op := range []string{`\times`, `\cdot`, `\div`, `\pm`, `\right`} {
			if p.cmd(op) {
				return false
			}
		}
		return isLetterAt(p.s, p.i+1)
	case c == 0xCF || c == 0xE2: // π, ∞ (UTF-8 lead bytes)
		return strings.HasPrefix(p.s[p.i:], "π") || strings.HasPrefix(p.s[p.i:], "∞") || strings.HasPrefix(p.s[p.i:], "√")
	}
	return false
}

// unary := ('-'|'+') unary | power
func (p *xparser) unary() (*node, error) {
	p.space()
	if p.i < len(p.s) && (p.s[p.i] == '-' || p.s[p.i] == '+') {
		neg := p.s[p.i] == '-'
		p.i++
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer func() { p.depth-- }()
		v, err := p.unary()
		if err != nil {
			return nil, err
		}
		if neg {
			return &node{kind: nNeg, kids: []*node{v}}, nil
		}
		return v, nil
	}
	return p.power()
}

// power := postfix ('^' (unary | {sum}))?
func (p *xparser) power() (*node, error) {
	base, err := p.postfix()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i >= len(p.s) || p.s[p.i] != '^' {
		return base, nil
	}
	p.i++
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	p.space()
	var exp *node
	if p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		// x^23 is x to the 23rd; a LaTeX x^23 would be x^2*3, but answers mean the former.
		start := p.i
		if exp, err = p.number(); err == nil {
			p.space()
			if p.i < len(p.s) && p.s[p.i] == '^' { // 10^10^10 is 10^(10^10)
				p.i = start
				exp, err = p.power()
			}
		}
	} else {
		exp, err = p.unary()
	}
	if err != nil {
		return nil, err
	}
	return &node{kind: nPow, kids: []*node{base, exp}}, nil
}

// postfix := primary '!'*
func (p *xparser) postfix() (*node, error) {
	v, err := p.primary()
	if err != nil {
		return nil, err
	}
	for p.i < len(p.s) && p.s[p.i] == '!' && !strings.HasPrefix(p.s[p.i:], "!=") {
		p.i++
		v = &node{kind: nFact, kids: []*node{v}}
	}
	return v, nil
}

func (p *xparser) group(open, close byte) (*node, error) {
	p.i++
	v, err := p.sum()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i >= len(p.s) || p.s[p.i] != close {
		return nil, fmt.Errorf("%w: missing %q", errNoExpr, close)
	}
	p.i++
	return v, nil
}

func (p *xparser) primary() (*node, error) {
	p.space()
	if p.i >= len(p.s) {
		return nil, fmt.Errorf("%w: unexpected end", errNoExpr)
	}
	c := p.s[p.i]
	switch {
	case c == '(':
		return p.group('(', ')')
	case c == '[':
		return p.group('[', ']')
	case c == '{':
		return p.group('{', '}')
	case c == '|':
		v, err := p.group('|', '|')
		if err != nil {
			return nil, err
		}
		return &node{kind: nAbs, kids: []*node{v}}, nil
	case c >= '0' && c <= '9' || c == '.':
		return p.numberOrMixed()
	case c == '\\':
		return p.command()
	case (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'):
		return p.word()
	case strings.HasPrefix(p.s[p.i:], "π"):
		p.i += len("π")
		return &node{kind: nPi}, nil
	case strings.HasPrefix(p.s[p.i:], "∞"):
		p.i += len("∞")
		return &node{kind: nInf}, nil
	case strings.HasPrefix(p.s[p.i:], "√"):
		p.i += len("√")
		arg, err := p.rootArg()
		if err != nil {
			return nil, err
		}
		return &node{kind: nFunc, name: "sqrt", kids: []*node{arg}}, nil
	}
	return nil, fmt.Errorf("%w: unexpected %q", errNoExpr, clip(p.s[p.i:], 12))
}

// number reads one literal with the exact-rational reader of rat.go.
func (p *xparser) number() (*node, error) {
	rp := &parser{s: p.s, i: p.i, mode: modeMath}
	v, err := rp.number()
	if err != nil {
		return nil, err
	}
	p.i = rp.i
	return &node{kind: nNum, val: v}, nil
}

// numberOrMixed reads a literal, and a mixed number when an integer is followed by a fraction
// of integers: 2\frac{1}{2} and "7 3/4" are 2.5 and 7.75, as MATH writes them.
func (p *xparser) numberOrMixed() (*node, error) {
	start := p.i
	n, err := p.number()
	if err != nil {
		return nil, err
	}
	if !n.val.IsInt() || strings.ContainsAny(p.s[start:p.i], ".eE") || p.inTerm {
		return n, nil
	}
	// A mixed number's fraction is proper (0 <= a < b): "11 6/6" and "4 4/0" are not numbers.
	proper := func(a, b *big.Rat) bool {
		return a.IsInt() && b.IsInt() && a.Sign() >= 0 && b.Sign() > 0 && a.Cmp(b) < 0
	}
	save := p.i
	p.space()
	if p.cmd(`\frac`) {
		f, err := p.command()
		if err == nil && f.kind == nDiv && f.kids[0].kind == nNum && f.kids[1].kind == nNum &&
			proper(f.kids[0].val, f.kids[1].val) {
			return &node{kind: nAdd, kids: []*node{n, f}}, nil
		}
		p.i = save
		return n, nil
	}
	if p.i > save && p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		// "7 3/4"
		q := &xparser{s: p.s, i: p.i}
		a, err1 := q.number()
		if err1 == nil && q.i < len(q.s) && q.s[q.i] == '/' {
			q.i++
			b, err2 := q.number()
			if err2 == nil && proper(a.val, b.val) && (q.i == len(q.s) || !digitAt(q.s, q.i) && q.s[q.i] != '/' && q.s[q.i] != '.') {
				p.i = q.i
				return &node{kind: nAdd, kids: []*node{n, {kind: nDiv, kids: []*node{a, b}}}}, nil
			}
		}
	}
	p.i = save
	return n, nil
}

// word reads a run of ASCII letters: single letters are symbols (e is Euler's number, i the
// imaginary unit), known function names apply, and any other run of two or more letters is
// read as a product of single-letter symbols only when it has two letters ("xy", "AB"); longer
// words are not expressions.
func (p *xparser) word() (*node, error) {
	j := p.i
	for j < len(p.s) && isLetterAt(p.s, j) {
		j++
	}
	w := p.s[p.i:j]
	if _, ok := funcs[w]; ok && len(w) > 1 {
		p.i = j
		return p.apply(w)
	}
	if w == "pi" {
		p.i = j
		return &node{kind: nPi}, nil
	}
	if w == "inf" || w == "infty" || w == "oo" {
		p.i = j
		return &node{kind: nInf}, nil
	}
	if len(w) > 2 || englishWords[w] {
		return nil, fmt.Errorf("%w: word %q", errNoExpr, clip(w, 20))
	}
	p.i++
	return p.symbol(w[:1])
}

// symbol finishes a symbol: a subscript (x_1, a_{37}) and a function call f(x) are part of it.
func (p *xparser) symbol(name string) (*node, error) {
	if p.i < len(p.s) && p.s[p.i] == '_' {
		j := p.i + 1
		if j < len(p.s) && p.s[j] == '{' {
			k := strings.IndexByte(p.s[j:], '}')
			if k < 0 || k > 24 {
				return nil, fmt.Errorf("%w: bad subscript", errNoExpr)
			}
			name += "_" + strings.ReplaceAll(p.s[j+1:j+k], " ", "")
			p.i = j + k + 1
		} else if j < len(p.s) && isAlnum(p.s[j]) {
			name += "_" + p.s[j:j+1]
			p.i = j + 1
		} else {
			return nil, fmt.Errorf("%w: bad subscript", errNoExpr)
		}
	}
	p.syms = true
	switch name {
	case "e":
		return &node{kind: nE}, nil
	case "i":
		return &node{kind: nI}, nil
	}
	return &node{kind: nSym, name: name}, nil
}

// command reads a LaTeX command at the cursor.
func (p *xparser) command() (*node, error) {
	j := p.i + 1
	for j < len(p.s) && isLetterAt(p.s, j) {
		j++
	}
	name := p.s[p.i+1 : j]
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer func() { p.depth-- }()
	switch {
	case name == "frac" || name == "dfrac" || name == "tfrac" || name == "cfrac":
		p.i = j
		num, err := p.fracArg()
		if err != nil {
			return nil, err
		}
		den, err := p.fracArg()
		if err != nil {
			return nil, err
		}
		return &node{kind: nDiv, kids: []*node{num, den}}, nil
	case name == "sqrt":
		p.i = j
		p.space()
		var index *node
		if p.i < len(p.s) && p.s[p.i] == '[' {
			var err error
			if index, err = p.group('[', ']'); err != nil {
				return nil, err
			}
		}
		arg, err := p.rootArg()
		if err != nil {
			return nil, err
		}
		if index != nil {
			return &node{kind: nPow, kids: []*node{arg, {kind: nDiv, kids: []*node{{kind: nNum, val: big.NewRat(1, 1)}, index}}}}, nil
		}
		return &node{kind: nFunc, name: "sqrt", kids: []*node{arg}}, nil
	case name == "binom" || name == "dbinom" || name == "tbinom":
		p.i = j
		n, err := p.fracArg()
		if err != nil {
			return nil, err
		}
		k, err := p.fracArg()
		if err != nil {
			return nil, err
		}
		// C(n, k) = n! / (k! (n-k)!)
		fact := func(x *node) *node { return &node{kind: nFact, kids: []*node{x}} }
		return &node{kind: nDiv, kids: []*node{fact(n), {kind: nMul, kids: []*node{fact(k), fact(&node{kind: nSub, kids: []*node{n, k}})}}}}, nil
	case name == "pi":
		p.i = j
		return &node{kind: nPi}, nil
	case name == "infty" || name == "infin":
		p.i = j
		return &node{kind: nInf}, nil
	case name == "exp" || funcs[name] != nil:
		p.i = j
		return p.apply(name)
	case greek[name]:
		p.i = j
		return p.symbol(`\` + name)
	}
	return nil, fmt.Errorf("%w: unsupported command \\%s", errNoExpr, clip(name, 20))
}

// fracArg: {expr}, or one digit or letter (\frac12, \frac ab).
func (p *xparser) fracArg() (*node, error) {
	p.space()
	if p.i >= len(p.s) {
		return nil, fmt.Errorf("%w: \\frac needs two arguments", errNoExpr)
	}
	c := p.s[p.i]
	switch {
	case c == '{':
		return p.group('{', '}')
	case c >= '0' && c <= '9':
		p.i++
		return &node{kind: nNum, val: big.NewRat(int64(c-'0'), 1)}, nil
	case isLetterAt(p.s, p.i):
		p.i++
		return p.symbol(string(c))
	case c == '\\':
		return p.command()
	}
	return nil, fmt.Errorf("%w: \\frac needs two arguments", errNoExpr)
}

// rootArg: {expr}, or one number, letter or command (\sqrt2, \sqrt 2, \sqrt x).
func (p *xparser) rootArg() (*node, error) {
	p.space()
	if p.i >= len(p.s) {
		return nil, fmt.Errorf("%w: \\sqrt needs an argument", errNoExpr)
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.group('{', '}')
	case c == '(':
		return p.group('(', ')')
	case c >= '0' && c <= '9':
		return p.number()
	case isLetterAt(p.s, p.i):
		p.i++
		return p.symbol(string(c))
	case c == '\\':
		return p.command()
	}
	return nil, fmt.Errorf("%w: \\sqrt needs an argument", errNoExpr)
}

// apply reads a function's optional power, base and argument: \sin^2(y), \log_2 8, \sin x.
func (p *xparser) apply(name string) (*node, error) {
	var pow, base *node
	var err error
	for k := 0; k < 2; k++ {
		p.space()
		if p.i < len(p.s) && p.s[p.i] == '^' && pow == nil {
			p.i++
			if pow, err = p.fracArg(); err != nil {
				return nil, err
			}
			continue
		}
		if p.i < len(p.s) && p.s[p.i] == '_' && base == nil && name == "log" {
			p.i++
			if base, err = p.fracArg(); err != nil {
				return nil, err
			}
			continue
		}
	}
	if isMinusOne(pow) && (name == "sin" || name == "cos" || name == "tan") {
		name, pow = "arc"+name, nil // \sin^{-1} x is arcsin x, not 1/sin x
	}
	p.space()
	var arg *node
	if p.i < len(p.s) && (p.s[p.i] == '(' || p.s[p.i] == '{' || p.s[p.i] == '[') {
		arg, err = p.primary()
	} else {
		arg, err = p.power() // \sin x, \ln 2
		// \sin 2x is sin(2x): plain digits and letters glued on stay in the argument; a
		// command, bracket or operator ends it (\sin x \cos x is a product of two functions).
		for err == nil && p.i < len(p.s) && (isLetterAt(p.s, p.i) && !p.funcWordAt() || digitAt(p.s, p.i) && !digitAt(p.s, p.i-1)) {
			var r *node
			if r, err = p.power(); err == nil {
				arg = &node{kind: nMul, kids: []*node{arg, r}}
			}
		}
	}
	if err != nil {
		return nil, err
	}
	var v *node
	if name == "exp" {
		v = &node{kind: nPow, kids: []*node{{kind: nE}, arg}}
	} else {
		v = &node{kind: nFunc, name: name, kids: []*node{arg}}
	}
	if base != nil {
		v = &node{kind: nDiv, kids: []*node{v, {kind: nFunc, name: "ln", kids: []*node{base}}}}
	}
	if pow != nil {
		v = &node{kind: nPow, kids: []*node{v, pow}}
	}
	return v, nil
}

// exact evaluates n over big.Rat when it holds only numbers, + - * / and integer powers.
// mask chooses the sign of each ± (bit k set: minus).
func (n *node) exact(mask int) (*big.Rat, bool, error) {
	switch n.kind {
	case nNum:
		return n.val, true, nil
	case nNeg:
		v, ok, err := n.kids[0].exact(mask)
		if !ok || err != nil {
			return nil, ok, err
		}
		return new(big.Rat).Neg(v), true, nil
	case nAbs:
		v, ok, err := n.kids[0].exact(mask)
		if !ok || err != nil {
			return nil, ok, err
		}
		return new(big.Rat).Abs(v), true, nil
	case nAdd, nSub, nMul, nDiv, nPow, nPM:
		var a *big.Rat
		if n.kids[0] != nil {
			var ok bool
			var err error
			if a, ok, err = n.kids[0].exact(mask); !ok || err != nil {
				return nil, ok, err
			}
		} else {
			a = new(big.Rat)
		}
		b, ok, err := n.kids[1].exact(mask)
		if !ok || err != nil {
			return nil, ok, err
		}
		var v *big.Rat
		switch n.kind {
		case nAdd:
			v = new(big.Rat).Add(a, b)
		case nSub:
			v = new(big.Rat).Sub(a, b)
		case nPM:
			if mask&(1<<n.idx) != 0 {
				v = new(big.Rat).Sub(a, b)
			} else {
				v = new(big.Rat).Add(a, b)
			}
		case nMul:
			v = new(big.Rat).Mul(a, b)
		case nDiv:
			if b.Sign() == 0 {
				return nil, true, errDivZero
			}
			v = new(big.Rat).Quo(a, b)
		case nPow:
			if !b.IsInt() {
				return nil, false, nil
			}
			var err error
			if v, err = powRat(a, b); err != nil {
				return nil, true, err
			}
			return v, true, nil
		}
		return v, true, checkBits(v)
	case nFact:
		v, ok, err := n.kids[0].exact(mask)
		if !ok || err != nil {
			return nil, ok, err
		}
		if !v.IsInt() || v.Sign() < 0 || v.Num().Cmp(big.NewInt(300)) > 0 {
			return nil, true, errTooBig
		}
		f := new(big.Int).MulRange(1, v.Num().Int64())
		if v.Num().Int64() == 0 {
			f = big.NewInt(1)
		}
		return new(big.Rat).SetInt(f), true, nil
	case nFunc:
		// \sqrt of a perfect square stays exact: \sqrt{4} = 2.
		if n.name == "sqrt" {
			v, ok, err := n.kids[0].exact(mask)
			if !ok || err != nil || v.Sign() < 0 {
				return nil, false, err
			}
			num, den := new(big.Int).Sqrt(v.Num()), new(big.Int).Sqrt(v.Denom())
			if new(big.Int).Mul(num, num).Cmp(v.Num()) == 0 && new(big.Int).Mul(den, den).Cmp(v.Denom()) == 0 {
				return new(big.Rat).SetFrac(num, den), true, nil
			}
		}
	}
	return nil, false, nil
}

// eval evaluates n in complex128 with env giving each symbol's value.
func (n *node) eval(env func(string) complex128, mask int) complex128 {
	switch n.kind {
	case nNum:
		f, _ := n.val.Float64()
		return complex(f, 0)
	case nSym:
		return env(n.name)
	case nPi:
		return complex(math.Pi, 0)
	case nE:
		return complex(math.E, 0)
	case nI:
		return complex(0, 1)
	case nInf:
		return complex(math.Inf(1), 0)
	case nNeg:
		v := -n.kids[0].eval(env, mask)
		if imag(v) == 0 {
			v = complex(real(v), 0) // -0i would put \sqrt{-1} on the other side of the branch cut
		}
		return v
	case nAbs:
		return complex(cmplx.Abs(n.kids[0].eval(env, mask)), 0)
	case nFact:
		v := n.kids[0].eval(env, mask)
		return complex(math.Gamma(real(v)+1), 0)
	case nFunc:
		return funcs[n.name](n.kids[0].eval(env, mask))
	}
	var a complex128
	if n.kids[0] != nil {
		a = n.kids[0].eval(env, mask)
	}
	b := n.kids[1].eval(env, mask)
	switch n.kind {
	case nAdd:
		return a + b
	case nSub:
		return a - b
	case nPM:
		if mask&(1<<n.idx) != 0 {
			return a - b
		}
		return a + b
	case nMul:
		return a * b
	case nDiv:
		return a / b
	case nPow:
		if imag(b) == 0 && real(b) == math.Trunc(real(b)) && math.Abs(real(b)) <= 64 {
			r := complex(1, 0)
			k := int(real(b))
			base := a
			if k < 0 {
				base, k = 1/a, -k
			}
			for ; k > 0; k-- {
				r *= base
			}
			return r
		}
		if imag(a) == 0 && real(a) > 0 && imag(b) == 0 {
			return complex(math.Pow(real(a), real(b)), 0)
		}
		return cmplx.Pow(a, b)
	}
	return cmplx.NaN()
}

// symbols returns the symbol names of n.
func (n *node) symbols(into map[string]bool) {
	if n == nil {
		return
	}
	if n.kind == nSym {
		into[n.name] = true
	}
	for _, k := range n.kids {
		k.symbols(into)
	}
}

func (n *node) has(kind int) bool {
	if n == nil {
		return false
	}
	if n.kind == kind {
		return true
	}
	for _, k := range n.kids {
		if k.has(kind) {
			return true
		}
	}
	return false
}

// symbolValue is the value symbol name takes at sample point k: a deterministic pseudo-random
// real with 0.35 <= |v| < 2.35, away from 0 and ±1 where distinct expressions tend to meet.
func symbolValue(name string, k int) complex128 {
	h := fnv.New64a()
	h.Write([]byte(name))
	h.Write([]byte{byte(k), 0x5a})
	x := h.Sum64()
	u := float64(x>>11) / float64(1<<53)
	if (k+int(x&1))%2 == 1 { // half the points negative: \sqrt{x^2} is not x
		return complex(-(0.35 + 2*u), 0)
	}
	return complex(0.35+2*u, 0)
}

// samplePoints is the number of points at which symbolic expressions are compared.
const samplePoints = 7

func isMinusOne(n *node) bool {
	if n == nil {
		return false
	}
	if n.kind == nNeg {
		n = n.kids[0]
		return n.kind == nNum && n.val.Cmp(big.NewRat(1, 1)) == 0
	}
	return n.kind == nNum && n.val.Cmp(big.NewRat(-1, 1)) == 0
}

// funcWordAt reports whether a function name written without a backslash starts at the cursor.
func (p *xparser) funcWordAt() bool {
	j := p.i
	for j < len(p.s) && isLetterAt(p.s, j) {
		j++
	}
	_, ok := funcs[p.s[p.i:j]]
	return ok && j-p.i > 1
}
