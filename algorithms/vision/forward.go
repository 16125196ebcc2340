package vision

import (
	"fmt"
	"math"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX graph code reads best unqualified.
	gm "github.com/gomlx/gomlx/ml/model"
	"github.com/gomlx/gomlx/support/exceptions"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/vision/visioncfg"
)

// param returns the graph value of the float32 variable at path (relative to scope). A variable
// that does not exist yet is created with the scope's initializer, but InitWeights/ImportWeights
// are the intended way to set weights.
func param(scope *gm.Scope, g *Graph, path string, dims ...int) *Node {
	s, name := model.SubScope(scope, path)
	return s.VariableWithShape(name, shapes.Make(dtypes.Float32, dims...)).NodeValue(g)
}

func at(pattern string, l int) string { return fmt.Sprintf(pattern, l) }

// Encode runs the tower.
//
//	pixels:  [batch, channels, image_size, image_size] float32, channels first (imageproc.Pixels)
//	pooled:  [batch, d] the pooling head's output (use_head), else the mean of patches over patches
//	patches: [batch, patches, d] the per-patch outputs after post_layernorm (transformers'
//	         last_hidden_state); patch i is row i / grid, column i % grid
//
// LoRA adapters attached to scope (AttachLoRA) are applied to the modules they target.
func Encode(scope *gm.Scope, cfg visioncfg.Config, pixels *Node) (pooled, patches *Node) {
	patches = Patches(scope, cfg, pixels)
	return Pool(scope, cfg, patches), patches
}

// Patches is the tower without the pooling: pixels → [batch, patches, d] (see Encode).
func Patches(scope *gm.Scope, cfg visioncfg.Config, pixels *Node) *Node {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	dims := pixels.Shape().Dimensions
	if pixels.Rank() != 4 || dims[1] != cfg.Channels || dims[2] != cfg.ImageSize || dims[3] != cfg.ImageSize {
		exceptions.Panicf("vision: pixels %s: want [batch, %d, %d, %d]", pixels.Shape(), cfg.Channels, cfg.ImageSize, cfg.ImageSize)
	}
	if pixels.DType() != dtypes.Float32 {
		pixels = ConvertDType(pixels, dtypes.Float32)
	}
	g := pixels.Graph()
	batch, d, n := dims[0], cfg.DModel, cfg.Patches()
	x := Add(patchEmbed(scope, cfg, pixels), Reshape(param(scope, g, VarPosition, n, d), 1, n, d))
	for l := range cfg.Layers {
		h := layerNorm(x, param(scope, g, at(VarLN1Scale, l), d), param(scope, g, at(VarLN1Bias, l), d), cfg.NormEps)
		x = Add(x, selfAttention(scope, cfg, l, h))
		h = layerNorm(x, param(scope, g, at(VarLN2Scale, l), d), param(scope, g, at(VarLN2Bias, l), d), cfg.NormEps)
		x = Add(x, mlp(scope, cfg, h, at(VarFC1, l), at(VarFC1Bias, l), at(VarFC2, l), at(VarFC2Bias, l), l))
	}
	out := layerNorm(x, param(scope, g, VarPostScale, d), param(scope, g, VarPostBias, d), cfg.NormEps)
	return Reshape(out, batch, n, d)
}

// Pool reduces per-patch outputs [batch, patches, d] to [batch, d]: the multi-head attention
// pooling head when cfg.UseHead, else the mean over patches.
func Pool(scope *gm.Scope, cfg visioncfg.Config, patches *Node) *Node {
	if !cfg.UseHead {
		return ReduceMean(patches, 1)
	}
	return attentionPool(scope, cfg, patches)
}

// patchEmbed is the strided convolution as a matmul over flattened patches:
// pixels [batch, C, S, S] → [batch, patches, d]. Pixels past grid·patch_size (when the patch size
// does not divide the image size) are ignored, as the convolution does.
func patchEmbed(scope *gm.Scope, cfg visioncfg.Config, pixels *Node) *Node {
	g := pixels.Graph()
	batch, c, p, gr, d := pixels.Shape().Dim(0), cfg.Channels, cfg.PatchSize, cfg.Grid(), cfg.DModel
	if used := gr * p; used != cfg.ImageSize {
		pixels = Slice(pixels, AxisRange(), AxisRange(), AxisRange(0, used), AxisRange(0, used))
	}
	x := Reshape(pixels, batch, c, gr, p, gr, p)
	x = TransposeAllAxes(x, 0, 2, 4, 1, 3, 5) // [batch, row, col, C, p, p]
	x = Reshape(x, batch*gr*gr, c*p*p)
	y := Add(Dot(x, param(scope, g, VarPatch, c*p*p, d)).Product(), Reshape(param(scope, g, VarPatchBias, d), 1, d))
	return Reshape(y, batch, gr*gr, d)
}

// layerNorm: x [..., d], scale, bias [d] → (x − mean) / sqrt(var + eps) · scale + bias over the last
// axis (biased variance, as torch's LayerNorm).
func layerNorm(x, scale, bias *Node, eps float64) *Node {
	mean := ReduceAndKeep(x, ReduceMean, -1)
	xc := Sub(x, mean)
	v := ReduceAndKeep(Square(xc), ReduceMean, -1)
	y := Div(xc, Sqrt(AddScalar(v, eps))) // Rsqrt has no gradient in GoMLX v0.28
	dims := make([]int, x.Rank())
	for i := range dims {
		dims[i] = 1
	}
	dims[len(dims)-1] = scale.Shape().Dim(0)
	return Add(Mul(y, Reshape(scale, dims...)), Reshape(bias, dims...))
}

