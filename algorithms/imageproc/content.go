package imageproc

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Part is one content part of a message or of a preference completion, in the form Hugging
// Face chat templates read: {"type": "text", "text": "…"} or {"type": "image", "image": "<uri>"}.
type Part struct {
	Type  string `json:"type"`
	Text  string `json:"text,omitempty"`
	Image string `json:"image,omitempty"`
	// Field is where the part was found ("messages[1].content[0]"), for errors found later (a
	// missing file, a truncated PNG) to name.
	Field string `json:"-"`
	// Ref is the parsed image reference of an image part.
	Ref *Ref `json:"-"`
}

// Part types.
const (
	PartText  = "text"
	PartImage = "image"
)

// FieldError is an error in one field of a data record. A loader prefixes file and line:
// "prefs.jsonl:12: imageproc: chosen[0].image: …".
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return "imageproc: " + e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

var partFields = []string{"type", "text", "image"}

// ParseContent reads a content value: a JSON string is one text part, an array is a list of
// parts. field names the value in errors ("messages[1].content", "chosen"). Image references
// are checked with ParseRef (a data: URI is decoded, and its bytes checked against lim.MaxBytes
// and its declared type); an unknown part type or key is refused by name.
func ParseContent(raw json.RawMessage, field string, lim Limits) ([]Part, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, &FieldError{field, errors.New("missing: want a string or a list of content parts")}
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, &FieldError{field, err}
		}
		return []Part{{Type: PartText, Text: s, Field: field}}, nil
	}
	if raw[0] != '[' {
		return nil, &FieldError{field, errors.New(`want a string or a list of content parts ({"type": "text", "text": …} or {"type": "image", "image": "<uri>"})`)}
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, &FieldError{field, err}
	}
	if len(items) == 0 {
		return nil, &FieldError{field, errors.New("empty list of content parts")}
	}
	parts := make([]Part, 0, len(items))
	for i, item := range items {
		p, err := parsePart(item, fmt.Sprintf("%s[%d]", field, i), lim)
		if err != nil {
			return nil, err
		}
		parts = append(parts, p)
	}
	return parts, nil
}

func parsePart(raw json.RawMessage, field string, lim Limits) (Part, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return Part{}, &FieldError{field, errors.New(`want an object {"type": "text" | "image", …}`)}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	str := func(key string) (string, error) {
		v, ok := m[key]
		if !ok {
			return "", &FieldError{field + "." + key, errors.New("missing")}
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return "", &FieldError{field + "." + key, errors.New("want a string")}
		}
		return s, nil
	}
	typ, err := str("type")
	if err != nil {
		return Part{}, err
	}
	switch typ {
	case "image_url", "input_image":
		return Part{}, &FieldError{field + ".type", fmt.Errorf(`%q is not supported: write {"type": "image", "image": "<uri>"}`, typ)}
	case PartText, PartImage:
	default:
		return Part{}, &FieldError{field + ".type", fmt.Errorf("%q: allowed values: text, image", typ)}
	}
	for _, k := range keys {
		if !contains(partFields, k) || (k == "text" && typ != PartText) || (k == "image" && typ != PartImage) {
			return Part{}, &FieldError{field + "." + k, fmt.Errorf("unknown field for a %s part (allowed: type, %s)", typ, typ)}
		}
	}
	p := Part{Type: typ, Field: field}
	if typ == PartText {
		p.Text, err = str("text")
		return p, err
	}
	if p.Image, err = str("image"); err != nil {
		return Part{}, err
	}
	ref, err := ParseRef(p.Image, lim)
	if err != nil {
		return Part{}, &FieldError{field + ".image", errors.New(strings.TrimPrefix(err.Error(), "imageproc: "))}
	}
	p.Ref = &ref
	return p, nil
}

// Images returns the image parts of parts, in order.
func Images(parts []Part) []Part {
	var out []Part
	for _, p := range parts {
		if p.Type == PartImage {
			out = append(out, p)
		}
	}
	return out
}

// Text joins the text parts of parts with newlines (a prompt for a model that reads text only).
func Text(parts []Part) string {
	var texts []string
	for _, p := range parts {
		if p.Type == PartText {
			texts = append(texts, p.Text)
		}
	}
	return strings.Join(texts, "\n")
}
