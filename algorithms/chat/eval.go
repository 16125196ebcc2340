package chat

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

type scope struct {
	vars   map[string]value
	parent *scope
}

func (s *scope) lookup(name string) (value, bool) {
	for ; s != nil; s = s.parent {
		if v, ok := s.vars[name]; ok {
			return v, true
		}
	}
	return nil, false
}

// evaluator renders one template call.
type evaluator struct {
	out  strings.Builder
	gen  [][2]int      // byte spans of {% generation %} bodies in out
	msgs map[*dict]int // the conversation's message dicts, to name the message an error is about
	root *scope
}

// loopSignal is how break and continue unwind to their loop.
type loopSignal struct{ brk bool }

func (loopSignal) Error() string { return "break or continue outside a loop" }

// TemplateError is an error the template raised itself (raise_exception), or one in evaluating
// it; Message is the index of the conversation message being rendered when it happened, or -1.
type TemplateError struct {
	Message int
	Err     error
}

func (e *TemplateError) Error() string {
	if e.Message >= 0 {
		return fmt.Sprintf("message %d: %v", e.Message, e.Err)
	}
	return e.Err.Error()
}

func (e *TemplateError) Unwrap() error { return e.Err }

func (ev *evaluator) exec(nodes []node, sc *scope) error {
	for _, n := range nodes {
		if err := ev.execOne(n, sc); err != nil {
			return err
		}
	}
	return nil
}

func (ev *evaluator) execOne(n node, sc *scope) error {
	switch n := n.(type) {
	case textNode:
		ev.out.WriteString(n.s)
	case outputNode:
		v, err := ev.eval(n.e, sc)
		if err != nil {
			return err
		}
		ev.out.WriteString(str(v))
	case ifNode:
		for i, c := range n.conds {
			v, err := ev.eval(c, sc)
			if err != nil {
				return err
			}
			if truthy(v) {
				return ev.exec(n.bodies[i], sc)
			}
		}
		return ev.exec(n.els, sc)
	case forNode:
		return ev.execFor(n, sc)
	case setNode:
		var v value
		if n.body != nil {
			sub := &evaluator{msgs: ev.msgs, root: ev.root}
			if err := sub.exec(n.body, sc); err != nil {
				return err
			}
			v = sub.out.String()
		} else {
			var err error
			if v, err = ev.eval(n.e, sc); err != nil {
				return err
			}
		}
		if n.ns != "" {
			nsv, _ := sc.lookup(n.ns)
			ns, ok := nsv.(*namespace)
			if !ok {
				return fmt.Errorf("line %d: cannot assign attribute on non-namespace object %s", n.line, n.ns)
			}
			ns.d.set(n.targets[0], v)
			return nil
		}
		if len(n.targets) == 1 {
			sc.vars[n.targets[0]] = v
			return nil
		}
		items, err := iterate(v)
		if err != nil || len(items) != len(n.targets) {
			return fmt.Errorf("line %d: cannot unpack %s into %d names", n.line, typeName(v), len(n.targets))
		}
		for i, t := range n.targets {
			sc.vars[t] = items[i]
		}
	case macroNode:
		sc.vars[n.name] = ev.macro(n, sc)
	case generationNode:
		start := ev.out.Len()
		if err := ev.exec(n.body, sc); err != nil {
			return err
		}
		ev.gen = append(ev.gen, [2]int{start, ev.out.Len()})
	case loopCtlNode:
		return loopSignal{brk: n.brk}
	}
	return nil
}

