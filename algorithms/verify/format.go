package verify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// FormatParams configures "format". Each configured item is one check; the score is the fraction
// of checks met and Pass needs all of them.
type FormatParams struct {
	// Tags must each appear exactly once as a well-formed, non-empty <tag>…</tag> pair.
	Tags []string `json:"tags,omitempty"`
	// Ordered additionally requires the tags to appear in the listed order (one more check).
	Ordered bool `json:"ordered,omitempty"`
	// Sections are headings that must start a line (leading spaces ignored), e.g. "## Plan".
	Sections []string `json:"sections,omitempty"`
	// Regex lists RE2 patterns (Go syntax, linear time) that must each match.
	Regex []string `json:"regex,omitempty"`
	// ForbidRegex lists patterns that must not match.
	ForbidRegex []string `json:"forbid_regex,omitempty"`
	// MaxChars, when > 0, bounds the completion length in characters.
	MaxChars int `json:"max_chars,omitempty"`
}

type formatVerifier struct {
	p      FormatParams
	re     []*regexp.Regexp
	forbid []*regexp.Regexp
}

// NewFormat builds "format".
func NewFormat(params json.RawMessage) (Verifier, error) {
	f := &formatVerifier{}
	if err := DecodeParams("format", params, &f.p); err != nil {
		return nil, err
	}
	var err error
	if f.re, f.forbid, err = f.p.compile(false); err != nil {
		return nil, err
	}
	return f, nil
}

func (p *FormatParams) compile(needChecks bool) (re, forbid []*regexp.Regexp, err error) {
	for i, t := range p.Tags {
		if !validTagName(t) {
			return nil, nil, fmt.Errorf("verify: format params: tags[%d]=%q: want letters, digits, '_' or '-'", i, t)
		}
	}
	for i, s := range p.Sections {
		if strings.TrimSpace(s) == "" {
			return nil, nil, fmt.Errorf("verify: format params: sections[%d] is empty", i)
		}
	}
	if p.MaxChars < 0 {
		return nil, nil, fmt.Errorf("verify: format params: max_chars=%d: want >= 0", p.MaxChars)
	}
	for i, s := range p.Regex {
		r, err := regexp.Compile(s)
		if err != nil {
			return nil, nil, fmt.Errorf("verify: format params: regex[%d]: %w", i, err)
		}
		re = append(re, r)
	}
	for i, s := range p.ForbidRegex {
		r, err := regexp.Compile(s)
		if err != nil {
			return nil, nil, fmt.Errorf("verify: format params: forbid_regex[%d]: %w", i, err)
		}
		forbid = append(forbid, r)
	}
	if needChecks && len(p.Tags)+len(p.Sections)+len(re)+len(forbid) == 0 && p.MaxChars == 0 {
		return nil, nil, errors.New("verify: format: no checks configured (set tags, sections, regex, forbid_regex or max_chars)")
	}
	return re, forbid, nil
}

func (f *formatVerifier) Verify(ctx context.Context, s Sample) (Verdict, error) {
	p, re, forbid := f.p, f.re, f.forbid
	changed, err := applyReference("format", &p, s.Reference)
	if err != nil {
		return Verdict{}, err
	}
	if changed { // per-sample checks: compile them (regexps too)
		if re, forbid, err = p.compile(true); err != nil {
			return Verdict{}, err
		}
	} else if len(p.Tags)+len(p.Sections)+len(re)+len(forbid) == 0 && p.MaxChars == 0 {
		return Verdict{}, errors.New("verify: format: no checks configured (set tags, sections, regex, forbid_regex or max_chars)")
	}
	text := s.Completion
	ok, total := 0, 0
	var failures []string
	check := func(good bool, why string) {
		total++
		if good {
			ok++
		} else {
			failures = append(failures, why)
		}
	}
	positions := make([]int, len(p.Tags))
	for i, t := range p.Tags {
		positions[i] = -1
		c, err := tagContents(text, t)
		switch {
		case err != nil:
			check(false, err.Error())
		case len(c) == 0:
			check(false, fmt.Sprintf("missing <%s>…</%s>", t, t))
		case len(c) > 1:
			check(false, fmt.Sprintf("<%s> appears %d times; expected once", t, len(c)))
		case strings.TrimSpace(c[0]) == "":
			check(false, fmt.Sprintf("<%s> is empty", t))
		default:
			positions[i] = indexFold(text, "<"+t+">")
			if outer := enclosingTag(text, t, p.Tags); outer != "" {
				check(false, fmt.Sprintf("<%s> is inside <%s>", t, outer))
				break
			}
			check(true, "")
		}
	}
	if p.Ordered && len(p.Tags) > 1 {
		inOrder := positions[0] >= 0
		for i := 1; i < len(positions); i++ {
			inOrder = inOrder && positions[i] > positions[i-1]
		}
		check(inOrder, "tags are not all present in the order "+tagList(p.Tags))
	}
	lines := strings.Split(text, "\n")
	for _, sec := range p.Sections {
		found := false
		for _, l := range lines {
			// "## Planning" is not the section "## Plan".
			if h := strings.TrimLeft(l, " \t"); strings.HasPrefix(h, sec) && (len(h) == len(sec) || !isWordByte(h[len(sec)]) || !isWordByte(sec[len(sec)-1])) {
				found = true
				break
			}
		}
		check(found, fmt.Sprintf("missing section %q", sec))
	}
	for i, r := range re {
		check(r.MatchString(text), fmt.Sprintf("does not match required pattern %s", quote(p.Regex[i])))
	}
	for i, r := range forbid {
		check(!r.MatchString(text), fmt.Sprintf("matches forbidden pattern %s", quote(p.ForbidRegex[i])))
	}
	if p.MaxChars > 0 {
		n := len([]rune(text))
		check(n <= p.MaxChars, fmt.Sprintf("output has %d characters; at most %d allowed", n, p.MaxChars))
	}
	return fraction(ok, total, failures, nil), nil
}

