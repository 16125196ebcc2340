package chat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/temperml/temper/algorithms/tokenize"
)

// Format is how Temper writes conversations for one model: its chat template, its tool-call
// convention and the template variables every render gets.
type Format struct {
	Template *Template
	Tools    ToolStyle
	// Options are passed to every render: tool definitions and Kwargs such as enable_thinking.
	// AddGenerationPrompt is set per call.
	Options Options
	// EndOfTurn are the texts that end an assistant turn (the model's stop tokens, spelled): the
	// config's eos_token and the known end-of-turn markers the template writes.
	EndOfTurn []string
}

// knownEnds are end-of-turn markers of the families Temper knows, taken as EndOfTurn when the
// template writes them (Llama 3.1 ends a turn that calls a built-in tool with <|eom_id|>).
var knownEnds = []string{"<|eot_id|>", "<|eom_id|>", "<|im_end|>", "<end_of_turn>", "<|end|>"}

// NewFormat pairs a template with a tool-call style ("" detects it from the template: ToolStyles).
func NewFormat(t *Template, style ToolStyle, opts Options) (Format, error) {
	if style == "" {
		var err error
		if style, err = DetectToolStyle(t.Source); err != nil {
			return Format{}, err
		}
	}
	if _, ok := toolStyles[style]; !ok {
		return Format{}, fmt.Errorf("chat: tool style %q: allowed values: %s", style, strings.Join(ToolStyles(), ", "))
	}
	f := Format{Template: t, Tools: style, Options: opts}
	if eos := t.Tokens["eos_token"]; eos != "" {
		f.EndOfTurn = append(f.EndOfTurn, eos)
	}
	for _, e := range knownEnds {
		if strings.Contains(t.Source, e) && !contains1(f.EndOfTurn, e) {
			f.EndOfTurn = append(f.EndOfTurn, e)
		}
	}
	if len(f.EndOfTurn) == 0 {
		return Format{}, fmt.Errorf("chat: template %s: no eos_token and no known end-of-turn marker: cannot tell where an assistant turn ends", t.Name)
	}
	if opts.Tools != nil && !strings.Contains(t.Source, "tools") {
		return Format{}, fmt.Errorf("chat: template %s does not render tool definitions (tools); describe the tools in the system message instead", t.Name)
	}
	return f, nil
}

// WithTools is f with the tool definitions of one conversation (an example's "tools").
func (f Format) WithTools(tools []json.RawMessage) (Format, error) {
	if len(tools) > 0 && !strings.Contains(f.Template.Source, "tools") {
		return Format{}, fmt.Errorf("chat: template %s does not render tool definitions (tools); describe the tools in the system message instead", f.Template.Name)
	}
	f.Options.Tools = tools
	return f, nil
}

