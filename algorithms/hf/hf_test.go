package hf

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
)

// The golden directories come from scripts/goldens/hf/make_goldens.py: torch's dtype conversions,
// huggingface_hub's shard split and save_pretrained's files (see its docstring).

type golden struct {
	MaxShardSize json.RawMessage      `json:"max_shard_size"` // "5GB", or a number of bytes
	DType        safetensors.DType    `json:"dtype"`
	First        map[string][]float64 `json:"first"`
}

func readGolden(t *testing.T, dir string) golden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "golden.json"))
	if err != nil {
		t.Fatal(err)
	}
	var g golden
	if err := json.Unmarshal(b, &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// shardSize parses huggingface_hub's max_shard_size: bytes, or a size string ("5GB", "20KB").
func shardSize(t *testing.T, raw json.RawMessage) int64 {
	t.Helper()
	var n int64
	if json.Unmarshal(raw, &n) == nil {
		return n
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil || len(s) < 3 {
		t.Fatalf("max_shard_size %s", raw)
	}
	units := map[string]float64{"KB": 1e3, "MB": 1e6, "GB": 1e9}
	v, err := strconv.ParseFloat(s[:len(s)-2], 64)
	if err != nil || units[s[len(s)-2:]] == 0 {
		t.Fatalf("size %q", s)
	}
	return int64(v * units[s[len(s)-2:]])
}

// memSink collects written files.
type memSink map[string][]byte

type memFile struct {
	bytes.Buffer
	name string
	sink memSink
}

func (f *memFile) Close() error { f.sink[f.name] = f.Bytes(); return nil }

func (s memSink) Create(name string) (io.WriteCloser, error) {
	return &memFile{name: name, sink: s}, nil
}

func (s memSink) fs() fstest.MapFS {
	m := fstest.MapFS{}
	for n, b := range s {
		m[n] = &fstest.MapFile{Data: b}
	}
	return m
}

func loadFS(t *testing.T, src Source) (*Model, map[string][]float32) {
	t.Helper()
	m, err := Inspect(src)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := m.OpenWeights(src)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	w, dt, err := ReadWeights(rc, m.Config, "weights")
	if err != nil {
		t.Fatal(err)
	}
	if dt != m.Meta.DType {
		t.Fatalf("ReadWeights found %s, Inspect %s", dt, m.Meta.DType)
	}
	return m, w
}

// TestGoldenDirs: each directory transformers would write reads with its dtype, shards, side files
// and generation config; the values are torch's; written back (in the dtype it came in, with the
// same max_shard_size) every weight file, the index and the side files are byte-identical, and
// config.json keeps the original's bookkeeping fields and dtype spelling. Written again from the
// re-read directory, everything is byte-identical to the first export.
func TestGoldenDirs(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dtype   safetensors.DType
		sharded int // shard files (0: one model.safetensors)
		files   []string
		eos     []int
		keep    map[string]string // config.json fields kept verbatim (JSON)
	}{
		{"llama-bf16", safetensors.BF16, 0, []string{"generation_config.json", "tokenizer_config.json", "chat_template.jinja"}, []int{2, 3},
			map[string]string{"torch_dtype": `"bfloat16"`, "transformers_version": `"4.55.0"`, "_name_or_path": `"temper/llama-tiny"`, "bos_token_id": "1", "pad_token_id": "null", "initializer_range": "0.02"}},
		{"gemma3-f16", safetensors.F16, 0, nil, nil,
			map[string]string{"dtype": `"float16"`, "transformers_version": `"5.0.0"`, "pad_token_id": "0"}},
		{"qwen3-bf16-sharded", safetensors.BF16, 4, nil, nil,
			map[string]string{"dtype": `"bfloat16"`, "eos_token_id": "2"}},
		{"llama-bf16-sharded", safetensors.BF16, 17, nil, nil, map[string]string{"torch_dtype": `"bfloat16"`}},
		{"llama-f16-sharded", safetensors.F16, 17, nil, nil, map[string]string{"torch_dtype": `"float16"`}},
		{"llama-f32", safetensors.F32, 0, nil, nil, map[string]string{"torch_dtype": `"float32"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join("testdata", tc.name)
			g := readGolden(t, dir)
			src := FS(os.DirFS(dir))
			m, w := loadFS(t, src)
			if m.Meta.DType != tc.dtype || g.DType != tc.dtype {
				t.Fatalf("dtype %s, golden %s, want %s", m.Meta.DType, g.DType, tc.dtype)
			}
			if m.Sharded != (tc.sharded > 0) || (tc.sharded > 0 && len(m.Shards) != tc.sharded) {
				t.Fatalf("shards %v (sharded %v), want %d", m.Shards, m.Sharded, tc.sharded)
			}
			if !slices.Equal(m.Meta.Files, tc.files) {
				t.Fatalf("side files %v, want %v", m.Meta.Files, tc.files)
			}
			if tc.eos != nil && (m.Generation == nil || !slices.Equal(m.Generation.EOS, tc.eos)) {
				t.Fatalf("generation config %+v, want eos %v", m.Generation, tc.eos)
			}
			hfw, err := m.Config.ToHF(w)
			if err != nil {
				t.Fatal(err)
			}
			if len(hfw) != len(g.First) {
				t.Fatalf("%d tensors, golden %d", len(hfw), len(g.First))
			}
			for name, want := range g.First {
				for i, v := range want {
					if float64(hfw[name][i]) != v {
						t.Fatalf("%s[%d] = %v, torch reads %v", name, i, hfw[name][i], v)
					}
				}
			}

			out := memSink{}
			if err := WriteDir(out, m.Config, w, m.Meta, WriteOptions{MaxShardSize: shardSize(t, g.MaxShardSize)}); err != nil {
				t.Fatal(err)
			}
			names, _ := fs.Glob(os.DirFS(dir), "*")
			for _, n := range names {
				if n == "golden.json" || n == ConfigFile || strings.HasPrefix(n, "to-") {
					continue
				}
				want, _ := os.ReadFile(filepath.Join(dir, n))
				if got, ok := out[n]; !ok || !bytes.Equal(got, want) {
					t.Errorf("written %s differs from the golden one (%d vs %d bytes, written: %v)", n, len(got), len(want), ok)
				}
			}
			if len(out) != len(names)-1-countPrefix(names, "to-") {
				t.Errorf("wrote %d files, the golden directory has %d", len(out), len(names)-1-countPrefix(names, "to-"))
			}
			var cfgOut map[string]json.RawMessage
			if err := json.Unmarshal(out[ConfigFile], &cfgOut); err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.keep {
				if string(cfgOut[k]) != v {
					t.Errorf("config.json %s = %s, want %s kept", k, cfgOut[k], v)
				}
			}
			if _, both := cfgOut["dtype"]; both && cfgOut["torch_dtype"] != nil {
				t.Errorf("config.json has both dtype and torch_dtype: %s", out[ConfigFile])
			}

			// Re-import the export and export again: byte-identical.
			m2, w2 := loadFS(t, FS(out.fs()))
			if !slices.Equal(m2.Meta.Files, m.Meta.Files) || m2.Meta.DType != m.Meta.DType {
				t.Fatalf("re-imported %+v, first %+v", m2.Meta, m.Meta)
			}
			out2 := memSink{}
			if err := WriteDir(out2, m2.Config, w2, m2.Meta, WriteOptions{MaxShardSize: shardSize(t, g.MaxShardSize)}); err != nil {
				t.Fatal(err)
			}
			if len(out2) != len(out) {
				t.Fatalf("second export wrote %d files, first %d", len(out2), len(out))
			}
			for n, b := range out {
				if !bytes.Equal(out2[n], b) {
					t.Errorf("second export's %s differs from the first", n)
				}
			}
		})
	}
}

func countPrefix(names []string, p string) int {
	n := 0
	for _, s := range names {
		if strings.HasPrefix(s, p) {
			n++
		}
	}
	return n
}

// TestNarrowingMatchesTorch: float32 weights written as BF16 and F16 are torch's Tensor.to, byte for
// byte (round to nearest even, subnormals, the file layout).
func TestNarrowingMatchesTorch(t *testing.T) {
	dir := filepath.Join("testdata", "llama-f32")
	m, w := loadFS(t, FS(os.DirFS(dir)))
	for _, dt := range []safetensors.DType{safetensors.BF16, safetensors.F16} {
		var buf bytes.Buffer
		if err := WriteWeights(&buf, m.Config, w, dt); err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(dir, "to-"+strings.ToLower(string(dt))+".safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), want) {
			t.Errorf("%s: written weights differ from torch's conversion", dt)
		}
	}
}

// TestWriteDirDTypeAndShards: the dtype asked for wins over the one the model came in; a negative
// MaxShardSize never shards; a model bigger than the limit gets an index whose totals match.
func TestWriteDirDTypeAndShards(t *testing.T) {
	m, w := loadFS(t, FS(os.DirFS(filepath.Join("testdata", "llama-bf16"))))
	out := memSink{}
	if err := WriteDir(out, m.Config, w, m.Meta, WriteOptions{DType: safetensors.F32, MaxShardSize: -1}); err != nil {
		t.Fatal(err)
	}
	h, err := safetensors.ReadHeader(bytes.NewReader(out[WeightsFile]))
	if err != nil || h.Entries[0].DType != safetensors.F32 {
		t.Fatalf("written %v (%v), want F32", h, err)
	}
	if !strings.Contains(string(out[ConfigFile]), `"torch_dtype": "float32"`) {
		t.Fatalf("config.json does not name float32:\n%s", out[ConfigFile])
	}
	out = memSink{}
	if err := WriteDir(out, m.Config, w, m.Meta, WriteOptions{MaxShardSize: 10_000}); err != nil {
		t.Fatal(err)
	}
	var ix struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(out[IndexFile], &ix); err != nil {
		t.Fatal(err)
	}
	var total int64
	for n, b := range out {
		if strings.HasPrefix(n, "model-") {
			h, err := safetensors.ReadHeader(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			total += h.DataSize
			if h.DataSize > 10_000 && len(h.Entries) > 1 {
				t.Errorf("shard %s holds %d bytes in %d tensors, over the limit", n, h.DataSize, len(h.Entries))
			}
		}
	}
	if ix.Metadata["total_size"] != total || ix.Metadata["total_parameters"] != m.Config.ParamCount() || len(ix.WeightMap) != len(mustShapes(t, m.Config)) {
		t.Fatalf("index %+v: want total_size %d, total_parameters %d", ix.Metadata, total, m.Config.ParamCount())
	}
	if _, w2 := loadFS(t, FS(out.fs())); !sameWeights(w, w2) {
		t.Fatal("sharded export reads back as other weights")
	}
}

func mustShapes(t *testing.T, cfg model.Config) map[string][]int {
	s, err := cfg.HFShapes()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sameWeights(a, b map[string][]float32) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if !slices.Equal(v, b[k]) {
			return false
		}
	}
	return true
}

// TestConfigJSONOfTemperModels: a model Temper made (no original config.json) writes exactly
// ToHFConfig's bytes in F32 (what every checkpoint holds), also when the "original" is that same
// config.json; another dtype is named.
func TestConfigJSONOfTemperModels(t *testing.T) {
	cfg, err := model.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	arch, err := cfg.ToHFConfig()
	if err != nil {
		t.Fatal(err)
	}
	for _, original := range [][]byte{nil, arch} {
		got, err := ConfigJSON(cfg, original, "")
		if err != nil || !bytes.Equal(got, arch) {
			t.Fatalf("ConfigJSON(original %d bytes) = %s (%v), want ToHFConfig's bytes", len(original), got, err)
		}
	}
	got, err := ConfigJSON(cfg, arch, safetensors.BF16)
	if err != nil || !strings.Contains(string(got), `"torch_dtype": "bfloat16"`) {
		t.Fatalf("BF16: %s (%v)", got, err)
	}
	if back, err := model.FromHFConfig(got); err != nil || back.Family != cfg.Family {
		t.Fatalf("BF16 config.json reads back as %+v (%v)", back, err)
	}
}

// TestBadInput: what is wrong with a directory is named (file, tensor, allowed values) and is a
// format error; nothing half-loads.
func TestBadInput(t *testing.T) {
	sharded := filepath.Join("testdata", "qwen3-bf16-sharded")
	single := filepath.Join("testdata", "llama-bf16")
	shard1 := "model-00001-of-00004.safetensors"
	for _, tc := range []struct {
		name string
		dir  string
		edit func(t *testing.T, m fstest.MapFS)
		want string
	}{
		{"index names a missing shard", sharded, func(t *testing.T, m fstest.MapFS) { delete(m, "model-00003-of-00004.safetensors") },
			"model.safetensors.index.json names shard model-00003-of-00004.safetensors, which is missing"},
		{"index puts a tensor in another shard", sharded, func(t *testing.T, m fstest.MapFS) {
			editIndex(t, m, func(wm map[string]string) { wm["model.norm.weight"] = shard1 })
		}, "shard model-00004-of-00004.safetensors holds tensor \"model.norm.weight\", which model.safetensors.index.json puts in " + shard1},
		{"index lists a tensor no shard holds", sharded, func(t *testing.T, m fstest.MapFS) {
			editIndex(t, m, func(wm map[string]string) { wm["model.layers.9.mlp.up_proj.weight"] = shard1 })
		}, "model.safetensors.index.json puts tensor \"model.layers.9.mlp.up_proj.weight\" in shard " + shard1 + ", which does not hold it"},
		{"a shard holds a tensor the index does not list", sharded, func(t *testing.T, m fstest.MapFS) {
			editIndex(t, m, func(wm map[string]string) { delete(wm, "lm_head.weight") })
		}, "shard model-00004-of-00004.safetensors holds tensor \"lm_head.weight\", which model.safetensors.index.json does not list"},
		{"index names a file elsewhere", sharded, func(t *testing.T, m fstest.MapFS) {
			editIndex(t, m, func(wm map[string]string) { wm["lm_head.weight"] = "../x.safetensors" })
		}, "names shard \"../x.safetensors\": want a file name in the same directory"},
		{"corrupt shard header", sharded, func(t *testing.T, m fstest.MapFS) { m["model-00002-of-00004.safetensors"].Data[9] = 'x' },
			"model-00002-of-00004.safetensors: safetensors: read header"},
		{"truncated shard", sharded, func(t *testing.T, m fstest.MapFS) {
			f := m["model-00004-of-00004.safetensors"]
			f.Data = f.Data[:len(f.Data)-10]
		}, "model-00004-of-00004.safetensors: truncated"},
		{"trailing bytes in a shard", sharded, func(t *testing.T, m fstest.MapFS) {
			f := m[shard1]
			f.Data = append(slices.Clone(f.Data), 0)
		}, shard1 + ": trailing bytes"},
		{"shape disagrees with config.json", single, func(t *testing.T, m fstest.MapFS) {
			editConfig(t, m, "intermediate_size", "40")
		}, "model.safetensors: tensor \"model.layers.0.mlp.down_proj.weight\" has shape [32 48], config.json implies [32 40]"},
		{"tensor missing", single, func(t *testing.T, m fstest.MapFS) { editConfig(t, m, "num_hidden_layers", "4") },
			"tensor \"model.layers.3.input_layernorm.weight\" (and 8 more) of this llama model is missing"},
		{"tensor not of the model", single, func(t *testing.T, m fstest.MapFS) { editConfig(t, m, "num_hidden_layers", "2") },
			"model.safetensors: tensor \"model.layers.2.input_layernorm.weight\" is not part of this llama model"},
		{"dtype not supported", single, func(t *testing.T, m fstest.MapFS) { retype(t, m, WeightsFile, "model.norm.weight", "I16") },
			"model.safetensors: tensor \"model.norm.weight\" has dtype I16: supported F32, BF16, F16, F64"},
		{"config field refused", single, func(t *testing.T, m fstest.MapFS) { editConfig(t, m, "num_experts", "8") },
			"config.json: model: hf config: field num_experts"},
		{"no weights", single, func(t *testing.T, m fstest.MapFS) { delete(m, WeightsFile) },
			"no weights: neither model.safetensors nor model.safetensors.index.json"},
		{"bad generation config", single, func(t *testing.T, m fstest.MapFS) {
			m[GenerationConfigFile] = &fstest.MapFile{Data: []byte(`{"eos_token_id": "x"}`)}
		}, "generation_config.json: field eos_token_id=\"x\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mapFS(t, tc.dir)
			tc.edit(t, m)
			src := FS(m)
			err := func() error {
				md, err := Inspect(src)
				if err != nil {
					return err
				}
				rc, err := md.OpenWeights(src)
				if err != nil {
					return err
				}
				defer rc.Close()
				_, _, err = ReadWeights(rc, md.Config, "weights")
				return err
			}()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v\nwant %q", err, tc.want)
			}
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("err %v is not a format error", err)
			}
		})
	}
}

func mapFS(t *testing.T, dir string) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	names, err := fs.Glob(os.DirFS(dir), "*")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			t.Fatal(err)
		}
		m[n] = &fstest.MapFile{Data: b}
	}
	return m
}

func editIndex(t *testing.T, m fstest.MapFS, edit func(map[string]string)) {
	t.Helper()
	var ix map[string]json.RawMessage
	if err := json.Unmarshal(m[IndexFile].Data, &ix); err != nil {
		t.Fatal(err)
	}
	var wm map[string]string
	if err := json.Unmarshal(ix["weight_map"], &wm); err != nil {
		t.Fatal(err)
	}
	edit(wm)
	ix["weight_map"], _ = json.Marshal(wm)
	m[IndexFile].Data, _ = json.Marshal(ix)
}

func editConfig(t *testing.T, m fstest.MapFS, field, value string) {
	t.Helper()
	var c map[string]json.RawMessage
	if err := json.Unmarshal(m[ConfigFile].Data, &c); err != nil {
		t.Fatal(err)
	}
	c[field] = json.RawMessage(value)
	m[ConfigFile].Data, _ = json.Marshal(c)
}

// retype rewrites file with tensor name in another 2-byte dtype (same bytes).
func retype(t *testing.T, m fstest.MapFS, file, name string, dt safetensors.DType) {
	t.Helper()
	f, err := safetensors.Read(bytes.NewReader(m[file].Data))
	if err != nil {
		t.Fatal(err)
	}
	for i := range f.Tensors {
		if f.Tensors[i].Name == name {
			f.Tensors[i].DType = dt
		}
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, f.Tensors, f.Metadata); err != nil {
		t.Fatal(err)
	}
	m[file].Data = buf.Bytes()
}

func TestParseGeneration(t *testing.T) {
	for _, tc := range []struct {
		in      string
		eos     []int
		bos     []int
		wantErr bool
	}{
		{`{"eos_token_id": 7}`, []int{7}, nil, false},
		{`{"eos_token_id": [1, 106], "bos_token_id": 2}`, []int{1, 106}, []int{2}, false},
		{`{"eos_token_id": null}`, nil, nil, false},
		{`{"eos_token_id": -1}`, nil, nil, true},
		{`{"eos_token_id": [1, "a"]}`, nil, nil, true},
		{`[]`, nil, nil, true},
	} {
		g, err := ParseGeneration([]byte(tc.in))
		if (err != nil) != tc.wantErr {
			t.Fatalf("%s: err %v", tc.in, err)
		}
		if err == nil && (!slices.Equal(g.EOS, tc.eos) || !slices.Equal(g.BOS, tc.bos)) {
			t.Fatalf("%s: %+v", tc.in, g)
		}
	}
}

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"5GB", 5_000_000_000, true}, {"20KB", 20_000, true}, {"1.5MB", 1_500_000, true}, {"4096", 4096, true},
		{" 2 gb", 2_000_000_000, true}, {"5GiB", 0, false}, {"GB", 0, false}, {"-1MB", 0, false},
	} {
		got, err := ParseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
