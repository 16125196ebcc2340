package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/temperml/temper/algorithms/chat"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/tokenize"
)

// Model is what the handlers need of the served model besides its engine: its name and
// configuration, its tokenizer, how it writes chats, and where it stops.
type Model struct {
	Name   string
	Config model.Config
	Tok    tokenize.Tokenizer
	// Format is the model's own chat template and tool-call convention; nil for byte-level models,
	// which Fixed (Temper's DefaultChat) writes.
	Format *chat.Format
	// ToolFormat writes requests that have tools (a tokenizer's "tool_use" template when it has
	// one) and parses the calls; nil when the template's tool-call convention is unknown.
	ToolFormat *chat.Format
	Fixed      tokenize.ChatTemplate
	// StopIDs end a choice (the token is not part of the text): the tokenizer's EOS, the chat
	// template's end-of-turn tokens and generation_config.json's eos_token_id.
	StopIDs []int
	// encode tokenises a completions prompt as Hugging Face's encode(add_special_tokens=True), or
	// BOS + bytes for byte-level models.
	encode func(string) []int
}

// ChatSpec chooses a model directory's chat template: Template names one of tokenizer_config.json's
// list ("" the default), ToolStyle overrides the detected tool-call convention, Kwargs are template
// variables every render gets (a request's chat_template_kwargs override them).
type ChatSpec struct {
	Template  string
	ToolStyle string
	Kwargs    map[string]json.RawMessage
}

// ByteModel is a Temper byte-level model (no tokenizer files): tokenize.Byte, DefaultChat, BOS
// before completions prompts, EOS stops.
func ByteModel(name string, cfg model.Config) (*Model, error) {
	if cfg.Vocab != tokenize.ByteVocabSize {
		return nil, fmt.Errorf("serve: model %s: no tokenizer.json, and its vocab %d is not the byte tokenizer's %d: give the directory of its tokenizer files (--tokenizer)", name, cfg.Vocab, tokenize.ByteVocabSize)
	}
	tok := tokenize.Byte{}
	return &Model{Name: name, Config: cfg, Tok: tok, Fixed: tokenize.DefaultChat(), StopIDs: []int{tokenize.ByteEOS},
		encode: func(s string) []int { return append([]int{tokenize.ByteBOS}, tok.Encode(s)...) }}, nil
}