func contains1(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// conversation is what the template sees: the messages as JSON objects, each with the index of
// the caller's message it came from (a Gemma tool result may merge several).
type conversation struct {
	msgs []json.RawMessage
	from []int
}

func (c conversation) array(n int) json.RawMessage {
	var b bytes.Buffer
	b.WriteByte('[')
	for i, m := range c.msgs[:n] {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(m)
	}
	b.WriteByte(']')
	return b.Bytes()
}

// conversation checks msgs and writes them in OpenAI form, through the tool style.
func (f Format) conversation(msgs []tokenize.Message) (conversation, error) {
	for i, m := range msgs {
		switch m.Role {
		case tokenize.RoleSystem, tokenize.RoleUser, tokenize.RoleAssistant, tokenize.RoleTool:
		default:
			return conversation{}, fmt.Errorf("chat: message %d: role %q: allowed values: system, user, assistant, tool", i, m.Role)
		}
		if m.Weight != nil && (m.Role != tokenize.RoleAssistant || (*m.Weight != 0 && *m.Weight != 1)) {
			return conversation{}, fmt.Errorf("chat: message %d: weight %d on a %s message: only assistant messages take a weight, 0 or 1", i, *m.Weight, m.Role)
		}
		if m.ReasoningContent != "" && !strings.Contains(f.Template.Source, "reasoning_content") {
			return conversation{}, fmt.Errorf("chat: message %d: reasoning_content: template %s does not render it", i, f.Template.Name)
		}
		if len(m.ToolCalls) > 0 && m.Role != tokenize.RoleAssistant {
			return conversation{}, fmt.Errorf("chat: message %d: tool_calls on a %s message (only assistant messages call tools)", i, m.Role)
		}
	}
	return toolStyles[f.Tools].prepare(msgs)
}

// openAIMessage writes m as apply_chat_template takes a message.
func openAIMessage(m tokenize.Message) json.RawMessage {
	var b bytes.Buffer
	field := func(k string, v any) {
		if b.Len() > 1 {
			b.WriteString(", ")
		}
		kb, _ := json.Marshal(k)
		b.Write(kb)
		b.WriteString(": ")
		switch v := v.(type) {
		case json.RawMessage:
			b.Write(v)
		default:
			vb, _ := json.Marshal(v) // strings and slices of raw JSON always marshal
			b.Write(vb)
		}
	}
	b.WriteByte('{')
	field("role", m.Role)
	field("content", m.Content)
	if m.ReasoningContent != "" {
		field("reasoning_content", m.ReasoningContent)
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]json.RawMessage, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			var args json.RawMessage = c.Arguments
			if s, ok := c.ArgumentsString(); ok {
				args, _ = json.Marshal(s)
			}
			if len(bytes.TrimSpace(args)) == 0 {
				args = json.RawMessage("{}")
			}
			fn, _ := json.Marshal(struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			}{c.Name, args})
			var cb bytes.Buffer
			cb.WriteByte('{')
			if c.CallID() != "" {
				id, _ := json.Marshal(c.CallID())
				cb.WriteString(`"id": `)
				cb.Write(id)
				cb.WriteString(", ")
			}
			cb.WriteString(`"type": "function", "function": `)
			cb.Write(fn)
			cb.WriteByte('}')
			calls[i] = cb.Bytes()
		}
		field("tool_calls", calls)
	}
	if m.ToolCallID != "" {
		field("tool_call_id", m.ToolCallID)
	}
	if m.Name != "" {
		field("name", m.Name)
	}
	b.WriteByte('}')
	return b.Bytes()
}

func (f Format) render(c conversation, n int, gen bool) (Rendered, error) {
	o := f.Options
	o.AddGenerationPrompt = gen
	return f.Template.Render(c.array(n), o)
}

// Text renders msgs as the model reads them (with the generation prompt when gen is set).
func (f Format) Text(msgs []tokenize.Message, gen bool) (string, error) {
	c, err := f.conversation(msgs)
	if err != nil {
		return "", err
	}
	r, err := f.render(c, len(c.msgs), gen)
	return r.Text, err
}

