package modeldir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/temperml/temper/algorithms/chat"
	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/internal/usage"
	"github.com/temperml/temper/tpu"
)

// InitOptions are `temper model init`'s flags; the messages of a refusal name them.
type InitOptions struct {
	Like      string   // a model directory whose config.json (and tokenizer) to copy, or a known shape (hf.LikeNames)
	Out       string   // the directory to write: must not exist or be empty
	DType     string   // bf16, f16 or f32; "": the dtype of Like's config.json, else f32
	Seed      uint64   // weights ~ N(0, 0.02²) from this seed
	Sets      []string // config.json overrides, key=value (value as JSON, else a string)
	Tokenizer string   // a directory to copy the tokenizer and chat template from, instead of Like's
	MaxShard  string   // the largest weights shard, e.g. "5GB"
}

// Initialized is what Init wrote.
type Initialized struct {
	Dir, From    string // From: the directory or the shape's source the config came from
	Config       model.Config
	DType        safetensors.DType
	Seed         uint64
	HasTokenizer bool
	Note         string // what the shape's note says about it ("" with another tokenizer)
}

// Text is the summary `temper model init` prints.
func (r *Initialized) Text(w io.Writer) {
	tok := "no tokenizer (byte-level)"
	if r.HasTokenizer {
		tok = "tokenizer and chat template copied"
	}
	cfg := r.Config
	fmt.Fprintf(w, "wrote %s: a random %s model shaped like %s (%d layers, hidden %d, %.3f B parameters, %s, seed %d); %s\n",
		r.Dir, cfg.Family, r.From, cfg.Layers, cfg.DModel, float64(cfg.ParamCount())/1e9, r.DType, r.Seed, tok)
	if r.Note != "" {
		fmt.Fprintf(w, "note: %s\n", r.Note)
	}
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

// Init writes a random-initialised model: config.json of Like (its bookkeeping fields kept) with
// Sets applied, generation_config.json, a tokenizer and chat template when one is known, and
// random weights in DType. Bad options are usage errors.
func Init(o InitOptions) (*Initialized, error) {
	shard, err := hf.ParseSize(o.MaxShard)
	if err != nil {
		return nil, usage.Errorf("model init: --max-shard-size: %v", err)
	}
	out := LocalDir(o.Out)
	if ents, err := os.ReadDir(out); err == nil && len(ents) > 0 {
		return nil, usage.Errorf("model init: --out %s exists and is not empty", out)
	}
	src, err := o.source()
	if err != nil {
		return nil, err
	}
	if src.config, err = applySets(src.config, o.Sets); err != nil {
		return nil, err
	}
	cfg, err := src.check(o.Like)
	if err != nil {
		return nil, err
	}
	dtype, err := o.dtype(src.config)
	if err != nil {
		return nil, err
	}
	weights, err := hf.RandomWeights(cfg, o.Seed, 0)
	if err != nil {
		return nil, err
	}
	meta := hf.Meta{ConfigJSON: src.config, DType: dtype, From: src.files}
	for _, name := range hf.SideFiles {
		if _, ok := src.files[name]; ok {
			meta.Files = append(meta.Files, name)
		}
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return nil, err
	}
	if err := hf.WriteDir(tpu.DirSink(out), cfg, weights, meta, hf.WriteOptions{DType: dtype, MaxShardSize: shard}); err != nil {
		return nil, err
	}
	_, tok := src.files["tokenizer.json"]
	return &Initialized{Dir: out, From: src.from, Config: cfg, DType: dtype, Seed: o.Seed, HasTokenizer: tok, Note: src.note}, nil
}

// initSource is what a new model is made from: config.json and the side files.
type initSource struct {
	config     []byte
	files      memFiles
	from, note string
}

// source reads --like (a directory or a known shape) and --tokenizer.
func (o InitOptions) source() (initSource, error) {
	src := initSource{files: memFiles{}, from: o.Like}
	likeDir := LocalDir(o.Like)
	if st, err := os.Stat(filepath.Join(likeDir, hf.ConfigFile)); err == nil && !st.IsDir() {
		if src.config, err = os.ReadFile(filepath.Join(likeDir, hf.ConfigFile)); err != nil {
			return src, err
		}
		if b, err := os.ReadFile(filepath.Join(likeDir, hf.GenerationConfigFile)); err == nil {
			src.files[hf.GenerationConfigFile] = b
		}
		if o.Tokenizer == "" {
			if err := readTokenizerFiles(likeDir, src.files); err != nil {
				return src, err
			}
		}
	} else {
		like, err := hf.LookupLike(o.Like)
		if err != nil {
			return src, usage.Errorf("model init: --like %s: not a model directory (no %s) and not a known shape: known %s", o.Like, hf.ConfigFile, strings.Join(hf.LikeNames(), ", "))
		}
		src.from, src.note = like.Source, like.Note
		src.config = []byte(like.Config)
		src.files[hf.GenerationConfigFile] = []byte(like.Generation + "\n")
		if o.Tokenizer == "" && like.Tokenizer != "" {
			if src.files["tokenizer.json"], err = tokenize.FamilyTokenizer(like.Tokenizer); err != nil {
				return src, err
			}
			if src.files["tokenizer_config.json"], err = chat.FamilyConfig(like.Tokenizer); err != nil {
				return src, err
			}
		}
	}
	if o.Tokenizer != "" {
		if err := readTokenizerFiles(LocalDir(o.Tokenizer), src.files); err != nil {
			return src, err
		}
		if _, ok := src.files["tokenizer.json"]; !ok {
			return src, usage.Errorf("model init: --tokenizer %s has no tokenizer.json", o.Tokenizer)
		}
		src.note = ""
	}
	return src, nil
}

// check parses config.json and checks the tokenizer's vocabulary fits it.
func (src initSource) check(like string) (model.Config, error) {
	cfg, err := model.FromHFConfig(src.config)
	if err != nil {
		return cfg, usage.Errorf("model init: config.json of %s: %w", like, err)
	}
	if tj, ok := src.files["tokenizer.json"]; ok {
		tok, err := tokenize.LoadHF(bytes.NewReader(tj))
		if err != nil {
			return cfg, usage.Errorf("model init: tokenizer.json: %w", err)
		}
		if err := tok.CheckVocab(cfg.Vocab); err != nil {
			return cfg, usage.Errorf("model init: vocab_size %d: %w", cfg.Vocab, err)
		}
	}
	return cfg, nil
}

// dtype is --dtype, else config.json's dtype, else float32.
func (o InitOptions) dtype(configJSON []byte) (safetensors.DType, error) {
	dtype := hf.ConfigDType(configJSON)
	if o.DType != "" {
		d, ok := map[string]safetensors.DType{"bf16": safetensors.BF16, "f16": safetensors.F16, "f32": safetensors.F32}[strings.ToLower(o.DType)]
		if !ok {
			return "", usage.Errorf("model init: --dtype %s: allowed bf16, f16, f32", o.DType)
		}
		dtype = d
	}
	if dtype == "" {
		dtype = safetensors.F32
	}
	return dtype, nil
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
			return nil, usage.Errorf("model init: --set %q: want key=value", s)
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