// LoadModel reads the tokenizer side of a model directory: tokenizer.json with tokenizer_config.json
// (and chat_template.jinja when there is one), or none of them for a byte-level model.
func LoadModel(dir, name string, cfg model.Config, spec ChatSpec) (*Model, error) {
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if errors.Is(err, os.ErrNotExist) {
		if spec.Template != "" || spec.ToolStyle != "" || len(spec.Kwargs) > 0 {
			return nil, fmt.Errorf("serve: model %s has no tokenizer.json (a byte-level model, written with Temper's DefaultChat): --chat-template, --tool-style and --chat-template-kwargs need the model's own template", dir)
		}
		return ByteModel(name, cfg)
	}
	if err != nil {
		return nil, fmt.Errorf("serve: model %s: %w", dir, err)
	}
	bpe, err := tokenize.LoadHF(bytes.NewReader(tj))
	if err != nil {
		return nil, fmt.Errorf("serve: model %s: tokenizer.json: %w", dir, err)
	}
	if err := bpe.CheckVocab(cfg.Vocab); err != nil {
		return nil, fmt.Errorf("serve: model %s: tokenizer.json: %w", dir, err)
	}
	m := &Model{Name: name, Config: cfg, Tok: bpe, encode: bpe.EncodeSpecial}
	if eos := bpe.Special().EOS; eos >= 0 {
		m.StopIDs = append(m.StopIDs, eos)
	}
	cfgPath := filepath.Join(dir, "tokenizer_config.json")
	tc, err := os.ReadFile(cfgPath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		// No chat template: completions only (chat requests are refused, naming why).
	case err != nil:
		return nil, fmt.Errorf("serve: model %s: %w", dir, err)
	default:
		jinja, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja"))
		if errors.Is(err, os.ErrNotExist) {
			jinja = nil
		} else if err != nil {
			return nil, fmt.Errorf("serve: model %s: %w", dir, err)
		}
		var has struct {
			ChatTemplate json.RawMessage `json:"chat_template"`
		}
		if err := json.Unmarshal(tc, &has); err != nil {
			return nil, fmt.Errorf("serve: model %s: tokenizer_config.json: %w", dir, err)
		}
		if jinja == nil && (len(has.ChatTemplate) == 0 || string(has.ChatTemplate) == "null") {
			if spec.Template != "" || spec.ToolStyle != "" || len(spec.Kwargs) > 0 {
				return nil, fmt.Errorf("serve: model %s has no chat template: --chat-template, --tool-style and --chat-template-kwargs need one", dir)
			}
			break // completions only: chat requests are refused, naming why
		}
		ts, err := chat.Load(cfgPath, tc, jinja)
		if err != nil {
			return nil, fmt.Errorf("serve: model %s: %w", dir, err)
		}
		// apply_chat_template picks a "tool_use" template when a request has tools, if there is one.
		for i, tools := range []bool{false, true} {
			t, err := ts.Select(spec.Template, tools)
			if err != nil {
				return nil, fmt.Errorf("serve: model %s: %w", dir, err)
			}
			style := chat.ToolStyle(spec.ToolStyle)
			if style == "" {
				if style, err = chat.DetectToolStyle(t.Source); err != nil {
					if tools {
						break // no known tool convention: requests with tools are refused, naming it
					}
					style = chat.ToolsHermes // writes messages as given; only parsing calls needs the real style
				}
			}
			f, err := chat.NewFormat(t, style, chat.Options{Kwargs: spec.Kwargs})
			if err != nil {
				return nil, fmt.Errorf("serve: model %s: %w", dir, err)
			}
			if i == 0 {
				m.Format = &f
			} else {
				m.ToolFormat = &f
			}
		}
		for _, id := range m.Format.StopIDs(bpe) {
			if !slices.Contains(m.StopIDs, id) {
				m.StopIDs = append(m.StopIDs, id)
			}
		}
	}
	gc, err := os.ReadFile(filepath.Join(dir, "generation_config.json"))
	if err == nil {
		var g struct {
			EOS json.RawMessage `json:"eos_token_id"`
		}
		if err := json.Unmarshal(gc, &g); err != nil {
			return nil, fmt.Errorf("serve: model %s: generation_config.json: %w", dir, err)
		}
		var ids []int
		var one int
		switch {
		case len(g.EOS) == 0 || string(g.EOS) == "null":
		case json.Unmarshal(g.EOS, &one) == nil:
			ids = []int{one}
		case json.Unmarshal(g.EOS, &ids) == nil:
		default:
			return nil, fmt.Errorf("serve: model %s: generation_config.json: eos_token_id %s: want an id or a list of ids", dir, g.EOS)
		}
		for _, id := range ids {
			if !slices.Contains(m.StopIDs, id) {
				m.StopIDs = append(m.StopIDs, id)
			}
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("serve: model %s: %w", dir, err)
	}
	return m, nil
}

// Encode tokenises a completions prompt.
func (m *Model) Encode(text string) []int { return m.encode(text) }

// chatPrompt renders messages (with tool definitions and template kwargs) followed by the
// generation prompt, and tokenises them.
func (m *Model) chatPrompt(msgs []tokenize.Message, tools []json.RawMessage, kwargs map[string]json.RawMessage) ([]int, *apiError) {
	if m.Format == nil {
		if _, isByte := m.Tok.(tokenize.Byte); !isByte {
			return nil, errorf(400, "invalid_request_error", "messages", "no_chat_template",
				"model %s has no chat template (tokenizer_config.json chat_template or chat_template.jinja): use /v1/completions", m.Name)
		}
		if len(tools) > 0 {
			return nil, unsupported("tools", "tools: model %s is written with Temper's DefaultChat, which has no place for tool definitions; describe the tools in a system message", m.Name)
		}
		if len(kwargs) > 0 {
			return nil, unsupported("chat_template_kwargs", "chat_template_kwargs: model %s is written with Temper's DefaultChat, which takes no template variables", m.Name)
		}
		ids, err := m.Fixed.Prompt(m.Tok, msgs)
		if err != nil {
			return nil, badParam("messages", "%v", err)
		}
		return ids, nil
	}
	f := *m.Format
	if len(tools) > 0 {
		if m.ToolFormat == nil {
			return nil, unsupported("tools", "tools: model %s's chat template has no tool-call convention Temper knows (%s); start the server with --tool-style", m.Name, strings.Join(chat.ToolStyles(), ", "))
		}
		var err error
		if f, err = m.ToolFormat.WithTools(tools); err != nil {
			return nil, unsupported("tools", "%v", err)
		}
	}
	if len(kwargs) > 0 {
		merged := map[string]json.RawMessage{}
		for k, v := range f.Options.Kwargs {
			merged[k] = v
		}
		for k, v := range kwargs {
			merged[k] = v
		}
		f.Options.Kwargs = merged
	}
	text, err := f.Text(msgs, true)
	if err != nil {
		return nil, badParam("messages", "%v", err)
	}
	return m.Tok.Encode(text), nil
}

// decode renders generated ids as text.
func (m *Model) decode(ids []int) string { return m.Tok.Decode(ids) }

// tokenText is one token's text and bytes for logprobs.
func (m *Model) tokenText(id int) (string, []int) {
	s := m.Tok.Decode([]int{id})
	b := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		b[i] = int(s[i])
	}
	return s, b
}
