package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// Template is one compiled chat template with the special-token strings of its tokenizer.
type Template struct {
	Name   string // "default", or the name in a list of named templates
	Source string
	// Tokens are the special-token variables transformers passes (bos_token, eos_token, pad_token,
	// unk_token and any other *_token string of the config); an unset token is absent, not "".
	Tokens map[string]string
	nodes  []node
}

// Options are the variables of one render besides the messages.
type Options struct {
	AddGenerationPrompt bool
	// Tools are the tool definitions (OpenAI form: {"type": "function", "function": {...}}), as
	// JSON; nil passes tools=None.
	Tools []json.RawMessage
	// Documents are retrieval documents for templates that read them, as JSON; nil: None.
	Documents []json.RawMessage
	// Kwargs are extra template variables (enable_thinking, date_string, tools_in_user_message,
	// builtin_tools, ...), each a JSON value. They may not override messages, tools, documents,
	// add_generation_prompt or a special token.
	Kwargs map[string]json.RawMessage
	// Now is the time strftime_now reads; zero makes a template that calls it fail (a render that
	// trains must not depend on the clock).
	Now time.Time
}

// Rendered is a template's output: the text and the byte spans of its {% generation %} blocks.
type Rendered struct {
	Text       string
	Generation [][2]int
}

// Parse compiles a template source with the given special-token variables.
func Parse(name, source string, tokens map[string]string) (*Template, error) {
	nodes, err := parseTemplate(source)
	if err != nil {
		return nil, fmt.Errorf("chat: parse template %q: %w", name, err)
	}
	return &Template{Name: name, Source: source, Tokens: tokens, nodes: nodes}, nil
}

// HasGeneration reports whether the template marks assistant text with {% generation %}.
func (t *Template) HasGeneration() bool { return hasGeneration(t.nodes) }

func hasGeneration(nodes []node) bool {
	for _, n := range nodes {
		switch n := n.(type) {
		case generationNode:
			return true
		case ifNode:
			for _, b := range n.bodies {
				if hasGeneration(b) {
					return true
				}
			}
			if hasGeneration(n.els) {
				return true
			}
		case forNode:
			if hasGeneration(n.body) || hasGeneration(n.els) {
				return true
			}
		case macroNode:
			if hasGeneration(n.body) {
				return true
			}
		case setNode:
			if hasGeneration(n.body) {
				return true
			}
		}
	}
	return false
}

var reserved = map[string]bool{"messages": true, "tools": true, "documents": true, "add_generation_prompt": true}

// Render renders messages (a JSON array of message objects, as transformers' apply_chat_template
// takes them) with opts. A template's own error (raise_exception) or an error evaluating it is a
// *TemplateError, naming the message being rendered when there was one.
func (t *Template) Render(messages json.RawMessage, opts Options) (Rendered, error) {
	mv, err := fromJSON(messages)
	if err != nil {
		return Rendered{}, fmt.Errorf("chat: render %s: messages: %w", t.Name, err)
	}
	ml, ok := mv.(*list)
	if !ok {
		return Rendered{}, fmt.Errorf("chat: render %s: messages must be a JSON array, not %s", t.Name, typeName(mv))
	}
	vars := globals(opts.Now)
	msgs := map[*dict]int{}
	for i, m := range ml.items {
		if d, ok := m.(*dict); ok {
			msgs[d] = i
		}
	}
	vars["messages"] = ml
	vars["add_generation_prompt"] = opts.AddGenerationPrompt
	for name, raw := range map[string][]json.RawMessage{"tools": opts.Tools, "documents": opts.Documents} {
		if raw == nil {
			vars[name] = nil
			continue
		}
		l := &list{}
		for i, r := range raw {
			v, err := fromJSON(r)
			if err != nil {
				return Rendered{}, fmt.Errorf("chat: render %s: %s[%d]: %w", t.Name, name, i, err)
			}
			l.items = append(l.items, v)
		}
		vars[name] = l
	}
	for k, v := range t.Tokens {
		vars[k] = v
	}
	keys := make([]string, 0, len(opts.Kwargs))
	for k := range opts.Kwargs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if _, tok := t.Tokens[k]; reserved[k] || tok {
			return Rendered{}, fmt.Errorf("chat: render %s: template variable %q is set by Temper and cannot be overridden", t.Name, k)
		}
		v, err := fromJSON(opts.Kwargs[k])
		if err != nil {
			return Rendered{}, fmt.Errorf("chat: render %s: template variable %q: %w", t.Name, k, err)
		}
		vars[k] = v
	}
	root := &scope{vars: vars}
	ev := &evaluator{msgs: msgs, root: root}
	if err := ev.exec(t.nodes, &scope{vars: map[string]value{}, parent: root}); err != nil {
		var te *TemplateError
		if !errors.As(err, &te) {
			te = &TemplateError{Message: -1, Err: err}
		}
		return Rendered{}, fmt.Errorf("chat: render %s: %w", t.Name, te)
	}
	return Rendered{Text: ev.out.String(), Generation: ev.gen}, nil
}