func indexFold(s, sub string) int {
	for i := 0; i+len(sub) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(sub)], sub) {
			return i
		}
	}
	return -1
}

func tagList(tags []string) string {
	parts := make([]string, len(tags))
	for i, t := range tags {
		parts[i] = "<" + t + ">"
	}
	return strings.Join(parts, ", ")
}

// JSONParams configures "json": the completion must hold JSON valid under a JSON Schema
// (drafts 4 to 2020-12; default 2020-12). External $refs are never loaded.
type JSONParams struct {
	Schema json.RawMessage `json:"schema,omitempty"`
	// Tag: read the JSON from inside <tag>…</tag> instead of the whole completion.
	Tag string `json:"tag,omitempty"`
	// IgnoreFormat turns off "format" assertions (email, date-time, ...), which are on by default.
	IgnoreFormat bool `json:"ignore_format,omitempty"`
}

type jsonVerifier struct {
	p      JSONParams
	schema *jsonschema.Schema // compiled params schema, nil when each sample brings its own

	mu    sync.Mutex
	cache map[string]*jsonschema.Schema // per-sample schemas, bounded
}

// NewJSON builds "json".
func NewJSON(params json.RawMessage) (Verifier, error) {
	j := &jsonVerifier{cache: map[string]*jsonschema.Schema{}}
	if err := DecodeParams("json", params, &j.p); err != nil {
		return nil, err
	}
	if j.p.Tag != "" && !validTagName(j.p.Tag) {
		return nil, fmt.Errorf("verify: json params: tag=%q: want letters, digits, '_' or '-'", j.p.Tag)
	}
	if len(bytes.TrimSpace(j.p.Schema)) > 0 {
		s, err := compileSchema(j.p.Schema, !j.p.IgnoreFormat)
		if err != nil {
			return nil, fmt.Errorf("verify: json params: schema: %w", err)
		}
		j.schema = s
	}
	return j, nil
}

// noLoader refuses every external reference: a schema must not make the verifier read files or
// the network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external schema %s not allowed", url)
}

const schemaURL = "mem://temper/schema.json"

func compileSchema(raw json.RawMessage, formats bool) (*jsonschema.Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	c.DefaultDraft(jsonschema.Draft2020)
	if formats {
		c.AssertFormat()
	}
	if err := c.AddResource(schemaURL, doc); err != nil {
		return nil, err
	}
	return c.Compile(schemaURL)
}

