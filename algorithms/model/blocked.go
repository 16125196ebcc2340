package model

import (
	"github.com/gomlx/compute"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX graph code reads best unqualified.
	"github.com/gomlx/gomlx/support/exceptions"
	"github.com/temperml/temper/algorithms/model/modelcfg"
)

// goBackend is the name (compute.Backend.String) of GoMLX's pure-Go backend, the one whose fork
// (third_party/compute) has the blocked attention kernel.
const goBackend = "go"

// blockedAttention reports whether self-attention over seq columns uses the blocked kernel
// (Config.Attention): "plain" never, "blocked" always (Go backend only), "auto" from
// BlockedAttentionMinSeq columns when the backend has the kernel.
func blockedAttention(cfg Config, g *Graph, seq int) bool {
	onGo := g.Backend().String() == goBackend
	switch cfg.Attention {
	case modelcfg.AttentionPlain:
		return false
	case modelcfg.AttentionBlocked:
		if !onGo {
			exceptions.Panicf("model: attention=%q needs the %q backend (Temper's compute fork), not %q; use %q or %q",
				modelcfg.AttentionBlocked, goBackend, g.Backend().String(), modelcfg.AttentionAuto, modelcfg.AttentionPlain)
		}
		return true
	}
	return onGo && seq >= modelcfg.BlockedAttentionMinSeq
}

// blockedAttentionValues is softmax(q·kᵀ + mask)·v by the fork's blocked (flash-style) kernel:
// what attentionOut computes before its projection, without the [seq × seq] scores in either
// pass. The kernel takes the masks of squareBias as rules (causal; a padded key hidden except
// from itself; the window of sliding layers) and the soft-cap of Gemma 2's scores.
//
//	q: [batch·kv, grp·seq, hd], already scaled; kk, vv: [batch·kv, seq, hd]; valid: [batch, seq] Bool
//	out: [batch·kv, grp·seq, hd]
func blockedAttentionValues(cfg Config, l int, q, kk, vv, valid *Node) *Node {
	batch, seq := valid.Shape().Dim(0), valid.Shape().Dim(1)
	nh, nkv, hd := cfg.Heads, cfg.KVHeads, cfg.HeadDim
	window := 0
	if cfg.Sliding(l) {
		window = cfg.SlidingWindow
	}
	opts := &compute.ScaledDotProductAttentionConfig{
		Scale:  1, // q is scaled as in the plain path, so that both see the same scores
		Causal: true,
		// The mask is an operand of the backend's node only: GoMLX does not differentiate
		// through it (it has no gradient) nor rematerialise it (it is computed before the layers).
		KeyMask: InternalBackendOutputs(valid)[0],
		Window:  window,
		Softcap: cfg.AttnSoftcap,
	}
	// Heads grouped by KV head (head = kv·grp + j): [batch·kv, grp·seq, hd] is [batch, heads, seq, hd].
	out, _ := BackendFusedScaledDotProductAttention(Reshape(q, batch, nh, seq, hd),
		Reshape(kk, batch, nkv, seq, hd), Reshape(vv, batch, nkv, seq, hd), compute.AttentionAxesLayoutBHSD, opts)
	return Reshape(out, batch*nkv, nh/nkv*seq, hd)
}

// decodeFused reports whether cached decoding attends with the fork's fused decode kernel
// (decodeAttentionWrite): on the Go backend unless Config.Attention is "plain", which keeps the
// plain graph (scores matmul, bias, softmax, values matmul) everywhere, as a reference and for
// A/B runs. Other backends do not have the kernel.
func decodeFused(cfg Config, g *Graph) bool {
	return g.Backend().String() == goBackend && cfg.Attention != modelcfg.AttentionPlain
}

