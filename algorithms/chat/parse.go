package chat

import (
	"fmt"
	"strconv"
)

// The statements and expressions of the Jinja subset chat templates use, parsed with Jinja2's
// precedence: conditional < or < and < not < comparisons/in < + - < ~ < * / // % < ** < unary,
// with filters (|), tests (is) and calls binding to the primary.

type node interface{}

type (
	textNode   struct{ s string }
	outputNode struct {
		e    expr
		line int
	}
	ifNode struct {
		conds  []expr
		bodies [][]node
		els    []node
	}
	forNode struct {
		targets []string
		iter    expr
		cond    expr
		body    []node
		els     []node
		line    int
	}
	setNode struct {
		targets []string // one name, or several to unpack
		ns      string   // set ns.attr = ...: the namespace's name, targets[0] the attribute
		e       expr
		body    []node // {% set x %}...{% endset %}
		line    int
	}
	macroNode struct {
		name     string
		params   []string
		defaults []expr // parallel to params; nil: required
		body     []node
	}
	generationNode struct{ body []node }
	loopCtlNode    struct{ brk bool }
)

type expr interface{}

type (
	literal  struct{ v value }
	nameExpr struct {
		name string
		line int
	}
	attrExpr struct {
		x    expr
		name string
	}
	itemExpr  struct{ x, key expr }
	sliceExpr struct{ x, lo, hi, step expr }
	callExpr  struct {
		fn     expr
		args   []expr
		kwargs []kwarg
		line   int
	}
	filterExpr struct {
		x      expr
		name   string
		args   []expr
		kwargs []kwarg
		line   int
	}
	testExpr struct {
		x    expr
		name string
		args []expr
		not  bool
		line int
	}
	binExpr struct {
		op   string
		l, r expr
		line int
	}
	unExpr struct {
		op string
		x  expr
	}
	condExpr  struct{ then, cond, els expr }
	listExpr  struct{ items []expr }
	tupleExpr struct{ items []expr }
	dictExpr  struct{ keys, vals []expr }
)

type kwarg struct {
	name string
	e    expr
}

type parser struct {
	segs []segment
	i    int
}

func parseTemplate(src string) ([]node, error) {
	segs, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{segs: segs}
	body, end, err := p.block()
	if err != nil {
		return nil, err
	}
	if end != "" {
		return nil, fmt.Errorf("line %d: unexpected {%% %s %%}", p.segs[p.i-1].line, end)
	}
	return body, nil
}

// block parses nodes up to a tag that closes or continues an enclosing block (endif, elif, else,
// endfor, ...), which it consumes and names; "" at the end of the template.
func (p *parser) block() ([]node, string, error) {
	var out []node
	for p.i < len(p.segs) {
		s := p.segs[p.i]
		p.i++
		switch s.kind {
		case segText:
			out = append(out, textNode{s.text})
		case segOutput:
			ts := &tokens{toks: s.toks, line: s.line}
			e, err := ts.parseExpr()
			if err != nil {
				return nil, "", err
			}
			if err := ts.done(); err != nil {
				return nil, "", err
			}
			out = append(out, outputNode{e, s.line})
		case segTag:
			if len(s.toks) == 0 || s.toks[0].kind != tokName {
				return nil, "", fmt.Errorf("line %d: empty or malformed tag", s.line)
			}
			ts := &tokens{toks: s.toks[1:], line: s.line}
			switch kw := s.toks[0].s; kw {
			case "endif", "elif", "else", "endfor", "endset", "endmacro", "endgeneration":
				p.i-- // the caller reads the tag's tokens
				return out, kw, nil
			case "if":
				n, err := p.parseIf(ts)
				if err != nil {
					return nil, "", err
				}
				out = append(out, n)
			case "for":
				n, err := p.parseFor(ts)
				if err != nil {
					return nil, "", err
				}
				out = append(out, n)
			case "set":
				n, err := p.parseSet(ts)
				if err != nil {
					return nil, "", err
				}
				out = append(out, n)
			case "macro":
				n, err := p.parseMacro(ts)
				if err != nil {
					return nil, "", err
				}
				out = append(out, n)
			case "generation":
				body, err := p.until(ts, "endgeneration")
				if err != nil {
					return nil, "", err
				}
				out = append(out, generationNode{body})
			case "break", "continue":
				if err := ts.done(); err != nil {
					return nil, "", err
				}
				out = append(out, loopCtlNode{brk: kw == "break"})
			default:
				return nil, "", fmt.Errorf("line %d: unsupported tag {%% %s %%} (supported: if, for, set, macro, generation, break, continue)", s.line, kw)
			}
		}
	}
	return out, "", nil
}

