package model

import (
	"fmt"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"math"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX graph code reads best unqualified.
	gm "github.com/gomlx/gomlx/ml/model"
	"github.com/gomlx/gomlx/support/exceptions"
)

// maskedScore is added to the attention scores of hidden keys: large enough that exp underflows to
// exactly 0, finite so that a row never turns into NaN.
const maskedScore = -1e9

// param returns the graph value of the float32 variable at path (relative to scope). A variable
// that does not exist yet is created with the scope's initializer (GoMLX's default), so a fresh
// store works, but InitWeights/ImportWeights are the intended way to set weights.
func param(scope *gm.Scope, g *Graph, path string, dims ...int) *Node {
	s, name := SubScope(scope, path)
	return s.VariableWithShape(name, shapes.Make(dtypes.Float32, dims...)).NodeValue(g)
}

func layerPath(pattern string, l int) string {
	return fmt.Sprintf(pattern, l)
}

// Forward computes next-token logits.
//
//	tokens:    [batch, seq] int32 token ids (padding ids must still be in [0, vocab))
//	positions: [batch, seq] int32 RoPE positions per row (0-based from the first real token, so a
//	           left-padded row starts at 0 where its prompt starts)
//	mask:      [batch, seq] valid-token mask (Bool, or numeric with non-zero = valid)
//	logits:    [batch, seq, vocab] float32
//
// Attention is causal over the seq index and hides padded keys; a padded query attends only to
// itself, so its (meaningless) output stays finite. Variables are read relative to scope; LoRA
// adapters attached to scope (AttachLoRA) are applied to the projections they target.
func Forward(scope *gm.Scope, cfg Config, tokens, positions, mask *Node) *Node {
	h := Hidden(scope, cfg, tokens, positions, mask)
	return lmHead(scope, cfg, h)
}

// Hidden is the trunk: embeddings → decoder blocks → final RMSNorm.
//
//	tokens, positions, mask: as in Forward
//	hidden: [batch, seq, d_model]
func Hidden(scope *gm.Scope, cfg Config, tokens, positions, mask *Node) *Node {
	if err := cfg.Validate(); err != nil {
		panic(err)
	}
	g := tokens.Graph()
	batch, seq := tokens.Shape().Dim(0), tokens.Shape().Dim(1)
	return trunk(scope, cfg, tokens, positions, selfAttnBias(cfg, g, validMask(mask), batch, seq), nil)
}

// attnBias holds the additive attention biases [batch, 1, seq, keys] (0 where a key is visible,
// maskedScore elsewhere) of the two layer kinds: full for full-attention layers, sliding for
// sliding-window ones; each is nil when no layer of the config needs it. With blocked attention
// there are no biases: valid, the [batch, seq] Bool of the real tokens, goes to the kernel, which
// builds each block's mask itself. Decoding with the fused decode kernel (decodeFused) has no
// biases either: fullKeys and slidingKeys, [batch, cache] Bool of the cache columns each layer
// kind sees, go to the kernel.
type attnBias struct{ full, sliding, valid, fullKeys, slidingKeys *Node }

func (b attnBias) layer(cfg Config, l int) *Node {
	if cfg.Sliding(l) {
		return b.sliding
	}
	return b.full
}

// keys is layer l's decode key mask [batch, cache] Bool, or nil when decoding builds biases.
func (b attnBias) keys(cfg Config, l int) *Node {
	if cfg.Sliding(l) {
		return b.slidingKeys
	}
	return b.fullKeys
}

// hasFull and hasSliding report whether some layer is of that kind.
func (c Config) hasFull() bool {
	for l := range c.Layers {
		if !c.Sliding(l) {
			return true
		}
	}
	return false
}

func (c Config) hasSliding() bool {
	for l := range c.Layers {
		if c.Sliding(l) {
			return true
		}
	}
	return false
}

// selfAttnBias is the attention bias of a sequence attending to itself (training, scoring,
// prefill): squareBias, or with blocked attention (Config.Attention) only the valid mask.
func selfAttnBias(cfg Config, g *Graph, valid *Node, batch, seq int) attnBias {
	if blockedAttention(cfg, g, seq) {
		return attnBias{valid: valid}
	}
	return squareBias(cfg, g, valid, batch, seq)
}