func (ev *evaluator) execFor(n forNode, sc *scope) error {
	it, err := ev.eval(n.iter, sc)
	if err != nil {
		return err
	}
	items, err := iterate(it)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.line, err)
	}
	body := &scope{vars: map[string]value{}, parent: sc}
	bind := func(item value) error {
		if len(n.targets) == 1 {
			body.vars[n.targets[0]] = item
			return nil
		}
		parts, err := iterate(item)
		if err != nil || len(parts) != len(n.targets) {
			return fmt.Errorf("line %d: cannot unpack %s into %d names", n.line, typeName(item), len(n.targets))
		}
		for i, t := range n.targets {
			body.vars[t] = parts[i]
		}
		return nil
	}
	if n.cond != nil { // the filter sees each item, and loop counts only the kept ones
		var kept []value
		for _, item := range items {
			if err := bind(item); err != nil {
				return err
			}
			c, err := ev.eval(n.cond, body)
			if err != nil {
				return err
			}
			if truthy(c) {
				kept = append(kept, item)
			}
		}
		items = kept
	}
	if len(items) == 0 {
		return ev.exec(n.els, sc)
	}
	loop := newDict()
	loopVal := &namespace{d: loop}
	for i, item := range items {
		body.vars = map[string]value{"loop": loopVal} // names set in one pass are gone in the next, as in Jinja2
		if err := bind(item); err != nil {
			return err
		}
		loop.set("index0", int64(i))
		loop.set("index", int64(i+1))
		loop.set("revindex0", int64(len(items)-1-i))
		loop.set("revindex", int64(len(items)-i))
		loop.set("first", i == 0)
		loop.set("last", i == len(items)-1)
		loop.set("length", int64(len(items)))
		loop.set("depth", int64(1))
		loop.set("depth0", int64(0))
		if i > 0 {
			loop.set("previtem", items[i-1])
		} else {
			loop.set("previtem", undefined{"previtem"})
		}
		if i+1 < len(items) {
			loop.set("nextitem", items[i+1])
		} else {
			loop.set("nextitem", undefined{"nextitem"})
		}
		idx := i
		loop.set("cycle", &callable{"cycle", func(args []value, _ map[string]value) (value, error) {
			if len(args) == 0 {
				return nil, errors.New("loop.cycle: no items")
			}
			return args[idx%len(args)], nil
		}})
		err := ev.exec(n.body, body)
		var sig loopSignal
		if errors.As(err, &sig) {
			if sig.brk {
				break
			}
			continue
		}
		if err != nil {
			var te *TemplateError
			if d, ok := item.(*dict); ok && !errors.As(err, &te) {
				if m, ok := ev.msgs[d]; ok {
					return &TemplateError{Message: m, Err: err}
				}
			}
			return err
		}
	}
	return nil
}

func (ev *evaluator) macro(n macroNode, def *scope) *callable {
	return &callable{n.name, func(args []value, kw map[string]value) (value, error) {
		if len(args) > len(n.params) {
			return nil, fmt.Errorf("macro %s takes %d arguments, got %d", n.name, len(n.params), len(args))
		}
		sc := &scope{vars: map[string]value{}, parent: def}
		for i, p := range n.params {
			switch v, ok := kw[p]; {
			case i < len(args):
				sc.vars[p] = args[i]
			case ok:
				sc.vars[p] = v
			case n.defaults[i] != nil:
				d, err := ev.eval(n.defaults[i], def)
				if err != nil {
					return nil, err
				}
				sc.vars[p] = d
			default:
				sc.vars[p] = undefined{p}
			}
		}
		sub := &evaluator{msgs: ev.msgs, root: ev.root}
		if err := sub.exec(n.body, sc); err != nil {
			return nil, err
		}
		return sub.out.String(), nil
	}}
}