// Templates are the chat templates of one tokenizer: tokenizer_config.json's chat_template (a
// string, or a list of {"name", "template"}), or a chat_template.jinja file, which wins.
type Templates struct {
	byName map[string]*Template
	// Config holds the special-token strings and flags read beside the template.
	BOS, EOS string
}

// tokenizerConfig is the part of tokenizer_config.json a chat template needs.
type tokenizerConfig struct {
	ChatTemplate json.RawMessage `json:"chat_template"`
}

// Load reads a tokenizer_config.json (name labels errors) and, when the model directory has one,
// chat_template.jinja (nil when it has none). The special-token variables are the config's
// *_token entries that are strings or {"content": ...} objects.
func Load(name string, config []byte, jinja []byte) (*Templates, error) {
	var cfg tokenizerConfig
	if err := json.Unmarshal(config, &cfg); err != nil {
		return nil, fmt.Errorf("chat: read %s: %w", name, err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(config, &raw); err != nil {
		return nil, fmt.Errorf("chat: read %s: %w", name, err)
	}
	tokens := map[string]string{}
	for k, v := range raw {
		if !strings.HasSuffix(k, "_token") {
			continue
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			tokens[k] = s
			continue
		}
		var obj struct {
			Content *string `json:"content"`
		}
		if json.Unmarshal(v, &obj) == nil && obj.Content != nil {
			tokens[k] = *obj.Content
		}
	}
	sources := map[string]string{}
	switch {
	case jinja != nil:
		sources["default"] = string(jinja)
	case len(cfg.ChatTemplate) == 0 || string(cfg.ChatTemplate) == "null":
		return nil, fmt.Errorf("chat: %s has no chat_template (and there is no chat_template.jinja)", name)
	default:
		var s string
		if err := json.Unmarshal(cfg.ChatTemplate, &s); err == nil {
			sources["default"] = s
			break
		}
		var named []struct {
			Name     string `json:"name"`
			Template string `json:"template"`
		}
		if err := json.Unmarshal(cfg.ChatTemplate, &named); err != nil {
			return nil, fmt.Errorf("chat: %s: chat_template must be a string or a list of {\"name\", \"template\"}: %w", name, err)
		}
		for i, n := range named {
			if n.Name == "" {
				return nil, fmt.Errorf("chat: %s: chat_template[%d] has no name", name, i)
			}
			sources[n.Name] = n.Template
		}
	}
	ts := &Templates{byName: map[string]*Template{}, BOS: tokens["bos_token"], EOS: tokens["eos_token"]}
	for n, src := range sources {
		t, err := Parse(n, src, tokens)
		if err != nil {
			return nil, fmt.Errorf("chat: %s: %w", name, err)
		}
		ts.byName[n] = t
	}
	return ts, nil
}

// Names lists the templates, sorted.
func (ts *Templates) Names() []string {
	var out []string
	for n := range ts.byName {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Select picks a template as apply_chat_template does: the named one if name is set; else
// "tool_use" when there are tools and the tokenizer has such a template; else "default".
func (ts *Templates) Select(name string, tools bool) (*Template, error) {
	if name != "" {
		t, ok := ts.byName[name]
		if !ok {
			return nil, fmt.Errorf("chat: no chat template named %q (have %s)", name, strings.Join(ts.Names(), ", "))
		}
		return t, nil
	}
	if t, ok := ts.byName["tool_use"]; ok && tools {
		return t, nil
	}
	if t, ok := ts.byName["default"]; ok {
		return t, nil
	}
	if len(ts.byName) == 1 {
		for _, t := range ts.byName {
			return t, nil
		}
	}
	return nil, fmt.Errorf("chat: no default chat template (have %s); name one", strings.Join(ts.Names(), ", "))
}

// FromConfig is the Format of a model directory's files: tokenizer_config.json (config, name labels
// errors) and chat_template.jinja (nil when absent), the template named templateName ("": the
// default, or tool_use when opts has tools), and the tool style ("": detected).
func FromConfig(name string, config, jinja []byte, templateName string, style ToolStyle, opts Options) (Format, error) {
	ts, err := Load(name, config, jinja)
	if err != nil {
		return Format{}, err
	}
	t, err := ts.Select(templateName, opts.Tools != nil)
	if err != nil {
		return Format{}, err
	}
	return NewFormat(t, style, opts)
}
