package chat

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// The filters, tests, str/dict methods and globals of Jinja2 and Python that chat templates use.
// Anything else is refused by name.

func applyFilter(name string, x value, args []value, kw map[string]value) (value, error) {
	arg := func(i int, key string, def value) value {
		if i < len(args) {
			return args[i]
		}
		if v, ok := kw[key]; ok {
			return v
		}
		return def
	}
	switch name {
	case "tojson":
		indent, hasIndent := "", false
		if v := arg(0, "indent", nil); v != nil {
			switch n := v.(type) {
			case int64:
				indent, hasIndent = strings.Repeat(" ", int(n)), true
			case string:
				indent, hasIndent = n, true
			default:
				return nil, fmt.Errorf("indent must be an integer or string")
			}
		}
		itemSep, keySep := ", ", ": "
		if hasIndent {
			itemSep = ","
		}
		if v, ok := kw["separators"]; ok && v != nil {
			l, ok := v.(*list)
			if !ok || len(l.items) != 2 {
				return nil, fmt.Errorf("separators must be a pair of strings")
			}
			a, ok1 := l.items[0].(string)
			b, ok2 := l.items[1].(string)
			if !ok1 || !ok2 {
				return nil, fmt.Errorf("separators must be a pair of strings")
			}
			itemSep, keySep = a, b
		}
		if _, u := x.(undefined); u {
			return nil, fmt.Errorf("object of type Undefined is not JSON serializable")
		}
		return toJSON(x, truthy(kw["ensure_ascii"]), indent, hasIndent, itemSep, keySep, truthy(kw["sort_keys"]))
	case "trim":
		s, err := asString(x)
		if err != nil {
			return nil, err
		}
		if chars, ok := arg(0, "chars", nil).(string); ok {
			return strings.Trim(s, chars), nil
		}
		return strings.TrimFunc(s, unicode.IsSpace), nil
	case "length", "count":
		if _, u := x.(undefined); u {
			return int64(0), nil
		}
		switch x.(type) {
		case string, *list, *dict, *namespace:
			return int64(length(x)), nil
		}
		return nil, fmt.Errorf("object of type %s has no len()", typeName(x))
	case "string":
		return str(x), nil
	case "list":
		items, err := iterate(x)
		return &list{items: append([]value(nil), items...)}, err
	case "first", "last":
		items, err := iterate(x)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return undefined{}, nil
		}
		if name == "first" {
			return items[0], nil
		}
		return items[len(items)-1], nil
	case "join":
		items, err := iterate(x)
		if err != nil {
			return nil, err
		}
		sep, _ := arg(0, "d", "").(string)
		attr, hasAttr := kw["attribute"].(string)
		parts := make([]string, len(items))
		for i, it := range items {
			if hasAttr {
				if it, err = getAttr(it, attr); err != nil {
					return nil, err
				}
			}
			parts[i] = str(it)
		}
		return strings.Join(parts, sep), nil
	case "items":
		switch d := x.(type) {
		case undefined:
			return &list{}, nil
		case *dict:
			out := &list{}
			for _, k := range d.keys {
				out.items = append(out.items, &list{items: []value{k, d.m[k]}, tuple: true})
			}
			return out, nil
		}
		return nil, fmt.Errorf("can only get item pairs from a mapping, not %s", typeName(x))
	case "default", "d":
		_, u := x.(undefined)
		if u || truthy(arg(1, "boolean", false)) && !truthy(x) {
			return arg(0, "default_value", ""), nil
		}
		return x, nil
	case "upper", "lower", "title", "capitalize":
		s, err := asString(x)
		if err != nil {
			return nil, err
		}
		v, _, err := method(s, name, nil, nil)
		return v, err
	case "replace":
		s, err := asString(x)
		if err != nil {
			return nil, err
		}
		old, _ := arg(0, "old", "").(string)
		nw, _ := arg(1, "new", "").(string)
		n := -1
		if c, ok := toInt(arg(2, "count", nil)); ok {
			n = c
		}
		return strings.Replace(s, old, nw, n), nil
	case "safe", "escape", "e", "forceescape":
		if name == "safe" {
			return x, nil
		}
		return nil, fmt.Errorf("autoescaping is off in chat templates; %s is not supported", name)
	case "int":
		switch n := x.(type) {
		case int64:
			return n, nil
		case float64:
			return int64(n), nil
		case bool:
			return b2i(n), nil
		case string:
			if i, err := strconv.ParseInt(strings.TrimSpace(n), 10, 64); err == nil {
				return i, nil
			}
			if f, err := strconv.ParseFloat(strings.TrimSpace(n), 64); err == nil {
				return int64(f), nil
			}
		}
		return arg(0, "default", int64(0)), nil
	case "float":
		if f, ok := toFloat(x); ok {
			return f, nil
		}
		if s, ok := x.(string); ok {
			if f, err := strconv.ParseFloat(strings.TrimSpace(s), 64); err == nil {
				return f, nil
			}
		}
		return arg(0, "default", 0.0), nil
	case "abs":
		switch n := x.(type) {
		case int64:
			if n < 0 {
				return -n, nil
			}
			return n, nil
		case float64:
			return math.Abs(n), nil
		}
		return nil, fmt.Errorf("bad operand type for abs(): %s", typeName(x))
	case "indent":
		s, err := asString(x)
		if err != nil {
			return nil, err
		}
		width := "    "
		switch w := arg(0, "width", int64(4)).(type) {
		case int64:
			width = strings.Repeat(" ", int(w))
		case string:
			width = w
		}
		first, blank := truthy(arg(1, "first", false)), truthy(arg(2, "blank", false))
		lines := strings.Split(s, "\n")
		for i := range lines {
			if (i > 0 || first) && (blank || strings.TrimSpace(lines[i]) != "") {
				lines[i] = width + lines[i]
			}
		}
		return strings.Join(lines, "\n"), nil
	case "map", "select", "reject", "selectattr", "rejectattr":
		return mapSelect(name, x, args, kw)
	case "unique":
		items, err := iterate(x)
		if err != nil {
			return nil, err
		}
		out := &list{}
		for _, it := range items {
			if ok, _ := contains(out, it); !ok {
				out.items = append(out.items, it)
			}
		}
		return out, nil
	case "reverse":
		if s, ok := x.(string); ok {
			r := []rune(s)
			for i, j := 0, len(r)-1; i < j; i, j = i+1, j-1 {
				r[i], r[j] = r[j], r[i]
			}
			return string(r), nil
		}
		items, err := iterate(x)
		if err != nil {
			return nil, err
		}
		out := &list{}
		for i := len(items) - 1; i >= 0; i-- {
			out.items = append(out.items, items[i])
		}
		return out, nil
	case "sort":
		items, err := iterate(x)
		if err != nil {
			return nil, err
		}
		out := &list{items: append([]value(nil), items...)}
		attr, _ := kw["attribute"].(string)
		var serr error
		sort.SliceStable(out.items, func(i, j int) bool {
			a, b := out.items[i], out.items[j]
			if attr != "" {
				a, _ = getAttr(a, attr)
				b, _ = getAttr(b, attr)
			}
			c, err := compare(a, b)
			if err != nil {
				serr = err
			}
			if truthy(arg(0, "reverse", false)) {
				return c > 0
			}
			return c < 0
		})
		return out, serr
	case "dictsort":
		d, ok := x.(*dict)
		if !ok {
			return nil, fmt.Errorf("dictsort needs a mapping, not %s", typeName(x))
		}
		keys := append([]string(nil), d.keys...)
		sort.Strings(keys)
		out := &list{}
		for _, k := range keys {
			out.items = append(out.items, &list{items: []value{k, d.m[k]}, tuple: true})
		}
		return out, nil
	case "sum":
		items, err := iterate(x)
		if err != nil {
			return nil, err
		}
		var total value = arg(1, "start", int64(0))
		for _, it := range items {
			if total, err = binary("+", total, it); err != nil {
				return nil, err
			}
		}
		return total, nil
	case "min", "max":
		items, err := iterate(x)
		if err != nil {
			return nil, err
		}
		if len(items) == 0 {
			return undefined{}, nil
		}
		best := items[0]
		for _, it := range items[1:] {
			c, err := compare(it, best)
			if err != nil {
				return nil, err
			}
			if (name == "min" && c < 0) || (name == "max" && c > 0) {
				best = it
			}
		}
		return best, nil
	case "round":
		f, ok := toFloat(x)
		if !ok {
			return nil, fmt.Errorf("round needs a number")
		}
		prec, _ := toInt(arg(0, "precision", int64(0)))
		p := math.Pow(10, float64(prec))
		switch arg(1, "method", "common") {
		case "ceil":
			return math.Ceil(f*p) / p, nil
		case "floor":
			return math.Floor(f*p) / p, nil
		}
		return math.Round(f*p) / p, nil
	case "wordcount":
		s, err := asString(x)
		return int64(len(strings.Fields(s))), err
	case "center":
		s, err := asString(x)
		if err != nil {
			return nil, err
		}
		w, _ := toInt(arg(0, "width", int64(80)))
		pad := w - len([]rune(s))
		if pad <= 0 {
			return s, nil
		}
		left := pad / 2
		if pad%2 == 1 && w%2 == 1 { // Python's str.center puts the odd space on the left for odd widths
			left++
		}
		return strings.Repeat(" ", left) + s + strings.Repeat(" ", pad-left), nil
	}
	return nil, fmt.Errorf("unsupported filter %q", name)
}