func (ev *evaluator) eval(e expr, sc *scope) (value, error) {
	switch e := e.(type) {
	case literal:
		return e.v, nil
	case nameExpr:
		if v, ok := sc.lookup(e.name); ok {
			return v, nil
		}
		return undefined{e.name}, nil
	case attrExpr:
		x, err := ev.eval(e.x, sc)
		if err != nil {
			return nil, err
		}
		return getAttr(x, e.name)
	case itemExpr:
		x, err := ev.eval(e.x, sc)
		if err != nil {
			return nil, err
		}
		k, err := ev.eval(e.key, sc)
		if err != nil {
			return nil, err
		}
		return getItem(x, k)
	case sliceExpr:
		x, err := ev.eval(e.x, sc)
		if err != nil {
			return nil, err
		}
		var b [3]value
		for i, p := range []expr{e.lo, e.hi, e.step} {
			if p == nil {
				b[i] = nil
				continue
			}
			if b[i], err = ev.eval(p, sc); err != nil {
				return nil, err
			}
		}
		return slice(x, b[0], b[1], b[2])
	case callExpr:
		args, kw, err := ev.evalArgs(e.args, e.kwargs, sc)
		if err != nil {
			return nil, err
		}
		if a, ok := e.fn.(attrExpr); ok { // a method of a str, dict or list
			x, err := ev.eval(a.x, sc)
			if err != nil {
				return nil, err
			}
			if m, ok, err := method(x, a.name, args, kw); ok || err != nil {
				return m, err
			}
		}
		f, err := ev.eval(e.fn, sc)
		if err != nil {
			return nil, err
		}
		c, ok := f.(*callable)
		if !ok {
			return nil, fmt.Errorf("line %d: %s is not callable", e.line, describe(e.fn, f))
		}
		return c.fn(args, kw)
	case filterExpr:
		x, err := ev.eval(e.x, sc)
		if err != nil {
			return nil, err
		}
		args, kw, err := ev.evalArgs(e.args, e.kwargs, sc)
		if err != nil {
			return nil, err
		}
		v, err := applyFilter(e.name, x, args, kw)
		if err != nil {
			return nil, fmt.Errorf("line %d: filter %s: %w", e.line, e.name, err)
		}
		return v, nil
	case testExpr:
		x, err := ev.eval(e.x, sc)
		if err != nil {
			return nil, err
		}
		args, _, err := ev.evalArgs(e.args, nil, sc)
		if err != nil {
			return nil, err
		}
		ok, err := applyTest(e.name, x, args)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", e.line, err)
		}
		return ok != e.not, nil
	case unExpr:
		x, err := ev.eval(e.x, sc)
		if err != nil {
			return nil, err
		}
		if e.op == "not" {
			return !truthy(x), nil
		}
		switch n := x.(type) {
		case int64:
			return -n, nil
		case float64:
			return -n, nil
		case bool:
			return -b2i(n), nil
		}
		return nil, fmt.Errorf("bad operand type for unary -: %s", typeName(x))
	case binExpr:
		l, err := ev.eval(e.l, sc)
		if err != nil {
			return nil, err
		}
		switch e.op {
		case "and":
			if !truthy(l) {
				return l, nil
			}
			return ev.eval(e.r, sc)
		case "or":
			if truthy(l) {
				return l, nil
			}
			return ev.eval(e.r, sc)
		}
		r, err := ev.eval(e.r, sc)
		if err != nil {
			return nil, err
		}
		v, err := binary(e.op, l, r)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", e.line, err)
		}
		return v, nil
	case condExpr:
		c, err := ev.eval(e.cond, sc)
		if err != nil {
			return nil, err
		}
		if truthy(c) {
			return ev.eval(e.then, sc)
		}
		if e.els == nil {
			return undefined{}, nil
		}
		return ev.eval(e.els, sc)
	case listExpr, tupleExpr:
		var exprs []expr
		if l, ok := e.(listExpr); ok {
			exprs = l.items
		} else {
			exprs = e.(tupleExpr).items
		}
		out := &list{tuple: isTuple(e)}
		for _, it := range exprs {
			v, err := ev.eval(it, sc)
			if err != nil {
				return nil, err
			}
			out.items = append(out.items, v)
		}
		return out, nil
	case dictExpr:
		d := newDict()
		for i := range e.keys {
			k, err := ev.eval(e.keys[i], sc)
			if err != nil {
				return nil, err
			}
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("dict key %s: only string keys are supported", repr(k))
			}
			v, err := ev.eval(e.vals[i], sc)
			if err != nil {
				return nil, err
			}
			d.set(ks, v)
		}
		return d, nil
	}
	return nil, fmt.Errorf("unknown expression %T", e)
}

func isTuple(e expr) bool { _, ok := e.(tupleExpr); return ok }

func describe(e expr, v value) string {
	if n, ok := e.(nameExpr); ok {
		if _, u := v.(undefined); u {
			return fmt.Sprintf("%q (undefined)", n.name)
		}
		return fmt.Sprintf("%q", n.name)
	}
	return typeName(v)
}