// squareBias is the attention bias of a sequence attending to itself: valid [batch, seq] Bool →
// biases [batch, 1, seq, seq]. Key j is visible from query i when j <= i and j is a real token;
// a padded query sees only itself, so its (meaningless) output stays finite. A sliding layer's
// query also needs i - j < sliding_window (transformers' sliding_window_overlay): the window counts
// sequence columns, which for the real tokens of a left-padded row differ as their positions do.
func squareBias(cfg Config, g *Graph, valid *Node, batch, seq int) attnBias {
	row := Iota(g, shapes.Make(dtypes.Int32, seq, seq), 0)
	col := Iota(g, shapes.Make(dtypes.Int32, seq, seq), 1)
	causal := Reshape(GreaterOrEqual(row, col), 1, seq, seq)
	diag := Reshape(Equal(row, col), 1, seq, seq)
	visible := LogicalAnd(causal, LogicalOr(Reshape(valid, batch, 1, seq), diag))
	toBias := func(v *Node) *Node {
		return Reshape(Where(v, ScalarZero(g, dtypes.Float32), Scalar(g, dtypes.Float32, maskedScore)),
			batch, 1, seq, seq)
	}
	var b attnBias
	if cfg.hasFull() {
		b.full = toBias(visible)
	}
	if cfg.hasSliding() {
		inWindow := Reshape(GreaterThan(AddScalar(col, cfg.SlidingWindow), row), 1, seq, seq) // i - j < window
		b.sliding = toBias(LogicalAnd(visible, inWindow))
	}
	return b
}

// Values is the scalar head on the trunk (reward models, PPO critics).
//
//	tokens, positions, mask: as in Forward
//	values: [batch, seq] float32
func Values(scope *gm.Scope, cfg Config, tokens, positions, mask *Node) *Node {
	return ValueHead(scope, cfg, Hidden(scope, cfg, tokens, positions, mask))
}

// ValueHead applies the value head to hidden states, so a caller that needs both logits and values
// can share one trunk: hidden [batch, seq, d] → values [batch, seq].
func ValueHead(scope *gm.Scope, cfg Config, hidden *Node) *Node {
	g := hidden.Graph()
	batch, seq := hidden.Shape().Dim(0), hidden.Shape().Dim(1)
	w := param(scope, g, VarValueW, cfg.DModel, 1)
	b := param(scope, g, VarValueB, 1)
	v := Add(Dot(Reshape(hidden, batch*seq, cfg.DModel), w).Product(), Reshape(b, 1, 1))
	return Reshape(v, batch, seq)
}

// RewardLogProbWeight is α of a reward model's generative term (Config.RewardLogProb): a [1]
// float32 variable.
func RewardLogProbWeight(scope *gm.Scope, g *Graph) *Node { return param(scope, g, VarValueLP, 1) }

// LMHead projects hidden states to logits: hidden [batch, seq, d] → logits [batch, seq, vocab].
func LMHead(scope *gm.Scope, cfg Config, hidden *Node) *Node { return lmHead(scope, cfg, hidden) }

func lmHead(scope *gm.Scope, cfg Config, h *Node) *Node {
	g := h.Graph()
	dims := h.Shape().Dimensions
	n := h.Shape().Size() / cfg.DModel
	h2 := Reshape(h, n, cfg.DModel)
	var logits *Node
	if cfg.TiedEmbeddings {
		emb := param(scope, g, VarEmbed, cfg.Vocab, cfg.DModel)
		logits = DotGeneral(h2, []int{1}, nil, emb, []int{1}, nil)
	} else {
		logits = Dot(h2, param(scope, g, VarLMHead, cfg.DModel, cfg.Vocab)).Product()
	}
	out := append(append([]int(nil), dims[:len(dims)-1]...), cfg.Vocab)
	logits = Reshape(logits, out...)
	if cfg.FinalSoftcap > 0 {
		logits = softcap(logits, cfg.FinalSoftcap)
	}
	return logits
}

// softcap is cap·tanh(x/cap) (Gemma 2's attention-score and final-logit capping).
func softcap(x *Node, limit float64) *Node {
	return MulScalar(Tanh(DivScalar(x, limit)), limit)
}