// tagTokens returns the tokens after the keyword of the tag block() stopped at, and moves past it.
func (p *parser) tagTokens() *tokens {
	s := p.segs[p.i]
	p.i++
	return &tokens{toks: s.toks[1:], line: s.line}
}

// until parses a body that must end with the tag end (after ts, the opening tag, is complete).
func (p *parser) until(ts *tokens, end string) ([]node, error) {
	if err := ts.done(); err != nil {
		return nil, err
	}
	body, got, err := p.block()
	if err != nil {
		return nil, err
	}
	if got != end {
		return nil, fmt.Errorf("line %d: missing {%% %s %%}", ts.line, end)
	}
	return body, p.tagTokens().done()
}

func (p *parser) parseIf(ts *tokens) (node, error) {
	n := ifNode{}
	for {
		cond, err := ts.parseExpr()
		if err != nil {
			return nil, err
		}
		if err := ts.done(); err != nil {
			return nil, err
		}
		body, end, err := p.block()
		if err != nil {
			return nil, err
		}
		n.conds, n.bodies = append(n.conds, cond), append(n.bodies, body)
		switch end {
		case "elif":
			ts = p.tagTokens()
			continue
		case "else":
			if err := p.tagTokens().done(); err != nil {
				return nil, err
			}
			els, end, err := p.block()
			if err != nil {
				return nil, err
			}
			if end != "endif" {
				return nil, fmt.Errorf("line %d: if without endif", ts.line)
			}
			n.els = els
			return n, p.tagTokens().done()
		case "endif":
			return n, p.tagTokens().done()
		}
		return nil, fmt.Errorf("line %d: if without endif", ts.line)
	}
}

func (p *parser) parseFor(ts *tokens) (node, error) {
	n := forNode{line: ts.line}
	for {
		t, err := ts.name()
		if err != nil {
			return nil, err
		}
		n.targets = append(n.targets, t)
		if !ts.accept(",") {
			break
		}
	}
	if !ts.acceptName("in") {
		return nil, fmt.Errorf("line %d: for without in", ts.line)
	}
	var err error
	if n.iter, err = ts.parseOr(); err != nil { // no conditional: "if" filters the loop
		return nil, err
	}
	if ts.acceptName("if") {
		if n.cond, err = ts.parseExpr(); err != nil {
			return nil, err
		}
	}
	if ts.acceptName("recursive") {
		return nil, fmt.Errorf("line %d: recursive loops are not supported", ts.line)
	}
	if err := ts.done(); err != nil {
		return nil, err
	}
	body, end, err := p.block()
	if err != nil {
		return nil, err
	}
	n.body = body
	if end == "else" {
		if err := p.tagTokens().done(); err != nil {
			return nil, err
		}
		if n.els, end, err = p.block(); err != nil {
			return nil, err
		}
	}
	if end != "endfor" {
		return nil, fmt.Errorf("line %d: for without endfor", ts.line)
	}
	return n, p.tagTokens().done()
}

func (p *parser) parseSet(ts *tokens) (node, error) {
	n := setNode{line: ts.line}
	first, err := ts.name()
	if err != nil {
		return nil, err
	}
	if ts.accept(".") {
		attr, err := ts.name()
		if err != nil {
			return nil, err
		}
		n.ns, n.targets = first, []string{attr}
	} else {
		n.targets = []string{first}
		for ts.accept(",") {
			t, err := ts.name()
			if err != nil {
				return nil, err
			}
			n.targets = append(n.targets, t)
		}
	}
	if !ts.accept("=") {
		if n.ns != "" || len(n.targets) > 1 {
			return nil, fmt.Errorf("line %d: set without =", ts.line)
		}
		body, err := p.until(ts, "endset")
		n.body = body
		return n, err
	}
	if n.e, err = ts.parseTupleOrExpr(); err != nil {
		return nil, err
	}
	return n, ts.done()
}

