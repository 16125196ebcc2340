package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"unicode"

	"github.com/temperml/temper/algorithms/tokenize"
)

// ToolStyle is a model family's convention for writing a tool call and reading its result.
type ToolStyle string

const (
	// ToolsHermes is Qwen2.5's and Qwen3's: the template writes each call as
	// <tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call> and a result as a
	// <tool_response> block in a user turn.
	ToolsHermes ToolStyle = "hermes"
	// ToolsLlama3JSON is Llama 3.1's: the assistant's turn is the call, {"name": ..., "parameters":
	// {...}}, one per turn, and a result is an ipython turn.
	ToolsLlama3JSON ToolStyle = "llama3_json"
	// ToolsGemmaToolCode is Gemma 3's: its template knows no tools, and Google's function-calling
	// guide has the model write ```tool_code\nname(arg=value)\n``` and read the result as
	// ```tool_output\n...\n``` in the next user turn; Temper writes calls and results as that text.
	ToolsGemmaToolCode ToolStyle = "gemma_tool_code"
)

type toolStyle struct {
	prepare func([]tokenize.Message) (conversation, error)
	parse   func(text string) (tokenize.ToolCall, bool, error)
}

var toolStyles = map[ToolStyle]toolStyle{
	ToolsHermes:        {prepare: passThrough, parse: parseHermes},
	ToolsLlama3JSON:    {prepare: passThrough, parse: parseLlama3},
	ToolsGemmaToolCode: {prepare: prepareGemma, parse: parseGemma},
}

// ToolStyles lists the styles, sorted.
func ToolStyles() []string {
	var out []string
	for s := range toolStyles {
		out = append(out, string(s))
	}
	sort.Strings(out)
	return out
}

// DetectToolStyle tells a template's tool convention from what it writes: <tool_call> (Qwen),
// ipython turns (Llama 3.1), or no tool_calls at all with Gemma's turn markers.
func DetectToolStyle(source string) (ToolStyle, error) {
	switch {
	case strings.Contains(source, "<tool_call>"):
		return ToolsHermes, nil
	case strings.Contains(source, "ipython") && strings.Contains(source, "tool_calls"):
		return ToolsLlama3JSON, nil
	case strings.Contains(source, "<start_of_turn>") && !strings.Contains(source, "tool_calls"):
		return ToolsGemmaToolCode, nil
	}
	return "", fmt.Errorf("chat: cannot tell the template's tool-call convention; name it: %s", strings.Join(ToolStyles(), ", "))
}

func passThrough(msgs []tokenize.Message) (conversation, error) {
	var c conversation
	for i, m := range msgs {
		c.msgs = append(c.msgs, openAIMessage(m))
		c.from = append(c.from, i)
	}
	return c, nil
}

// ParseCall finds the first tool call in a policy turn's text (which may end with the model's
// end-of-turn marker). found is false for a turn without a call; err says what is wrong with a
// call that is there, and is what the policy is told.
func (f Format) ParseCall(text string) (tokenize.ToolCall, bool, error) {
	text = strings.TrimRightFunc(text, unicode.IsSpace)
	for trimmed := true; trimmed; {
		trimmed = false
		for _, e := range f.EndOfTurn {
			if t, ok := strings.CutSuffix(text, e); ok {
				text, trimmed = strings.TrimRightFunc(t, unicode.IsSpace), true
			}
		}
	}
	return toolStyles[f.Tools].parse(text)
}

// CallStop is text that ends a policy turn at a call besides the model's own end of turn: none,
// since every style's call is followed by the turn's end-of-turn token (StopIDs).
func (f Format) CallStop() string { return "" }

// ToolText is the text that follows a policy turn ending in a call (the turn's own end-of-turn
// marker included in the policy's tokens) when the tool answered result: the template's tool
// turn up to the next turn's generation prompt. It is found by rendering, since templates differ
// in more than the text around a result (Llama 3.1's writes a string result as JSON, quoted).
func (f Format) ToolText(result string) (string, error) {
	msgs := []tokenize.Message{
		{Role: tokenize.RoleUser, Content: "?"},
		{Role: tokenize.RoleAssistant, ToolCalls: []tokenize.ToolCall{{Name: "f", Arguments: json.RawMessage(`{}`)}}},
	}
	msgs = append(msgs, tokenize.Message{Role: tokenize.RoleTool, Content: result})
	// The policy's turn ends at its end-of-turn marker (the end of the assistant's span); what
	// follows is the template's. The call's own turn may render otherwise once a result follows
	// it (Qwen3's empty think block of a last turn), so both come from the same conversation.
	text, spans, err := f.Spans(msgs)
	if err != nil {
		return "", fmt.Errorf("chat: tool text of %s: %w", f.Template.Name, err)
	}
	after, err := f.Text(msgs, true)
	if err != nil {
		return "", fmt.Errorf("chat: tool text of %s: %w", f.Template.Name, err)
	}
	if len(spans) != 1 || !strings.HasPrefix(after, text[:spans[0][1]]) {
		return "", fmt.Errorf("chat: tool text of %s: a tool result does not follow the assistant's turn in the rendering", f.Template.Name)
	}
	return after[spans[0][1]:], nil
}

