package modeldir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/temperml/temper/algorithms/chat"
	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/tokenize"
)

// LocalDir accepts a path or a file:// URI.
func LocalDir(s string) string { return strings.TrimPrefix(s, "file://") }

// Report is what `temper model inspect` prints.
type Report struct {
	Dir          string `json:"dir"`
	Family       string `json:"family,omitempty"`
	Architecture string `json:"architecture,omitempty"`
	// Refused is the error loading the directory gives, "" when it loads.
	Refused string   `json:"refused,omitempty"`
	Sizes   *Sizes   `json:"sizes,omitempty"`
	Weights *Weights `json:"weights,omitempty"`
	// Attention describes the layers' attention (full, or the sliding-window pattern).
	Attention  string         `json:"attention,omitempty"`
	LayerTypes []string       `json:"layer_types,omitempty"`
	Tokenizer  *Tokenizer     `json:"tokenizer,omitempty"`
	Chat       *Chat          `json:"chat,omitempty"`
	Generation *hf.Generation `json:"generation,omitempty"`
	Fields     []hf.Field     `json:"config_fields"`
}

// Sizes are the model's shape.
type Sizes struct {
	Layers     int   `json:"layers"`
	Hidden     int   `json:"hidden"`
	Heads      int   `json:"heads"`
	KVHeads    int   `json:"kv_heads"`
	HeadDim    int   `json:"head_dim"`
	FFN        int   `json:"ffn"`
	Vocab      int   `json:"vocab"`
	Context    int   `json:"context"`
	Parameters int64 `json:"parameters"`
	TiedHead   bool  `json:"tied_head"`
}

// Weights are the safetensors files and their dtypes.
type Weights struct {
	Files     []string       `json:"files"`
	Sharded   bool           `json:"sharded"`
	DiskBytes int64          `json:"disk_bytes"`
	DType     string         `json:"dtype"`            // written back on export
	Tensors   map[string]int `json:"tensors_by_dtype"` // a directory may mix dtypes
}

// Tokenizer is tokenizer.json's kind and tokenizer_config.json's special tokens.
type Tokenizer struct {
	File         string `json:"file"`
	Model        string `json:"model,omitempty"`
	PreTokenizer string `json:"pre_tokenizer,omitempty"`
	Decoder      string `json:"decoder,omitempty"`
	Vocab        int    `json:"vocab,omitempty"`
	BOS          string `json:"bos,omitempty"`
	EOS          string `json:"eos,omitempty"`
	PAD          string `json:"pad,omitempty"`
	AddBOS       bool   `json:"add_bos"`
	Error        string `json:"error,omitempty"`
}

