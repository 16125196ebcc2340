package tokenize

import (
	"encoding/json"
	"fmt"
)

// Roles a Message may have.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
	RoleTool      = "tool" // a tool's result, answering the assistant's call before it
)

// Message is one chat turn. An assistant message may end with tool calls: its turn then ends at
// the last call's close tag (no Suffix, no EOS), as a policy's turn does in an agentic episode, and
// the next message is the tool's result.
type Message struct {
	Role      string     `json:"role"`
	Content   string     `json:"content"`
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// Weight, on an assistant message, is 0 to keep it as context without training on it (an
	// earlier mistake the conversation then corrects), or 1 (the default when unset).
	Weight *int `json:"weight,omitempty"`
}

// Trained reports whether the loss covers m's tokens: an assistant message whose Weight is unset or 1.
func (m Message) Trained() bool {
	return m.Role == RoleAssistant && (m.Weight == nil || *m.Weight != 0)
}

// ToolCall is one call of a tool, as a policy writes it: ToolOpenTag, the call as one JSON object
// {"name": ..., "arguments": {...}}, ToolCloseTag (FormatToolCall).
type ToolCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
}

// The markers around a tool call in a policy's text.
const (
	ToolOpenTag  = "<tool>"
	ToolCloseTag = "</tool>"
)

// FormatToolCall writes c as a policy writes it.
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
// with each role's Turn. Each piece is encoded separately, which is what
// makes the mask exact; with markers ending in a newline or a special token
// this matches tokenising the joined text. Content goes through Encode like
// any text, so an added-token string inside it (say "<|im_end|>") becomes
// that token, as with Hugging Face's default; sanitise untrusted content.
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
	sp := tok.Special()
	add := func(train bool, toks ...int) {
		ids = append(ids, toks...)
		for range toks {
			mask = append(mask, train)
		}
	}
	if c.BOS {
		if sp.BOS < 0 {
			return nil, nil, fmt.Errorf("tokenize: chat render: template wants BOS, tokenizer has none")
		}
		add(false, sp.BOS)
	}
	if c.EOS && sp.EOS < 0 {
		return nil, nil, fmt.Errorf("tokenize: chat render: template wants EOS, tokenizer has none")
	}
	for i, m := range msgs {
		t, ok := c.turn(m.Role)
		if !ok {
			return nil, nil, fmt.Errorf("tokenize: chat render: message %d: unknown role %q", i, m.Role)
		}
		train := m.Trained()
		if m.Weight != nil && (m.Role != RoleAssistant || (*m.Weight != 0 && *m.Weight != 1)) {
			return nil, nil, fmt.Errorf("tokenize: chat render: message %d: weight %d on a %s message: only assistant messages take a weight, 0 or 1", i, *m.Weight, m.Role)
		}
		if len(m.ToolCalls) > 0 && m.Role != RoleAssistant {
			return nil, nil, fmt.Errorf("tokenize: chat render: message %d: tool_calls on a %s message (only assistant messages call tools)", i, m.Role)
		}
		if len(m.ToolCalls) > 1 {
			return nil, nil, fmt.Errorf("tokenize: chat render: message %d: %d tool_calls: one call per assistant turn (an episode's turn ends at the first %s)", i, len(m.ToolCalls), ToolCloseTag)
		}
		if m.Role == RoleTool && (i == 0 || len(msgs[i-1].ToolCalls) == 0) {
			return nil, nil, fmt.Errorf("tokenize: chat render: message %d: a tool message must follow an assistant message with tool_calls", i)
		}
		add(false, encode(tok, t.Prefix)...)
		add(train, encode(tok, m.Content)...)
		if len(m.ToolCalls) > 0 {
			for _, tc := range m.ToolCalls {
				add(train, encode(tok, FormatToolCall(tc))...)
			}
			continue
		}
		add(train, encode(tok, t.Suffix)...)
		if train && c.EOS {
			add(true, sp.EOS)
		}
		add(false, encode(tok, t.Sep)...)
	}
	return ids, mask, nil
}

// Prompt renders msgs followed by the assistant Prefix: the input for
// generating the next assistant turn.
func (c ChatTemplate) Prompt(tok Tokenizer, msgs []Message) ([]int, error) {
	ids, _, err := c.Render(tok, msgs)
	if err != nil {
		return nil, err
	}
	return append(ids, encode(tok, c.Assistant.Prefix)...), nil
}

func encode(tok Tokenizer, s string) []int {
	if s == "" {
		return nil
	}
	return tok.Encode(s)
}
