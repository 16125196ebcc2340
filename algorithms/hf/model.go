package hf

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"sort"
	"strings"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
)

// FloatDTypes are the weight dtypes Temper reads (into float32) and writes.
var FloatDTypes = []safetensors.DType{safetensors.F32, safetensors.BF16, safetensors.F16, safetensors.F64}

// Model is a Hugging Face model directory as Inspect found it: everything but the tensor data.
type Model struct {
	// Config is config.json read by model.FromHFConfig, with the heads the weights hold besides
	// the causal LM (a value head: score.weight).
	Config model.Config
	// Meta is what is carried to every directory written from this model.
	Meta Meta
	// Generation is generation_config.json read (nil when the directory has none).
	Generation *Generation
	// Shards are the weight files: [model.safetensors], or the files the index names in order.
	Shards []string
	// Sharded says the weights come through model.safetensors.index.json.
	Sharded bool

	headers []*safetensors.Header // per shard
}

// Meta is what a model carries besides its architecture and weights from the directory it was read
// from to those written from it.
type Meta struct {
	// ConfigJSON is the config.json read (nil: a model Temper made); its bookkeeping fields are kept.
	ConfigJSON []byte
	// DType is the dtype the weights came in, written back by default ("" is F32).
	DType safetensors.DType
	// Files are the side files (SideFiles) found, copied verbatim from From.
	Files []string
	From  Source
}

// Inspect reads a model directory's config.json, generation_config.json and weight headers (one
// file or the shards of model.safetensors.index.json) and checks them against each other: every
// tensor of the config present with its shape and a float dtype, nothing else (a tied model's
// lm_head.weight aside), every shard the index names present with exactly its tensors.
func Inspect(src Source) (*Model, error) {
	raw, err := readAll(src, ConfigFile)
	if err != nil {
		return nil, err
	}
	cfg, err := model.FromHFConfig(raw)
	if err != nil {
		return nil, badf("hf: %s: %w", ConfigFile, err)
	}
	m := &Model{Config: cfg, Meta: Meta{ConfigJSON: raw, From: src}}
	for _, name := range SideFiles {
		ok, err := src.Has(name)
		if err != nil {
			return nil, fmt.Errorf("hf: inspect %s: %w", name, err)
		}
		if ok {
			m.Meta.Files = append(m.Meta.Files, name)
		}
	}
	if slices.Contains(m.Meta.Files, GenerationConfigFile) {
		b, err := readAll(src, GenerationConfigFile)
		if err != nil {
			return nil, err
		}
		if m.Generation, err = ParseGeneration(b); err != nil {
			return nil, err
		}
	}
	if err := m.readHeaders(src); err != nil {
		return nil, err
	}
	if err := m.check(); err != nil {
		return nil, err
	}
	return m, nil
}