// validMask turns a mask of any dtype into Bool.
func validMask(mask *Node) *Node {
	if mask.DType() == dtypes.Bool {
		return mask
	}
	return NotEqual(mask, ScalarZero(mask.Graph(), mask.DType()))
}

// kvMode selects how attention uses the KV cache.
type kvMode int

const (
	kvNone    kvMode = iota
	kvPrefill        // attend within the sequence; emit K/V padded to the cache length
	kvDecode         // write the new K/V into the cache slot, attend over the cache
)

// kvState carries the cache through the layers.
//
//	k[l], v[l]: [batch·kv_heads, cache, head_dim]
//	slotIdx:    [batch·kv_heads, 2] int32 (row, slot) scatter indices into k and v (decode, plain
//	            path only)
//	slot:       [batch] int32 cache column each row writes, or a scalar for every row (decode,
//	            fused path only: the fork's decode kernel writes the rows itself)
//
// Keys and values share the layout: a decode step writes one row of head_dim floats of each per
// (batch row, kv head), and the fused decode kernel reads both row by row. (Keys used to be kept
// transposed, [batch·kv, head_dim, cache], so that the plain path's scores were a plain matmul;
// the write of a key column was then head_dim scattered scalars per row.)
type kvState struct {
	mode     kvMode
	cacheLen int
	slotIdx  *Node
	slot     *Node
	k, v     []*Node
}

// trunk runs embeddings, the blocks and the final norm.
//
//	bias: [batch, 1, seq, keys] additive attention biases per layer kind (keys = seq, or the cache
//	length in decode)
//	hidden: [batch, seq, d]
func trunk(scope *gm.Scope, cfg Config, tokens, positions *Node, bias attnBias, kv *kvState) *Node {
	g := tokens.Graph()
	if tokens.DType() != dtypes.Int32 {
		tokens = ConvertDType(tokens, dtypes.Int32)
	}
	if tokens.Rank() != 2 || positions.Rank() != 2 || positions.Shape().Dim(0) != tokens.Shape().Dim(0) ||
		positions.Shape().Dim(1) != tokens.Shape().Dim(1) {
		exceptions.Panicf("model: tokens %s and positions %s must both be [batch, seq]", tokens.Shape(), positions.Shape())
	}
	batch, seq := tokens.Shape().Dim(0), tokens.Shape().Dim(1)
	d := cfg.DModel
	emb := param(scope, g, VarEmbed, cfg.Vocab, d)
	x := Gather(emb, Reshape(tokens, batch, seq, 1)) // [batch, seq, d]
	if cfg.ScaleEmbeddings {
		x = MulScalar(x, float64(float32(math.Sqrt(float64(d)))))
	}
	// RoPE tables per layer kind, built once for the layers that use them: sliding layers have
	// their own when they rotate with another base (Gemma 3's rope_local_base_freq).
	var tables [2][2]*Node
	rope := func(l int) (cos, sin *Node) {
		k := 0
		if cfg.Sliding(l) && cfg.RopeLocalTheta > 0 {
			k = 1
		}
		if tables[k][0] == nil {
			tables[k][0], tables[k][1] = ropeTables(cfg, positions, k == 1)
		}
		return tables[k][0], tables[k][1]
	}
	remat := rematOf(cfg, kv)
	for l := range cfg.Layers {
		cos, sin := rope(l)
		x = remat.start(modelcfg.RematLayer, x)
		h := rmsNorm(x, param(scope, g, layerPath(VarAttnNorm, l), d), cfg)
		h = remat.start(modelcfg.RematAttention, h)
		a := remat.end(modelcfg.RematAttention, attention(scope, cfg, l, h, cos, sin, bias, kv, remat))
		if cfg.PostNorms {
			a = rmsNorm(a, param(scope, g, layerPath(VarAttnPostNorm, l), d), cfg)
		}
		x = Add(x, a)
		h = rmsNorm(x, param(scope, g, layerPath(VarMLPNorm, l), d), cfg)
		m := mlp(scope, cfg, l, h)
		if cfg.PostNorms {
			m = rmsNorm(m, param(scope, g, layerPath(VarMLPPostNorm, l), d), cfg)
		}
		x = Add(x, m)
	}
	x = remat.end(modelcfg.RematLayer, x)
	return rmsNorm(x, param(scope, g, VarFinalNorm, d), cfg)
}