// Spans renders msgs and returns the text with the byte spans the loss covers: each trained
// assistant message from where the model starts writing (the end of what the generation prompt
// and the text agree on) to the end of its end-of-turn marker, which is what the model writes
// when prompted with the conversation before it; or the template's {% generation %} blocks.
func (f Format) Spans(msgs []tokenize.Message) (string, [][2]int, error) {
	c, err := f.conversation(msgs)
	if err != nil {
		return "", nil, err
	}
	full, err := f.render(c, len(c.msgs), false)
	if err != nil {
		return "", nil, err
	}
	var assistants []int // conversation indices of assistant messages
	for i, raw := range c.msgs {
		if msgs[c.from[i]].Role == tokenize.RoleAssistant && isAssistant(raw) {
			assistants = append(assistants, i)
		}
	}
	var spans [][2]int
	if len(full.Generation) > 0 || f.Template.HasGeneration() {
		if len(full.Generation) != len(assistants) {
			return "", nil, fmt.Errorf("chat: template %s: %d {%% generation %%} blocks for %d assistant messages", f.Template.Name, len(full.Generation), len(assistants))
		}
		for k, i := range assistants {
			if msgs[c.from[i]].Trained() {
				spans = append(spans, full.Generation[k])
			}
		}
		return full.Text, spans, nil
	}
	for _, i := range assistants {
		if !msgs[c.from[i]].Trained() {
			continue
		}
		pre, err := f.render(c, i, false)
		if err != nil {
			return "", nil, fmt.Errorf("chat: conversation before message %d: %w", c.from[i], err)
		}
		if !strings.HasPrefix(full.Text, pre.Text) {
			return "", nil, fmt.Errorf("chat: message %d: template %s renders the conversation before it differently once later messages follow (Qwen3 drops reasoning_content of turns before the last user message): end the conversation after this turn and start the rest as another example", c.from[i], f.Template.Name)
		}
		prompt, err := f.render(c, i, true)
		if err != nil {
			return "", nil, fmt.Errorf("chat: prompt before message %d: %w", c.from[i], err)
		}
		// Where the generation prompt is not what precedes the turn in the whole text (Qwen3's
		// enable_thinking false prompts with an empty think block that earlier turns do not
		// have), the model's text starts after the last line break they agree on: turn headers
		// end lines, and "<think>" must not count as the start of "<tool_call>".
		start := commonPrefix(prompt.Text, full.Text)
		if start < len(prompt.Text) {
			if nl := strings.LastIndexByte(full.Text[len(pre.Text):start], '\n'); nl >= 0 {
				start = len(pre.Text) + nl + 1
			}
		}
		end := -1
		for _, e := range f.EndOfTurn {
			if j := strings.Index(full.Text[start:], e); j >= 0 && (end < 0 || start+j+len(e) < end) {
				end = start + j + len(e)
			}
		}
		if end < 0 {
			if i != len(c.msgs)-1 {
				return "", nil, fmt.Errorf("chat: message %d: no end-of-turn marker (%s) after the assistant's text", c.from[i], strings.Join(f.EndOfTurn, ", "))
			}
			end = len(full.Text)
		}
		if len(spans) > 0 && start < spans[len(spans)-1][1] {
			return "", nil, fmt.Errorf("chat: message %d: the template renders it inside the previous assistant message", c.from[i])
		}
		spans = append(spans, [2]int{start, end})
	}
	return full.Text, spans, nil
}

func isAssistant(raw json.RawMessage) bool {
	var m struct {
		Role string `json:"role"`
	}
	return json.Unmarshal(raw, &m) == nil && m.Role == tokenize.RoleAssistant
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	i := 0
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// Encode tokenises the rendered conversation as one string and marks the ids whose bytes overlap
// a trained span (Spans): what SFT trains on. The tokenizer must report offsets.
func (f Format) Encode(tok tokenize.Tokenizer, msgs []tokenize.Message) (ids []int, mask []bool, err error) {
	oe, ok := tok.(tokenize.OffsetEncoder)
	if !ok {
		return nil, nil, fmt.Errorf("chat: encode with template %s: the tokenizer (%T) cannot report offsets (tokenize.OffsetEncoder), which the assistant mask needs", f.Template.Name, tok)
	}
	text, spans, err := f.Spans(msgs)
	if err != nil {
		return nil, nil, err
	}
	ids, offs := oe.EncodeOffsets(text)
	return ids, tokenize.Mask(offs, spans), nil
}

// Prompt tokenises msgs with the generation prompt: the input for the next assistant turn.
func (f Format) Prompt(tok tokenize.Tokenizer, msgs []tokenize.Message) ([]int, error) {
	text, err := f.Text(msgs, true)
	if err != nil {
		return nil, err
	}
	return tok.Encode(text), nil
}

// StopIDs are the ids of EndOfTurn in tok's vocabulary (those that are single tokens): the stop
// tokens of a policy's turn.
func (f Format) StopIDs(tok tokenize.Tokenizer) []int {
	var out []int
	sp := tok.Special()
	for _, e := range f.EndOfTurn {
		if id, ok := sp.ID(e); ok {
			out = append(out, id)
		}
	}
	return out
}
