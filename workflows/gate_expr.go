package workflows

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// A gate's when: condition is a small expression over phase metrics, parsed here and never
// executed as code:
//
//	cond    := and { ("or" | "||") and }
//	and     := unary { ("and" | "&&") unary }
//	unary   := ("not" | "!") unary | "(" cond ")" | operand op operand
//	operand := number | metric | PHASE.metric
//	op      := "<" | "<=" | ">" | ">=" | "==" | "!="
//
// A bare metric is the previous phase's; PHASE.metric an earlier phase's (PhaseResult.Metrics).

// condition is a parsed when: expression.
type condition interface {
	eval(vals map[string]float64) bool
	metrics(out []string) []string // the metric names it reads, in order of appearance
}

type operand struct {
	name string // "" for a number
	num  float64
}

func (o operand) value(vals map[string]float64) float64 {
	if o.name == "" {
		return o.num
	}
	return vals[o.name]
}

type comparison struct {
	op   string
	l, r operand
}

func (c comparison) eval(vals map[string]float64) bool {
	l, r := c.l.value(vals), c.r.value(vals)
	switch c.op {
	case "<":
		return l < r
	case "<=":
		return l <= r
	case ">":
		return l > r
	case ">=":
		return l >= r
	case "==":
		return l == r
	default: // "!="
		return l != r
	}
}

func (c comparison) metrics(out []string) []string {
	for _, o := range []operand{c.l, c.r} {
		if o.name != "" {
			out = append(out, o.name)
		}
	}
	return out
}

type logical struct {
	and  bool
	l, r condition
}

func (c logical) eval(vals map[string]float64) bool {
	if c.and {
		return c.l.eval(vals) && c.r.eval(vals)
	}
	return c.l.eval(vals) || c.r.eval(vals)
}

func (c logical) metrics(out []string) []string { return c.r.metrics(c.l.metrics(out)) }

type negation struct{ c condition }

func (c negation) eval(vals map[string]float64) bool { return !c.c.eval(vals) }
func (c negation) metrics(out []string) []string     { return c.c.metrics(out) }

// token is one lexeme of a condition: kind is "num", "name", "op" (comparisons), "and", "or",
// "not", "(", ")" or "end"; pos is its byte offset, for errors.
type token struct {
	kind, text string
	pos        int
}

var (
	numberRE = regexp.MustCompile(`^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?`)
	nameRE   = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?`)
)

// lexCondition splits s into tokens.
func lexCondition(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		rest := s[i:]
		switch {
		case rest[0] == ' ' || rest[0] == '\t':
			i++
			continue
		case numberRE.MatchString(rest):
			m := numberRE.FindString(rest)
			toks = append(toks, token{"num", m, i})
			i += len(m)
			continue
		case nameRE.MatchString(rest):
			m := nameRE.FindString(rest)
			kind := "name"
			if k := strings.ToLower(m); k == "and" || k == "or" || k == "not" {
				kind = k
			}
			toks = append(toks, token{kind, m, i})
			i += len(m)
			continue
		}
		op := ""
		for _, o := range []string{"<=", ">=", "==", "!=", "&&", "||", "<", ">", "!", "(", ")"} {
			if strings.HasPrefix(rest, o) {
				op = o
				break
			}
		}
		switch op {
		case "":
			hint := ""
			if rest[0] == '=' {
				hint = ` (compare with ==)`
			}
			return nil, fmt.Errorf("at %d: unexpected %q%s", i, rest[:1], hint)
		case "&&":
			toks = append(toks, token{"and", op, i})
		case "||":
			toks = append(toks, token{"or", op, i})
		case "!":
			toks = append(toks, token{"not", op, i})
		case "(", ")":
			toks = append(toks, token{op, op, i})
		default:
			toks = append(toks, token{"op", op, i})
		}
		i += len(op)
	}
	return append(toks, token{"end", "", len(s)}), nil
}

// condParser is a recursive-descent parser over the tokens.
type condParser struct {
	toks []token
	i    int
}

// parseCondition parses a when: expression; errors give the byte offset and what was expected.
func parseCondition(s string) (condition, error) {
	if strings.TrimSpace(s) == "" {
		return nil, fmt.Errorf("empty condition")
	}
	toks, err := lexCondition(s)
	if err != nil {
		return nil, err
	}
	p := &condParser{toks: toks}
	c, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != "end" {
		return nil, fmt.Errorf("at %d: unexpected %q after a complete condition (join conditions with and, or)", t.pos, t.text)
	}
	return c, nil
}

func (p *condParser) peek() token { return p.toks[p.i] }
func (p *condParser) take() token { t := p.toks[p.i]; p.i++; return t }

func (p *condParser) or() (condition, error) {
	l, err := p.and()
	for err == nil && p.peek().kind == "or" {
		p.take()
		var r condition
		if r, err = p.and(); err == nil {
			l = logical{and: false, l: l, r: r}
		}
	}
	return l, err
}

func (p *condParser) and() (condition, error) {
	l, err := p.unary()
	for err == nil && p.peek().kind == "and" {
		p.take()
		var r condition
		if r, err = p.unary(); err == nil {
			l = logical{and: true, l: l, r: r}
		}
	}
	return l, err
}

func (p *condParser) unary() (condition, error) {
	switch p.peek().kind {
	case "not":
		p.take()
		c, err := p.unary()
		return negation{c}, err
	case "(":
		p.take()
		c, err := p.or()
		if err != nil {
			return nil, err
		}
		if t := p.take(); t.kind != ")" {
			return nil, fmt.Errorf("at %d: want ) to close the ( , got %s", t.pos, describeToken(t))
		}
		return c, nil
	}
	l, err := p.operand()
	if err != nil {
		return nil, err
	}
	op := p.take()
	if op.kind != "op" {
		return nil, fmt.Errorf("at %d: want a comparison (<, <=, >, >=, ==, !=) after %q, got %s", op.pos, l.text(), describeToken(op))
	}
	r, err := p.operand()
	if err != nil {
		return nil, err
	}
	return comparison{op: op.text, l: l, r: r}, nil
}

func (p *condParser) operand() (operand, error) {
	t := p.take()
	switch t.kind {
	case "num":
		v, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return operand{}, fmt.Errorf("at %d: %q: %w", t.pos, t.text, err)
		}
		return operand{num: v}, nil
	case "name":
		return operand{name: t.text}, nil
	}
	return operand{}, fmt.Errorf("at %d: want a number or a metric name, got %s", t.pos, describeToken(t))
}

func (o operand) text() string {
	if o.name != "" {
		return o.name
	}
	return strconv.FormatFloat(o.num, 'g', -1, 64)
}

func describeToken(t token) string {
	if t.kind == "end" {
		return "the end"
	}
	return strconv.Quote(t.text)
}
