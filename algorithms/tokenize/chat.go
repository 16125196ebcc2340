package tokenize

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Roles a Message may have.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool" // a tool's result, answering the assistant's call before it
)

// Message is one chat turn, in the OpenAI `messages` form chat templates read. An assistant
// message may end with tool calls: in Temper's own formats its turn then ends at the last call's
// close tag (no Suffix, no EOS), as a policy's turn does in an agentic episode, and the next
// message is the tool's result.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ReasoningContent is an assistant's reasoning, for templates that render it (Qwen3's
	// <think> block); Temper's own formats refuse it rather than drop it.
	ReasoningContent string     `json:"reasoning_content,omitempty"`
	ToolCalls        []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and Name, on a tool message, say which call it answers (OpenAI form); templates
	// that read them get them, Temper's own formats ignore them (one call per turn).
	ToolCallID string `json:"tool_call_id,omitempty"`
	Name       string `json:"name,omitempty"`
	// Weight, on an assistant message, is 0 to keep it as context without training on it (an
	// earlier mistake the conversation then corrects), or 1 (the default when unset).
	Weight *int `json:"weight,omitempty"`
}

// Trained reports whether the loss covers m's tokens: an assistant message whose Weight is unset or 1.
func (m Message) Trained() bool {
	return m.Role == RoleAssistant && (m.Weight == nil || *m.Weight != 0)
}

// ToolCall is one call of a tool, as Temper writes it: {"name": ..., "arguments": {...}}. A
// message's tool_calls also read OpenAI's form {"id": ..., "type": "function", "function":
// {"name": ..., "arguments": ...}}, the arguments a JSON object or a string holding one; the call
// keeps the id and whether the arguments came as a string, so that a chat template that tells
// the two apart (Qwen3 writes a string as it is) renders what the data said. Decoding a ToolCall
// on its own (a policy's call) reads Temper's form only.
type ToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	id        string
	argString *string // arguments as given, when given as a JSON string holding an object
}

// CallID is the call's id in OpenAI form ("" when it had none).
func (c ToolCall) CallID() string { return c.id }

// ArgumentsString is the arguments as the data gave them when that was a JSON string.
func (c ToolCall) ArgumentsString() (string, bool) {
	if c.argString == nil {
		return "", false
	}
	return *c.argString, true
}

// messageFields is a message's JSON form, decoded strictly.
type messageFields struct {
	Role             string            `json:"role"`
	Content          *string           `json:"content"`
	ReasoningContent string            `json:"reasoning_content"`
	ToolCalls        []json.RawMessage `json:"tool_calls"`
	ToolCallID       string            `json:"tool_call_id"`
	Name             string            `json:"name"`
	Weight           *int              `json:"weight"`
}

// UnmarshalJSON reads a message strictly (an unknown field is an error naming it, as encoding/json
// words it), its tool calls in either form; "content": null reads as "".
func (m *Message) UnmarshalJSON(b []byte) error {
	var f messageFields
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return err
	}
	out := Message{Role: f.Role, ReasoningContent: f.ReasoningContent, ToolCallID: f.ToolCallID, Name: f.Name, Weight: f.Weight}
	if f.Content != nil {
		out.Content = *f.Content
	}
	for i, raw := range f.ToolCalls {
		c, err := readToolCall(raw)
		if err != nil {
			return fmt.Errorf("tool_calls[%d]: %w", i, err)
		}
		out.ToolCalls = append(out.ToolCalls, c)
	}
	*m = out
	return nil
}

func readToolCall(b []byte) (ToolCall, error) {
	var f struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return ToolCall{}, err
	}
	if f.Type != "" && f.Type != "function" {
		return ToolCall{}, fmt.Errorf("type %q: allowed values: function", f.Type)
	}
	c := ToolCall{Name: f.Name, Arguments: f.Arguments, id: f.ID}
	if f.Function != nil {
		if f.Name != "" || len(f.Arguments) > 0 {
			return ToolCall{}, fmt.Errorf("both \"function\" and a top-level name/arguments; use one form")
		}
		c.Name, c.Arguments = f.Function.Name, f.Function.Arguments
	}
	if a := bytes.TrimSpace(c.Arguments); len(a) > 0 && a[0] == '"' {
		var s string
		if err := json.Unmarshal(a, &s); err != nil {
			return ToolCall{}, fmt.Errorf("%q: arguments: %w", c.Name, err)
		}
		// A string that holds no JSON object stays a string: the data's validation
		// (tasks.ReadJSONL) names the message it is in.
		obj := bytes.TrimSpace([]byte(s))
		var m map[string]json.RawMessage
		if json.Unmarshal(obj, &m) == nil && m != nil {
			c.Arguments, c.argString = obj, &s
		}
	}
	return c, nil
}

// The markers around a tool call in a policy's text.
const (
	ToolOpenTag  = "<tool>"
	ToolCloseTag = "</tool>"
)

// FormatToolCall writes c as a policy writes it in Temper's own formats.
func FormatToolCall(c ToolCall) string {
	b, _ := json.Marshal(c) // a name and a raw JSON value always marshal
	return ToolOpenTag + string(b) + ToolCloseTag
}

