package train

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tokenize"
)

// modelDir lays out a Hugging Face model directory with the real Qwen3 tokenizer and config.
func modelDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open("../../algorithms/tokenize/testdata/hf/qwen3.tokenizer.json.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	out.Close()
	cfg, err := os.ReadFile("../../algorithms/chat/testdata/qwen3/tokenizer_config.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestModelEncoder: a model directory's encoder writes conversations in its own template, its
// episodes use its tool-call convention and stop at its end-of-turn token; chat_template.jinja
// wins over the config's template; a bad tool style is refused by name.
func TestModelEncoder(t *testing.T) {
	dir := modelDir(t)
	enc, err := ModelEncoder(dir, ChatSpec{Kwargs: map[string]json.RawMessage{"enable_thinking": json.RawMessage("false")}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := enc.Encode(tasks.Example{Messages: []tokenize.Message{{Role: "user", Content: "hi"}, {Role: "assistant", Content: "yo"}}})
	if err != nil {
		t.Fatal(err)
	}
	if want := enc.Tok.Encode("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nyo<|im_end|>\n"); !slices.Equal(got.IDs, want) {
		t.Fatalf("ids %v, want %v", got.IDs, want)
	}
	cfg := EpisodeConfig(enc, 2, 64, 0, 0)
	if cfg.Syntax == nil || cfg.ToolOpen != "" {
		t.Fatalf("episode config %+v: want the model's syntax", cfg)
	}
	if id, _ := enc.Tok.Special().ID("<|im_end|>"); !slices.Equal(StopTokens(enc), []int{id}) {
		t.Fatalf("stop tokens %v, want <|im_end|> (%d)", StopTokens(enc), id)
	}
	if byteCfg := EpisodeConfig(Encoder(), 2, 64, 0, 0); byteCfg.Syntax != nil || byteCfg.ToolOpen == "" || !slices.Equal(StopTokens(Encoder()), []int{tokenize.ByteEOS}) {
		t.Fatalf("byte-level episode config %+v", byteCfg)
	}

	if err := os.WriteFile(filepath.Join(dir, "chat_template.jinja"), []byte("{% for m in messages %}[{{ m.role }}]{{ m.content }}<|im_end|>{% endfor %}"), 0o644); err != nil {
		t.Fatal(err)
	}
	enc, err = ModelEncoder(dir, ChatSpec{ToolStyle: "hermes"})
	if err != nil {
		t.Fatal(err)
	}
	if text, _ := enc.Model.Text([]tokenize.Message{{Role: "user", Content: "hi"}}, false); text != "[user]hi<|im_end|>" {
		t.Fatalf("chat_template.jinja not used: %q", text)
	}
	if _, err := ModelEncoder(dir, ChatSpec{ToolStyle: "xml"}); err == nil || !strings.Contains(err.Error(), `tool style "xml": allowed values`) {
		t.Fatalf("bad tool style: %v", err)
	}
	if _, err := ModelEncoder(t.TempDir(), ChatSpec{}); err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Fatalf("empty directory: %v", err)
	}
}