// Hermes / Qwen.

func parseHermes(text string) (tokenize.ToolCall, bool, error) {
	const open, close = "<tool_call>", "</tool_call>"
	i := strings.Index(text, open)
	if i < 0 {
		return tokenize.ToolCall{}, false, nil
	}
	body := text[i+len(open):]
	j := strings.Index(body, close)
	if j < 0 {
		return tokenize.ToolCall{}, true, fmt.Errorf("tool call without %s", close)
	}
	c, err := decodeCall(body[:j], "arguments")
	return c, true, err
}

// decodeCall reads {"name": ..., argsKey: {...}} (Llama 3.1's "parameters" or the usual
// "arguments"), one JSON object and nothing else.
func decodeCall(s, argsKey string) (tokenize.ToolCall, error) {
	dec := json.NewDecoder(strings.NewReader(s))
	var raw map[string]json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		return tokenize.ToolCall{}, fmt.Errorf("tool call is not a JSON object {\"name\": ..., %q: {...}}: %v", argsKey, err)
	}
	if dec.More() {
		return tokenize.ToolCall{}, fmt.Errorf("tool call holds more than one JSON value")
	}
	var c tokenize.ToolCall
	keys := make([]string, 0, len(raw))
	for k := range raw {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if raw["arguments"] != nil && raw["parameters"] != nil {
		return tokenize.ToolCall{}, fmt.Errorf("tool call has both arguments and parameters")
	}
	for _, k := range keys {
		v := raw[k]
		switch k {
		case "name":
			if err := json.Unmarshal(v, &c.Name); err != nil {
				return tokenize.ToolCall{}, fmt.Errorf("tool call name: %v", err)
			}
		case "arguments", "parameters":
			c.Arguments = v
		default:
			return tokenize.ToolCall{}, fmt.Errorf("tool call: unknown field %q (want name and %s)", k, argsKey)
		}
	}
	if c.Name == "" {
		return tokenize.ToolCall{}, fmt.Errorf("tool call without a name")
	}
	if a := bytes.TrimSpace(c.Arguments); len(a) == 0 || string(a) == "null" {
		c.Arguments = nil
	} else if a[0] != '{' {
		return tokenize.ToolCall{}, fmt.Errorf("tool call %q: %s must be a JSON object", c.Name, argsKey)
	}
	return c, nil
}

// Llama 3.1.

func parseLlama3(text string) (tokenize.ToolCall, bool, error) {
	t := strings.TrimSpace(text)
	t = strings.TrimSpace(strings.TrimPrefix(t, "<|python_tag|>"))
	if !strings.HasPrefix(t, "{") {
		return tokenize.ToolCall{}, false, nil
	}
	c, err := decodeCall(t, "parameters")
	return c, true, err
}

// Gemma 3: calls and results as text in the turns.

const (
	gemmaCodeOpen   = "```tool_code\n"
	gemmaOutputOpen = "```tool_output\n"
	gemmaFence      = "\n```"
)

// prepareGemma writes an assistant's calls into its content and tool results into a user turn
// (consecutive results share one), since Gemma's template has neither tool_calls nor a tool role.
func prepareGemma(msgs []tokenize.Message) (conversation, error) {
	var c conversation
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		switch {
		case m.Role == tokenize.RoleAssistant && len(m.ToolCalls) > 0:
			var parts []string
			if m.Content != "" {
				parts = append(parts, m.Content)
			}
			for _, tc := range m.ToolCalls {
				call, err := FormatGemmaCall(tc)
				if err != nil {
					return conversation{}, fmt.Errorf("chat: message %d: %w", i, err)
				}
				parts = append(parts, gemmaCodeOpen+call+gemmaFence)
			}
			m.Content, m.ToolCalls = strings.Join(parts, "\n"), nil
			c.msgs, c.from = append(c.msgs, openAIMessage(m)), append(c.from, i)
		case m.Role == tokenize.RoleTool:
			var parts []string
			first := i
			for ; i < len(msgs) && msgs[i].Role == tokenize.RoleTool; i++ {
				parts = append(parts, gemmaOutputOpen+msgs[i].Content+gemmaFence)
			}
			i--
			u := tokenize.Message{Role: tokenize.RoleUser, Content: strings.Join(parts, "\n")}
			c.msgs, c.from = append(c.msgs, openAIMessage(u)), append(c.from, first)
		default:
			c.msgs, c.from = append(c.msgs, openAIMessage(m)), append(c.from, i)
		}
	}
	return c, nil
}

