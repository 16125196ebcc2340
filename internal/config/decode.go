package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// Validator is implemented by config structs; Validate names the bad field and its allowed values.
type Validator interface {
	Validate() error
}

// FieldError is an error about one field, addressed by its dotted path ("phases[0].config.steps").
type FieldError struct {
	Path string
	Msg  string
}

func (e *FieldError) Error() string { return e.Path + ": " + e.Msg }

// ParseTree parses YAML (a superset of JSON) into a generic tree of map[string]any, []any and scalars.
func ParseTree(data []byte) (any, error) {
	var tree any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&tree); err != nil {
		if err.Error() == "EOF" {
			return map[string]any{}, nil
		}
		return nil, fmt.Errorf("parse: %w", err)
	}
	return normalize(tree), nil
}

// normalize turns yaml's map[any]any (from non-string keys) into map[string]any.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = normalize(x)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			m[fmt.Sprint(k)] = normalize(x)
		}
		return m
	case []any:
		for i, x := range t {
			t[i] = normalize(x)
		}
		return t
	}
	return v
}

// SetPath sets path in a tree of decoded maps and lists to v, making the maps it lacks. A path
// element indexes a map by key and a list by number, or by the "name" field of its elements; an
// error names the path up to the element it could not follow.
func SetPath(tree any, path []string, v any) error {
	cur := tree
	for i, p := range path {
		last := i == len(path)-1
		switch c := cur.(type) {
		case map[string]any:
			if last {
				c[p] = v
				return nil
			}
			next, ok := c[p]
			if !ok || next == nil {
				next = map[string]any{}
				c[p] = next
			}
			cur = next
		case []any:
			idx := listIndex(c, p)
			if idx < 0 {
				return fmt.Errorf("%s: no list element %q", strings.Join(path[:i], "."), p)
			}
			if last {
				c[idx] = v
				return nil
			}
			cur = c[idx]
		default:
			return fmt.Errorf("%s is not a map or list", strings.Join(path[:i], "."))
		}
	}
	return nil
}

// listIndex is the index of list element p (a number, or an element's "name"), or -1.
func listIndex(list []any, p string) int {
	idx, err := strconv.Atoi(p)
	if err != nil {
		idx = -1
		for j, el := range list {
			if m, ok := el.(map[string]any); ok && fmt.Sprint(m["name"]) == p {
				return j
			}
		}
	}
	if idx < 0 || idx >= len(list) {
		return -1
	}
	return idx
}

// Set applies one `key.path=value` override to a tree. Path elements index maps by key and lists by
// number, or by the "name" field of their elements (`phases.sft.config.steps=10`). The value is parsed as
// a YAML scalar, so numbers and booleans keep their types.
func Set(tree any, assignment string) (any, error) {
	key, raw, ok := strings.Cut(assignment, "=")
	if !ok || key == "" {
		return tree, fmt.Errorf("set %q: want key.path=value", assignment)
	}
	var val any
	if err := yaml.Unmarshal([]byte(raw), &val); err != nil {
		return tree, fmt.Errorf("set %q: value: %w", assignment, err)
	}
	val = normalize(val)
	if tree == nil {
		tree = map[string]any{}
	}
	if err := SetPath(tree, strings.Split(key, "."), val); err != nil {
		return tree, fmt.Errorf("set %q: %w", assignment, err)
	}
	return tree, nil
}

