package vision

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/imageproc"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/testbackend"
	"github.com/temperml/temper/algorithms/vision/visioncfg"
)

// smallConfigs cover both pooling paths and every activation, with a patch size that does not
// divide the image (leftover pixels ignored).
func smallConfigs() map[string]visioncfg.Config {
	head := visioncfg.Config{DModel: 16, Layers: 2, Heads: 2, FFN: 24, Channels: 3, ImageSize: 12, PatchSize: 4,
		Activation: visioncfg.ActGELU, NormEps: 1e-6, UseHead: true}
	mean := head
	mean.UseHead, mean.Activation, mean.ImageSize = false, visioncfg.ActGELUExact, 14
	quick := head
	quick.Activation = visioncfg.ActQuickGELU
	return map[string]visioncfg.Config{"head": head, "mean": mean, "quick": quick}
}

func randomPixels(cfg visioncfg.Config, n int, seed uint64) []imageproc.Pixels {
	rng := rand.New(rand.NewPCG(seed, 1))
	out := make([]imageproc.Pixels, n)
	for i := range out {
		v := make([]float32, cfg.Channels*cfg.ImageSize*cfg.ImageSize)
		for j := range v {
			v[j] = float32(2*rng.Float64() - 1)
		}
		out[i] = imageproc.Pixels{C: cfg.Channels, H: cfg.ImageSize, W: cfg.ImageSize, Values: v}
	}
	return out
}

func batchTensor(cfg visioncfg.Config, px []imageproc.Pixels) *tensors.Tensor {
	var flat []float32
	for _, p := range px {
		flat = append(flat, p.Values...)
	}
	return tensors.FromFlatDataAndDimensions(flat, len(px), cfg.Channels, cfg.ImageSize, cfg.ImageSize)
}

// lossOf is a fixed random projection of both outputs: every output element reaches the loss.
func lossOf(pooled, patches *Node) *Node {
	g := pooled.Graph()
	w1 := Sin(MulScalar(Iota(g, shapes.Make(dtypes.Float32, pooled.Shape().Dimensions...), -1), 1.3))
	w2 := Cos(MulScalar(Iota(g, shapes.Make(dtypes.Float32, patches.Shape().Dimensions...), 1), 0.7))
	return Add(ReduceAllSum(Mul(pooled, w1)), MulScalar(ReduceAllSum(Mul(patches, w2)), 0.1))
}

// TestGradientsFlow: every variable of the tower gets a finite, non-zero gradient, and the
// gradient of a few weights agrees with a central finite difference.
func TestGradientsFlow(t *testing.T) {
	for name, cfg := range smallConfigs() {
		t.Run(name, func(t *testing.T) {
			store := gm.NewStore()
			if err := InitWeights(store.RootScope(), cfg, 3); err != nil {
				t.Fatal(err)
			}
			vars := Variables(cfg)
			px := batchTensor(cfg, randomPixels(cfg, 2, 9))
			grads, err := gm.NewExec(testbackend.Sequential(), store, func(scope *gm.Scope, pixels *Node) []*Node {
				pooled, patches := Encode(scope, cfg, pixels)
				loss := lossOf(pooled, patches)
				nodes := make([]*Node, len(vars))
				for i, v := range vars {
					nodes[i] = param(scope, pixels.Graph(), v.Path, v.Shape...)
				}
				return append([]*Node{loss}, Gradient(loss, nodes...)...)
			})
			if err != nil {
				t.Fatal(err)
			}
			out, err := grads.Call(px)
			if err != nil {
				t.Fatal(err)
			}
			for i, v := range vars {
				g := tensors.MustCopyFlatData[float32](out[i+1])
				var norm float64
				for _, x := range g {
					if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
						t.Fatalf("%s: non-finite gradient", v.Path)
					}
					norm += float64(x) * float64(x)
				}
				if norm == 0 {
					t.Errorf("%s: zero gradient", v.Path)
				}
			}
			// Central differences on one element of a few weights, in float64 on the host loss.
			lossAt := gm.MustNewExec(testbackend.Sequential(), store, func(scope *gm.Scope, pixels *Node) *Node {
				pooled, patches := Encode(scope, cfg, pixels)
				return lossOf(pooled, patches)
			})
			for _, probe := range []string{VarPatch, at(VarQ, 0), at(VarLN2Scale, 1), at(VarFC2Bias, 1), VarPosition} {
				idx := -1
				for i, v := range vars {
					if v.Path == probe {
						idx = i
					}
				}
				analytic := float64(tensors.MustCopyFlatData[float32](out[idx+1])[5])
				w, _ := ExportWeights(store.RootScope(), cfg)
				const h = 1e-2
				eval := func(delta float32) float64 {
					w2 := map[string][]float32{}
					for k, v := range w {
						w2[k] = append([]float32(nil), v...)
					}
					w2[probe][5] += delta
					if err := ImportWeights(store.RootScope(), cfg, w2); err != nil {
						t.Fatal(err)
					}
					return float64(tensors.MustCopyFlatData[float32](lossAt.MustCall(px)[0])[0])
				}
				numeric := (eval(h) - eval(-h)) / (2 * h)
				if err := ImportWeights(store.RootScope(), cfg, w); err != nil {
					t.Fatal(err)
				}
				if math.Abs(numeric-analytic) > 2e-2*(1+math.Abs(analytic)) {
					t.Errorf("%s[5]: gradient %.5g, finite difference %.5g", probe, analytic, numeric)
				}
			}
		})
	}
}