// FormatGemmaCall writes a call as a Python call with keyword arguments, as Gemma's guide has the
// model write it: get_weather(city="Paris", days=3).
func FormatGemmaCall(tc tokenize.ToolCall) (string, error) {
	if !isIdent(tc.Name) {
		return "", fmt.Errorf("tool %q: a Gemma tool_code call needs a Python identifier as its name", tc.Name)
	}
	var b strings.Builder
	b.WriteString(tc.Name)
	b.WriteByte('(')
	if a := bytes.TrimSpace(tc.Arguments); len(a) > 0 && string(a) != "null" {
		v, err := fromJSON(a)
		if err != nil {
			return "", fmt.Errorf("tool %q: arguments: %w", tc.Name, err)
		}
		d, ok := v.(*dict)
		if !ok {
			return "", fmt.Errorf("tool %q: arguments must be a JSON object", tc.Name)
		}
		for i, k := range d.keys {
			if !isIdent(k) {
				return "", fmt.Errorf("tool %q: argument %q is not a Python identifier", tc.Name, k)
			}
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(k)
			b.WriteByte('=')
			if err := writePyLiteral(&b, d.m[k]); err != nil {
				return "", fmt.Errorf("tool %q: argument %q: %w", tc.Name, k, err)
			}
		}
	}
	b.WriteByte(')')
	return b.String(), nil
}

func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i, r := range s {
		if r != '_' && !unicode.IsLetter(r) && (i == 0 || !unicode.IsDigit(r)) {
			return false
		}
	}
	return true
}

