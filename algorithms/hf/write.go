package hf

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
)

// DefaultMaxShardSize is transformers' default max_shard_size, "5GB" (10⁹ bytes a GB).
const DefaultMaxShardSize int64 = 5_000_000_000

// WriteOptions choose how WriteDir writes the weights.
type WriteOptions struct {
	// DType of the written weights; "" is the dtype they came in (Meta.DType), else F32.
	DType safetensors.DType
	// MaxShardSize splits the weights into shards of at most this many bytes of tensor data (a
	// bigger tensor gets a shard of its own), as save_pretrained's max_shard_size; 0 is
	// DefaultMaxShardSize, a negative value never shards.
	MaxShardSize int64
}

// dtypeNames are config.json's names of the weight dtypes.
var dtypeNames = map[safetensors.DType]string{safetensors.F32: "float32", safetensors.BF16: "bfloat16",
	safetensors.F16: "float16", safetensors.F64: "float64"}

// ConfigJSON is the config.json of cfg written back: model.ToHFConfig's fields and, from original
// (the config.json of the model it was loaded from; nil for a model Temper made), every
// bookkeeping field (token ids, transformers_version, _name_or_path, …), with the dtype field(s)
// naming dtype. Without an original and in F32 it is exactly ToHFConfig's output (what every
// checkpoint so far holds); otherwise the keys are sorted and indented as transformers writes them.
func ConfigJSON(cfg model.Config, original []byte, dtype safetensors.DType) ([]byte, error) {
	arch, err := cfg.ToHFConfig()
	if err != nil {
		return nil, fmt.Errorf("hf: config.json: %w", err)
	}
	dtype = cmp.Or(dtype, safetensors.F32)
	name, ok := dtypeNames[dtype]
	if !ok {
		return nil, fmt.Errorf("hf: config.json: dtype %q: supported %s", dtype, dtypeList())
	}
	if original == nil && dtype == safetensors.F32 {
		return arch, nil
	}
	var out, orig map[string]json.RawMessage
	if err := json.Unmarshal(arch, &out); err != nil {
		return nil, fmt.Errorf("hf: config.json: %w", err)
	}
	if original != nil {
		if err := json.Unmarshal(original, &orig); err != nil {
			return nil, fmt.Errorf("hf: config.json: original: %w", err)
		}
	}
	for k, v := range orig {
		if _, set := out[k]; !set && model.HFBookkeeping(k) {
			out[k] = v
		}
	}
	q, _ := json.Marshal(name)
	// transformers ≥ 4.56 writes dtype, older versions torch_dtype: keep the original's spelling.
	_, hasNew := orig["dtype"]
	_, hasOld := orig["torch_dtype"]
	delete(out, "dtype")
	delete(out, "torch_dtype")
	if hasNew {
		out["dtype"] = q
	}
	if hasOld || !hasNew {
		out["torch_dtype"] = q
	}
	if sameJSON(out, arch) {
		return arch, nil // nothing kept: a Temper checkpoint's config.json stays byte for byte
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil { // map keys sorted, as json.dumps(sort_keys=True)
		return nil, fmt.Errorf("hf: config.json: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// sameJSON reports whether fields holds exactly the fields of the JSON object doc, with equal values.
func sameJSON(fields map[string]json.RawMessage, doc []byte) bool {
	var d map[string]json.RawMessage
	if json.Unmarshal(doc, &d) != nil || len(d) != len(fields) {
		return false
	}
	for k, v := range fields {
		var a, b any
		if json.Unmarshal(v, &a) != nil || json.Unmarshal(d[k], &b) != nil || !reflect.DeepEqual(a, b) {
			return false
		}
	}
	return true
}

// WriteDir writes a model directory as transformers' save_pretrained does: config.json
// (ConfigJSON), the side files of meta copied from meta.From, and cfg's weights (internal paths) in
// opt.DType, in model.safetensors or, when they exceed opt.MaxShardSize, in shards
// model-0000i-of-0000n.safetensors with model.safetensors.index.json.
func WriteDir(dst Sink, cfg model.Config, weights map[string][]float32, meta Meta, opt WriteOptions) error {
	dtype := opt.DType
	dtype = cmp.Or(dtype, meta.DType)
	dtype = cmp.Or(dtype, safetensors.F32)
	if !slices.Contains(FloatDTypes, dtype) {
		return fmt.Errorf("hf: write dir: dtype %q: supported %s", dtype, dtypeList())
	}
	cfgJSON, err := ConfigJSON(cfg, meta.ConfigJSON, dtype)
	if err != nil {
		return err
	}
	if err := writeFile(dst, ConfigFile, func(w io.Writer) error {
		_, err := w.Write(append(cfgJSON, '\n'))
		return err
	}); err != nil {
		return err
	}
	for _, name := range meta.Files {
		if err := copyFile(dst, meta.From, name); err != nil {
			return err
		}
	}
	return WriteWeightFiles(dst, cfg, weights, dtype, opt.MaxShardSize)
}

// WriteWeightFiles writes cfg's weights in dtype as model.safetensors, or as shards with their
// index when they exceed maxShard bytes (0: DefaultMaxShardSize; negative: never).
func WriteWeightFiles(dst Sink, cfg model.Config, weights map[string][]float32, dtype safetensors.DType, maxShard int64) error {
	plan, err := planShards(cfg, dtype, maxShard)
	if err != nil {
		return err
	}
	shapes, err := cfg.HFShapes()
	if err != nil {
		return fmt.Errorf("hf: write weights: %w", err)
	}
	for i, file := range plan.files {
		if err := writeFile(dst, file, func(w io.Writer) error {
			return writeTensors(w, cfg, weights, plan.tensors[i], shapes, dtype)
		}); err != nil {
			return err
		}
	}
	if len(plan.files) == 1 {
		return nil
	}
	return writeFile(dst, IndexFile, func(w io.Writer) error {
		_, err := w.Write(plan.index)
		return err
	})
}

// shardPlan is where each tensor goes.
type shardPlan struct {
	files   []string
	tensors [][]string
	index   []byte // model.safetensors.index.json, when sharded
}

// planShards cuts cfg's tensors into shards as huggingface_hub's split_state_dict_into_shards
// does: tensors in the state dict's order (transformers' module order), a new shard when the next
// tensor would take the current one over maxShard, a tensor bigger than maxShard alone in its own.
func planShards(cfg model.Config, dtype safetensors.DType, maxShard int64) (*shardPlan, error) {
	maxShard = cmp.Or(maxShard, DefaultMaxShardSize)
	shapes, err := cfg.HFShapes()
	if err != nil {
		return nil, fmt.Errorf("hf: write weights: %w", err)
	}
	names := stateDictOrder(shapes)
	if maxShard < 0 {
		return &shardPlan{files: []string{WeightsFile}, tensors: [][]string{names}}, nil
	}
	var shards [][]string
	var cur []string
	var curSize, total int64
	for _, n := range names {
		size := safetensors.Spec{DType: dtype, Shape: shapes[n]}.Size()
		if size > maxShard {
			total += size
			shards = append(shards, []string{n})
			continue
		}
		if curSize+size > maxShard {
			shards = append(shards, cur)
			cur, curSize = nil, 0
		}
		cur = append(cur, n)
		curSize += size
		total += size
	}
	if len(cur) > 0 {
		shards = append(shards, cur)
	}
	if len(shards) <= 1 {
		return &shardPlan{files: []string{WeightsFile}, tensors: [][]string{names}}, nil
	}
	p := &shardPlan{tensors: shards}
	weightMap := map[string]string{}
	for i, s := range shards {
		f := fmt.Sprintf("model-%05d-of-%05d.safetensors", i+1, len(shards))
		p.files = append(p.files, f)
		for _, n := range s {
			weightMap[n] = f
		}
	}
	index := map[string]any{
		"metadata":   map[string]int64{"total_parameters": cfg.ParamCount(), "total_size": total},
		"weight_map": weightMap,
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(index); err != nil { // json.dumps(index, indent=2, sort_keys=True) + "\n"
		return nil, fmt.Errorf("hf: write index: %w", err)
	}
	p.index = buf.Bytes()
	return p, nil
}

var layerName = regexp.MustCompile(`^model\.layers\.(\d+)\.(.+)$`)

// moduleRank orders a decoder layer's tensors as transformers registers its modules: attention
// (q, k, v, o; Phi-3's o before its fused qkv; then Qwen3/Gemma 3's q/k norms), the MLP, then the
// norms, each weight before its bias.
var moduleRank = map[string]int{
	"self_attn.q_proj.weight": 0, "self_attn.q_proj.bias": 1, "self_attn.k_proj.weight": 2,
	"self_attn.k_proj.bias": 3, "self_attn.v_proj.weight": 4, "self_attn.v_proj.bias": 5,
	"self_attn.o_proj.weight": 6, "self_attn.o_proj.bias": 7, "self_attn.qkv_proj.weight": 8,
	"self_attn.q_norm.weight": 9, "self_attn.k_norm.weight": 10,
	"mlp.gate_proj.weight": 11, "mlp.up_proj.weight": 12, "mlp.gate_up_proj.weight": 13, "mlp.down_proj.weight": 14,
	"input_layernorm.weight": 15, "post_attention_layernorm.weight": 16,
	"pre_feedforward_layernorm.weight": 17, "post_feedforward_layernorm.weight": 18,
}

// topRank orders the tensors outside the layers: the embedding first, then the layers, the final
// norm, the LM head and the value head (a SequenceClassification model's score).
var topRank = map[string]int{"model.embed_tokens.weight": 0, "model.norm.weight": 2, "lm_head.weight": 3,
	"score.weight": 4, "score.bias": 5, "score.logprob_weight": 6}

// stateDictOrder sorts Hugging Face tensor names into the order of transformers' state_dict.
func stateDictOrder(shapes map[string][]int) []string {
	type key struct{ top, layer, rank int }
	keyOf := func(n string) key {
		if m := layerName.FindStringSubmatch(n); m != nil {
			l, _ := strconv.Atoi(m[1])
			r, ok := moduleRank[m[2]]
			if !ok {
				r = len(moduleRank)
			}
			return key{1, l, r}
		}
		if r, ok := topRank[n]; ok {
			return key{r, 0, 0}
		}
		return key{len(topRank) + 1, 0, 0}
	}
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := keyOf(names[i]), keyOf(names[j])
		if a != b {
			if a.top != b.top {
				return a.top < b.top
			}
			if a.layer != b.layer {
				return a.layer < b.layer
			}
			return a.rank < b.rank
		}
		return names[i] < names[j]
	})
	return names
}

// ParseSize reads a shard size as huggingface_hub's parse_size_to_int does ("5GB", "500MB", "20KB",
// "1.5TB": decimal units) or as a number of bytes.
func ParseSize(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	units := map[string]float64{"TB": 1e12, "GB": 1e9, "MB": 1e6, "KB": 1e3}
	if len(s) > 2 {
		if u, ok := units[strings.ToUpper(s[len(s)-2:])]; ok {
			if v, err := strconv.ParseFloat(strings.TrimSpace(s[:len(s)-2]), 64); err == nil && v >= 0 {
				return int64(v * u), nil
			}
		}
	}
	return 0, fmt.Errorf("hf: size %q: want bytes or a number with TB, GB, MB or KB", s)
}