// rmsNorm: x [..., n], w [n] → x / rms(x) · w  (· (1+w) when NormPlusOne), over the last axis.
func rmsNorm(x, w *Node, cfg Config) *Node {
	ms := ReduceAndKeep(Square(x), ReduceMean, -1)
	y := Div(x, Sqrt(AddScalar(ms, cfg.NormEps))) // Rsqrt has no gradient in GoMLX v0.28
	if cfg.NormPlusOne {
		w = OnePlus(w)
	}
	dims := make([]int, x.Rank())
	for i := range dims {
		dims[i] = 1
	}
	dims[len(dims)-1] = w.Shape().Dim(0)
	return Mul(y, Reshape(w, dims...))
}

// ropeTables: positions [batch, seq] → cos, sin [batch, seq, 1, head_dim] in the rotate-half
// layout used by Hugging Face (frequency i at columns i and i+rotary_dim/2), for the sliding layers'
// RoPE when local is set. With a partial rotary dimension the features past it get cos 1 and sin 0,
// so applyRope passes them through exactly.
func ropeTables(cfg Config, positions *Node, local bool) (cos, sin *Node) {
	g := positions.Graph()
	batch, seq := positions.Shape().Dim(0), positions.Shape().Dim(1)
	inv := cfg.ropeInvFreqFor(local)
	inv32 := make([]float32, len(inv))
	for i, f := range inv {
		inv32[i] = float32(f)
	}
	freqs := Reshape(Const(g, inv32), 1, 1, len(inv))
	pos := Reshape(ConvertDType(positions, dtypes.Float32), batch, seq, 1)
	ang := Mul(pos, freqs) // [batch, seq, head_dim/2]
	// cos and sin of the half, then each duplicated: the same values as of the duplicated angles,
	// for half the transcendental calls (the backend's are scalar float64, one per element).
	pass := cfg.HeadDim - cfg.rotaryDim()
	full := func(x *Node, fill float64) *Node {
		parts := []*Node{x, x}
		if pass > 0 {
			parts = append(parts, BroadcastToDims(Scalar(g, dtypes.Float32, fill), batch, seq, pass))
		}
		return Reshape(Concatenate(parts, -1), batch, seq, 1, cfg.HeadDim) // broadcast over heads
	}
	return full(Cos(ang), 1), full(Sin(ang), 0)
}

// applyRope: x [batch, seq, heads, head_dim] → x·cos + rotate_half(x)·sin, rotate_half acting on the
// first rotary features (all of them but with Phi-3's partial rotary factor).
//
// rotate_half(x) = [-x2, x1] is one small matmul with a constant signed permutation (each output
// column has a single ±1), which is exact and keeps the backward pass a matmul too: the
// slice/negate/concatenate form costs two Pads, a Slice and a Concatenate per call in the
// gradient, each over the whole activation.
func applyRope(x, cos, sin *Node, rotary int) *Node {
	hd := x.Shape().Dim(-1)
	half := rotary / 2
	r := make([]float32, hd*hd) // r[i, j]: x[i]'s weight in rotate_half(x)[j]
	for j := range half {
		r[(j+half)*hd+j] = -1
		r[j*hd+j+half] = 1
	}
	rot := Dot(Reshape(x, x.Shape().Size()/hd, hd), Reshape(Const(x.Graph(), r), hd, hd)).Product()
	return Add(Mul(x, cos), Mul(Reshape(rot, x.Shape().Dimensions...), sin))
}

