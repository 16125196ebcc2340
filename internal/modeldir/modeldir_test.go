package modeldir

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/temperml/temper/internal/usage"
)

// TestInspect: the committed model directories' sizes, dtype, attention pattern and fields as the
// report gives them (the numbers are the directories' config.json, read by hand).
func TestInspect(t *testing.T) {
	for _, tc := range []struct {
		dir       string
		family    string
		sizes     Sizes
		dtype     string
		attention string
		text      []string
	}{
		{"../../algorithms/hf/testdata/qwen3-bf16-sharded", "qwen3",
			Sizes{Layers: 3, Hidden: 32, Heads: 4, KVHeads: 2, HeadDim: 12, FFN: 48, Vocab: 64, Context: 64, Parameters: 32424},
			"BF16", "full causal attention on every layer", []string{"its own lm_head", "model.safetensors.index.json"}},
		{"../../algorithms/model/testdata/families/gemma3-new", "gemma3_text", Sizes{}, "",
			"sliding window 6 on 2 layers, full on 1; RoPE θ 10000 local", []string{"SFS (S sliding"}},
	} {
		t.Run(filepath.Base(tc.dir), func(t *testing.T) {
			rep, err := Inspect(tc.dir)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Refused != "" || rep.Family != tc.family || !strings.HasPrefix(rep.Attention, tc.attention) || len(rep.Fields) == 0 {
				t.Errorf("refused %q, family %q, attention %q, %d fields", rep.Refused, rep.Family, rep.Attention, len(rep.Fields))
			}
			if tc.dtype != "" && (rep.Sizes == nil || *rep.Sizes != tc.sizes || rep.Weights.DType != tc.dtype || !rep.Weights.Sharded) {
				t.Errorf("sizes %+v, weights %+v; want %+v, %s sharded", rep.Sizes, rep.Weights, tc.sizes, tc.dtype)
			}
			var b bytes.Buffer
			rep.Text(&b)
			for _, w := range tc.text {
				if !strings.Contains(b.String(), w) {
					t.Errorf("text lacks %q:\n%s", w, b.String())
				}
			}
		})
	}
	if _, err := Inspect(t.TempDir()); err == nil {
		t.Error("a directory without config.json: no error")
	}
}

// TestApplySets: a value that is JSON is set as JSON, anything else as a string; a set without a
// key is a usage error.
func TestApplySets(t *testing.T) {
	for _, tc := range []struct {
		sets    []string
		want    map[string]any
		refused bool
	}{
		{nil, map[string]any{"a": 1.0}, false},
		{[]string{"a=2", "b=true", `c={"x":1}`}, map[string]any{"a": 2.0, "b": true, "c": map[string]any{"x": 1.0}}, false},
		{[]string{"b=silu", "c=1e"}, map[string]any{"a": 1.0, "b": "silu", "c": "1e"}, false},
		{[]string{"=3"}, nil, true},
		{[]string{"a"}, nil, true},
	} {
		b, err := applySets([]byte(`{"a":1}`), tc.sets)
		if tc.refused {
			if !usage.Is(err) {
				t.Errorf("%q: %v, want a usage error", tc.sets, err)
			}
			continue
		}
		var got map[string]any
		if err != nil || json.Unmarshal(b, &got) != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: %s, %v; want %v", tc.sets, b, err, tc.want)
		}
	}
}

// TestInit: a model initialised like a committed directory, with an override, inspects as that
// directory with the override applied; bad options are usage errors naming the flag.
func TestInit(t *testing.T) {
	like := "../../algorithms/hf/testdata/qwen3-bf16-sharded"
	out := filepath.Join(t.TempDir(), "m")
	r, err := Init(InitOptions{Like: like, Out: "file://" + out, Seed: 3, Sets: []string{"intermediate_size=64"}, MaxShard: "5GB"})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	r.Text(&b)
	if !strings.Contains(b.String(), "wrote "+out+": a random qwen3 model shaped like "+like+" (3 layers, hidden 32") {
		t.Errorf("summary: %s", b.String())
	}
	rep, err := Inspect(out)
	if err != nil || rep.Refused != "" || rep.Sizes.FFN != 64 || rep.Sizes.Hidden != 32 || rep.Weights.DType != "BF16" {
		t.Fatalf("inspect of the new model: %v %+v", err, rep)
	}
	for _, tc := range []struct {
		o    InitOptions
		flag string
	}{
		{InitOptions{Like: like, Out: out, MaxShard: "5GB"}, "--out"},
		{InitOptions{Like: "no-such-shape", Out: t.TempDir(), MaxShard: "5GB"}, "--like"},
		{InitOptions{Like: like, Out: t.TempDir(), MaxShard: "5GB", DType: "f8"}, "--dtype"},
		{InitOptions{Like: like, Out: t.TempDir(), MaxShard: "big"}, "--max-shard-size"},
		{InitOptions{Like: like, Out: t.TempDir(), MaxShard: "5GB", Tokenizer: t.TempDir()}, "--tokenizer"},
	} {
		if _, err := Init(tc.o); !usage.Is(err) || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%+v: %v, want a usage error naming %s", tc.o, err, tc.flag)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "config.json")); err != nil {
		t.Error(err)
	}
}