// readHeaders finds the weight files (single or through the index) and reads their headers.
func (m *Model) readHeaders(src Source) error {
	single, err := src.Has(WeightsFile)
	if err != nil {
		return fmt.Errorf("hf: inspect %s: %w", WeightsFile, err)
	}
	indexed, err := src.Has(IndexFile)
	if err != nil {
		return fmt.Errorf("hf: inspect %s: %w", IndexFile, err)
	}
	var index map[string]string // tensor → shard
	switch {
	case single:
		m.Shards = []string{WeightsFile}
	case indexed:
		b, err := readAll(src, IndexFile)
		if err != nil {
			return err
		}
		var ix struct {
			WeightMap map[string]string `json:"weight_map"`
		}
		if err := json.Unmarshal(b, &ix); err != nil {
			return badf("hf: %s: %w", IndexFile, err)
		}
		if len(ix.WeightMap) == 0 {
			return badf("hf: %s: weight_map is empty", IndexFile)
		}
		index = ix.WeightMap
		seen := map[string]bool{}
		for _, f := range index {
			if !seen[f] {
				seen[f] = true
				m.Shards = append(m.Shards, f)
			}
		}
		sort.Strings(m.Shards) // model-00001-of-0000N… in order
		m.Sharded = true
	default:
		return badf("hf: no weights: neither %s nor %s (only safetensors weights are read)", WeightsFile, IndexFile)
	}
	for _, shard := range m.Shards {
		if strings.Contains(shard, "/") || strings.Contains(shard, `\`) || shard == ".." {
			return badf("hf: %s names shard %q: want a file name in the same directory", IndexFile, shard)
		}
		rc, err := src.Open(shard)
		if errors.Is(err, fs.ErrNotExist) && m.Sharded {
			return badf("hf: %s names shard %s, which is missing: %w", IndexFile, shard, err)
		}
		if err != nil {
			return fmt.Errorf("hf: open %s: %w", shard, err)
		}
		h, err := safetensors.ReadHeader(bufio.NewReader(rc))
		rc.Close()
		if err != nil {
			return badf("hf: %s: %w", shard, err)
		}
		m.headers = append(m.headers, h)
	}
	if index == nil {
		return nil
	}
	for i, h := range m.headers {
		for _, e := range h.Entries {
			if f, ok := index[e.Name]; !ok {
				return badf("hf: shard %s holds tensor %q, which %s does not list", m.Shards[i], e.Name, IndexFile)
			} else if f != m.Shards[i] {
				return badf("hf: shard %s holds tensor %q, which %s puts in %s", m.Shards[i], e.Name, IndexFile, f)
			}
		}
	}
	for name, f := range index {
		h := m.headers[slices.Index(m.Shards, f)]
		if _, ok := h.Entry(name); !ok {
			return badf("hf: %s puts tensor %q in shard %s, which does not hold it", IndexFile, name, f)
		}
	}
	return nil
}

// check compares the headers with the config: names, shapes, dtypes; it sets the value head from
// the names and the weights' dtype.
func (m *Model) check() error {
	where := map[string]string{}
	var dtypes = map[safetensors.DType]int{}
	for i, h := range m.headers {
		for _, e := range h.Entries {
			if f, dup := where[e.Name]; dup {
				return badf("hf: tensor %q is in both %s and %s", e.Name, f, m.Shards[i])
			}
			where[e.Name] = m.Shards[i]
			if !slices.Contains(FloatDTypes, e.DType) {
				return badf("hf: %s: tensor %q has dtype %s: supported %s", m.Shards[i], e.Name, e.DType, dtypeList())
			}
			dtypes[e.DType]++
		}
	}
	m.Config = m.Config.WithHeads(func(name string) bool { _, ok := where[name]; return ok })
	if err := CheckTensors(m.Config, func(yield func(name string, shape []int, file string) bool) {
		for i, h := range m.headers {
			for _, e := range h.Entries {
				if !yield(e.Name, e.Shape, m.Shards[i]) {
					return
				}
			}
		}
	}); err != nil {
		return err
	}
	m.Meta.DType = mainDType(dtypes, m.Meta.ConfigJSON)
	return nil
}

// CheckTensors checks a weight file's tensors (name, shape, the file they are in) against cfg: every
// tensor of cfg present with its shape, no other (a tied model's lm_head.weight aside).
func CheckTensors(cfg model.Config, tensors func(yield func(name string, shape []int, file string) bool)) error {
	shapes, err := cfg.HFShapes()
	if err != nil {
		return fmt.Errorf("hf: %w", err)
	}
	seen := map[string]bool{}
	var bad error
	tensors(func(name string, shape []int, file string) bool {
		want, ok := shapes[name]
		switch {
		case !ok && name == "lm_head.weight" && cfg.TiedEmbeddings:
		case !ok:
			bad = badf("hf: %s: tensor %q is not part of this %s model (config.json)", file, name, cfg.Family)
		case !slices.Equal(want, shape):
			bad = badf("hf: %s: tensor %q has shape %v, config.json implies %v", file, name, shape, want)
		}
		seen[name] = true
		return bad == nil
	})
	if bad != nil {
		return bad
	}
	var missing []string
	for name := range shapes {
		if !seen[name] {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		more := ""
		if len(missing) > 1 {
			more = fmt.Sprintf(" (and %d more)", len(missing)-1)
		}
		return badf("hf: tensor %q%s of this %s model is missing from the weights", missing[0], more, cfg.Family)
	}
	return nil
}

func dtypeList() string {
	s := make([]string, len(FloatDTypes))
	for i, d := range FloatDTypes {
		s[i] = string(d)
	}
	return strings.Join(s, ", ")
}

// torchDTypes maps config.json's dtype names to safetensors dtypes.
var torchDTypes = map[string]safetensors.DType{"float32": safetensors.F32, "bfloat16": safetensors.BF16,
	"float16": safetensors.F16, "float64": safetensors.F64}

// mainDType is the weights' dtype: the only one, or for mixed files the one config.json names (else
// the most common).
func mainDType(counts map[safetensors.DType]int, configJSON []byte) safetensors.DType {
	if len(counts) == 1 {
		for d := range counts {
			return d
		}
	}
	if d := ConfigDType(configJSON); d != "" && counts[d] > 0 {
		return d
	}
	best := safetensors.F32
	for _, d := range FloatDTypes {
		if counts[d] > counts[best] {
			best = d
		}
	}
	return best
}

// ConfigDType is the weight dtype a config.json names (dtype, or torch_dtype), "" when none: a
// Temper checkpoint stores float32 weights and keeps the dtype its model came in here.
func ConfigDType(configJSON []byte) safetensors.DType {
	var c struct {
		DType      string `json:"dtype"`
		TorchDType string `json:"torch_dtype"`
	}
	if json.Unmarshal(configJSON, &c) != nil {
		return ""
	}
	if d, ok := torchDTypes[c.DType]; ok {
		return d
	}
	return torchDTypes[c.TorchDType]
}

// TensorDTypes counts the weights' tensors by dtype (a directory may mix them, e.g. F32 norms
// beside BF16 matrices).
func (m *Model) TensorDTypes() map[safetensors.DType]int {
	out := map[safetensors.DType]int{}
	for _, h := range m.headers {
		for _, e := range h.Entries {
			out[e.DType]++
		}
	}
	return out
}