// attention is one self-attention sub-block (GQA, RoPE, fused QKV).
//
//	h: [batch, seq, d] normalized input; output: [batch, seq, d]
//
// Layout: heads are grouped by their KV head (head = kv·group + j, as transformers' repeat_kv), so
// queries reshape to [batch·kv_heads, group·seq, head_dim] and multiply the un-repeated keys
// [batch·kv_heads, keys, head_dim] directly: batched rank-3 matmuls, no repeat of K/V.
func attention(scope *gm.Scope, cfg Config, l int, h, cos, sin *Node, bias attnBias, kv *kvState, remat rematMode) *Node {
	g := h.Graph()
	batch, seq, d := h.Shape().Dim(0), h.Shape().Dim(1), cfg.DModel
	nh, nkv, hd := cfg.Heads, cfg.KVHeads, cfg.HeadDim
	grp := nh / nkv
	width := cfg.qkvWidth()

	x := Reshape(h, batch*seq, d)
	var qkvBias *Node
	if cfg.QKVBias {
		qkvBias = param(scope, g, layerPath(VarQKVBias, l), width)
	}
	scaleDim := float64(hd)
	if cfg.QueryScale > 0 {
		scaleDim = cfg.QueryScale
	}
	w := param(scope, g, layerPath(VarQKV, l), d, width)
	if kv != nil && kv.mode == kvDecode && !cfg.QKNorm && x.Shape().Dim(0) < d {
		if m := bias.keys(cfg, l); m != nil { // the fork's fused decode kernel (decodeFused)
			// One node reads the fused projection's q, k and v columns in place (PackedQKV): RoPE of
			// q and of the new key row, the cache writes (ScatterSum's bits) and the attention, with
			// the same bits as slicing the product (splitLinear with fewer rows than d), then the
			// graph's rope, scale and ScatterSum.
			var out *Node
			out, kv.k[l], kv.v[l] = decodeAttentionPacked(cfg, fusedLinear(scope, VarQKV, l, x, w, qkvBias), kv.k[l], kv.v[l],
				kv.slot, m, cos, sin, 1/math.Sqrt(scaleDim))
			return projectAttention(scope, cfg, l, Reshape(out, batch*seq, nh*hd), batch, seq)
		}
	}
	parts := splitLinear(scope, VarQKV, l, x, w, qkvBias, nh*hd, (nh+nkv)*hd)
	q := Reshape(parts[0], batch, seq, nh, hd)
	k := Reshape(parts[1], batch, seq, nkv, hd)
	v := Reshape(parts[2], batch, seq, nkv, hd)
	if cfg.QKNorm {
		q = rmsNorm(q, param(scope, g, layerPath(VarQNorm, l), hd), cfg)
		k = rmsNorm(k, param(scope, g, layerPath(VarKNorm, l), hd), cfg)
	}
	rd := cfg.rotaryDim()
	if kv != nil && kv.mode == kvDecode {
		if m := bias.keys(cfg, l); m != nil { // the fork's fused decode kernel (decodeFused)
			// One node: RoPE of q and of the new key row, the cache writes (ScatterSum's bits) and
			// the attention, with the same bits as the graph's rope, scale and ScatterSum.
			var out *Node
			out, kv.k[l], kv.v[l] = decodeAttentionWrite(cfg, q, kv.k[l], kv.v[l],
				Reshape(k, batch*nkv, hd), Reshape(v, batch*nkv, hd), kv.slot, m, cos, sin, 1/math.Sqrt(scaleDim))
			return attentionProject(scope, cfg, l, out, batch, seq)
		}
	}
	q = MulScalar(applyRope(q, cos, sin, rd), 1/math.Sqrt(scaleDim))
	k = applyRope(k, cos, sin, rd)

	// q: [batch, seq, kv, grp, hd] → [batch·kv, grp·seq, hd]
	q = permute(Reshape(q, batch, seq, nkv, grp, hd), 0, 2, 3, 1, 4)
	q = Reshape(q, batch*nkv, grp*seq, hd)
	// K/V as [batch·kv, seq, hd], the layout the cache keeps, so decode reads the cache without a
	// reshape (a reshape of a buffer that is also a graph output is a full copy on the Go backend).
	kk := Reshape(permute(k, 0, 2, 1, 3), batch*nkv, seq, hd)
	vv := Reshape(permute(v, 0, 2, 1, 3), batch*nkv, seq, hd)

	keys := seq
	if kv != nil {
		switch kv.mode {
		case kvPrefill:
			pad := compute.PadAxis{End: kv.cacheLen - seq}
			zero := ScalarZero(g, dtypes.Float32)
			kv.k[l] = Pad(kk, zero, compute.PadAxis{}, pad, compute.PadAxis{})
			kv.v[l] = Pad(vv, zero, compute.PadAxis{}, pad, compute.PadAxis{})
		case kvDecode:
			// seq == 1: add this step's key/value into the (still zero) slot column. With the cache
			// buffers donated, the Go backend writes in place: O(batch·kv·hd), not O(cache).
			keys = kv.cacheLen // (the fused decode kernel's steps returned above)
			kk = ScatterSum(kv.k[l], kv.slotIdx, Reshape(k, batch*nkv, hd), true, true)
			vv = ScatterSum(kv.v[l], kv.slotIdx, Reshape(v, batch*nkv, hd), true, true)
			kv.k[l], kv.v[l] = kk, vv
			scores := DotGeneral(q, []int{2}, []int{0}, kk, []int{2}, []int{0}) // [batch·kv, grp, cache]
			return attentionOut(scope, cfg, l, scores, vv, bias.layer(cfg, l), batch, seq, keys)
		}
	}
	if bias.valid != nil { // blocked attention (selfAttnBias chose it): no [seq × seq] scores
		q, kk, vv = remat.keep(q), remat.keep(kk), remat.keep(vv)
		return attentionProject(scope, cfg, l, blockedAttentionValues(cfg, l, q, kk, vv, bias.valid), batch, seq)
	}
	// Contracting the last axis of both (the backend's native "transposed" layout) measured as fast
	// as pre-transposed keys here.
	scores := DotGeneral(q, []int{2}, []int{0}, kk, []int{2}, []int{0}) // [batch·kv, grp·seq, keys]
	return attentionOut(scope, cfg, l, scores, vv, bias.layer(cfg, l), batch, seq, keys)
}