// linear is x·W + b with the LoRA adapter of (module, layer) when one is attached:
// x [n, in] → [n, out].
func linear(scope *gm.Scope, x *Node, wPath, bPath string, in, out int, module string, l int) *Node {
	g := x.Graph()
	w := param(scope, g, wPath, in, out)
	if merged := loraMerged(scope, g, w, module, l, in, out); merged != nil {
		w = merged
	}
	return Add(Dot(x, w).Product(), Reshape(param(scope, g, bPath, out), 1, out))
}

// selfAttention is SiglipAttention: h [batch, n, d] normalised input → [batch, n, d].
func selfAttention(scope *gm.Scope, cfg visioncfg.Config, l int, h *Node) *Node {
	batch, n, d := h.Shape().Dim(0), h.Shape().Dim(1), cfg.DModel
	x := Reshape(h, batch*n, d)
	q := linear(scope, x, at(VarQ, l), at(VarQBias, l), d, d, "q_proj", l)
	k := linear(scope, x, at(VarK, l), at(VarKBias, l), d, d, "k_proj", l)
	v := linear(scope, x, at(VarV, l), at(VarVBias, l), d, d, "v_proj", l)
	o := multiHead(cfg, q, k, v, batch, n, n)
	out := linear(scope, o, at(VarO, l), at(VarOBias, l), d, d, "out_proj", l)
	return Reshape(out, batch, n, d)
}

// multiHead is softmax(q·kᵀ/√head_dim)·v per head, with no mask (every patch sees every patch):
// q [batch·nq, d], k, v [batch·nk, d] → [batch·nq, d].
func multiHead(cfg visioncfg.Config, q, k, v *Node, batch, nq, nk int) *Node {
	nh, hd := cfg.Heads, cfg.HeadDim()
	heads := func(x *Node, n int) *Node {
		return Reshape(TransposeAllAxes(Reshape(x, batch, n, nh, hd), 0, 2, 1, 3), batch*nh, n, hd)
	}
	qh, kh, vh := heads(q, nq), heads(k, nk), heads(v, nk)
	scores := MulScalar(DotGeneral(qh, []int{2}, []int{0}, kh, []int{2}, []int{0}), math.Pow(float64(hd), -0.5)) // [b·h, nq, nk]
	probs := Softmax(scores, -1)
	out := DotGeneral(probs, []int{2}, []int{0}, vh, []int{1}, []int{0}) // [b·h, nq, hd]
	out = TransposeAllAxes(Reshape(out, batch, nh, nq, hd), 0, 2, 1, 3)
	return Reshape(out, batch*nq, nh*hd)
}

// mlp is SiglipMLP: fc1, activation, fc2. h [batch, n, d] → [batch, n, d]. Adapters apply to the
// encoder layers' MLPs (l >= 0), not the head's (l < 0).
func mlp(scope *gm.Scope, cfg visioncfg.Config, h *Node, fc1, fc1b, fc2, fc2b string, l int) *Node {
	dims := h.Shape().Dimensions
	d, f := cfg.DModel, cfg.FFN
	x := Reshape(h, h.Shape().Size()/d, d)
	x = linear(scope, x, fc1, fc1b, d, f, "fc1", l)
	x = activate(cfg.Activation, x)
	x = linear(scope, x, fc2, fc2b, f, d, "fc2", l)
	return Reshape(x, dims...)
}

func activate(name string, x *Node) *Node {
	switch name {
	case visioncfg.ActGELU:
		// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
		inner := MulScalar(Add(x, MulScalar(Mul(x, Square(x)), 0.044715)), math.Sqrt(2/math.Pi))
		return Mul(MulScalar(x, 0.5), OnePlus(Tanh(inner)))
	case visioncfg.ActGELUExact:
		return Mul(MulScalar(x, 0.5), OnePlus(Erf(MulScalar(x, 1/math.Sqrt2))))
	case visioncfg.ActQuickGELU:
		return Mul(x, Sigmoid(MulScalar(x, 1.702)))
	}
	exceptions.Panicf("vision: unknown activation %q", name)
	return nil
}

// attentionPool is SiglipMultiheadAttentionPoolingHead: a learned probe attends over the patches
// (torch's MultiheadAttention with packed q|k|v projections), then a residual MLP on its
// LayerNorm. patches [batch, n, d] → [batch, d].
func attentionPool(scope *gm.Scope, cfg visioncfg.Config, patches *Node) *Node {
	g := patches.Graph()
	batch, n, d := patches.Shape().Dim(0), patches.Shape().Dim(1), cfg.DModel
	in := param(scope, g, VarHeadIn, d, 3*d)
	inBias := param(scope, g, VarHeadInBias, 3*d)
	proj := func(x *Node, part int) *Node {
		w := SliceAxis(in, 1, AxisRange(part*d, (part+1)*d))
		b := Reshape(SliceAxis(inBias, 0, AxisRange(part*d, (part+1)*d)), 1, d)
		return Add(Dot(x, w).Product(), b)
	}
	probe := Reshape(param(scope, g, VarProbe, d), 1, d)
	q := BroadcastToDims(proj(probe, 0), batch, d) // the same query for every image
	flat := Reshape(patches, batch*n, d)
	o := multiHead(cfg, q, proj(flat, 1), proj(flat, 2), batch, 1, n)
	o = Add(Dot(o, param(scope, g, VarHeadOut, d, d)).Product(), Reshape(param(scope, g, VarHeadOutBias, d), 1, d))
	h := layerNorm(o, param(scope, g, VarHeadLNScale, d), param(scope, g, VarHeadLNBias, d), cfg.NormEps)
	return Add(o, mlp(scope, cfg, h, VarHeadFC1, VarHeadFC1Bias, VarHeadFC2, VarHeadFC2Bias, -1))
}
