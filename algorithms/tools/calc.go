package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
)

// Calc limits: an expression, its numbers and its powers stay small enough that no call can run
// for long or allocate much, whatever the policy writes.
const (
	calcMaxExpr   = 512  // characters of an expression
	calcMaxDigits = 2000 // digits of any intermediate numerator or denominator
	calcMaxPower  = 64   // largest |exponent| of ^
)

// CalcTool is the built-in `calc`: exact arithmetic on integers and decimals of any size with
// + - * / ^ (integer exponents) and parentheses. The result is an integer, a terminating decimal,
// or an exact fraction "p/q".
func CalcTool() Tool {
	return Tool{
		Name:        "calc",
		Description: "exact arithmetic: + - * / ^ and parentheses on integers and decimals of any size",
		Schema: json.RawMessage(`{"type":"object","properties":{"expr":{"type":"string","minLength":1,"maxLength":512}},
			"required":["expr"],"additionalProperties":false}`),
		Run: func(_ context.Context, args json.RawMessage) (string, error) {
			var a struct {
				Expr string `json:"expr"`
			}
			if err := json.Unmarshal(args, &a); err != nil {
				return "", err
			}
			v, err := Calc(a.Expr)
			if err != nil {
				return "", err
			}
			return FormatRat(v), nil
		},
	}
}

// Calc evaluates expr exactly.
func Calc(expr string) (*big.Rat, error) {
	if len(expr) > calcMaxExpr {
		return nil, fmt.Errorf("calc: expression of %d characters: at most %d", len(expr), calcMaxExpr)
	}
	p := &calcParser{s: expr}
	v, err := p.expr()
	if err != nil {
		return nil, err
	}
	p.space()
	if p.i < len(p.s) {
		return nil, fmt.Errorf("calc: unexpected %q at %d", p.s[p.i:p.i+1], p.i)
	}
	return v, nil
}

// FormatRat writes an integer as such, a terminating fraction as a decimal, and the rest as p/q.
func FormatRat(v *big.Rat) string {
	if v.IsInt() {
		return v.Num().String()
	}
	den := new(big.Int).Set(v.Denom())
	digits := 0
	for _, f := range []int64{2, 5} {
		fb := big.NewInt(f)
		for new(big.Int).Mod(den, fb).Sign() == 0 {
			den.Quo(den, fb)
			digits++
		}
	}
	if den.Cmp(big.NewInt(1)) == 0 {
		s := v.FloatString(digits)
		if strings.Contains(s, ".") {
			s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
		}
		return s
	}
	return v.String()
}

type calcParser struct {
	s string
	i int
}

func (p *calcParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
}

func (p *calcParser) peek() byte {
	p.space()
	if p.i < len(p.s) {
		return p.s[p.i]
	}
	return 0
}

func (p *calcParser) expr() (*big.Rat, error) {
	v, err := p.term()
	for err == nil {
		op := p.peek()
		if op != '+' && op != '-' {
			return v, nil
		}
		p.i++
		var r *big.Rat
		if r, err = p.term(); err == nil {
			if op == '+' {
				v = new(big.Rat).Add(v, r)
			} else {
				v = new(big.Rat).Sub(v, r)
			}
			err = checkSize(v)
		}
	}
	return nil, err
}

func (p *calcParser) term() (*big.Rat, error) {
	v, err := p.power()
	for err == nil {
		op := p.peek()
		if op != '*' && op != '/' {
			return v, nil
		}
		p.i++
		var r *big.Rat
		if r, err = p.power(); err == nil {
			if op == '/' {
				if r.Sign() == 0 {
					return nil, fmt.Errorf("calc: division by zero")
				}
				v = new(big.Rat).Quo(v, r)
			} else {
				v = new(big.Rat).Mul(v, r)
			}
			err = checkSize(v)
		}
	}
	return nil, err
}

// power is unary (^ unary)?, right-associative.
func (p *calcParser) power() (*big.Rat, error) {
	base, err := p.unary()
	if err != nil || p.peek() != '^' {
		return base, err
	}
	p.i++
	exp, err := p.power()
	if err != nil {
		return nil, err
	}
	if !exp.IsInt() || exp.Num().CmpAbs(big.NewInt(calcMaxPower)) > 0 {
		return nil, fmt.Errorf("calc: exponent %s: an integer of magnitude at most %d", exp.RatString(), calcMaxPower)
	}
	n := exp.Num().Int64()
	if n < 0 && base.Sign() == 0 {
		return nil, fmt.Errorf("calc: division by zero")
	}
	out := big.NewRat(1, 1)
	for range abs(n) {
		out.Mul(out, base)
		if err := checkSize(out); err != nil {
			return nil, err
		}
	}
	if n < 0 {
		out.Inv(out)
	}
	return out, nil
}

func abs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

func (p *calcParser) unary() (*big.Rat, error) {
	switch p.peek() {
	case '-':
		p.i++
		v, err := p.unary()
		if err != nil {
			return nil, err
		}
		return new(big.Rat).Neg(v), nil
	case '+':
		p.i++
		return p.unary()
	case '(':
		p.i++
		v, err := p.expr()
		if err != nil {
			return nil, err
		}
		if p.peek() != ')' {
			return nil, fmt.Errorf("calc: missing ) at %d", p.i)
		}
		p.i++
		return v, nil
	}
	start := p.i
	for p.i < len(p.s) && (p.s[p.i] >= '0' && p.s[p.i] <= '9' || p.s[p.i] == '.' || p.s[p.i] == '_') {
		p.i++
	}
	if start == p.i {
		if p.i >= len(p.s) {
			return nil, fmt.Errorf("calc: expression ends where a number was expected")
		}
		return nil, fmt.Errorf("calc: unexpected %q at %d", p.s[p.i:p.i+1], p.i)
	}
	lit := strings.ReplaceAll(p.s[start:p.i], "_", "")
	if len(lit) > calcMaxDigits {
		return nil, fmt.Errorf("calc: number of %d digits: at most %d", len(lit), calcMaxDigits)
	}
	v, ok := new(big.Rat).SetString(lit)
	if !ok || strings.Count(lit, ".") > 1 {
		return nil, fmt.Errorf("calc: bad number %q", p.s[start:p.i])
	}
	return v, nil
}

func checkSize(v *big.Rat) error {
	// bits·log10(2) ≈ digits
	if float64(v.Num().BitLen()+v.Denom().BitLen())*0.30103 > calcMaxDigits {
		return fmt.Errorf("calc: result beyond %d digits", calcMaxDigits)
	}
	return nil
}