// attentionOut finishes attention from the raw scores: bias, softmax, the weighted sum of values
// and the output projection.
//
//	scores: [batch·kv, grp·seq, keys]; vv: [batch·kv, keys, hd]; attnBias: [batch, 1, seq, keys]
//	output: [batch, seq, d]
func attentionOut(scope *gm.Scope, cfg Config, l int, scores, vv, attnBias *Node, batch, seq, keys int) *Node {
	nh, nkv := cfg.Heads, cfg.KVHeads
	grp := nh / nkv
	scores = Reshape(scores, batch, nh, seq, keys)
	if cfg.AttnSoftcap > 0 {
		scores = softcap(scores, cfg.AttnSoftcap)
	}
	scores = Add(scores, attnBias)
	probs := Reshape(softmax(scores), batch*nkv, grp*seq, keys)
	out := DotGeneral(probs, []int{2}, []int{0}, vv, []int{1}, []int{0}) // [batch·kv, grp·seq, hd]
	return attentionProject(scope, cfg, l, out, batch, seq)
}

// attentionProject is the output projection of the attention values.
//
//	out: [batch·kv, grp·seq, hd] (heads grouped by KV head) → [batch, seq, d]
func attentionProject(scope *gm.Scope, cfg Config, l int, out *Node, batch, seq int) *Node {
	nh, nkv, hd := cfg.Heads, cfg.KVHeads, cfg.HeadDim
	grp := nh / nkv
	out = permute(Reshape(out, batch, nkv, grp, seq, hd), 0, 3, 1, 2, 4)
	return projectAttention(scope, cfg, l, Reshape(out, batch*seq, nh*hd), batch, seq)
}

// projectAttention is attentionProject's output projection: out [batch·seq, heads·hd] → [batch, seq, d].
func projectAttention(scope *gm.Scope, cfg Config, l int, out *Node, batch, seq int) *Node {
	g := out.Graph()
	d, nh, hd := cfg.DModel, cfg.Heads, cfg.HeadDim
	out = linear(scope, VarAttnOut, l, out, param(scope, g, layerPath(VarAttnOut, l), nh*hd, d))
	if cfg.AttnOutBias {
		out = Add(out, Reshape(param(scope, g, layerPath(VarAttnOutBias, l), d), 1, d))
	}
	return Reshape(out, batch, seq, d)
}

// mlp is the gated MLP (SwiGLU / GeGLU) with fused gate|up weights.
//
//	h: [batch, seq, d] → [batch, seq, d]
func mlp(scope *gm.Scope, cfg Config, l int, h *Node) *Node {
	g := h.Graph()
	batch, seq, d, f := h.Shape().Dim(0), h.Shape().Dim(1), cfg.DModel, cfg.FFN
	x := Reshape(h, batch*seq, d)
	gu := splitLinear(scope, VarGateUp, l, x, param(scope, g, layerPath(VarGateUp, l), d, 2*f), nil, f)
	act := Mul(activate(cfg.Activation, gu[0]), gu[1])
	out := linear(scope, VarDown, l, act, param(scope, g, layerPath(VarDown, l), f, d))
	return Reshape(out, batch, seq, d)
}

