package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Values follow Python's data model, as Jinja2 sees the JSON-like data transformers passes:
// nil is None, undefined is Jinja's Undefined, then bool, int64, float64, string, *list (a list or,
// with tuple set, a tuple), *dict (ordered, as Python dicts are), *namespace and *callable.
type value = any

type undefined struct{ name string }

type list struct {
	items []value
	tuple bool
}

type dict struct {
	keys []string
	m    map[string]value
}

func newDict() *dict { return &dict{m: map[string]value{}} }

func (d *dict) set(k string, v value) {
	if _, ok := d.m[k]; !ok {
		d.keys = append(d.keys, k)
	}
	d.m[k] = v
}

func (d *dict) get(k string) (value, bool) {
	v, ok := d.m[k]
	return v, ok
}

type namespace struct{ d *dict }

type callable struct {
	name string
	fn   func(args []value, kw map[string]value) (value, error)
}

// FromJSON turns one JSON value into a template value, keeping the order of object keys (Python
// dicts keep insertion order, and tojson writes them in that order).
func fromJSON(b []byte) (value, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeJSON(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("more than one JSON value")
	}
	return v, nil
}

func decodeJSON(dec *json.Decoder) (value, error) {
	t, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := t.(type) {
	case json.Delim:
		if v == '{' {
			d := newDict()
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				x, err := decodeJSON(dec)
				if err != nil {
					return nil, err
				}
				d.set(k.(string), x)
			}
			_, err := dec.Token()
			return d, err
		}
		l := &list{}
		for dec.More() {
			x, err := decodeJSON(dec)
			if err != nil {
				return nil, err
			}
			l.items = append(l.items, x)
		}
		_, err := dec.Token()
		return l, err
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			if n, err := strconv.ParseInt(s, 10, 64); err == nil {
				return n, nil
			}
		}
		return strconv.ParseFloat(s, 64)
	case string, bool, nil:
		return v, nil
	}
	return nil, fmt.Errorf("unexpected JSON token %v", t)
}

func typeName(v value) string {
	switch v.(type) {
	case nil:
		return "NoneType"
	case undefined:
		return "Undefined"
	case bool:
		return "bool"
	case int64:
		return "int"
	case float64:
		return "float"
	case string:
		return "str"
	case *list:
		if v.(*list).tuple {
			return "tuple"
		}
		return "list"
	case *dict:
		return "dict"
	case *namespace:
		return "Namespace"
	case *callable:
		return "function"
	}
	return fmt.Sprintf("%T", v)
}

func truthy(v value) bool {
	switch x := v.(type) {
	case nil, undefined:
		return false
	case bool:
		return x
	case int64:
		return x != 0
	case float64:
		return x != 0
	case string:
		return x != ""
	case *list:
		return len(x.items) > 0
	case *dict:
		return len(x.keys) > 0
	}
	return true
}

// str is Python's str(v) as Jinja prints it (Undefined prints as nothing).
func str(v value) string {
	switch x := v.(type) {
	case undefined:
		return ""
	case string:
		return x
	}
	return repr(v)
}

