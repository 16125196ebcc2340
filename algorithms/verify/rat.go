package verify

import (
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Bounds that keep exact arithmetic cheap whatever the model writes.
const (
	maxExprBytes   = 512  // longest expression parsed
	maxDigits      = 400  // digits in one literal
	maxExponent    = 400  // |e| in 1.5e3 and in powers of ten
	maxBits        = 4096 // bits of a numerator or denominator, after every operation
	maxDepth       = 64   // nesting of parentheses, braces and powers
	maxPowExponent = 4096 // |n| in x^n before the bit check
)

var (
	errTooBig    = errors.New("number too large")
	errDivZero   = errors.New("division by zero")
	errNotNumber = errors.New("not a number")
)

// exprMode selects the grammar.
type exprMode int

const (
	// modeMath: decimals, 1,000 separators, scientific notation, \frac, \times, ^, unary signs.
	modeMath exprMode = iota
	// modeCountdown: non-negative integer literals, + - * / and parentheses only; literals are
	// recorded so the caller can check which numbers were used.
	modeCountdown
)

// parser is a recursive-descent evaluator over exact rationals.
type parser struct {
	s     string
	i     int
	depth int
	mode  exprMode
	used  []*big.Int // literals seen, in modeCountdown
}

// evalExpr evaluates s exactly. It never panics and is bounded in time and memory by the
// constants above.
func evalExpr(s string, mode exprMode) (*big.Rat, []*big.Int, error) {
	if len(s) > maxExprBytes {
		return nil, nil, fmt.Errorf("expression longer than %d bytes", maxExprBytes)
	}
	p := &parser{s: s, mode: mode}
	v, err := p.expr()
	if err != nil {
		return nil, nil, err
	}
	p.space()
	if p.i != len(p.s) {
		return nil, nil, fmt.Errorf("unexpected %q at offset %d", p.rest(), p.i)
	}
	return v, p.used, nil
}

func (p *parser) rest() string {
	r := p.s[p.i:]
	if len(r) > 12 {
		r = r[:12]
	}
	return r
}

func (p *parser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

// peekOp reports the binary operator at the cursor without consuming it: '+', '-', '*', '/' or 0.
func (p *parser) peekOp() (op byte, width int) {
	p.space()
	if p.i >= len(p.s) {
		return 0, 0
	}
	switch c := p.s[p.i]; c {
	case '+', '-', '*', '/':
		return c, 1
	case '\\':
		if p.mode != modeMath {
			return 0, 0
		}
		for _, cmd := range []struct {
			name string
			op   byte
		}{{`\times`, '*'}, {`\cdot`, '*'}, {`\div`, '/'}} {
			if strings.HasPrefix(p.s[p.i:], cmd.name) && !isLetterAt(p.s, p.i+len(cmd.name)) {
				return cmd.op, len(cmd.name)
			}
		}
	}
	return 0, 0
}

func isLetterAt(s string, i int) bool {
	return i < len(s) && ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z'))
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return fmt.Errorf("nesting deeper than %d", maxDepth)
	}
	return nil
}

func (p *parser) leave() { p.depth-- }

// expr := term (('+'|'-') term)*
func (p *parser) expr() (*big.Rat, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	v, err := p.term()
	if err != nil {
		return nil, err
	}
	for {
		op, w := p.peekOp()
		if op != '+' && op != '-' {
			return v, nil
		}
		p.i += w
		r, err := p.term()
		if err != nil {
			return nil, err
		}
		if op == '+' {
			v = new(big.Rat).Add(v, r)
		} else {
			v = new(big.Rat).Sub(v, r)
		}
		if err := checkBits(v); err != nil {
			return nil, err
		}
	}
}

// term := unary (('*'|'/') unary)*
func (p *parser) term() (*big.Rat, error) {
	v, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		op, w := p.peekOp()
		if op != '*' && op != '/' {
			return v, nil
		}
		p.i += w
		r, err := p.unary()
		if err != nil {
			return nil, err
		}
		if op == '*' {
			v = new(big.Rat).Mul(v, r)
		} else {
			if r.Sign() == 0 {
				return nil, errDivZero
			}
			v = new(big.Rat).Quo(v, r)
		}
		if err := checkBits(v); err != nil {
			return nil, err
		}
	}
}