// decodeAttentionWrite is one cached decoding step's attention by the fork's fused decode kernel
// (a FusedScaledDotProductAttention with KeyMask and without Causal, its NewKey, NewValue, NewSlot
// and RopeCos, RopeSin set): it rotates the query rows and this step's key rows (RoPE) and scales
// the queries exactly as the plain path's applyRope and MulScalar do (the same bits), adds the key
// and value rows into their slot of the caches as the plain path's ScatterSum does (the same bits),
// then each query row attends over the cache columns keys marks visible for its batch row, in one
// pass per (batch row, kv head), without the scores, bias and probabilities as tensors and while
// the written rows are still in the processor's cache. Its sums run in another order than the
// plain path's matmuls: the two agree to float32 rounding, not bit for bit. The updated caches
// come back as the node's trailing outputs; with the cache buffers donated the kernel writes them
// in place.
//
//	q: [batch, 1, heads, hd], not yet rotated nor scaled; kc, vc: the caches [batch·kv, cache, hd],
//	slot column still zero (passed as they are: a Reshape of a buffer that is also a graph output
//	is a copy on the Go backend); knew (not yet rotated), vnew: [batch·kv, hd]; slot: [batch]
//	int32, or a scalar for every row; keys: [batch, cache] Bool (the slot column included);
//	cos, sin: ropeTables' [batch, 1, 1, hd]; qscale: the queries' factor after RoPE
//	out: [batch·kv, grp, hd]; kk, vv: the updated caches
func decodeAttentionWrite(cfg Config, q, kc, vc, knew, vnew, slot, keys, cos, sin *Node, qscale float64) (out, kk, vv *Node) {
	return decodeAttentionCall(cfg, q, nil, kc, vc, knew, vnew, slot, keys, cos, sin, qscale)
}

// decodeAttentionPacked is decodeAttentionWrite with the query, new key and new value rows read
// in place from the step's fused QKV projection (the fork's PackedQKV): no Slices of it.
//
//	qkv: [batch, (heads + 2·kv)·hd] (splitLinear's product before its cuts at heads·hd and
//	(heads + kv)·hd); kc, vc, slot, keys, cos, sin, qscale as decodeAttentionWrite's
//	out: [batch, heads, 1, hd]; kk, vv: the updated caches
func decodeAttentionPacked(cfg Config, qkv, kc, vc, slot, keys, cos, sin *Node, qscale float64) (out, kk, vv *Node) {
	return decodeAttentionCall(cfg, nil, qkv, kc, vc, nil, nil, slot, keys, cos, sin, qscale)
}

// decodeAttentionCall is decodeAttentionWrite (q, knew, vnew) or decodeAttentionPacked (qkv).
func decodeAttentionCall(cfg Config, q, qkv, kc, vc, knew, vnew, slot, keys, cos, sin *Node, qscale float64) (out, kk, vv *Node) {
	batch := keys.Shape().Dim(0)
	nh, nkv, hd := cfg.Heads, cfg.KVHeads, cfg.HeadDim
	packed := qkv != nil
	switch {
	case packed && (qkv.Rank() != 2 || qkv.Shape().Dim(0) != batch || qkv.Shape().Dim(1) != (nh+2*nkv)*hd):
		exceptions.Panicf("model: decode attention: qkv %s, want [%d, %d]", qkv.Shape(), batch, (nh+2*nkv)*hd)
	case !packed && (q.Rank() != 4 || q.Shape().Dim(0) != batch || q.Shape().Dim(1) != 1 || q.Shape().Dim(2) != nh || q.Shape().Dim(3) != hd):
		exceptions.Panicf("model: decode attention: q %s, want [%d, 1, %d, %d]", q.Shape(), batch, nh, hd)
	}
	opts := &compute.ScaledDotProductAttentionConfig{
		Scale:      1, // the queries are scaled after RoPE (QueryScale), as in the plain path
		KeyMask:    InternalBackendOutputs(keys)[0],
		Softcap:    cfg.AttnSoftcap,
		NewSlot:    InternalBackendOutputs(slot)[0],
		PackedQKV:  packed,
		RopeCos:    InternalBackendOutputs(cos)[0],
		RopeSin:    InternalBackendOutputs(sin)[0],
		RopeRotary: cfg.rotaryDim(),
		// MulScalar's constant: the float32 of the float64 factor.
		QueryScale: float64(float32(qscale)),
	}
	query := qkv
	if !packed {
		opts.NewKey, opts.NewValue = InternalBackendOutputs(knew)[0], InternalBackendOutputs(vnew)[0]
		// Heads grouped by KV head (head = kv·grp + j): [batch, 1, heads, hd] is [batch, heads, 1, hd].
		query = Reshape(q, batch, nh, 1, hd)
	}
	o, states := BackendFusedScaledDotProductAttention(query, kc, vc, compute.AttentionAxesLayoutBHSD, opts)
	if len(states) != 3 { // log-sum-exp, key cache, value cache
		exceptions.Panicf("model: decode attention with cache writes returned %d trailing outputs, want 3", len(states))
	}
	if packed {
		return o, states[1], states[2]
	}
	return Reshape(o, batch*nkv, nh/nkv, hd), states[1], states[2]
}