func (p *parser) parseMacro(ts *tokens) (node, error) {
	name, err := ts.name()
	if err != nil {
		return nil, err
	}
	n := macroNode{name: name}
	if err := ts.expect("("); err != nil {
		return nil, err
	}
	for !ts.accept(")") {
		if len(n.params) > 0 {
			if err := ts.expect(","); err != nil {
				return nil, err
			}
		}
		pn, err := ts.name()
		if err != nil {
			return nil, err
		}
		var def expr
		if ts.accept("=") {
			if def, err = ts.parseExpr(); err != nil {
				return nil, err
			}
		}
		n.params, n.defaults = append(n.params, pn), append(n.defaults, def)
	}
	n.body, err = p.until(ts, "endmacro")
	return n, err
}

// tokens is a cursor over one tag's or output's tokens.
type tokens struct {
	toks []token
	i    int
	line int
}

func (t *tokens) peek() (token, bool) {
	if t.i < len(t.toks) {
		return t.toks[t.i], true
	}
	return token{}, false
}

func (t *tokens) accept(op string) bool {
	if k, ok := t.peek(); ok && k.kind == tokOp && k.s == op {
		t.i++
		return true
	}
	return false
}

func (t *tokens) acceptName(n string) bool {
	if k, ok := t.peek(); ok && k.kind == tokName && k.s == n {
		t.i++
		return true
	}
	return false
}

func (t *tokens) expect(op string) error {
	if !t.accept(op) {
		return t.errorf("expected %q", op)
	}
	return nil
}

func (t *tokens) name() (string, error) {
	if k, ok := t.peek(); ok && k.kind == tokName {
		t.i++
		return k.s, nil
	}
	return "", t.errorf("expected a name")
}

func (t *tokens) done() error {
	if t.i < len(t.toks) {
		return t.errorf("unexpected %s", t.toks[t.i])
	}
	return nil
}

func (t *tokens) errorf(format string, args ...any) error {
	at := "end of tag"
	if k, ok := t.peek(); ok {
		at = k.String()
	}
	return fmt.Errorf("line %d: %s at %s", t.line, fmt.Sprintf(format, args...), at)
}

// parseTupleOrExpr: "a, b" (an implicit tuple, as in set x = a, b) or one expression.
func (t *tokens) parseTupleOrExpr() (expr, error) {
	e, err := t.parseExpr()
	if err != nil || !t.accept(",") {
		return e, err
	}
	items := []expr{e}
	for {
		if _, ok := t.peek(); !ok {
			break
		}
		e, err := t.parseExpr()
		if err != nil {
			return nil, err
		}
		items = append(items, e)
		if !t.accept(",") {
			break
		}
	}
	return tupleExpr{items}, nil
}

func (t *tokens) parseExpr() (expr, error) {
	e, err := t.parseOr()
	if err != nil {
		return nil, err
	}
	for t.acceptName("if") {
		cond, err := t.parseOr()
		if err != nil {
			return nil, err
		}
		var els expr
		if t.acceptName("else") {
			if els, err = t.parseExpr(); err != nil {
				return nil, err
			}
		}
		e = condExpr{then: e, cond: cond, els: els}
	}
	return e, nil
}

func (t *tokens) parseOr() (expr, error) {
	return t.binary(t.parseAnd, "or")
}

func (t *tokens) parseAnd() (expr, error) {
	return t.binary(t.parseNot, "and")
}

func (t *tokens) binary(next func() (expr, error), names ...string) (expr, error) {
	l, err := next()
	if err != nil {
		return nil, err
	}
	for {
		op := ""
		if k, ok := t.peek(); ok {
			for _, n := range names {
				if k.s == n && (k.kind == tokOp || k.kind == tokName && (n == "or" || n == "and")) {
					op = n
				}
			}
		}
		if op == "" {
			return l, nil
		}
		t.i++
		r, err := next()
		if err != nil {
			return nil, err
		}
		l = binExpr{op: op, l: l, r: r, line: t.line}
	}
}