// asString is a string filter's input: Jinja's filters read Undefined as "".
func asString(x value) (string, error) {
	if _, u := x.(undefined); u {
		return "", nil
	}
	s, ok := x.(string)
	if !ok {
		return "", fmt.Errorf("expected a string, got %s", typeName(x))
	}
	return s, nil
}

// mapSelect is map(attribute=... | filter name), select/reject(test, args...) and
// selectattr/rejectattr(attribute, test, args...).
func mapSelect(name string, x value, args []value, kw map[string]value) (value, error) {
	items, err := iterate(x)
	if err != nil {
		return nil, err
	}
	out := &list{}
	if name == "map" {
		attr, hasAttr := kw["attribute"].(string)
		for _, it := range items {
			var v value
			switch {
			case hasAttr:
				if v, err = getAttr(it, attr); err != nil {
					return nil, err
				}
				if _, u := v.(undefined); u {
					if d, ok := kw["default"]; ok {
						v = d
					}
				}
			case len(args) > 0:
				f, ok := args[0].(string)
				if !ok {
					return nil, fmt.Errorf("map needs a filter name or attribute=")
				}
				if v, err = applyFilter(f, it, args[1:], nil); err != nil {
					return nil, err
				}
			default:
				return nil, fmt.Errorf("map needs a filter name or attribute=")
			}
			out.items = append(out.items, v)
		}
		return out, nil
	}
	attr := ""
	if name == "selectattr" || name == "rejectattr" {
		if len(args) == 0 {
			return nil, fmt.Errorf("%s needs an attribute name", name)
		}
		attr, _ = args[0].(string)
		args = args[1:]
	}
	keep := name == "select" || name == "selectattr"
	for _, it := range items {
		v := it
		if attr != "" {
			if v, err = getAttr(it, attr); err != nil {
				return nil, err
			}
		}
		ok := truthy(v)
		if len(args) > 0 {
			test, isStr := args[0].(string)
			if !isStr {
				return nil, fmt.Errorf("%s: test name must be a string", name)
			}
			if ok, err = applyTest(test, v, args[1:]); err != nil {
				return nil, err
			}
		}
		if ok == keep {
			out.items = append(out.items, it)
		}
	}
	return out, nil
}