func (ev *evaluator) evalArgs(args []expr, kwargs []kwarg, sc *scope) ([]value, map[string]value, error) {
	var out []value
	for _, a := range args {
		v, err := ev.eval(a, sc)
		if err != nil {
			return nil, nil, err
		}
		out = append(out, v)
	}
	var kw map[string]value
	for _, k := range kwargs {
		v, err := ev.eval(k.e, sc)
		if err != nil {
			return nil, nil, err
		}
		if kw == nil {
			kw = map[string]value{}
		}
		kw[k.name] = v
	}
	return out, kw, nil
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// getAttr is Jinja's environment.getattr: an attribute, else the item of that name, else
// Undefined. An attribute of Undefined is an error, as with Jinja's default Undefined.
func getAttr(x value, name string) (value, error) {
	switch x := x.(type) {
	case undefined:
		return nil, fmt.Errorf("%s has no attribute %q", undefName(x), name)
	case *dict:
		if v, ok := x.get(name); ok {
			return v, nil
		}
	case *namespace:
		if v, ok := x.d.get(name); ok {
			return v, nil
		}
	}
	return undefined{name}, nil
}

func undefName(u undefined) string {
	if u.name == "" {
		return "an undefined value"
	}
	return fmt.Sprintf("%q (undefined)", u.name)
}

// getItem is Jinja's environment.getitem: the item, else the attribute, else Undefined.
func getItem(x, k value) (value, error) {
	switch c := x.(type) {
	case undefined:
		return nil, fmt.Errorf("%s has no item %s", undefName(c), repr(k))
	case *dict:
		if s, ok := k.(string); ok {
			if v, ok := c.get(s); ok {
				return v, nil
			}
		}
	case *namespace:
		if s, ok := k.(string); ok {
			if v, ok := c.d.get(s); ok {
				return v, nil
			}
		}
	case *list, string:
		i, ok := toInt(k)
		if !ok {
			break
		}
		n := length(x)
		if i < 0 {
			i += n
		}
		if i < 0 || i >= n {
			return undefined{}, nil
		}
		if l, ok := x.(*list); ok {
			return l.items[i], nil
		}
		return string([]rune(c.(string))[i]), nil
	}
	if s, ok := k.(string); ok {
		return getAttr(x, s)
	}
	return undefined{}, nil
}

func toInt(v value) (int, bool) {
	switch n := v.(type) {
	case int64:
		return int(n), true
	case bool:
		return int(b2i(n)), true
	}
	return 0, false
}

func length(v value) int {
	switch x := v.(type) {
	case string:
		return len([]rune(x))
	case *list:
		return len(x.items)
	case *dict:
		return len(x.keys)
	case *namespace:
		return len(x.d.keys)
	}
	return 0
}

// slice is Python's x[lo:hi:step] on a list, tuple or str.
func slice(x, lo, hi, step value) (value, error) {
	var items []value
	var runes []rune
	switch c := x.(type) {
	case *list:
		items = c.items
	case string:
		runes = []rune(c)
	case undefined:
		return nil, fmt.Errorf("%s cannot be sliced", undefName(c))
	default:
		return nil, fmt.Errorf("%s cannot be sliced", typeName(x))
	}
	n := len(items) + len(runes)
	st := 1
	if step != nil {
		s, ok := toInt(step)
		if !ok || s == 0 {
			return nil, fmt.Errorf("slice step must be a non-zero integer")
		}
		st = s
	}
	bound := func(v value, def int) (int, error) {
		if v == nil {
			return def, nil
		}
		i, ok := toInt(v)
		if !ok {
			return 0, fmt.Errorf("slice indices must be integers")
		}
		if i < 0 {
			i += n
		}
		if st > 0 {
			return min(max(i, 0), n), nil
		}
		return min(max(i, -1), n-1), nil
	}
	var a, b int
	var err error
	if st > 0 {
		if a, err = bound(lo, 0); err == nil {
			b, err = bound(hi, n)
		}
	} else {
		if a, err = bound(lo, n-1); err == nil {
			b, err = bound(hi, -1)
		}
	}
	if err != nil {
		return nil, err
	}
	var idx []int
	for i := a; (st > 0 && i < b) || (st < 0 && i > b); i += st {
		idx = append(idx, i)
	}
	if runes != nil || items == nil && x != nil {
		if _, ok := x.(string); ok {
			out := make([]rune, len(idx))
			for j, i := range idx {
				out[j] = runes[i]
			}
			return string(out), nil
		}
	}
	out := &list{tuple: x.(*list).tuple}
	for _, i := range idx {
		out.items = append(out.items, items[i])
	}
	return out, nil
}

// iterate lists what a for loop over v sees: a list's items, a dict's keys, a string's
// characters; Undefined and None-free empties give nothing.
func iterate(v value) ([]value, error) {
	switch x := v.(type) {
	case undefined:
		return nil, nil
	case *list:
		return x.items, nil
	case *dict:
		out := make([]value, len(x.keys))
		for i, k := range x.keys {
			out[i] = k
		}
		return out, nil
	case string:
		var out []value
		for _, r := range x {
			out = append(out, string(r))
		}
		return out, nil
	}
	return nil, fmt.Errorf("%s is not iterable", typeName(v))
}

func toFloat(v value) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case float64:
		return n, true
	case bool:
		return float64(b2i(n)), true
	}
	return 0, false
}

