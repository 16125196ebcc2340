package vision

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/testbackend"
	"github.com/temperml/temper/algorithms/vision/visioncfg"
)

func encodeOnce(t *testing.T, scope *gm.Scope, cfg visioncfg.Config, seed uint64) Output {
	t.Helper()
	enc, err := NewEncoder(testbackend.Sequential(), scope, cfg)
	if err != nil {
		t.Fatal(err)
	}
	out, err := enc.Encode(randomPixels(cfg, 2, seed))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLoRA: fresh adapters change nothing bit for bit; trained ones compute what their merged
// weights compute; gradients reach both adapter matrices; names follow PEFT.
func TestLoRA(t *testing.T) {
	for _, targets := range [][]string{nil, {"q_proj", "fc2"}} {
		cfg := smallConfigs()["head"]
		l := visioncfg.LoRA{Rank: 3, Targets: targets}
		store := gm.NewStore()
		scope := store.RootScope()
		if err := InitWeights(scope, cfg, 21); err != nil {
			t.Fatal(err)
		}
		base := encodeOnce(t, scope, cfg, 4)
		if err := AttachLoRA(scope, cfg, l, 1); err != nil {
			t.Fatal(err)
		}
		fresh := encodeOnce(t, scope, cfg, 4)
		for i := range base.PatchOut {
			if fresh.PatchOut[i] != base.PatchOut[i] {
				t.Fatalf("targets %v: fresh adapters changed patch output %d: %v → %v", targets, i, base.PatchOut[i], fresh.PatchOut[i])
			}
		}
		ad, err := ExportLoRA(scope, cfg)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(2, 2))
		for k, v := range ad {
			if strings.HasSuffix(k, "/b") {
				for i := range v {
					v[i] = float32(rng.NormFloat64() * 0.3)
				}
			}
		}
		if err := ImportLoRA(scope, cfg, ad); err != nil {
			t.Fatal(err)
		}
		adapted := encodeOnce(t, scope, cfg, 4)
		w, _ := ExportWeights(scope, cfg)
		merged, err := MergeLoRA(cfg, l, w, ad)
		if err != nil {
			t.Fatal(err)
		}
		plain := gm.NewStore()
		if err := ImportWeights(plain.RootScope(), cfg, merged); err != nil {
			t.Fatal(err)
		}
		ref := encodeOnce(t, plain.RootScope(), cfg, 4)
		var moved, diff float64
		for i := range ref.PatchOut {
			moved = math.Max(moved, math.Abs(float64(adapted.PatchOut[i]-base.PatchOut[i])))
			diff = math.Max(diff, math.Abs(float64(adapted.PatchOut[i]-ref.PatchOut[i])))
		}
		for i := range ref.Pooled {
			diff = math.Max(diff, math.Abs(float64(adapted.Pooled[i]-ref.Pooled[i])))
		}
		if moved < 1e-2 || diff > 1e-5 {
			t.Fatalf("targets %v: adapters moved outputs by %.3g (want > 1e-2); differ from merged weights by %.3g (want <= 1e-5)", targets, moved, diff)
		}
		// Gradients reach A and B.
		vs, _ := LoRAVariables(cfg, l)
		px := batchTensor(cfg, randomPixels(cfg, 2, 4))
		out := gm.MustNewExec(testbackend.Sequential(), store, func(scope *gm.Scope, pixels *Node) []*Node {
			pooled, patches := Encode(scope, cfg, pixels)
			nodes := make([]*Node, len(vs))
			for i, v := range vs {
				nodes[i] = param(scope, pixels.Graph(), v.Path, v.Shape...)
			}
			return Gradient(lossOf(pooled, patches), nodes...)
		}).MustCall(px)
		for i, v := range vs {
			var norm float64
			for _, x := range tensors.MustCopyFlatData[float32](out[i]) {
				norm += float64(x * x)
			}
			if norm == 0 || math.IsNaN(norm) {
				t.Errorf("targets %v: %s: gradient norm %v", targets, v.Path, norm)
			}
		}
		peft, err := ToPEFT(cfg, l, ad)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := peft["base_model.model.vision_model.encoder.layers.1.mlp.fc2.lora_B.weight"]; !ok {
			t.Errorf("PEFT names: %v", keys(peft))
		}
		if err := DetachLoRA(scope); err != nil {
			t.Fatal(err)
		}
		if _, ok := AttachedLoRA(scope); ok {
			t.Error("still attached")
		}
	}
	if err := AttachLoRA(gm.NewStore().RootScope(), smallConfigs()["head"], visioncfg.LoRA{Targets: []string{"o_proj"}}, 1); err == nil ||
		!strings.Contains(err.Error(), `"o_proj": allowed ["q_proj" "k_proj" "v_proj" "out_proj" "fc1" "fc2" "all-linear"]`) {
		t.Errorf("bad target: %v", err)
	}
}