func applyTest(name string, x value, args []value) (bool, error) {
	arg := func() (value, error) {
		if len(args) == 0 {
			return nil, fmt.Errorf("test %s needs an argument", name)
		}
		return args[0], nil
	}
	switch name {
	case "defined":
		_, u := x.(undefined)
		return !u, nil
	case "undefined":
		_, u := x.(undefined)
		return u, nil
	case "none":
		return x == nil, nil
	case "true":
		b, ok := x.(bool)
		return ok && b, nil
	case "false":
		b, ok := x.(bool)
		return ok && !b, nil
	case "boolean":
		_, ok := x.(bool)
		return ok, nil
	case "string":
		_, ok := x.(string)
		return ok, nil
	case "number":
		switch x.(type) {
		case int64, float64:
			return true, nil
		}
		return false, nil
	case "integer":
		_, ok := x.(int64)
		return ok, nil
	case "float":
		_, ok := x.(float64)
		return ok, nil
	case "mapping":
		switch x.(type) {
		case *dict, *namespace:
			return true, nil
		}
		return false, nil
	case "iterable":
		switch x.(type) {
		case string, *list, *dict:
			return true, nil
		}
		return false, nil
	case "sequence":
		switch x.(type) {
		case string, *list, *dict:
			return true, nil
		}
		return false, nil
	case "callable":
		_, ok := x.(*callable)
		return ok, nil
	case "equalto", "eq", "==", "sameas":
		a, err := arg()
		return err == nil && equal(x, a), err
	case "ne", "!=":
		a, err := arg()
		return err == nil && !equal(x, a), err
	case "gt", "lt", "ge", "le", ">", "<", ">=", "<=", "greaterthan", "lessthan":
		a, err := arg()
		if err != nil {
			return false, err
		}
		c, err := compare(x, a)
		switch name {
		case "gt", ">", "greaterthan":
			return c > 0, err
		case "lt", "<", "lessthan":
			return c < 0, err
		case "ge", ">=":
			return c >= 0, err
		}
		return c <= 0, err
	case "in":
		a, err := arg()
		if err != nil {
			return false, err
		}
		return contains(a, x)
	case "odd", "even":
		n, ok := x.(int64)
		if !ok {
			return false, fmt.Errorf("test %s needs an integer", name)
		}
		return (n%2 != 0) == (name == "odd"), nil
	case "divisibleby":
		a, err := arg()
		if err != nil {
			return false, err
		}
		n, ok1 := x.(int64)
		d, ok2 := a.(int64)
		if !ok1 || !ok2 || d == 0 {
			return false, fmt.Errorf("divisibleby needs non-zero integers")
		}
		return n%d == 0, nil
	case "lower", "upper":
		s, ok := x.(string)
		if !ok {
			return false, nil
		}
		if name == "lower" {
			return s == strings.ToLower(s), nil
		}
		return s == strings.ToUpper(s), nil
	}
	return false, fmt.Errorf("unsupported test %q", name)
}