// repr is Python's repr(v).
func repr(v value) string {
	switch x := v.(type) {
	case nil:
		return "None"
	case undefined:
		return ""
	case bool:
		if x {
			return "True"
		}
		return "False"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return pyFloat(x)
	case string:
		return pyStrRepr(x)
	case *list:
		parts := make([]string, len(x.items))
		for i, it := range x.items {
			parts[i] = repr(it)
		}
		if x.tuple {
			if len(parts) == 1 {
				return "(" + parts[0] + ",)"
			}
			return "(" + strings.Join(parts, ", ") + ")"
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case *dict:
		parts := make([]string, len(x.keys))
		for i, k := range x.keys {
			parts[i] = pyStrRepr(k) + ": " + repr(x.m[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case *namespace:
		return "<Namespace " + repr(x.d) + ">"
	case *callable:
		return "<function " + x.name + ">"
	}
	return fmt.Sprint(v)
}

// pyFloat is Python's repr of a float: the shortest round-tripping digits, with ".0" on integral
// values and exponents from 1e16 and below 1e-4.
func pyFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	case math.IsNaN(f):
		return "nan"
	}
	abs := math.Abs(f)
	if abs != 0 && (abs >= 1e16 || abs < 1e-4) {
		s := strconv.FormatFloat(f, 'e', -1, 64)
		mant, exp, _ := strings.Cut(s, "e")
		sign := exp[0]
		exp = strings.TrimLeft(exp[1:], "0")
		if len(exp) < 2 {
			exp = strings.Repeat("0", 2-len(exp)) + exp
		}
		return mant + "e" + string(sign) + exp
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(s, ".") {
		s += ".0"
	}
	return s
}

func pyStrRepr(s string) string {
	q := byte('\'')
	if strings.Contains(s, "'") && !strings.Contains(s, "\"") {
		q = '"'
	}
	var b strings.Builder
	b.WriteByte(q)
	for _, r := range s {
		switch {
		case r == '\\':
			b.WriteString(`\\`)
		case r == rune(q):
			b.WriteByte('\\')
			b.WriteByte(q)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte(q)
	return b.String()
}

// toJSON is transformers' tojson filter: Python's json.dumps(x, ensure_ascii=False by default,
// indent, separators, sort_keys).
func toJSON(v value, ensureASCII bool, indent string, hasIndent bool, itemSep, keySep string, sortKeys bool) (string, error) {
	var b strings.Builder
	var enc func(v value, depth int) error
	nl := func(depth int) {
		b.WriteByte('\n')
		for i := 0; i < depth; i++ {
			b.WriteString(indent)
		}
	}
	enc = func(v value, depth int) error {
		switch x := v.(type) {
		case nil:
			b.WriteString("null")
		case bool:
			if x {
				b.WriteString("true")
			} else {
				b.WriteString("false")
			}
		case int64:
			b.WriteString(strconv.FormatInt(x, 10))
		case float64:
			switch {
			case math.IsNaN(x):
				b.WriteString("NaN")
			case math.IsInf(x, 1):
				b.WriteString("Infinity")
			case math.IsInf(x, -1):
				b.WriteString("-Infinity")
			default:
				b.WriteString(pyFloat(x))
			}
		case string:
			jsonString(&b, x, ensureASCII)
		case *list:
			if len(x.items) == 0 {
				b.WriteString("[]")
				return nil
			}
			b.WriteByte('[')
			for i, it := range x.items {
				if i > 0 {
					b.WriteString(itemSep)
				}
				if hasIndent {
					nl(depth + 1)
				}
				if err := enc(it, depth+1); err != nil {
					return err
				}
			}
			if hasIndent {
				nl(depth)
			}
			b.WriteByte(']')
		case *dict:
			if len(x.keys) == 0 {
				b.WriteString("{}")
				return nil
			}
			keys := x.keys
			if sortKeys {
				keys = append([]string(nil), keys...)
				sort.Strings(keys)
			}
			b.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					b.WriteString(itemSep)
				}
				if hasIndent {
					nl(depth + 1)
				}
				jsonString(&b, k, ensureASCII)
				b.WriteString(keySep)
				if err := enc(x.m[k], depth+1); err != nil {
					return err
				}
			}
			if hasIndent {
				nl(depth)
			}
			b.WriteByte('}')
		case *namespace:
			return enc(x.d, depth)
		default:
			return fmt.Errorf("tojson: object of type %s is not JSON serializable", typeName(v))
		}
		return nil
	}
	if err := enc(v, 0); err != nil {
		return "", err
	}
	return b.String(), nil
}

// jsonString writes s as Python's json encoder does: \" \\ \n \r \t \b \f, other control
// characters as \u00XX, and with ensureASCII every non-ASCII character as \uXXXX (surrogate pairs
// beyond the BMP).
func jsonString(b *strings.Builder, s string, ensureASCII bool) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20 || ensureASCII && r == 0x7f:
			fmt.Fprintf(b, `\u%04x`, r)
		case ensureASCII && r > 0x7f:
			if r > 0xffff {
				r -= 0x10000
				fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			} else {
				fmt.Fprintf(b, `\u%04x`, r)
			}
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}
