package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/temperml/temper/algorithms/chat"
	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/tpu"
)

func init() {
	register(&command{name: "model",
		summary: "Hugging Face model directories: `model inspect DIR` (family, sizes, dtype, tokenizer, chat template, what Temper does with each config.json field); `model init --like DIR|SHAPE --out DIR` (a random-initialised model of a real shape)",
		usage:   "inspect DIR | init --like DIR|" + strings.Join(hf.LikeNames(), "|") + " --out DIR",
		subs:    []string{"inspect", "init"}, flags: flagsOf[modelCmd]()})
}

type modelCmd struct {
	asJSON    bool
	like, out string
	dtype     string
	seed      uint64
	sets      multiFlag
	tokenizer string
	maxShard  string
}

func (c *modelCmd) bind(fs *flag.FlagSet) {
	fs.BoolVar(&c.asJSON, "json", false, "inspect: print JSON")
	fs.StringVar(&c.like, "like", "", "init: a model directory whose config.json (and tokenizer) to copy, or a known shape: "+strings.Join(hf.LikeNames(), ", "))
	fs.StringVar(&c.out, "out", "", "init: the directory to write (must not exist or be empty)")
	fs.StringVar(&c.dtype, "dtype", "", "init: weight dtype bf16, f16 or f32 (default: the dtype of --like's config.json)")
	fs.Uint64Var(&c.seed, "seed", 1, "init: weights ~ N(0, 0.02²) from this seed (norm scales 1)")
	fs.Var(&c.sets, "set", "init: override a config.json field, key=value (value as JSON, else a string), e.g. --set num_hidden_layers=2 (repeatable)")
	fs.StringVar(&c.tokenizer, "tokenizer", "", "init: copy tokenizer.json, tokenizer_config.json and chat_template.jinja from this directory (default: --like DIR's, or the shape's family's, when Temper carries one)")
	fs.StringVar(&c.maxShard, "max-shard-size", "5GB", "init: cut the weights into shards of at most this size, as save_pretrained does")
}

func (c *modelCmd) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageErr("usage: temper model inspect DIR | init --like DIR|SHAPE --out DIR")
	}
	switch args[0] {
	case "inspect":
		if len(args) != 2 {
			return usageErr("usage: temper model inspect DIR [--json]")
		}
		return c.inspect(args[1])
	case "init":
		if len(args) != 1 || c.like == "" || c.out == "" {
			return usageErr("usage: temper model init --like DIR|%s --out DIR [--dtype bf16|f16|f32] [--seed N] [--set key=value ...]", strings.Join(hf.LikeNames(), "|"))
		}
		return c.init()
	}
	return usageErr("unknown model command %q (inspect, init)", args[0])
}

// localDir accepts a path or a file:// URI.
func localDir(s string) string { return strings.TrimPrefix(s, "file://") }

// modelReport is what `temper model inspect` prints.
type modelReport struct {
	Dir          string `json:"dir"`
	Family       string `json:"family,omitempty"`
	Architecture string `json:"architecture,omitempty"`
	// Refused is the error loading the directory gives, "" when it loads.
	Refused string        `json:"refused,omitempty"`
	Sizes   *modelSizes   `json:"sizes,omitempty"`
	Weights *modelWeights `json:"weights,omitempty"`
	// Attention describes the layers' attention (full, or the sliding-window pattern).
	Attention  string         `json:"attention,omitempty"`
	LayerTypes []string       `json:"layer_types,omitempty"`
	Tokenizer  *tokReport     `json:"tokenizer,omitempty"`
	Chat       *chatReport    `json:"chat,omitempty"`
	Generation *hf.Generation `json:"generation,omitempty"`
	Fields     []hf.Field     `json:"config_fields"`
}