func (t *tokens) parseNot() (expr, error) {
	if t.acceptName("not") {
		x, err := t.parseNot()
		return unExpr{op: "not", x: x}, err
	}
	return t.parseCompare()
}

func (t *tokens) parseCompare() (expr, error) {
	l, err := t.parseMath1()
	if err != nil {
		return nil, err
	}
	for {
		op := ""
		k, ok := t.peek()
		switch {
		case !ok:
		case k.kind == tokOp && (k.s == "==" || k.s == "!=" || k.s == "<" || k.s == ">" || k.s == "<=" || k.s == ">="):
			op = k.s
			t.i++
		case k.kind == tokName && k.s == "in":
			op = "in"
			t.i++
		case k.kind == tokName && k.s == "not" && t.i+1 < len(t.toks) && t.toks[t.i+1].kind == tokName && t.toks[t.i+1].s == "in":
			op = "not in"
			t.i += 2
		}
		if op == "" {
			return l, nil
		}
		r, err := t.parseMath1()
		if err != nil {
			return nil, err
		}
		l = binExpr{op: op, l: l, r: r, line: t.line}
	}
}

func (t *tokens) parseMath1() (expr, error)  { return t.binary(t.parseConcat, "+", "-") }
func (t *tokens) parseConcat() (expr, error) { return t.binary(t.parseMath2, "~") }
func (t *tokens) parseMath2() (expr, error) {
	return t.binary(t.parsePow, "*", "/", "//", "%")
}
func (t *tokens) parsePow() (expr, error) { return t.binary(t.parseUnary, "**") }

func (t *tokens) parseUnary() (expr, error) {
	if t.accept("-") {
		x, err := t.parseUnary()
		return unExpr{op: "-", x: x}, err
	}
	if t.accept("+") {
		return t.parseUnary()
	}
	x, err := t.parsePrimary()
	if err != nil {
		return nil, err
	}
	if x, err = t.parsePostfix(x); err != nil {
		return nil, err
	}
	return t.parseFilters(x)
}

func (t *tokens) parsePrimary() (expr, error) {
	k, ok := t.peek()
	if !ok {
		return nil, t.errorf("expected an expression")
	}
	t.i++
	switch k.kind {
	case tokString:
		s := k.s
		for { // adjacent literals concatenate
			n, ok := t.peek()
			if !ok || n.kind != tokString {
				break
			}
			s += n.s
			t.i++
		}
		return literal{s}, nil
	case tokInt:
		n, err := strconv.ParseInt(k.s, 10, 64)
		if err != nil {
			return nil, t.errorf("bad integer %s", k.s)
		}
		return literal{n}, nil
	case tokFloat:
		f, err := strconv.ParseFloat(k.s, 64)
		if err != nil {
			return nil, t.errorf("bad number %s", k.s)
		}
		return literal{f}, nil
	case tokName:
		switch k.s {
		case "true", "True":
			return literal{true}, nil
		case "false", "False":
			return literal{false}, nil
		case "none", "None":
			return literal{nil}, nil
		}
		return nameExpr{k.s, k.line}, nil
	}
	switch k.s {
	case "(":
		if t.accept(")") {
			return tupleExpr{}, nil
		}
		e, err := t.parseExpr()
		if err != nil {
			return nil, err
		}
		if t.accept(")") {
			return e, nil
		}
		items := []expr{e}
		for t.accept(",") {
			if t.accept(")") {
				return tupleExpr{items}, nil
			}
			e, err := t.parseExpr()
			if err != nil {
				return nil, err
			}
			items = append(items, e)
		}
		return tupleExpr{items}, t.expect(")")
	case "[":
		var items []expr
		for !t.accept("]") {
			if len(items) > 0 {
				if err := t.expect(","); err != nil {
					return nil, err
				}
				if t.accept("]") {
					break
				}
			}
			e, err := t.parseExpr()
			if err != nil {
				return nil, err
			}
			items = append(items, e)
		}
		return listExpr{items}, nil
	case "{":
		d := dictExpr{}
		for !t.accept("}") {
			if len(d.keys) > 0 {
				if err := t.expect(","); err != nil {
					return nil, err
				}
				if t.accept("}") {
					break
				}
			}
			k, err := t.parseExpr()
			if err != nil {
				return nil, err
			}
			if err := t.expect(":"); err != nil {
				return nil, err
			}
			v, err := t.parseExpr()
			if err != nil {
				return nil, err
			}
			d.keys, d.vals = append(d.keys, k), append(d.vals, v)
		}
		return d, nil
	}
	t.i--
	return nil, t.errorf("unexpected token")
}