// method calls Python's str, dict or list method name on x; ok is false when x has no such method
// (the caller then looks name up as an attribute, as Jinja does).
func method(x value, name string, args []value, kw map[string]value) (value, bool, error) {
	arg := func(i int) value {
		if i < len(args) {
			return args[i]
		}
		return nil
	}
	switch s := x.(type) {
	case string:
		switch name {
		case "strip", "lstrip", "rstrip":
			chars, hasChars := arg(0).(string)
			trim := func(f func(string, func(rune) bool) string) string {
				if hasChars {
					return f(s, func(r rune) bool { return strings.ContainsRune(chars, r) })
				}
				return f(s, unicode.IsSpace)
			}
			switch name {
			case "strip":
				return trim(strings.TrimFunc), true, nil
			case "lstrip":
				return trim(strings.TrimLeftFunc), true, nil
			}
			return trim(strings.TrimRightFunc), true, nil
		case "split", "rsplit":
			sep, hasSep := arg(0).(string)
			n := -1
			if m, ok := toInt(arg(1)); ok {
				n = m
			} else if m, ok := toInt(kw["maxsplit"]); ok {
				n = m
			}
			var parts []string
			switch {
			case !hasSep:
				if n >= 0 {
					return nil, true, fmt.Errorf("split() with maxsplit and no separator is not supported")
				}
				parts = strings.Fields(s)
			case sep == "":
				return nil, true, errors.New("empty separator")
			case name == "split" || n < 0:
				if n >= 0 {
					n++
				}
				parts = strings.SplitN(s, sep, n)
			default: // rsplit with maxsplit
				parts = rsplit(s, sep, n)
			}
			out := &list{}
			for _, p := range parts {
				out.items = append(out.items, p)
			}
			return out, true, nil
		case "splitlines":
			out := &list{}
			for _, l := range strings.Split(strings.TrimSuffix(s, "\n"), "\n") {
				out.items = append(out.items, strings.TrimSuffix(l, "\r"))
			}
			if s == "" {
				out.items = nil
			}
			return out, true, nil
		case "startswith", "endswith":
			var prefixes []string
			switch a := arg(0).(type) {
			case string:
				prefixes = []string{a}
			case *list:
				for _, it := range a.items {
					p, ok := it.(string)
					if !ok {
						return nil, true, fmt.Errorf("%s: tuple items must be strings", name)
					}
					prefixes = append(prefixes, p)
				}
			default:
				return nil, true, fmt.Errorf("%s needs a string", name)
			}
			for _, p := range prefixes {
				if (name == "startswith" && strings.HasPrefix(s, p)) || (name == "endswith" && strings.HasSuffix(s, p)) {
					return true, true, nil
				}
			}
			return false, true, nil
		case "upper":
			return strings.ToUpper(s), true, nil
		case "lower":
			return strings.ToLower(s), true, nil
		case "title":
			r := []rune(s)
			prev := false
			for i, c := range r {
				if unicode.IsLetter(c) {
					if prev {
						r[i] = unicode.ToLower(c)
					} else {
						r[i] = unicode.ToTitle(c)
					}
					prev = true
				} else {
					prev = false
				}
			}
			return string(r), true, nil
		case "capitalize":
			r := []rune(strings.ToLower(s))
			if len(r) > 0 {
				r[0] = unicode.ToUpper(r[0])
			}
			return string(r), true, nil
		case "replace":
			old, ok1 := arg(0).(string)
			nw, ok2 := arg(1).(string)
			if !ok1 || !ok2 {
				return nil, true, fmt.Errorf("replace needs two strings")
			}
			n := -1
			if c, ok := toInt(arg(2)); ok {
				n = c
			}
			return strings.Replace(s, old, nw, n), true, nil
		case "find", "rfind", "index", "count":
			sub, ok := arg(0).(string)
			if !ok {
				return nil, true, fmt.Errorf("%s needs a string", name)
			}
			var i int
			switch name {
			case "count":
				return int64(strings.Count(s, sub)), true, nil
			case "rfind":
				i = strings.LastIndex(s, sub)
			default:
				i = strings.Index(s, sub)
			}
			if i >= 0 {
				i = len([]rune(s[:i]))
			} else if name == "index" {
				return nil, true, errors.New("substring not found")
			}
			return int64(i), true, nil
		case "join":
			items, err := iterate(arg(0))
			if err != nil {
				return nil, true, err
			}
			parts := make([]string, len(items))
			for i, it := range items {
				p, ok := it.(string)
				if !ok {
					return nil, true, fmt.Errorf("join: sequence item %d: expected str, %s found", i, typeName(it))
				}
				parts[i] = p
			}
			return strings.Join(parts, s), true, nil
		case "isdigit", "isalpha", "isspace", "isalnum", "isupper", "islower":
			if s == "" {
				return false, true, nil
			}
			for _, r := range s {
				ok := false
				switch name {
				case "isdigit":
					ok = unicode.IsDigit(r)
				case "isalpha":
					ok = unicode.IsLetter(r)
				case "isspace":
					ok = unicode.IsSpace(r)
				case "isalnum":
					ok = unicode.IsLetter(r) || unicode.IsDigit(r)
				case "isupper":
					ok = !unicode.IsLower(r)
				case "islower":
					ok = !unicode.IsUpper(r)
				}
				if !ok {
					return false, true, nil
				}
			}
			if name == "isupper" || name == "islower" {
				return strings.ToUpper(s) != strings.ToLower(s), true, nil
			}
			return true, true, nil
		}
	case *dict:
		switch name {
		case "items":
			v, err := applyFilter("items", s, nil, nil)
			return v, true, err
		case "keys":
			items, _ := iterate(s)
			return &list{items: items}, true, nil
		case "values":
			out := &list{}
			for _, k := range s.keys {
				out.items = append(out.items, s.m[k])
			}
			return out, true, nil
		case "get":
			k, ok := arg(0).(string)
			if !ok {
				return arg(1), true, nil
			}
			if v, ok := s.get(k); ok {
				return v, true, nil
			}
			return arg(1), true, nil
		}
		if _, has := s.get(name); has {
			return nil, false, nil // a callable stored under that key
		}
		return nil, true, fmt.Errorf("dict has no method %q", name)
	case *list:
		switch name {
		case "index":
			for i, it := range s.items {
				if equal(it, arg(0)) {
					return int64(i), true, nil
				}
			}
			return nil, true, fmt.Errorf("%s is not in list", repr(arg(0)))
		case "count":
			n := 0
			for _, it := range s.items {
				if equal(it, arg(0)) {
					n++
				}
			}
			return int64(n), true, nil
		case "append", "extend", "pop", "insert", "remove", "clear", "sort", "reverse":
			return nil, true, fmt.Errorf("list.%s: templates cannot modify lists (transformers renders in an immutable sandbox)", name)
		}
	case undefined:
		return nil, true, fmt.Errorf("%s has no method %q", undefName(s), name)
	}
	if _, ok := x.(*namespace); ok {
		return nil, false, nil
	}
	return nil, true, fmt.Errorf("%s has no method %q", typeName(x), name)
}