// unary := ('-'|'+') unary | power   (math mode only)
func (p *parser) unary() (*big.Rat, error) {
	p.space()
	if p.mode == modeMath && p.i < len(p.s) && (p.s[p.i] == '-' || p.s[p.i] == '+') {
		neg := p.s[p.i] == '-'
		p.i++
		if err := p.enter(); err != nil {
			return nil, err
		}
		defer p.leave()
		v, err := p.unary()
		if err != nil {
			return nil, err
		}
		if neg {
			v = new(big.Rat).Neg(v)
		}
		return v, nil
	}
	return p.power()
}

// power := primary ('^' unary)?   (math mode only; the exponent must be a small integer)
func (p *parser) power() (*big.Rat, error) {
	base, err := p.primary()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.mode != modeMath || p.i >= len(p.s) || p.s[p.i] != '^' {
		return base, nil
	}
	p.i++
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	exp, err := p.unary()
	if err != nil {
		return nil, err
	}
	return powRat(base, exp)
}

func powRat(base, exp *big.Rat) (*big.Rat, error) {
	if !exp.IsInt() {
		return nil, errors.New("non-integer exponent")
	}
	e := exp.Num()
	if e.CmpAbs(big.NewInt(maxPowExponent)) > 0 {
		return nil, errTooBig
	}
	n := e.Int64()
	neg := n < 0
	if neg {
		n = -n
	}
	if base.Sign() == 0 {
		if neg {
			return nil, errDivZero
		}
		if n == 0 {
			return big.NewRat(1, 1), nil
		}
		return new(big.Rat), nil
	}
	bits := max(base.Num().BitLen(), base.Denom().BitLen())
	if bits > 1 && int64(bits-1)*n > maxBits {
		return nil, errTooBig
	}
	num := new(big.Int).Exp(base.Num(), big.NewInt(n), nil)
	den := new(big.Int).Exp(base.Denom(), big.NewInt(n), nil)
	if neg {
		num, den = den, num
	}
	if den.Sign() < 0 {
		num.Neg(num)
		den.Neg(den)
	}
	v := new(big.Rat).SetFrac(num, den)
	return v, checkBits(v)
}

// primary := number | '(' expr ')' | '{' expr '}' | '[' expr ']' | \frac{a}{b}
func (p *parser) primary() (*big.Rat, error) {
	p.space()
	if p.i >= len(p.s) {
		return nil, errors.New("unexpected end of expression")
	}
	c := p.s[p.i]
	switch {
	case c == '(' || c == '[' || (c == '{' && p.mode == modeMath):
		closer := map[byte]byte{'(': ')', '[': ']', '{': '}'}[c]
		p.i++
		v, err := p.expr()
		if err != nil {
			return nil, err
		}
		p.space()
		if p.i >= len(p.s) || p.s[p.i] != closer {
			return nil, fmt.Errorf("missing %q", closer)
		}
		p.i++
		return v, nil
	case c >= '0' && c <= '9' || (c == '.' && p.mode == modeMath):
		return p.number()
	case c == '\\' && p.mode == modeMath:
		return p.command()
	}
	return nil, fmt.Errorf("unexpected %q at offset %d", p.rest(), p.i)
}

// command handles \frac, \dfrac and \tfrac with braced or single-digit arguments.
func (p *parser) command() (*big.Rat, error) {
	j := p.i + 1
	for j < len(p.s) && isLetterAt(p.s, j) {
		j++
	}
	name := p.s[p.i+1 : j]
	if name != "frac" && name != "dfrac" && name != "tfrac" {
		return nil, fmt.Errorf("unsupported command \\%s", name)
	}
	p.i = j
	if err := p.enter(); err != nil {
		return nil, err
	}
	defer p.leave()
	num, err := p.fracArg()
	if err != nil {
		return nil, err
	}
	den, err := p.fracArg()
	if err != nil {
		return nil, err
	}
	if den.Sign() == 0 {
		return nil, errDivZero
	}
	v := new(big.Rat).Quo(num, den)
	return v, checkBits(v)
}