// headEncoder is an encoder of the "head" test config on weights initialized with seed 5, with its
// config and weight store.
func headEncoder(t *testing.T) (visioncfg.Config, *gm.Store, *Encoder) {
	t.Helper()
	cfg := smallConfigs()["head"]
	store := gm.NewStore()
	if err := InitWeights(store.RootScope(), cfg, 5); err != nil {
		t.Fatal(err)
	}
	enc, err := NewEncoder(testbackend.Sequential(), store.RootScope(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, store, enc
}

// TestBatchIndependence: an image's outputs do not depend on the other images of its batch.
func TestBatchIndependence(t *testing.T) {
	cfg, _, enc := headEncoder(t)
	px := randomPixels(cfg, 3, 11)
	all, err := enc.Encode(px)
	if err != nil {
		t.Fatal(err)
	}
	for i := range px {
		one, err := enc.Encode(px[i : i+1])
		if err != nil {
			t.Fatal(err)
		}
		for k, v := range one.Pooled {
			if math.Abs(float64(v-all.PooledOf(i)[k])) > 1e-5 {
				t.Fatalf("image %d pooled[%d]: %v alone, %v in a batch", i, k, v, all.PooledOf(i)[k])
			}
		}
		for k, v := range one.PatchOut {
			if math.Abs(float64(v-all.PatchesOf(i)[k])) > 1e-5 {
				t.Fatalf("image %d patches[%d]: %v alone, %v in a batch", i, k, v, all.PatchesOf(i)[k])
			}
		}
	}
}

// TestEncoderErrors: host entry points return errors, never panic.
func TestEncoderErrors(t *testing.T) {
	cfg, store, enc := headEncoder(t)
	if _, err := enc.Encode(nil); err == nil || !strings.Contains(err.Error(), "no images") {
		t.Errorf("empty batch: %v", err)
	}
	bad := randomPixels(cfg, 1, 1)
	bad[0].H, bad[0].W = 10, 10
	if _, err := enc.Encode(bad); err == nil || !strings.Contains(err.Error(), "want 3x12x12: preprocess with size 12") {
		t.Errorf("wrong size: %v", err)
	}
	bad = randomPixels(cfg, 1, 1)
	bad[0].Values = bad[0].Values[:5]
	if _, err := enc.Encode(bad); err == nil {
		t.Error("short values accepted")
	}
	// Weights of another shape under the scope: GoMLX's panic comes back as an error.
	wider := cfg
	wider.DModel, wider.FFN = 32, 40
	enc2, err := NewEncoder(testbackend.Sequential(), store.RootScope(), wider)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := enc2.Encode(randomPixels(wider, 1, 1)); err == nil || !strings.HasPrefix(err.Error(), "vision: encode: ") {
		t.Errorf("weights of another config: %v", err)
	}
	if _, err := NewEncoder(testbackend.Sequential(), store.RootScope(), visioncfg.Config{}); err == nil {
		t.Error("zero config accepted")
	}
}

// TestTrainingReducesLoss: a few plain gradient steps on the pooled output regress it toward a
// target, so the tower is trainable end to end (a critic's trunk).
func TestTrainingReducesLoss(t *testing.T) {
	cfg := smallConfigs()["head"]
	store := gm.NewStore()
	if err := InitWeights(store.RootScope(), cfg, 7); err != nil {
		t.Fatal(err)
	}
	vars := Variables(cfg)
	step := gm.MustNewExec(testbackend.Sequential(), store, func(scope *gm.Scope, pixels *Node) *Node {
		g := pixels.Graph()
		pooled, _ := Encode(scope, cfg, pixels)
		target := Sin(Iota(g, shapes.Make(dtypes.Float32, pooled.Shape().Dimensions...), 0))
		loss := ReduceAllMean(Square(Sub(pooled, target)))
		nodes := make([]*Node, len(vars))
		for i, v := range vars {
			nodes[i] = param(scope, g, v.Path, v.Shape...)
		}
		grads := Gradient(loss, nodes...)
		for i, v := range vars {
			s, name := model.SubScope(scope, v.Path)
			s.GetVariable(name).SetValueGraph(Sub(nodes[i], MulScalar(grads[i], 0.05)))
		}
		return loss
	})
	px := batchTensor(cfg, randomPixels(cfg, 4, 13))
	var first, last float32
	for i := range 15 {
		l := tensors.MustCopyFlatData[float32](step.MustCall(px)[0])[0]
		if i == 0 {
			first = l
		}
		last = l
	}
	if !(last < 0.5*first) {
		t.Fatalf("loss %v → %v after 15 steps: want at least halved", first, last)
	}
	t.Logf("loss %.4g → %.4g", first, last)
}