func (j *jsonVerifier) schemaFor(s Sample) (*jsonschema.Schema, JSONParams, error) {
	p := j.p
	if len(bytes.TrimSpace(s.Reference)) == 0 {
		if j.schema == nil {
			return nil, p, errors.New("verify: json: no schema (set \"schema\" in the params or the reference)")
		}
		return j.schema, p, nil
	}
	p.Schema = nil
	if err := ApplyReference("json", &p, s.Reference); err != nil {
		return nil, p, err
	}
	if p.Tag == "" {
		p.Tag = j.p.Tag
	}
	if len(bytes.TrimSpace(p.Schema)) == 0 && p.IgnoreFormat == j.p.IgnoreFormat {
		if j.schema == nil {
			return nil, p, errors.New("verify: json: no schema (set \"schema\" in the params or the reference)")
		}
		return j.schema, p, nil
	}
	if len(bytes.TrimSpace(p.Schema)) == 0 {
		p.Schema = j.p.Schema
	}
	key := fmt.Sprintf("%t|%s", p.IgnoreFormat, p.Schema)
	j.mu.Lock()
	sch, ok := j.cache[key]
	j.mu.Unlock()
	if ok {
		return sch, p, nil
	}
	sch, err := compileSchema(p.Schema, !p.IgnoreFormat)
	if err != nil {
		return nil, p, fmt.Errorf("verify: json: reference schema: %w", err)
	}
	j.mu.Lock()
	if len(j.cache) >= 256 {
		clear(j.cache)
	}
	j.cache[key] = sch
	j.mu.Unlock()
	return sch, p, nil
}

func (j *jsonVerifier) Verify(ctx context.Context, s Sample) (Verdict, error) {
	sch, p, err := j.schemaFor(s)
	if err != nil {
		return Verdict{}, err
	}
	partial := map[string]float64{"parse": 0, "schema": 0}
	text, err := jsonText(s.Completion, p.Tag)
	if err != nil {
		v := fail("no JSON found: %v", err)
		v.Partial = partial
		return v, nil
	}
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(text))
	if err == nil {
		// {"a": "x", "a": 1} means different things to different readers; refuse it.
		err = duplicateKey(text)
	}
	if err != nil {
		v := fail("output is not valid JSON: %v", err)
		v.Partial = partial
		return v, nil
	}
	partial["parse"] = 1
	if err := sch.Validate(inst); err != nil {
		v := fail("%s", schemaFeedback(err))
		v.Partial = partial
		return v, nil
	}
	partial["schema"] = 1
	v := pass()
	v.Partial = partial
	return v, nil
}

// schemaFeedback names each failing instance path ("at /items/0/price: ...").
func schemaFeedback(err error) string {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return "does not match the schema: " + err.Error()
	}
	var msgs []string
	seen := map[string]bool{}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			if loc == "/" {
				loc = "(root)"
			}
			what := "invalid"
			if u := e.BasicOutput(); u != nil && u.Error != nil {
				what = u.Error.String()
			}
			m := fmt.Sprintf("at %s: %s", loc, what)
			if !seen[m] {
				seen[m] = true
				msgs = append(msgs, m)
			}
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(msgs) == 0 {
		return "does not match the schema"
	}
	return "does not match the schema: " + listFeedback(msgs)
}

// duplicateKey reports the first object key that appears twice in the same object.
func duplicateKey(text string) error {
	dec := json.NewDecoder(strings.NewReader(text))
	dec.UseNumber()
	type frame struct {
		obj    bool
		keys   map[string]bool
		expect bool // the next string token in this object is a key
	}
	var stack []*frame
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil // end of input (or an error the parser above already judged)
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if top != nil && top.obj {
					top.expect = true
				}
				stack = append(stack, &frame{obj: t == '{', keys: map[string]bool{}, expect: t == '{'})
				continue
			case '}', ']':
				stack = stack[:len(stack)-1]
				continue
			}
		case string:
			if top != nil && top.obj && top.expect {
				if top.keys[t] {
					return fmt.Errorf("duplicate key %s", quote(t))
				}
				top.keys[t] = true
				top.expect = false
				continue
			}
		}
		if top != nil && top.obj {
			top.expect = true // a value was read; a key comes next
		}
	}
}

// enclosingTag returns another of the listed tags whose single pair encloses <t>, or "".
func enclosingTag(text, t string, tags []string) string {
	at := indexFold(text, "<"+t+">")
	for _, o := range tags {
		if strings.EqualFold(o, t) {
			continue
		}
		open, close := indexFold(text, "<"+o+">"), indexFold(text, "</"+o+">")
		if open >= 0 && close > open && at > open && at < close {
			return o
		}
	}
	return ""
}

// CompileSchema compiles a JSON Schema (draft 2020-12 unless it says otherwise) the way the json
// verifier does: external $refs are refused, formats are not asserted. For other layers that
// check JSON against a schema (tool arguments).
func CompileSchema(raw json.RawMessage) (*jsonschema.Schema, error) { return compileSchema(raw, false) }

// SchemaFeedback turns a validation error into one line naming each failing instance path.
func SchemaFeedback(err error) string { return schemaFeedback(err) }