func (t *tokens) parsePostfix(x expr) (expr, error) {
	for {
		switch {
		case t.accept("."):
			k, ok := t.peek()
			if !ok || (k.kind != tokName && k.kind != tokInt) {
				return nil, t.errorf("expected an attribute name")
			}
			t.i++
			if k.kind == tokInt {
				n, _ := strconv.ParseInt(k.s, 10, 64)
				x = itemExpr{x, literal{n}}
			} else {
				x = attrExpr{x, k.s}
			}
		case t.accept("["):
			var parts [3]expr
			n, colon := 0, false
			for {
				if k, ok := t.peek(); ok && !(k.kind == tokOp && (k.s == ":" || k.s == "]")) {
					e, err := t.parseExpr()
					if err != nil {
						return nil, err
					}
					parts[n] = e
				}
				if t.accept(":") {
					colon = true
					if n++; n > 2 {
						return nil, t.errorf("bad slice")
					}
					continue
				}
				break
			}
			if err := t.expect("]"); err != nil {
				return nil, err
			}
			if colon {
				x = sliceExpr{x, parts[0], parts[1], parts[2]}
			} else {
				x = itemExpr{x, parts[0]}
			}
		case t.accept("("):
			args, kwargs, err := t.parseArgs()
			if err != nil {
				return nil, err
			}
			x = callExpr{fn: x, args: args, kwargs: kwargs, line: t.line}
		default:
			return x, nil
		}
	}
}

// parseArgs parses call arguments after "(" up to and including ")".
func (t *tokens) parseArgs() ([]expr, []kwarg, error) {
	var args []expr
	var kwargs []kwarg
	for !t.accept(")") {
		if len(args)+len(kwargs) > 0 {
			if err := t.expect(","); err != nil {
				return nil, nil, err
			}
			if t.accept(")") {
				break
			}
		}
		if k, ok := t.peek(); ok && k.kind == tokName && t.i+1 < len(t.toks) && t.toks[t.i+1].kind == tokOp && t.toks[t.i+1].s == "=" {
			t.i += 2
			e, err := t.parseExpr()
			if err != nil {
				return nil, nil, err
			}
			kwargs = append(kwargs, kwarg{k.s, e})
			continue
		}
		e, err := t.parseExpr()
		if err != nil {
			return nil, nil, err
		}
		args = append(args, e)
	}
	return args, kwargs, nil
}

func (t *tokens) parseFilters(x expr) (expr, error) {
	for {
		switch {
		case t.accept("|"):
			name, err := t.name()
			if err != nil {
				return nil, err
			}
			f := filterExpr{x: x, name: name, line: t.line}
			if t.accept("(") {
				if f.args, f.kwargs, err = t.parseArgs(); err != nil {
					return nil, err
				}
			}
			x = f
		case t.acceptName("is"):
			te := testExpr{x: x, not: t.acceptName("not"), line: t.line}
			name, err := t.name()
			if err != nil {
				// "is none" / "is true": keywords lexed as names already; anything else is an error
				return nil, err
			}
			te.name = name
			if t.accept("(") {
				if te.args, _, err = t.parseArgs(); err != nil {
					return nil, err
				}
			} else if k, ok := t.peek(); ok && (k.kind == tokOp && (k.s == "[" || k.s == "{") || k.kind == tokString || k.kind == tokInt || k.kind == tokFloat || k.kind == tokName && k.s != "and" && k.s != "or" && k.s != "if" && k.s != "else" && k.s != "in" && k.s != "not" && k.s != "is") {
				// a test's single argument without parentheses: "is divisibleby 3", "is sameas false"
				arg, err := t.parsePrimary()
				if err != nil {
					return nil, err
				}
				if arg, err = t.parsePostfix(arg); err != nil {
					return nil, err
				}
				te.args = []expr{arg}
			}
			x = te
		default:
			return x, nil
		}
	}
}