func writePyLiteral(b *strings.Builder, v value) error {
	switch x := v.(type) {
	case nil:
		b.WriteString("None")
	case bool:
		if x {
			b.WriteString("True")
		} else {
			b.WriteString("False")
		}
	case int64, float64:
		b.WriteString(repr(x))
	case string:
		jsonString(b, x, false) // a JSON string is a valid Python literal of the same string
	case *list:
		b.WriteByte('[')
		for i, it := range x.items {
			if i > 0 {
				b.WriteString(", ")
			}
			if err := writePyLiteral(b, it); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case *dict:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteString(", ")
			}
			jsonString(b, k, false)
			b.WriteString(": ")
			if err := writePyLiteral(b, x.m[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return fmt.Errorf("cannot write %s as a Python literal", typeName(v))
	}
	return nil
}

func parseGemma(text string) (tokenize.ToolCall, bool, error) {
	i := strings.Index(text, "```tool_code")
	if i < 0 {
		return tokenize.ToolCall{}, false, nil
	}
	body := text[i+len("```tool_code"):]
	j := strings.Index(body, "```")
	if j < 0 {
		return tokenize.ToolCall{}, true, fmt.Errorf("tool_code block without its closing ```")
	}
	c, err := parsePyCall(strings.TrimSpace(body[:j]))
	return c, true, err
}

// parsePyCall reads name(k=literal, ...) (optionally inside [...], as Gemma's guide also writes
// calls) into a call whose arguments are the JSON object of the keywords, in their order.
func parsePyCall(s string) (tokenize.ToolCall, error) {
	if strings.HasPrefix(s, "[") && strings.HasSuffix(s, "]") {
		s = strings.TrimSpace(s[1 : len(s)-1])
	}
	p := &pyParser{s: s}
	name := p.ident()
	if name == "" {
		return tokenize.ToolCall{}, fmt.Errorf("tool_code is not a call name(arg=value, ...): %q", truncate(s, 60))
	}
	p.space()
	if !p.eat('(') {
		return tokenize.ToolCall{}, fmt.Errorf("tool_code %q: expected ( after the name", name)
	}
	args := newDict()
	for {
		p.space()
		if p.eat(')') {
			break
		}
		if len(args.keys) > 0 {
			if !p.eat(',') {
				return tokenize.ToolCall{}, fmt.Errorf("tool_code %s: expected , or ) at %q", name, truncate(p.s[p.i:], 20))
			}
			p.space()
			if p.eat(')') {
				break
			}
		}
		k := p.ident()
		p.space()
		if k == "" || !p.eat('=') {
			return tokenize.ToolCall{}, fmt.Errorf("tool_code %s: arguments must be keywords (arg=value) at %q", name, truncate(p.s[p.i:], 20))
		}
		v, err := p.literal()
		if err != nil {
			return tokenize.ToolCall{}, fmt.Errorf("tool_code %s: argument %s: %w", name, k, err)
		}
		if _, dup := args.get(k); dup {
			return tokenize.ToolCall{}, fmt.Errorf("tool_code %s: argument %s given twice", name, k)
		}
		args.set(k, v)
	}
	p.space()
	if p.i != len(p.s) {
		return tokenize.ToolCall{}, fmt.Errorf("tool_code %s: text after the call: %q", name, truncate(p.s[p.i:], 20))
	}
	js, err := toJSON(args, false, "", false, ",", ":", false)
	if err != nil {
		return tokenize.ToolCall{}, fmt.Errorf("tool_code %s: %w", name, err)
	}
	return tokenize.ToolCall{Name: name, Arguments: json.RawMessage(js)}, nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

type pyParser struct {
	s string
	i int
}

func (p *pyParser) space() {
	for p.i < len(p.s) && unicode.IsSpace(rune(p.s[p.i])) {
		p.i++
	}
}

func (p *pyParser) eat(c byte) bool {
	if p.i < len(p.s) && p.s[p.i] == c {
		p.i++
		return true
	}
	return false
}

func (p *pyParser) ident() string {
	j := p.i
	for j < len(p.s) && (p.s[j] == '_' || p.s[j] < 0x80 && (unicode.IsLetter(rune(p.s[j])) || j > p.i && unicode.IsDigit(rune(p.s[j])))) {
		j++
	}
	id := p.s[p.i:j]
	p.i = j
	return id
}

func (p *pyParser) literal() (value, error) {
	p.space()
	if p.i >= len(p.s) {
		return nil, fmt.Errorf("missing value")
	}
	switch c := p.s[p.i]; {
	case c == '"' || c == '\'':
		s, n, err := lexString(p.s[p.i:])
		if err != nil {
			return nil, err
		}
		p.i += n
		return s, nil
	case c == '[' || c == '(':
		closer := byte(']')
		if c == '(' {
			closer = ')'
		}
		p.i++
		l := &list{}
		for {
			p.space()
			if p.eat(closer) {
				return l, nil
			}
			if len(l.items) > 0 {
				if !p.eat(',') {
					return nil, fmt.Errorf("expected , in a list")
				}
				p.space()
				if p.eat(closer) {
					return l, nil
				}
			}
			v, err := p.literal()
			if err != nil {
				return nil, err
			}
			l.items = append(l.items, v)
		}
	case c == '{':
		p.i++
		d := newDict()
		for {
			p.space()
			if p.eat('}') {
				return d, nil
			}
			if len(d.keys) > 0 {
				if !p.eat(',') {
					return nil, fmt.Errorf("expected , in a dict")
				}
				p.space()
				if p.eat('}') {
					return d, nil
				}
			}
			k, err := p.literal()
			if err != nil {
				return nil, err
			}
			ks, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("dict keys must be strings")
			}
			p.space()
			if !p.eat(':') {
				return nil, fmt.Errorf("expected : in a dict")
			}
			v, err := p.literal()
			if err != nil {
				return nil, err
			}
			d.set(ks, v)
		}
	case c == '-' || c == '+' || c == '.' || c >= '0' && c <= '9':
		j := p.i + 1
		for j < len(p.s) && strings.IndexByte("0123456789.eE+-_", p.s[j]) >= 0 {
			j++
		}
		num := strings.ReplaceAll(p.s[p.i:j], "_", "")
		p.i = j
		if n, err := strconv.ParseInt(num, 10, 64); err == nil {
			return n, nil
		}
		f, err := strconv.ParseFloat(num, 64)
		if err != nil {
			return nil, fmt.Errorf("bad number %q", num)
		}
		return f, nil
	}
	switch id := p.ident(); id {
	case "True", "true":
		return true, nil
	case "False", "false":
		return false, nil
	case "None", "null":
		return nil, nil
	case "":
		return nil, fmt.Errorf("unexpected %q", truncate(p.s[p.i:], 10))
	default:
		return nil, fmt.Errorf("%s is not a literal (write strings in quotes)", id)
	}
}
