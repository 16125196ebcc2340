package tokenize

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"sync"
	"testing"
)

// The goldens under testdata/hf come from Hugging Face's Rust tokenizers (node binding) on
// real tokenizer.json files; scripts/goldens/tokenizers/gen.js regenerates them.
var goldenTokenizers = []string{"qwen3", "llama3_1", "gemma3", "deepseek_v3", "gpt4o", "llama2"}

type goldenCase struct {
	IDs     []int    `json:"ids"`
	Offsets [][2]int `json:"offsets"`
	Special []int    `json:"special"`
	Decoded string   `json:"decoded"`
}

type golden struct {
	Cases   []goldenCase `json:"cases"`
	Decodes []struct {
		IDs  []int  `json:"ids"`
		Text string `json:"text"`
	} `json:"decodes"`
}

func openGz(t testing.TB, name string) io.ReadCloser {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "hf", name))
	if err != nil {
		t.Fatal(err)
	}
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	return struct {
		io.Reader
		io.Closer
	}{z, f}
}

var hfCache sync.Map // name -> *BPE

func loadGoldenTokenizer(t testing.TB, name string) *BPE {
	t.Helper()
	if b, ok := hfCache.Load(name); ok {
		return b.(*BPE)
	}
	r := openGz(t, name+".tokenizer.json.gz")
	defer r.Close()
	b, err := LoadHF(r)
	if err != nil {
		t.Fatalf("LoadHF(%s): %v", name, err)
	}
	hfCache.Store(name, b)
	return b
}

func loadCorpus(t testing.TB) []string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("testdata", "hf", "corpus.json"))
	if err != nil {
		t.Fatal(err)
	}
	var c []string
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	return c
}

func loadGolden(t testing.TB, name string) golden {
	t.Helper()
	r := openGz(t, name+".golden.json.gz")
	defer r.Close()
	var g golden
	if err := json.NewDecoder(r).Decode(&g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestHFGoldens requires 100% agreement with the reference on every corpus string: ids,
// byte offsets, ids with special tokens, decode of the ids, and decodes of random ids.
func TestHFGoldens(t *testing.T) {
	corpus := loadCorpus(t)
	if len(corpus) < 300 {
		t.Fatalf("corpus has %d strings, want >= 300", len(corpus))
	}
	for _, name := range goldenTokenizers {
		t.Run(name, func(t *testing.T) {
			checkGolden(t, loadGoldenTokenizer(t, name), corpus, loadGolden(t, name))
		})
	}
}

type variant struct {
	Base  string                     `json:"base"`
	Set   map[string]json.RawMessage `json:"set"`
	Model map[string]json.RawMessage `json:"model"`
	Added []json.RawMessage          `json:"added"`
}

// TestHFVariantGoldens checks the components no real file of the target families uses, on
// variants of those files that the generator built the same way (variants.json).
func TestHFVariantGoldens(t *testing.T) {
	corpus := loadCorpus(t)
	raw, err := os.ReadFile(filepath.Join("testdata", "hf", "variants.json"))
	if err != nil {
		t.Fatal(err)
	}
	var variants map[string]variant
	if err := json.Unmarshal(raw, &variants); err != nil {
		t.Fatal(err)
	}
	if len(variants) < 6 {
		t.Fatalf("%d variants", len(variants))
	}
	for name, v := range variants {
		t.Run(name, func(t *testing.T) {
			r := openGz(t, v.Base+".tokenizer.json.gz")
			var file map[string]json.RawMessage
			err := json.NewDecoder(r).Decode(&file)
			r.Close()
			if err != nil {
				t.Fatal(err)
			}
			for k, x := range v.Set {
				file[k] = x
			}
			var model map[string]json.RawMessage
			if err := json.Unmarshal(file["model"], &model); err != nil {
				t.Fatal(err)
			}
			for k, x := range v.Model {
				model[k] = x
			}
			var added []json.RawMessage
			if err := json.Unmarshal(file["added_tokens"], &added); err != nil {
				t.Fatal(err)
			}
			added = append(added, v.Added...)
			file["model"], _ = json.Marshal(model)
			file["added_tokens"], _ = json.Marshal(added)
			js, _ := json.Marshal(file)
			b, err := LoadHF(bytes.NewReader(js))
			if err != nil {
				t.Fatal(err)
			}
			checkGolden(t, b, corpus, loadGolden(t, name))
		})
	}
}

func checkGolden(t *testing.T, b *BPE, corpus []string, g golden) {
	t.Helper()
	if len(g.Cases) != len(corpus) {
		t.Fatalf("%d golden cases for %d corpus strings", len(g.Cases), len(corpus))
	}
	bad := 0
	report := func(format string, args ...any) {
		bad++
		if bad <= 8 {
			t.Errorf(format, args...)
		}
	}
	for i, s := range corpus {
		c := g.Cases[i]
		ids := b.Encode(s)
		if !sameInts(ids, c.IDs) {
			report("Encode(%q) = %v, want %v", s, ids, c.IDs)
			continue
		}
		oids, offs := b.EncodeOffsets(s)
		if !sameInts(oids, c.IDs) {
			report("EncodeOffsets(%q) ids = %v, want %v", s, oids, c.IDs)
		} else if len(c.IDs) > 0 && !reflect.DeepEqual(offs, c.Offsets) {
			report("EncodeOffsets(%q) offsets = %v, want %v", s, offs, c.Offsets)
		}
		want := c.Special
		if want == nil {
			want = c.IDs
		}
		if got := b.EncodeSpecial(s); !sameInts(got, want) {
			report("EncodeSpecial(%q) = %v, want %v", s, got, want)
		}
		if got := b.Decode(c.IDs); got != c.Decoded {
			report("Decode(%v) = %q, want %q", c.IDs, got, c.Decoded)
		}
	}
	for _, d := range g.Decodes {
		if got := b.Decode(d.IDs); got != d.Text {
			report("Decode(%v) = %q, want %q", d.IDs, got, d.Text)
		}
	}
	if bad > 0 {
		t.Errorf("%d disagreements with the reference", bad)
	}
}

// sameInts treats nil and empty alike.
func sameInts(a, b []int) bool { return len(a) == 0 && len(b) == 0 || reflect.DeepEqual(a, b) }