func rsplit(s, sep string, n int) []string {
	var out []string
	for n > 0 {
		i := strings.LastIndex(s, sep)
		if i < 0 {
			break
		}
		out = append([]string{s[i+len(sep):]}, out...)
		s = s[:i]
		n--
	}
	return append([]string{s}, out...)
}

// globals are the names transformers' environment defines besides the render variables.
func globals(now time.Time) map[string]value {
	return map[string]value{
		"raise_exception": &callable{"raise_exception", func(args []value, _ map[string]value) (value, error) {
			msg := ""
			if len(args) > 0 {
				msg = str(args[0])
			}
			return nil, &raised{msg}
		}},
		"range": &callable{"range", func(args []value, _ map[string]value) (value, error) {
			var b [3]int
			b[2] = 1
			for i, a := range args {
				n, ok := toInt(a)
				if !ok || i > 2 {
					return nil, fmt.Errorf("range takes up to three integers")
				}
				b[i] = n
			}
			lo, hi, st := 0, b[0], 1
			if len(args) >= 2 {
				lo, hi = b[0], b[1]
			}
			if len(args) == 3 {
				st = b[2]
			}
			if st == 0 {
				return nil, fmt.Errorf("range step must not be zero")
			}
			out := &list{}
			for i := lo; (st > 0 && i < hi) || (st < 0 && i > hi); i += st {
				out.items = append(out.items, int64(i))
			}
			return out, nil
		}},
		"namespace": &callable{"namespace", func(args []value, kw map[string]value) (value, error) {
			return &namespace{d: mergedDict(args, kw)}, nil
		}},
		"dict": &callable{"dict", func(args []value, kw map[string]value) (value, error) {
			return mergedDict(args[:min(len(args), 1)], kw), nil // dict reads one mapping argument
		}},
		"strftime_now": &callable{"strftime_now", func(args []value, _ map[string]value) (value, error) {
			if len(args) != 1 {
				return nil, fmt.Errorf("strftime_now takes one format")
			}
			f, ok := args[0].(string)
			if !ok {
				return nil, fmt.Errorf("strftime_now: format must be a string")
			}
			if now.IsZero() {
				return nil, fmt.Errorf("strftime_now(%q): the template reads the date, and no date was given (chat.Options.Now)", f)
			}
			return strftimeFormat(now, f)
		}},
	}
}

