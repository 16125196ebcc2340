package data

import (
	"compress/gzip"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/chat"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tokenize"
)

// TestModelTemplate: with Model set, a conversation is the model's own template rendered and
// tokenised at once (the assistant's turn through <|im_end|> trained), the prompt ends with the
// template's generation prompt, and text examples are unchanged.
func TestModelTemplate(t *testing.T) {
	f, err := os.Open("../tokenize/testdata/hf/qwen3.tokenizer.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.LoadHF(zr)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile("../chat/testdata/qwen3/tokenizer_config.json")
	if err != nil {
		t.Fatal(err)
	}
	format, err := chat.FromConfig("qwen3", cfg, nil, "", "", chat.Options{Kwargs: map[string]json.RawMessage{"enable_thinking": json.RawMessage("false")}})
	if err != nil {
		t.Fatal(err)
	}
	enc := Encoder{Tok: tok, Chat: tokenize.ChatML(), Model: &format}
	ex := tasks.Example{Messages: []tokenize.Message{{Role: "user", Content: "2+2?"}, {Role: "assistant", Content: "4"}}}
	got, err := enc.Encode(ex)
	if err != nil {
		t.Fatal(err)
	}
	text := "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|>\n"
	if !slices.Equal(got.IDs, tok.Encode(text)) {
		t.Fatalf("ids %v, want the rendered text's %v", got.IDs, tok.Encode(text))
	}
	var trained []int
	for i, l := range got.Loss {
		if l {
			trained = append(trained, got.IDs[i])
		}
	}
	if want := tok.Encode("4<|im_end|>"); !slices.Equal(trained, want) {
		t.Errorf("trained %q, want %q", tok.Decode(trained), "4<|im_end|>")
	}
	p, err := enc.PromptIDs(ex)
	if err != nil {
		t.Fatal(err)
	}
	if want := tok.Encode("<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"); !slices.Equal(p, want) {
		t.Errorf("prompt %q", tok.Decode(p))
	}
	tool := json.RawMessage(`{"type": "function", "function": {"name": "calc", "parameters": {}}}`)
	withTools, err := enc.Encode(tasks.Example{Messages: ex.Messages, Tools: []json.RawMessage{tool}})
	if err != nil {
		t.Fatal(err)
	}
	if s := tok.Decode(withTools.IDs); !strings.Contains(s, "<tools>\n{\"type\": \"function\", \"function\": {\"name\": \"calc\", \"parameters\": {}}}\n</tools>") {
		t.Errorf("the example's tools are not rendered: %q", s)
	}
	if _, err := (Encoder{Tok: tok, Chat: tokenize.ChatML()}).Encode(tasks.Example{Messages: ex.Messages, Tools: []json.RawMessage{tool}}); err == nil || !strings.Contains(err.Error(), "do not render tool definitions") {
		t.Errorf("tools with a fixed format: %v", err)
	}
	txt, err := enc.Encode(tasks.Example{Text: "hi"})
	if err != nil || !slices.Equal(txt.IDs, append(tok.Encode("hi"), tok.Special().EOS)) {
		t.Errorf("text example: %v %v", txt.IDs, err)
	}
}
