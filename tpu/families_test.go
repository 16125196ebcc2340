package tpu

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/sample"
)

// TestFamilyDirsLoad loads each reference Hugging Face directory of algorithms/model/testdata/families
// (8 families × both config.json forms, made by scripts/goldens/families/make_goldens.py) the way a
// user's model is loaded, and checks the runtime's logits (1e-4 at every position), greedy
// generation, and that SaveModelDir writes the same weights back, byte for byte.
func TestFamilyDirsLoad(t *testing.T) {
	paths, err := filepath.Glob("../algorithms/model/testdata/families/*/golden.json")
	if err != nil || len(paths) < 16 {
		t.Fatalf("found %d reference directories (%v), want 16", len(paths), err)
	}
	for _, p := range paths {
		dir := filepath.Dir(p)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			var g struct {
				Sequences [][]int       `json:"sequences"`
				Logits    [][][]float64 `json:"logits"`
				Prompt    []int         `json:"prompt"`
				Greedy    []int         `json:"greedy"`
			}
			raw, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(raw, &g); err != nil {
				t.Fatal(err)
			}
			r, err := loadDir(dir, Options{Seed: 1, ExecTimeout: -1})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			b, err := LMBatch(g.Sequences, nil)
			if err != nil {
				t.Fatal(err)
			}
			lg, err := r.Logits(b)
			if err != nil {
				t.Fatal(err)
			}
			var worst float64
			for i, s := range g.Sequences {
				for pos := range len(s) - 1 { // LMBatch drops each sequence's last token (its target)
					for v, want := range g.Logits[i][pos] {
						worst = math.Max(worst, math.Abs(float64(lg.At(i, pos)[v])-want))
					}
				}
			}
			if worst > 1e-4 {
				t.Errorf("max |Δlogit| %.3g, want <= 1e-4", worst)
			}
			out, err := r.Generate([][]int{g.Prompt}, sample.Options{MaxNewTokens: len(g.Greedy)})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(out[0].Tokens, g.Greedy) {
				t.Errorf("greedy %v, reference %v", out[0].Tokens, g.Greedy)
			}
			saved := filepath.Join(t.TempDir(), "m")
			if err := r.SaveModelDir(saved); err != nil {
				t.Fatal(err)
			}
			a, _ := os.ReadFile(filepath.Join(dir, hf.WeightsFile))
			c, _ := os.ReadFile(filepath.Join(saved, hf.WeightsFile))
			if !bytes.Equal(a, c) {
				t.Errorf("saved %s differs from the reference's (%d vs %d bytes)", hf.WeightsFile, len(c), len(a))
			}
			back, err := hf.Inspect(DirSource(saved))
			if err != nil || !sameArchitecture(back.Config, r.Config()) {
				t.Errorf("saved config.json reads back as %+v (%v), want %+v", back, err, r.Config())
			}
		})
	}
}
