package vision

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/imageproc"
	"github.com/temperml/temper/algorithms/testbackend"
	"github.com/temperml/temper/algorithms/vision/visioncfg"
)

// towerGolden is golden.json of one directory made by scripts/goldens/vision/make_goldens.py.
type towerGolden struct {
	Name         string    `json:"name"`
	Images       []string  `json:"images"`
	Pixels       []float64 `json:"pixel_values"`
	PixelsShape  []int     `json:"pixel_values_shape"`
	Last         []float64 `json:"last_hidden_state"`
	LastShape    []int     `json:"last_hidden_state_shape"`
	Pooled       []float64 `json:"pooler_output"`
	PooledShape  []int     `json:"pooler_output_shape"`
	checkpoint   []byte
	cfg          visioncfg.Config
	processorCfg imageproc.Config
	dir          string
}

func loadTowers(t testing.TB) []*towerGolden {
	t.Helper()
	dirs, err := filepath.Glob("testdata/siglip-*")
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 3 {
		t.Fatalf("found %d reference directories, want 3: run scripts/goldens/vision/make_goldens.py", len(dirs))
	}
	var out []*towerGolden
	for _, dir := range dirs {
		g := &towerGolden{dir: dir}
		read := func(name string) []byte {
			b, err := os.ReadFile(filepath.Join(dir, name))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
		if err := json.Unmarshal(read("golden.json"), g); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if g.cfg, err = visioncfg.FromHFConfig(read("config.json")); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		if g.processorCfg, err = imageproc.FromHFProcessorConfig(read("preprocessor_config.json")); err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		g.checkpoint = read("model.safetensors")
		out = append(out, g)
	}
	return out
}

// storeFor loads the checkpoint the way a user's directory is loaded: ReadHF on the file's bytes.
func storeFor(t testing.TB, g *towerGolden) *gm.Store {
	t.Helper()
	w, prefix, err := ReadHF(g.cfg, bytes.NewReader(g.checkpoint), int64(len(g.checkpoint)))
	if err != nil {
		t.Fatalf("%s: %v", g.dir, err)
	}
	if prefix != PrefixVisionModel {
		t.Fatalf("%s: prefix %q", g.dir, prefix)
	}
	store := gm.NewStore()
	if err := ImportWeights(store.RootScope(), g.cfg, w); err != nil {
		t.Fatal(err)
	}
	return store
}

func goldenPixels(g *towerGolden) []imageproc.Pixels {
	c, h, w := g.PixelsShape[1], g.PixelsShape[2], g.PixelsShape[3]
	n := c * h * w
	out := make([]imageproc.Pixels, g.PixelsShape[0])
	for i := range out {
		v := make([]float32, n)
		for j := range v {
			v[j] = float32(g.Pixels[i*n+j])
		}
		out[i] = imageproc.Pixels{C: c, H: h, W: w, Values: v}
	}
	return out
}

func maxDiff(got []float32, want []float64) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var worst float64
	for i, w := range want {
		worst = math.Max(worst, math.Abs(float64(got[i])-w))
	}
	return worst
}

const towerTolerance = 1e-4

// TestTowerMatchesReference: for each reference checkpoint (a SiglipVisionModel with the pooling
// head, a full SiglipModel without it, exact GELU, a 6-pixel patch grid, quick_gelu), the per-patch
// outputs and the pooled output are within 1e-4 of transformers' (re-implemented in PyTorch), on
// the reference's own pixel values; the config and weights load from the directory as written.
func TestTowerMatchesReference(t *testing.T) {
	for _, g := range loadTowers(t) {
		t.Run(g.Name, func(t *testing.T) {
			enc, err := NewEncoder(testbackend.Sequential(), storeFor(t, g).RootScope(), g.cfg)
			if err != nil {
				t.Fatal(err)
			}
			out, err := enc.Encode(goldenPixels(g))
			if err != nil {
				t.Fatal(err)
			}
			if d := maxDiff(out.PatchOut, g.Last); d > towerTolerance {
				t.Errorf("per-patch outputs: max |Δ| %.3g > %g", d, towerTolerance)
			} else {
				t.Logf("per-patch outputs %v: max |Δ| %.3g", g.LastShape, d)
			}
			if g.cfg.UseHead {
				if d := maxDiff(out.Pooled, g.Pooled); d > towerTolerance {
					t.Errorf("pooled outputs: max |Δ| %.3g > %g", d, towerTolerance)
				} else {
					t.Logf("pooled outputs %v: max |Δ| %.3g", g.PooledShape, d)
				}
			} else {
				// No head: the mean of the patches (transformers has no pooled output here).
				mean := make([]float64, out.Batch*out.D)
				for b := range out.Batch {
					for p := range out.Patches {
						for k := range out.D {
							mean[b*out.D+k] += g.Last[(b*out.Patches+p)*out.D+k] / float64(out.Patches)
						}
					}
				}
				if d := maxDiff(out.Pooled, mean); d > towerTolerance {
					t.Errorf("pooled (mean of patches): max |Δ| %.3g", d)
				}
			}
		})
	}
}

// TestPreprocessingFeedsTheTower: Temper's preprocessing of the reference images gives the pixel
// values the reference fed the tower: bit for bit from PNG files, within imageproc's JPEG
// tolerance (4/255 before normalisation, 8/255 after) from JPEG ones.
func TestPreprocessingFeedsTheTower(t *testing.T) {
	for _, g := range loadTowers(t) {
		want := goldenPixels(g)
		for i, name := range g.Images {
			data, err := os.ReadFile(filepath.Join("../imageproc/testdata/images", name))
			if err != nil {
				t.Fatal(err)
			}
			got, err := imageproc.Preprocess(data, g.processorCfg)
			if err != nil {
				t.Fatal(err)
			}
			var worst float64
			for j, v := range got.Values {
				worst = math.Max(worst, math.Abs(float64(v-want[i].Values[j])))
			}
			limit := 0.0
			if filepath.Ext(name) == ".jpg" {
				limit = 8.0 / 255
			}
			if worst > limit {
				t.Errorf("%s %s: max |Δ| %.3g > %.3g", g.Name, name, worst, limit)
			}
		}
	}
}