func binary(op string, l, r value) (value, error) {
	switch op {
	case "==":
		return equal(l, r), nil
	case "!=":
		return !equal(l, r), nil
	case "in", "not in":
		in, err := contains(r, l)
		if err != nil {
			return nil, err
		}
		return in == (op == "in"), nil
	case "~":
		return str(l) + str(r), nil
	case "<", ">", "<=", ">=":
		c, err := compare(l, r)
		if err != nil {
			return nil, err
		}
		switch op {
		case "<":
			return c < 0, nil
		case ">":
			return c > 0, nil
		case "<=":
			return c <= 0, nil
		}
		return c >= 0, nil
	case "+":
		switch a := l.(type) {
		case string:
			if b, ok := r.(string); ok {
				return a + b, nil
			}
		case *list:
			if b, ok := r.(*list); ok && a.tuple == b.tuple {
				return &list{items: append(append([]value(nil), a.items...), b.items...), tuple: a.tuple}, nil
			}
		}
	case "*":
		if s, ok := l.(string); ok {
			if n, ok := toInt(r); ok {
				return strings.Repeat(s, max(n, 0)), nil
			}
		}
		if l2, ok := l.(*list); ok {
			if n, ok := toInt(r); ok {
				out := &list{tuple: l2.tuple}
				for i := 0; i < n; i++ {
					out.items = append(out.items, l2.items...)
				}
				return out, nil
			}
		}
	}
	// numbers
	li, lInt := l.(int64)
	ri, rInt := r.(int64)
	if lb, ok := l.(bool); ok {
		li, lInt = b2i(lb), true
	}
	if rb, ok := r.(bool); ok {
		ri, rInt = b2i(rb), true
	}
	lf, lok := toFloat(l)
	rf, rok := toFloat(r)
	if !lok || !rok {
		return nil, fmt.Errorf("unsupported operand types for %s: %s and %s", op, typeName(l), typeName(r))
	}
	both := lInt && rInt
	switch op {
	case "+":
		if both {
			return li + ri, nil
		}
		return lf + rf, nil
	case "-":
		if both {
			return li - ri, nil
		}
		return lf - rf, nil
	case "*":
		if both {
			return li * ri, nil
		}
		return lf * rf, nil
	case "/":
		if rf == 0 {
			return nil, errors.New("division by zero")
		}
		return lf / rf, nil
	case "//":
		if rf == 0 {
			return nil, errors.New("integer division or modulo by zero")
		}
		if both {
			q := li / ri
			if (li%ri != 0) && ((li < 0) != (ri < 0)) {
				q--
			}
			return q, nil
		}
		return math.Floor(lf / rf), nil
	case "%":
		if rf == 0 {
			return nil, errors.New("integer division or modulo by zero")
		}
		if both {
			m := li % ri
			if m != 0 && (m < 0) != (ri < 0) {
				m += ri
			}
			return m, nil
		}
		m := math.Mod(lf, rf)
		if m != 0 && (m < 0) != (rf < 0) {
			m += rf
		}
		return m, nil
	case "**":
		if both && ri >= 0 {
			out := int64(1)
			for i := int64(0); i < ri; i++ {
				out *= li
			}
			return out, nil
		}
		return math.Pow(lf, rf), nil
	}
	return nil, fmt.Errorf("unsupported operand types for %s: %s and %s", op, typeName(l), typeName(r))
}

func equal(a, b value) bool {
	if af, ok := toFloat(a); ok {
		if bf, ok := toFloat(b); ok {
			return af == bf
		}
		return false
	}
	switch x := a.(type) {
	case nil:
		return b == nil
	case undefined:
		_, ok := b.(undefined)
		return ok
	case string:
		y, ok := b.(string)
		return ok && x == y
	case *list:
		y, ok := b.(*list)
		if !ok || len(x.items) != len(y.items) {
			return false
		}
		for i := range x.items {
			if !equal(x.items[i], y.items[i]) {
				return false
			}
		}
		return true
	case *dict:
		y, ok := b.(*dict)
		if !ok || len(x.keys) != len(y.keys) {
			return false
		}
		for _, k := range x.keys {
			v, ok := y.get(k)
			if !ok || !equal(x.m[k], v) {
				return false
			}
		}
		return true
	}
	return a == b
}

func compare(a, b value) (int, error) {
	if af, ok := toFloat(a); ok {
		if bf, ok := toFloat(b); ok {
			switch {
			case af < bf:
				return -1, nil
			case af > bf:
				return 1, nil
			}
			return 0, nil
		}
	}
	if as, ok := a.(string); ok {
		if bs, ok := b.(string); ok {
			return strings.Compare(as, bs), nil
		}
	}
	return 0, fmt.Errorf("cannot compare %s with %s", typeName(a), typeName(b))
}

func contains(container, x value) (bool, error) {
	switch c := container.(type) {
	case string:
		s, ok := x.(string)
		if !ok {
			return false, fmt.Errorf("'in <string>' requires string as left operand, not %s", typeName(x))
		}
		return strings.Contains(c, s), nil
	case *list:
		for _, it := range c.items {
			if equal(it, x) {
				return true, nil
			}
		}
		return false, nil
	case *dict:
		s, ok := x.(string)
		if !ok {
			return false, nil
		}
		_, in := c.get(s)
		return in, nil
	case *namespace:
		return contains(c.d, x)
	case undefined:
		return false, nil
	}
	return false, fmt.Errorf("argument of type %s is not iterable", typeName(container))
}