func activate(name string, x *Node) *Node {
	switch name {
	case modelcfg.ActSiLU:
		return Mul(x, Sigmoid(x))
	case modelcfg.ActGELU:
		// 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))
		inner := MulScalar(Add(x, MulScalar(Mul(x, Square(x)), 0.044715)), math.Sqrt(2/math.Pi))
		return Mul(MulScalar(x, 0.5), OnePlus(Tanh(inner)))
	case modelcfg.ActGELUExact:
		return Mul(MulScalar(x, 0.5), OnePlus(Erf(MulScalar(x, 1/math.Sqrt2))))
	}
	exceptions.Panicf("model: unknown activation %q", name)
	return nil
}

// splitLinear is x·w (+ bias) for a fused projection whose output columns split at cuts into
// parts (q|k|v, gate|up): x [n, in], w [in, width], bias [width] or nil → parts [n, width_i].
//
// With more rows than the weight has inputs (training), each part is its own matmul with a column
// slice of the weight, so the backward pass pads and sums weight-sized gradients rather than
// activation-sized ones (slicing the fused output costs a zero-filled Pad per part plus their sum,
// each as large as the activation); with fewer (decoding) the product is sliced. Adapters attached
// to the projection address its fused columns: a merged weight is sliced like w, an explicit
// delta is sliced and added per part.
func splitLinear(scope *gm.Scope, kind string, l int, x, w, bias *Node, cuts ...int) []*Node {
	width := w.Shape().Dim(1)
	bounds := append(append([]int{0}, cuts...), width)
	merged, delta := loraTerm(scope, kind, l, x, w)
	if merged != nil {
		w = merged
	}
	parts := make([]*Node, len(bounds)-1)
	if x.Shape().Dim(0) < w.Shape().Dim(0) {
		// Fewer rows than the weight has (decoding): slicing the product copies less than
		// slicing the weight would, every step.
		y := fusedProduct(x, w, nil, delta, bias) // w is the merged weight already
		for i := range parts {
			parts[i] = SliceAxis(y, 1, AxisRange(bounds[i], bounds[i+1]))
		}
		return parts
	}
	for i := range parts {
		lo, hi := bounds[i], bounds[i+1]
		parts[i] = Dot(x, SliceAxis(w, 1, AxisRange(lo, hi))).Product()
		if delta != nil {
			parts[i] = Add(parts[i], SliceAxis(delta, 1, AxisRange(lo, hi)))
		}
		if bias != nil {
			parts[i] = Add(parts[i], Reshape(SliceAxis(bias, 0, AxisRange(lo, hi)), 1, hi-lo))
		}
	}
	return parts
}

// fusedLinear is splitLinear's product before its slices, for fewer rows than w has inputs
// (decoding): x [n, in], w [in, width], bias [width] or nil → [n, width], adapters included.
func fusedLinear(scope *gm.Scope, kind string, l int, x, w, bias *Node) *Node {
	merged, delta := loraTerm(scope, kind, l, x, w)
	return fusedProduct(x, w, merged, delta, bias)
}

// fusedProduct is x·w (w replaced by merged when an adapter is merged into it) + delta + bias.
func fusedProduct(x, w, merged, delta, bias *Node) *Node {
	if merged != nil {
		w = merged
	}
	y := Dot(x, w).Product()
	if delta != nil {
		y = Add(y, delta)
	}
	if bias != nil {
		y = Add(y, Reshape(bias, 1, w.Shape().Dim(1)))
	}
	return y
}

// permute is TransposeAllAxes, or a Reshape when the permutation only moves axes of size 1 (decode's
// one-token sequence axis): the elements are then already in the permuted order, and the Go backend
// would otherwise copy them (four copies per layer per decode step).
func permute(x *Node, perm ...int) *Node {
	dims := x.Shape().Dimensions
	last := -1
	for _, a := range perm {
		if dims[a] == 1 {
			continue
		}
		if a < last {
			return TransposeAllAxes(x, perm...)
		}
		last = a
	}
	out := make([]int, len(perm))
	for i, a := range perm {
		out[i] = dims[a]
	}
	return Reshape(x, out...)
}