// Chat is the chat template and the tool-call style Temper uses with it.
type Chat struct {
	File      string   `json:"file"`
	Templates []string `json:"templates,omitempty"`
	ToolStyle string   `json:"tool_style,omitempty"`
	EndOfTurn []string `json:"end_of_turn,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// inspectDir reads everything of a model directory but the tensor data. Only an unreadable or
// malformed config.json is an error: what loading would refuse is reported in Refused.
func Inspect(dir string) (*Report, error) {
	raw, err := os.ReadFile(filepath.Join(dir, hf.ConfigFile))
	if err != nil {
		return nil, fmt.Errorf("model inspect %s: %w", dir, err)
	}
	rep := &Report{Dir: dir}
	if rep.Fields, err = hf.ConfigFields(raw); err != nil {
		rep.Refused = err.Error()
	}
	var head struct {
		ModelType     string   `json:"model_type"`
		Architectures []string `json:"architectures"`
	}
	_ = json.Unmarshal(raw, &head) // ConfigFields has said whether it is an object
	rep.Family = head.ModelType
	if len(head.Architectures) > 0 {
		rep.Architecture = head.Architectures[0]
	}
	m, err := hf.Inspect(hf.FS(os.DirFS(dir)))
	if err != nil && rep.Refused == "" {
		rep.Refused = err.Error()
	}
	if err == nil {
		cfg := m.Config
		rep.Sizes = &Sizes{Layers: cfg.Layers, Hidden: cfg.DModel, Heads: cfg.Heads, KVHeads: cfg.KVHeads,
			HeadDim: cfg.HeadDim, FFN: cfg.FFN, Vocab: cfg.Vocab, Context: cfg.MaxSeq, Parameters: cfg.ParamCount(),
			TiedHead: cfg.TiedEmbeddings}
		w := &Weights{Files: m.Shards, Sharded: m.Sharded, DType: string(m.Meta.DType), Tensors: map[string]int{}}
		if m.Sharded {
			w.Files = append([]string{hf.IndexFile}, w.Files...)
		}
		for _, f := range w.Files {
			if st, err := os.Stat(filepath.Join(dir, f)); err == nil {
				w.DiskBytes += st.Size()
			}
		}
		for d, n := range m.TensorDTypes() {
			w.Tensors[string(d)] = n
		}
		rep.Weights = w
		rep.Attention, rep.LayerTypes = attentionOf(cfg)
		rep.Generation = m.Generation
	} else if b, gerr := os.ReadFile(filepath.Join(dir, hf.GenerationConfigFile)); gerr == nil {
		rep.Generation, _ = hf.ParseGeneration(b)
	}
	rep.Tokenizer = inspectTokenizer(dir)
	rep.Chat = inspectChat(dir)
	return rep, nil
}

// attentionOf describes the layers' attention: full, or which layers slide over which window.
func attentionOf(cfg model.Config) (string, []string) {
	if cfg.SlidingWindow == 0 {
		return "full causal attention on every layer", nil
	}
	var sliding, full int
	for l := range cfg.Layers {
		if cfg.Sliding(l) {
			sliding++
		} else {
			full++
		}
	}
	s := fmt.Sprintf("sliding window %d on %d layers, full on %d", cfg.SlidingWindow, sliding, full)
	if cfg.RopeLocalTheta > 0 {
		s += fmt.Sprintf("; RoPE θ %g local, %g global", cfg.RopeLocalTheta, cfg.RopeTheta)
	}
	return s, cfg.LayerTypes
}

// inspectTokenizer reads tokenizer.json and tokenizer_config.json's specials (nil: no tokenizer.json,
// a byte-level model).
func inspectTokenizer(dir string) *Tokenizer {
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	r := &Tokenizer{File: "tokenizer.json"}
	if err != nil {
		r.Error = err.Error()
		return r
	}
	var kinds struct {
		Model        struct{ Type string }  `json:"model"`
		PreTokenizer *struct{ Type string } `json:"pre_tokenizer"`
		Decoder      *struct{ Type string } `json:"decoder"`
	}
	if err := json.Unmarshal(tj, &kinds); err == nil {
		r.Model = kinds.Model.Type
		if kinds.PreTokenizer != nil {
			r.PreTokenizer = kinds.PreTokenizer.Type
		}
		if kinds.Decoder != nil {
			r.Decoder = kinds.Decoder.Type
		}
	}
	bpe, err := tokenize.LoadHF(bytes.NewReader(tj))
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Vocab = bpe.VocabSize()
	spell := func(text string) string {
		if text == "" {
			return ""
		}
		if id, ok := bpe.TokenID(text); ok {
			return fmt.Sprintf("%s (%d)", text, id)
		}
		return text + " (not in the vocabulary)"
	}
	if tc, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err == nil {
		if hc, err := tokenize.LoadHFConfig(bytes.NewReader(tc)); err != nil {
			r.Error = "tokenizer_config.json: " + err.Error()
		} else {
			r.BOS, r.EOS, r.PAD = spell(hc.BOS), spell(hc.EOS), spell(hc.PAD)
			r.AddBOS = hc.AddBOS != nil && *hc.AddBOS
		}
	}
	return r
}

// inspectChat finds the chat template and the tool-call style Temper will use with it (nil: none).
func inspectChat(dir string) *Chat {
	tc, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return nil
	}
	jinja, err := os.ReadFile(filepath.Join(dir, "chat_template.jinja"))
	file := "chat_template.jinja"
	if err != nil {
		jinja, file = nil, "tokenizer_config.json chat_template"
		var has struct {
			ChatTemplate json.RawMessage `json:"chat_template"`
		}
		if json.Unmarshal(tc, &has) != nil || len(has.ChatTemplate) == 0 || string(has.ChatTemplate) == "null" {
			return nil
		}
	}
	r := &Chat{File: file}
	ts, err := chat.Load(filepath.Join(dir, "tokenizer_config.json"), tc, jinja)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	t, err := ts.Select("", false)
	if err != nil {
		r.Error = err.Error()
		return r
	}
	r.Templates = append(r.Templates, t.Name)
	if tt, err := ts.Select("", true); err == nil && tt.Name != t.Name {
		r.Templates = append(r.Templates, tt.Name+" (requests with tools)")
	}
	style, err := chat.DetectToolStyle(t.Source)
	if err != nil {
		r.ToolStyle = "none: " + err.Error()
		style = chat.ToolsHermes // the end of a turn does not depend on it
	} else {
		r.ToolStyle = string(style)
	}
	if f, err := chat.NewFormat(t, style, chat.Options{}); err != nil {
		r.Error = err.Error()
	} else {
		r.EndOfTurn = f.EndOfTurn
	}
	return r
}