// Turn is the text around one role's content. Prefix and Suffix are
// tokenised with the tokenizer's own Encode, so a marker that is an added
// token (<|im_start|>) becomes its single id.
type Turn struct {
	Prefix string // before the content; never trained on
	Suffix string // after the content; trained on in assistant turns, so the model learns to end its turn
	Sep    string // after Suffix; never trained on
}

// ChatTemplate renders messages as
//
//	[BOS] (Prefix content Suffix [EOS if assistant and EOS] Sep)*
//
// with each role's Turn: the text between BOS/EOS ids is rendered first and tokenised as one
// string, and the mask comes from where each id's bytes sit in that text (OffsetEncoder), so the
// ids are those of tokenising the rendered conversation, whatever merges across a marker. Content
// goes through Encode like any text, so an added-token string inside it (say "<|im_end|>")
// becomes that token, as with Hugging Face's default; sanitise untrusted content.
type ChatTemplate struct {
	BOS                     bool // start with Special().BOS
	EOS                     bool // end each assistant turn with Special().EOS (trained on)
	System, User, Assistant Turn
	// Tool wraps a tool's result (never trained on). An agentic episode writes the same text around
	// a result (ToolMarkers), so that demonstrations and episodes are the same tokens.
	Tool Turn
}

// ToolMarkers are the texts an episode writes around a tool's result after a policy turn that
// ended with a call: open before it, close after it (the close hands the turn back to the
// assistant). Rendering a tool message after a call gives the same text.
func (c ChatTemplate) ToolMarkers() (open, close string) {
	return c.Tool.Prefix, c.Tool.Suffix + c.Tool.Sep + c.Assistant.Prefix
}

// DefaultChat is Temper's own format, for tokenizers without chat markers
// (Byte) and models trained from scratch:
//
//	<bos><|system|>\n{system}\n<|user|>\n{user}\n<|assistant|>\n{assistant}<eos>
//
// Only {assistant} and <eos> are trained on. A turn that calls a tool reads
// <|assistant|>\n{content}<tool>{call}</tool>\n<|tool|>\n{result}\n<|assistant|>\n...
func DefaultChat() ChatTemplate {
	return ChatTemplate{
		BOS:       true,
		EOS:       true,
		System:    Turn{Prefix: "<|system|>\n", Sep: "\n"},
		User:      Turn{Prefix: "<|user|>\n", Sep: "\n"},
		Assistant: Turn{Prefix: "<|assistant|>\n"},
		Tool:      Turn{Prefix: "\n<|tool|>\n", Sep: "\n"},
	}
}

// ChatML is Qwen2's format: <|im_start|>{role}\n{content}<|im_end|>\n, with
// the assistant's <|im_end|> trained on.
func ChatML() ChatTemplate {
	turn := func(role string) Turn {
		return Turn{Prefix: "<|im_start|>" + role + "\n", Suffix: "<|im_end|>", Sep: "\n"}
	}
	return ChatTemplate{System: turn(RoleSystem), User: turn(RoleUser), Assistant: turn(RoleAssistant),
		Tool: Turn{Prefix: "\n<|im_start|>tool\n", Suffix: "<|im_end|>", Sep: "\n"}}
}

// Llama3Chat is Llama-3-Instruct's format:
// <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>,
// with the assistant's <|eot_id|> trained on.
func Llama3Chat() ChatTemplate {
	turn := func(role string) Turn {
		return Turn{Prefix: "<|start_header_id|>" + role + "<|end_header_id|>\n\n", Suffix: "<|eot_id|>"}
	}
	return ChatTemplate{BOS: true, System: turn(RoleSystem), User: turn(RoleUser), Assistant: turn(RoleAssistant),
		Tool: turn("ipython")}
}

func (c ChatTemplate) turn(role string) (Turn, bool) {
	switch role {
	case RoleSystem:
		return c.System, true
	case RoleUser:
		return c.User, true
	case RoleAssistant:
		return c.Assistant, true
	case RoleTool:
		return c.Tool, true
	}
	return Turn{}, false
}

// Render tokenises msgs and returns the ids with a parallel mask that is
// true exactly on assistant content, assistant tool calls, assistant Suffix
// and the EOS the template adds after it. An assistant turn with tool calls
// ends at its last call (no Suffix, EOS or Sep: an episode's policy turn
// stops there), and a tool message must follow it.
func (c ChatTemplate) Render(tok Tokenizer, msgs []Message) (ids []int, mask []bool, err error) {
	ps, err := c.pieces(tok, msgs)
	if err != nil {
		return nil, nil, err
	}
	ids, mask = EncodePieces(tok, ps)
	return ids, mask, nil
}

// Prompt renders msgs followed by the assistant Prefix: the input for
// generating the next assistant turn.
func (c ChatTemplate) Prompt(tok Tokenizer, msgs []Message) ([]int, error) {
	ps, err := c.pieces(tok, msgs)
	if err != nil {
		return nil, err
	}
	ids, _ := EncodePieces(tok, append(ps, Piece{Text: c.Assistant.Prefix, ID: -1}))
	return ids, nil
}