// mergedDict is a new dict with the entries of the dicts among srcs, in order, then kw's in sorted
// order (Go's map order is random; the templates' output must not be).
func mergedDict(srcs []value, kw map[string]value) *dict {
	d := newDict()
	for _, a := range srcs {
		if src, ok := a.(*dict); ok {
			for _, k := range src.keys {
				d.set(k, src.m[k])
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(kw)) {
		d.set(k, kw[k])
	}
	return d
}

// raised is raise_exception's error: the template's own message.
type raised struct{ msg string }

func (r *raised) Error() string { return r.msg }

// strftimeFormat is Python's datetime.strftime for the directives date headers use.
func strftimeFormat(t time.Time, f string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(f); i++ {
		if f[i] != '%' || i+1 >= len(f) {
			b.WriteByte(f[i])
			continue
		}
		i++
		switch f[i] {
		case 'Y':
			fmt.Fprintf(&b, "%04d", t.Year())
		case 'y':
			fmt.Fprintf(&b, "%02d", t.Year()%100)
		case 'm':
			fmt.Fprintf(&b, "%02d", int(t.Month()))
		case 'd':
			fmt.Fprintf(&b, "%02d", t.Day())
		case 'e':
			fmt.Fprintf(&b, "%2d", t.Day())
		case 'H':
			fmt.Fprintf(&b, "%02d", t.Hour())
		case 'I':
			fmt.Fprintf(&b, "%02d", (t.Hour()+11)%12+1)
		case 'M':
			fmt.Fprintf(&b, "%02d", t.Minute())
		case 'S':
			fmt.Fprintf(&b, "%02d", t.Second())
		case 'p':
			b.WriteString(t.Format("PM"))
		case 'b':
			b.WriteString(t.Format("Jan"))
		case 'B':
			b.WriteString(t.Format("January"))
		case 'a':
			b.WriteString(t.Format("Mon"))
		case 'A':
			b.WriteString(t.Format("Monday"))
		case 'j':
			fmt.Fprintf(&b, "%03d", t.YearDay())
		case '%':
			b.WriteByte('%')
		default:
			return "", fmt.Errorf("strftime_now: unsupported directive %%%c", f[i])
		}
	}
	return b.String(), nil
}