// Decode checks tree against out's type (unknown fields are *FieldError with a suggestion), then decodes
// it into out through encoding/json, so JSON tags and json.RawMessage fields behave as everywhere else.
// Fields of type json.RawMessage are not checked here: their owner checks them with its own type.
// prefix is prepended to error paths.
func Decode(tree any, out any, prefix string) error {
	if err := checkFinite(tree, prefix); err != nil {
		return err
	}
	if err := check(tree, reflect.TypeOf(out), prefix); err != nil {
		return err
	}
	b, err := json.Marshal(tree)
	if err != nil {
		return fmt.Errorf("%s: %w", orRoot(prefix), err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(out); err != nil {
		var te *json.UnmarshalTypeError
		if ok := asTypeError(err, &te); ok {
			return &FieldError{Path: join(prefix, te.Field), Msg: fmt.Sprintf("want %s, got %s", te.Type, te.Value)}
		}
		return fmt.Errorf("%s: %w", orRoot(prefix), err)
	}
	return nil
}

// DecodeBytes is ParseTree followed by Decode.
func DecodeBytes(data []byte, out any, prefix string) error {
	tree, err := ParseTree(data)
	if err != nil {
		return err
	}
	return Decode(tree, out, prefix)
}

// checkFinite rejects NaN and ±Inf anywhere in the tree (YAML's .nan and .inf), raw sub-configs
// included: encoding/json cannot carry them, and its error ("json: unsupported value: NaN") names no
// field.
func checkFinite(v any, path string) error {
	switch t := v.(type) {
	case float64:
		if math.IsNaN(t) || math.IsInf(t, 0) {
			return &FieldError{Path: orRoot(path), Msg: fmt.Sprintf("%v is not a finite number", t)}
		}
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys) // the first error is deterministic
		for _, k := range keys {
			if err := checkFinite(t[k], join(path, k)); err != nil {
				return err
			}
		}
	case []any:
		for i, x := range t {
			if err := checkFinite(x, fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func asTypeError(err error, te **json.UnmarshalTypeError) bool {
	t, ok := err.(*json.UnmarshalTypeError)
	if ok {
		*te = t
	}
	return ok
}

var rawMessageType = reflect.TypeOf(json.RawMessage{})

func check(v any, t reflect.Type, path string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == rawMessageType || v == nil {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		m, ok := v.(map[string]any)
		if !ok {
			return &FieldError{Path: orRoot(path), Msg: fmt.Sprintf("want a map of fields, got %s", describe(v))}
		}
		fields := Fields(t)
		byName := make(map[string]Field, len(fields))
		names := make([]string, 0, len(fields))
		for _, f := range fields {
			byName[f.Name] = f
			names = append(names, f.Name)
		}
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys) // first error is deterministic
		for _, k := range keys {
			f, ok := byName[k]
			if !ok {
				msg := "unknown field"
				if s := Closest(k, names); s != "" {
					msg += fmt.Sprintf("; did you mean %q?", s)
				}
				msg += " (valid: " + strings.Join(names, ", ") + ")"
				return &FieldError{Path: join(path, k), Msg: msg}
			}
			if err := check(m[k], f.Type, join(path, k)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return nil
		}
		l, ok := v.([]any)
		if !ok {
			return &FieldError{Path: orRoot(path), Msg: fmt.Sprintf("want a list, got %s", describe(v))}
		}
		for i, el := range l {
			if err := check(el, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	case reflect.Map:
		m, ok := v.(map[string]any)
		if !ok {
			return &FieldError{Path: orRoot(path), Msg: fmt.Sprintf("want a map, got %s", describe(v))}
		}
		for k, x := range m {
			if err := check(x, t.Elem(), join(path, k)); err != nil {
				return err
			}
		}
	}
	return nil
}

func describe(v any) string {
	switch v.(type) {
	case map[string]any:
		return "a map"
	case []any:
		return "a list"
	case string:
		return fmt.Sprintf("string %q", v)
	}
	return fmt.Sprintf("%T %v", v, v)
}

func join(prefix, name string) string {
	if prefix == "" {
		return name
	}
	if name == "" {
		return prefix
	}
	return prefix + "." + name
}

func orRoot(p string) string {
	if p == "" {
		return "config"
	}
	return p
}

// Closest returns the candidate within edit distance max(2, len/3) of s, or "".
func Closest(s string, candidates []string) string {
	best, bestD := "", 1<<30
	for _, c := range candidates {
		d := levenshtein(strings.ToLower(s), strings.ToLower(c))
		if d < bestD {
			best, bestD = c, d
		}
	}
	limit := len(s) / 3
	if limit < 2 {
		limit = 2
	}
	if bestD > limit && !strings.Contains(best, s) && !strings.Contains(s, best) {
		return ""
	}
	return best
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