func (c ChatTemplate) pieces(tok Tokenizer, msgs []Message) ([]Piece, error) {
	sp := tok.Special()
	var ps []Piece
	text := func(s string, train bool) {
		if s != "" {
			ps = append(ps, Piece{Text: s, Train: train, ID: -1})
		}
	}
	if c.BOS {
		if sp.BOS < 0 {
			return nil, fmt.Errorf("tokenize: chat render: template wants BOS, tokenizer has none")
		}
		ps = append(ps, Piece{ID: sp.BOS})
	}
	if c.EOS && sp.EOS < 0 {
		return nil, fmt.Errorf("tokenize: chat render: template wants EOS, tokenizer has none")
	}
	for i, m := range msgs {
		t, ok := c.turn(m.Role)
		if !ok {
			return nil, fmt.Errorf("tokenize: chat render: message %d: unknown role %q", i, m.Role)
		}
		train := m.Trained()
		if m.Weight != nil && (m.Role != RoleAssistant || (*m.Weight != 0 && *m.Weight != 1)) {
			return nil, fmt.Errorf("tokenize: chat render: message %d: weight %d on a %s message: only assistant messages take a weight, 0 or 1", i, *m.Weight, m.Role)
		}
		if len(m.ToolCalls) > 0 && m.Role != RoleAssistant {
			return nil, fmt.Errorf("tokenize: chat render: message %d: tool_calls on a %s message (only assistant messages call tools)", i, m.Role)
		}
		if len(m.ToolCalls) > 1 {
			return nil, fmt.Errorf("tokenize: chat render: message %d: %d tool_calls: one call per assistant turn (an episode's turn ends at the first %s)", i, len(m.ToolCalls), ToolCloseTag)
		}
		if m.Role == RoleTool && (i == 0 || len(msgs[i-1].ToolCalls) == 0) {
			return nil, fmt.Errorf("tokenize: chat render: message %d: a tool message must follow an assistant message with tool_calls", i)
		}
		if m.ReasoningContent != "" {
			return nil, fmt.Errorf("tokenize: chat render: message %d: reasoning_content: Temper's fixed chat formats do not render reasoning; use the model's own chat template (chat.Format) or put it in content", i)
		}
		text(t.Prefix, false)
		text(m.Content, train)
		if len(m.ToolCalls) > 0 {
			for _, tc := range m.ToolCalls {
				text(FormatToolCall(tc), train)
			}
			continue
		}
		text(t.Suffix, train)
		if train && c.EOS {
			ps = append(ps, Piece{ID: sp.EOS, Train: true})
		}
		text(t.Sep, false)
	}
	return ps, nil
}

// Piece is a part of a rendered conversation: text (ID < 0) or one control id (a BOS or EOS that
// is not spelled in text, as with Byte), and whether the loss covers it.
type Piece struct {
	Text  string
	ID    int
	Train bool
}

// EncodePieces tokenises a rendered conversation: each run of text between control ids as one
// string, an id trained when its bytes overlap a trained piece's (Mask). A tokenizer that cannot
// say where its ids come from (no OffsetEncoder) encodes piece by piece instead, which agrees
// with the whole text only where no token spans two pieces.
func EncodePieces(tok Tokenizer, ps []Piece) (ids []int, mask []bool) {
	oe, whole := tok.(OffsetEncoder)
	for i := 0; i < len(ps); {
		if ps[i].ID >= 0 {
			ids, mask = append(ids, ps[i].ID), append(mask, ps[i].Train)
			i++
			continue
		}
		j := i
		var b strings.Builder
		var spans [][2]int
		for ; j < len(ps) && ps[j].ID < 0; j++ {
			if !whole {
				for _, id := range tok.Encode(ps[j].Text) {
					ids, mask = append(ids, id), append(mask, ps[j].Train)
				}
				continue
			}
			if ps[j].Train {
				spans = append(spans, [2]int{b.Len(), b.Len() + len(ps[j].Text)})
			}
			b.WriteString(ps[j].Text)
		}
		if whole && b.Len() > 0 {
			got, offs := oe.EncodeOffsets(b.String())
			ids = append(ids, got...)
			mask = append(mask, Mask(offs, spans)...)
		}
		i = j
	}
	return ids, mask
}

// Mask marks the ids whose byte span overlaps one of spans (sorted, disjoint byte ranges of the
// text): a token that straddles the edge of trained text is trained, as transformers'
// assistant-token mask marks every token a trained character falls in. An id with an empty span
// (inserted by normalisation) is trained when its position lies inside a span.
func Mask(offsets [][2]int, spans [][2]int) []bool {
	out := make([]bool, len(offsets))
	k := 0
	for i, o := range offsets {
		// Spans ending at or before this id's start cannot reach it or any later id (offsets do
		// not decrease); the first span left is the only one that can start soonest enough.
		for k < len(spans) && spans[k][1] <= o[0] {
			k++
		}
		if k < len(spans) {
			if o[0] < o[1] {
				out[i] = spans[k][0] < o[1]
			} else {
				out[i] = spans[k][0] <= o[0]
			}
		}
	}
	return out
}
