package tokenize

import "fmt"

// Roles a Message may have.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one chat turn.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
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
}

// DefaultChat is Temper's own format, for tokenizers without chat markers
// (Byte) and models trained from scratch:
//
//	<bos><|system|>\n{system}\n<|user|>\n{user}\n<|assistant|>\n{assistant}<eos>
//
// Only {assistant} and <eos> are trained on.
func DefaultChat() ChatTemplate {
	return ChatTemplate{
		BOS:       true,
		EOS:       true,
		System:    Turn{Prefix: "<|system|>\n", Sep: "\n"},
		User:      Turn{Prefix: "<|user|>\n", Sep: "\n"},
		Assistant: Turn{Prefix: "<|assistant|>\n"},
	}
}

// ChatML is Qwen2's format: <|im_start|>{role}\n{content}<|im_end|>\n, with
// the assistant's <|im_end|> trained on.
func ChatML() ChatTemplate {
	turn := func(role string) Turn {
		return Turn{Prefix: "<|im_start|>" + role + "\n", Suffix: "<|im_end|>", Sep: "\n"}
	}
	return ChatTemplate{System: turn(RoleSystem), User: turn(RoleUser), Assistant: turn(RoleAssistant)}
}

// Llama3Chat is Llama-3-Instruct's format:
// <|begin_of_text|><|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|>,
// with the assistant's <|eot_id|> trained on.
func Llama3Chat() ChatTemplate {
	turn := func(role string) Turn {
		return Turn{Prefix: "<|start_header_id|>" + role + "<|end_header_id|>\n\n", Suffix: "<|eot_id|>"}
	}
	return ChatTemplate{BOS: true, System: turn(RoleSystem), User: turn(RoleUser), Assistant: turn(RoleAssistant)}
}

func (c ChatTemplate) turn(role string) (Turn, bool) {
	switch role {
	case RoleSystem:
		return c.System, true
	case RoleUser:
		return c.User, true
	case RoleAssistant:
		return c.Assistant, true
	}
	return Turn{}, false
}

// Render tokenises msgs and returns the ids with a parallel mask that is
// true exactly on assistant content, assistant Suffix and the EOS the
// template adds after it.
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
		train := m.Role == RoleAssistant
		add(false, encode(tok, t.Prefix)...)
		add(train, encode(tok, m.Content)...)
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
