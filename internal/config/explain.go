package config

import (
	"cmp"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// Field describes one JSON-visible field of a config struct.
type Field struct {
	Name    string // JSON name
	Type    reflect.Type
	Default string // from the `default:"..."` tag, documentation only
	Help    string // from the `help:"..."` tag
	Index   []int  // reflect field index path (through embedded structs), for FieldByIndex
}

// Fields lists t's JSON fields in declaration order, flattening embedded structs.
func Fields(t reflect.Type) []Field {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var out []Field
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		name, _, _ := strings.Cut(tag, ",")
		if name == "-" {
			continue
		}
		if sf.Anonymous && name == "" {
			for _, f := range Fields(sf.Type) {
				f.Index = append([]int{i}, f.Index...)
				out = append(out, f)
			}
			continue
		}
		name = cmp.Or(name, sf.Name)
		out = append(out, Field{Name: name, Type: sf.Type, Default: sf.Tag.Get("default"), Help: sf.Tag.Get("help"), Index: []int{i}})
	}
	return out
}

// Explain renders every field of v's type, recursing into nested structs, one line each:
// "path  type  default  help". When v is not the zero value (a kind's constructor filled in its own
// defaults), the default column shows v's value of each scalar field; otherwise, and for fields v
// cannot reach (nil pointers, list elements), the field's `default` tag.
func Explain(v any) string {
	return ExplainMarked(v, nil)
}

// ExplainMarked is Explain with mark(path)'s text put before a field's help (nil: none), such as
// "[live]" for the fields a running phase lets people change.
func ExplainMarked(v any, mark func(path string) string) string {
	var b strings.Builder
	val := reflect.ValueOf(v)
	if !val.IsValid() || val.IsZero() {
		val = reflect.Value{}
	}
	if mark == nil {
		mark = func(string) string { return "" }
	}
	explain(&b, reflect.TypeOf(v), val, "", mark)
	return b.String()
}

// explain writes t's fields; val is a value of t, or invalid when there is none (nil pointer, list
// element types).
func explain(b *strings.Builder, t reflect.Type, val reflect.Value, prefix string, mark func(string) string) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
		if val.IsValid() {
			val = val.Elem() // invalid when nil
		}
	}
	for _, f := range Fields(t) {
		path := join(prefix, f.Name)
		ft := f.Type
		fv := reflect.Value{}
		if val.IsValid() {
			fv, _ = val.FieldByIndexErr(f.Index) // invalid through a nil embedded pointer
		}
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
			if fv.IsValid() {
				fv = fv.Elem()
			}
		}
		def := f.Default
		if fv.IsValid() && isScalar(ft) {
			def = scalarString(fv)
		}
		def = cmp.Or(def, "-")
		help := f.Help
		if m := mark(path); m != "" {
			help = strings.TrimSpace(m + " " + help)
		}
		fmt.Fprintf(b, "%-34s %-14s %-12s %s\n", path, typeName(ft), def, help)
		if ft.Kind() == reflect.Struct && ft != rawMessageType {
			explain(b, ft, fv, path, mark)
		}
		if (ft.Kind() == reflect.Slice) && ft.Elem().Kind() == reflect.Struct {
			explain(b, ft.Elem(), reflect.Value{}, path+"[]", mark)
		}
	}
}

func isScalar(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

func scalarString(v reflect.Value) string {
	if d, ok := v.Interface().(Duration); ok {
		return durationString(int64(d))
	}
	return fmt.Sprint(v.Interface())
}

func typeName(t reflect.Type) string {
	if t == rawMessageType {
		return "object"
	}
	if t == reflect.TypeOf(Duration(0)) {
		return "duration"
	}
	switch t.Kind() {
	case reflect.Struct:
		return "object"
	case reflect.Slice:
		return "list of " + typeName(t.Elem())
	case reflect.Map:
		return "map of " + typeName(t.Elem())
	}
	return t.Kind().String()
}

// OneOf returns a *FieldError unless v is among allowed.
func OneOf(path, v string, allowed ...string) error {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return &FieldError{Path: path, Msg: fmt.Sprintf("%q is not allowed; allowed values: %s", v, strings.Join(allowed, ", "))}
}

// Duration is a time.Duration that reads and writes as a Go duration string ("1m30s") in configs.
type Duration int64

// MarshalJSON writes "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(durationString(int64(d)))
}

// UnmarshalJSON reads "1m30s" or a number of seconds.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		v, err := parseDuration(s)
		if err != nil {
			return err
		}
		*d = Duration(v)
		return nil
	}
	var f float64
	if err := json.Unmarshal(b, &f); err != nil {
		return fmt.Errorf("duration: want a string like \"90s\" or a number of seconds, got %s", b)
	}
	*d = Duration(f * 1e9)
	return nil
}