type modelSizes struct {
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

type modelWeights struct {
	Files     []string       `json:"files"`
	Sharded   bool           `json:"sharded"`
	DiskBytes int64          `json:"disk_bytes"`
	DType     string         `json:"dtype"`            // written back on export
	Tensors   map[string]int `json:"tensors_by_dtype"` // a directory may mix dtypes
}

type tokReport struct {
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

type chatReport struct {
	File      string   `json:"file"`
	Templates []string `json:"templates,omitempty"`
	ToolStyle string   `json:"tool_style,omitempty"`
	EndOfTurn []string `json:"end_of_turn,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// inspect is `temper model inspect DIR`: the report, and exit status 2 when loading would refuse
// the directory (after the report says why).
func (c *modelCmd) inspect(dir string) error {
	dir = localDir(dir)
	rep, err := inspectDir(dir)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	if c.asJSON {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(b))
	} else {
		rep.text(stdout)
	}
	if rep.Refused != "" {
		return &exitError{code: 2, err: fmt.Errorf("model inspect %s: Temper refuses this directory: %s", dir, rep.Refused)}
	}
	return nil
}

// inspectDir reads everything of a model directory but the tensor data. Only an unreadable or
// malformed config.json is an error: what loading would refuse is reported in Refused.
func inspectDir(dir string) (*modelReport, error) {
	raw, err := os.ReadFile(filepath.Join(dir, hf.ConfigFile))
	if err != nil {
		return nil, fmt.Errorf("model inspect %s: %w", dir, err)
	}
	rep := &modelReport{Dir: dir}
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
		rep.Sizes = &modelSizes{Layers: cfg.Layers, Hidden: cfg.DModel, Heads: cfg.Heads, KVHeads: cfg.KVHeads,
			HeadDim: cfg.HeadDim, FFN: cfg.FFN, Vocab: cfg.Vocab, Context: cfg.MaxSeq, Parameters: cfg.ParamCount(),
			TiedHead: cfg.TiedEmbeddings}
		w := &modelWeights{Files: m.Shards, Sharded: m.Sharded, DType: string(m.Meta.DType), Tensors: map[string]int{}}
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
func inspectTokenizer(dir string) *tokReport {
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	r := &tokReport{File: "tokenizer.json"}
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
func inspectChat(dir string) *chatReport {
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
	r := &chatReport{File: file}
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

func (r *modelReport) text(w io.Writer) {
	fmt.Fprintf(w, "model       %s\n", r.Dir)
	fmt.Fprintf(w, "family      %s (%s)\n", r.Family, r.Architecture)
	if s := r.Sizes; s != nil {
		fmt.Fprintf(w, "sizes       %d layers, hidden %d, heads %d / kv heads %d, head_dim %d, ffn %d, vocab %d, context %d\n",
			s.Layers, s.Hidden, s.Heads, s.KVHeads, s.HeadDim, s.FFN, s.Vocab, s.Context)
		head := "its own lm_head"
		if s.TiedHead {
			head = "tied to the embeddings"
		}
		fmt.Fprintf(w, "parameters  %d (%.3f B), head %s\n", s.Parameters, float64(s.Parameters)/1e9, head)
	}
	if wt := r.Weights; wt != nil {
		fmt.Fprintf(w, "weights     %s, %.1f MB on disk, dtype %s (tensors: %s; trained in float32, written back in %s)\n",
			strings.Join(wt.Files, ", "), float64(wt.DiskBytes)/1e6, wt.DType, dtypeCounts(wt.Tensors), wt.DType)
	}
	if r.Attention != "" {
		fmt.Fprintf(w, "attention   %s\n", r.Attention)
		if len(r.LayerTypes) > 0 {
			fmt.Fprintf(w, "layers      %s\n", layerPattern(r.LayerTypes))
		}
	}
	switch t := r.Tokenizer; {
	case t == nil:
		fmt.Fprintln(w, "tokenizer   none (no tokenizer.json): Temper's byte-level tokenizer and DefaultChat")
	case t.Error != "":
		fmt.Fprintf(w, "tokenizer   %s: refused: %s\n", t.File, t.Error)
	default:
		fmt.Fprintf(w, "tokenizer   %s: %s model, pre-tokenizer %s, decoder %s, %d ids; bos %s, eos %s, pad %s, add_bos %v\n",
			t.File, t.Model, noneIfEmpty(t.PreTokenizer), noneIfEmpty(t.Decoder), t.Vocab, noneIfEmpty(t.BOS), noneIfEmpty(t.EOS), noneIfEmpty(t.PAD), t.AddBOS)
	}
	switch ch := r.Chat; {
	case ch == nil:
		fmt.Fprintln(w, "chat        no chat template: completions only (chat data needs one)")
	case ch.Error != "":
		fmt.Fprintf(w, "chat        %s: refused: %s\n", ch.File, ch.Error)
	default:
		fmt.Fprintf(w, "chat        %s (%s); tool calls: %s; a turn ends at %q\n", ch.File, strings.Join(ch.Templates, ", "), ch.ToolStyle, ch.EndOfTurn)
	}
	if g := r.Generation; g != nil {
		fmt.Fprintf(w, "generation  generation_config.json: eos ids %v (generation stops at them), bos %v, pad %v\n", g.EOS, g.BOS, g.Pad)
	} else {
		fmt.Fprintln(w, "generation  no generation_config.json")
	}
	if r.Refused != "" {
		fmt.Fprintf(w, "REFUSED     %s\n", r.Refused)
	}
	fmt.Fprintln(w, "config.json fields:")
	for _, use := range []string{hf.FieldRefused, hf.FieldIgnored, hf.FieldDefault, hf.FieldUsed} {
		var names []string
		for _, f := range r.Fields {
			if f.Use != use {
				continue
			}
			switch use {
			case hf.FieldRefused, hf.FieldIgnored:
				fmt.Fprintf(w, "  %-8s %s=%s: %s\n", use, f.Name, short(f.Value), f.Why)
			default:
				names = append(names, f.Name)
			}
		}
		if len(names) > 0 {
			what := map[string]string{hf.FieldUsed: "used", hf.FieldDefault: "default (read; the value Temper assumes without it)"}[use]
			fmt.Fprintf(w, "  %-8s %s\n", what, strings.Join(names, ", "))
		}
	}
}

func noneIfEmpty(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func short(v json.RawMessage) string {
	var b bytes.Buffer
	s := string(v)
	if json.Compact(&b, v) == nil {
		s = b.String()
	}
	if len(s) > 40 {
		s = s[:37] + "..."
	}
	return s
}

func dtypeCounts(m map[string]int) string {
	var parts []string
	for _, d := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%d %s", m[d], d))
	}
	return strings.Join(parts, ", ")
}

// layerPattern writes layer types compactly: S for sliding, F for full, layer 0 first.
func layerPattern(types []string) string {
	var b strings.Builder
	for _, t := range types {
		if t == model.LayerSliding {
			b.WriteByte('S')
		} else {
			b.WriteByte('F')
		}
	}
	return b.String() + " (S sliding, F full; layer 0 first)"
}

// memFiles is a model directory's side files held in memory, to be written by hf.WriteDir.
type memFiles map[string][]byte

func (m memFiles) Open(name string) (io.ReadCloser, error) {
	b, ok := m[name]
	if !ok {
		return nil, fmt.Errorf("open %s: %w", name, fs.ErrNotExist)
	}
	return io.NopCloser(bytes.NewReader(b)), nil
}

func (m memFiles) Has(name string) (bool, error) { _, ok := m[name]; return ok, nil }

// tokenizerFiles are the files of a model directory a tokenizer and chat template are read from.
var tokenizerFiles = []string{"tokenizer.json", "tokenizer_config.json", "chat_template.jinja",
	"special_tokens_map.json", "tokenizer.model"}

// init is `temper model init`: config.json of --like (its bookkeeping fields kept) with --set
// applied, generation_config.json, a tokenizer and chat template when one is known, and random
// weights in --dtype.
func (c *modelCmd) init() error {
	shard, err := hf.ParseSize(c.maxShard)
	if err != nil {
		return usageErr("model init: --max-shard-size: %v", err)
	}
	out := localDir(c.out)
	if ents, err := os.ReadDir(out); err == nil && len(ents) > 0 {
		return usageErr("model init: --out %s exists and is not empty", out)
	}
	files := memFiles{}
	var configJSON []byte
	from := c.like
	likeDir := localDir(c.like)
	note := ""
	if st, err := os.Stat(filepath.Join(likeDir, hf.ConfigFile)); err == nil && !st.IsDir() {
		if configJSON, err = os.ReadFile(filepath.Join(likeDir, hf.ConfigFile)); err != nil {
			return err
		}
		if b, err := os.ReadFile(filepath.Join(likeDir, hf.GenerationConfigFile)); err == nil {
			files[hf.GenerationConfigFile] = b
		}
		if c.tokenizer == "" {
			if err := readTokenizerFiles(likeDir, files); err != nil {
				return err
			}
		}
	} else {
		like, err := hf.LookupLike(c.like)
		if err != nil {
			return usageErr("model init: --like %s: not a model directory (no %s) and not a known shape: known %s", c.like, hf.ConfigFile, strings.Join(hf.LikeNames(), ", "))
		}
		from = like.Source
		configJSON = []byte(like.Config)
		files[hf.GenerationConfigFile] = []byte(like.Generation + "\n")
		if c.tokenizer == "" && like.Tokenizer != "" {
			if files["tokenizer.json"], err = tokenize.FamilyTokenizer(like.Tokenizer); err != nil {
				return err
			}
			if files["tokenizer_config.json"], err = chat.FamilyConfig(like.Tokenizer); err != nil {
				return err
			}
		}
		note = like.Note
	}
	if c.tokenizer != "" {
		if err := readTokenizerFiles(localDir(c.tokenizer), files); err != nil {
			return err
		}
		if _, ok := files["tokenizer.json"]; !ok {
			return usageErr("model init: --tokenizer %s has no tokenizer.json", c.tokenizer)
		}
		note = ""
	}
	if configJSON, err = applySets(configJSON, c.sets); err != nil {
		return err
	}
	cfg, err := model.FromHFConfig(configJSON)
	if err != nil {
		return &exitError{code: 2, err: fmt.Errorf("model init: config.json of %s: %w", c.like, err)}
	}
	if tj, ok := files["tokenizer.json"]; ok {
		tok, err := tokenize.LoadHF(bytes.NewReader(tj))
		if err != nil {
			return &exitError{code: 2, err: fmt.Errorf("model init: tokenizer.json: %w", err)}
		}
		if err := tok.CheckVocab(cfg.Vocab); err != nil {
			return &exitError{code: 2, err: fmt.Errorf("model init: vocab_size %d: %w", cfg.Vocab, err)}
		}
	}
	dtype := hf.ConfigDType(configJSON)
	if c.dtype != "" {
		d, ok := map[string]safetensors.DType{"bf16": safetensors.BF16, "f16": safetensors.F16, "f32": safetensors.F32}[strings.ToLower(c.dtype)]
		if !ok {
			return usageErr("model init: --dtype %s: allowed bf16, f16, f32", c.dtype)
		}
		dtype = d
	}
	if dtype == "" {
		dtype = safetensors.F32
	}
	weights, err := hf.RandomWeights(cfg, c.seed, 0)
	if err != nil {
		return err
	}
	meta := hf.Meta{ConfigJSON: configJSON, DType: dtype, From: files}
	for _, name := range hf.SideFiles {
		if _, ok := files[name]; ok {
			meta.Files = append(meta.Files, name)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := hf.WriteDir(tpu.DirSink(out), cfg, weights, meta, hf.WriteOptions{DType: dtype, MaxShardSize: shard}); err != nil {
		return err
	}
	tok := "no tokenizer (byte-level)"
	if _, ok := files["tokenizer.json"]; ok {
		tok = "tokenizer and chat template copied"
	}
	fmt.Fprintf(stdout, "wrote %s: a random %s model shaped like %s (%d layers, hidden %d, %.3f B parameters, %s, seed %d); %s\n",
		out, cfg.Family, from, cfg.Layers, cfg.DModel, float64(cfg.ParamCount())/1e9, dtype, c.seed, tok)
	if note != "" {
		fmt.Fprintf(stdout, "note: %s\n", note)
	}
	return nil
}

// readTokenizerFiles copies the tokenizer and template files a directory has into files.
func readTokenizerFiles(dir string, files memFiles) error {
	for _, name := range tokenizerFiles {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("model init: %w", err)
		}
		files[name] = b
	}
	return nil
}

// applySets sets config.json fields from key=value flags (value as JSON, else a string).
func applySets(configJSON []byte, sets []string) ([]byte, error) {
	if len(sets) == 0 {
		return configJSON, nil
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(configJSON, &m); err != nil {
		return nil, fmt.Errorf("model init: config.json: %w", err)
	}
	for _, s := range sets {
		k, v, ok := strings.Cut(s, "=")
		if !ok || k == "" {
			return nil, usageErr("model init: --set %q: want key=value", s)
		}
		if json.Valid([]byte(v)) {
			m[k] = json.RawMessage(v)
		} else {
			q, _ := json.Marshal(v)
			m[k] = q
		}
	}
	return json.Marshal(m)
}