func (p *parser) fracArg() (*big.Rat, error) {
	p.space()
	if p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' { // \frac12
		v := new(big.Rat).SetInt64(int64(p.s[p.i] - '0'))
		p.i++
		return v, nil
	}
	if p.i >= len(p.s) || p.s[p.i] != '{' {
		return nil, errors.New(`\frac needs {numerator}{denominator}`)
	}
	return p.primary()
}

// number reads a literal. Math mode: 12, 1,234,567, 3.25, .5, 6.02e23. Countdown mode: digits.
func (p *parser) number() (*big.Rat, error) {
	start := p.i
	var digits strings.Builder
	intDigits := 0
	for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
		digits.WriteByte(p.s[p.i])
		p.i++
		intDigits++
	}
	if p.mode == modeCountdown {
		if digits.Len() > maxDigits {
			return nil, errTooBig
		}
		n, _ := new(big.Int).SetString(digits.String(), 10)
		p.used = append(p.used, n)
		return new(big.Rat).SetInt(n), nil
	}
	// Thousands separators: only groups of exactly three digits after a first group of 1-3.
	if intDigits >= 1 && intDigits <= 3 {
		for p.i+3 < len(p.s) && p.s[p.i] == ',' && allDigits(p.s[p.i+1:p.i+4]) && !digitAt(p.s, p.i+4) {
			digits.WriteString(p.s[p.i+1 : p.i+4])
			p.i += 4
		}
	}
	frac := 0
	if p.i < len(p.s) && p.s[p.i] == '.' && digitAt(p.s, p.i+1) {
		p.i++
		for p.i < len(p.s) && p.s[p.i] >= '0' && p.s[p.i] <= '9' {
			digits.WriteByte(p.s[p.i])
			p.i++
			frac++
		}
	}
	if digits.Len() == 0 {
		return nil, fmt.Errorf("bad number at offset %d", start)
	}
	if digits.Len() > maxDigits {
		return nil, errTooBig
	}
	exp := 0
	if p.i < len(p.s) && (p.s[p.i] == 'e' || p.s[p.i] == 'E') {
		j := p.i + 1
		sign := 1
		if j < len(p.s) && (p.s[j] == '+' || p.s[j] == '-') {
			if p.s[j] == '-' {
				sign = -1
			}
			j++
		}
		k := j
		for k < len(p.s) && p.s[k] >= '0' && p.s[k] <= '9' && k-j <= 6 {
			k++
		}
		if k > j { // a real exponent; otherwise the 'e' belongs to what follows
			if k-j > 4 || digitAt(p.s, k) {
				return nil, errTooBig
			}
			e := 0
			for _, d := range p.s[j:k] {
				e = e*10 + int(d-'0')
			}
			if e > maxExponent {
				return nil, errTooBig
			}
			exp = sign * e
			p.i = k
		}
	}
	n, _ := new(big.Int).SetString(digits.String(), 10)
	scale := exp - frac
	v := new(big.Rat).SetInt(n)
	if scale != 0 {
		if scale > maxExponent || scale < -maxExponent-maxDigits {
			return nil, errTooBig
		}
		a := scale
		if a < 0 {
			a = -a
		}
		pow := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(a)), nil)
		if scale > 0 {
			v.Mul(v, new(big.Rat).SetInt(pow))
		} else {
			v.Quo(v, new(big.Rat).SetInt(pow))
		}
	}
	return v, checkBits(v)
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return len(s) > 0
}

func digitAt(s string, i int) bool { return i < len(s) && s[i] >= '0' && s[i] <= '9' }

func checkBits(v *big.Rat) error {
	if v.Num().BitLen() > maxBits || v.Denom().BitLen() > maxBits {
		return errTooBig
	}
	return nil
}

// ratString prints a value for feedback: an integer, a short decimal, or a fraction.
func ratString(v *big.Rat) string {
	if v.IsInt() {
		s := v.Num().String()
		return clip(s, 40)
	}
	if f, exact := v.Float64(); exact || v.Denom().BitLen() > 64 {
		return clip(fmt.Sprintf("%g", f), 40)
	}
	return clip(v.RatString(), 40)
}
