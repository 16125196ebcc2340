package model

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/compute"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/algorithms/testbackend"
)

// TestDecodeRopeInKernelMatches: the fused decode node that rotates q and the new key rows itself
// (RopeCos, RopeSin, QueryScale) gives the same bits — outputs and both updated caches — as the
// same node fed by the graph's applyRope and MulScalar (what decoding ran before the rotation moved
// into the kernel), for full and partial rotary dimensions, GQA groups of 1–3, a soft-cap, and
// ragged positions and key masks; and so does the node reading q and the new rows in place from
// the fused projection's output (decodeAttentionPacked, PackedQKV).
func TestDecodeRopeInKernelMatches(t *testing.T) {
	cases := []struct {
		name                 string
		heads, kv, hd, rot   int
		softcap, queryScaleD float64
	}{
		{name: "base-like gqa3", heads: 6, kv: 2, hd: 64},
		{name: "small-like gqa2", heads: 4, kv: 2, hd: 32},
		{name: "mha partial rotary softcap", heads: 3, kv: 3, hd: 24, rot: 8, softcap: 50},
		{name: "query scale", heads: 2, kv: 1, hd: 16, queryScaleD: 256},
	}
	const batch, cache = 5, 13
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := Config{Heads: c.heads, KVHeads: c.kv, HeadDim: c.hd, RotaryDim: c.rot, RopeTheta: 10000,
				AttnSoftcap: c.softcap}
			scaleDim := float64(c.hd)
			if c.queryScaleD > 0 {
				scaleDim = c.queryScaleD
			}
			rng := rand.New(rand.NewPCG(uint64(c.hd), 7))
			fill := func(n int) []float32 {
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(rng.NormFloat64())
				}
				return x
			}
			q := fill(batch * c.heads * c.hd)
			kn, vn := fill(batch*c.kv*c.hd), fill(batch*c.kv*c.hd)
			kc, vc := fill(batch*c.kv*cache*c.hd), fill(batch*c.kv*cache*c.hd)
			pos := make([]int32, batch)
			slots := make([]int32, batch)
			mask := make([]bool, batch*cache)
			for b := range batch {
				pos[b] = int32(rng.IntN(3000))
				slots[b] = int32(rng.IntN(cache))
				for j := range cache {
					mask[b*cache+j] = j == int(slots[b]) || rng.IntN(3) > 0
				}
				for r := range c.kv { // the slot column is zero before the write
					clear(kc[((b*c.kv+r)*cache+int(slots[b]))*c.hd:][:c.hd])
					clear(vc[((b*c.kv+r)*cache+int(slots[b]))*c.hd:][:c.hd])
				}
			}
			const graphRope, inKernel, packed = 0, 1, 2
			run := func(mode int) [][]float32 {
				outs := MustExecOnceN(testbackend.Sequential(), func(in []*Node) []*Node {
					qn := Reshape(in[0], batch, 1, c.heads, c.hd)
					knew, vnew := Reshape(in[1], batch*c.kv, c.hd), Reshape(in[2], batch*c.kv, c.hd)
					kcn, vcn := Reshape(in[3], batch*c.kv, cache, c.hd), Reshape(in[4], batch*c.kv, cache, c.hd)
					cos, sin := ropeTables(cfg, Reshape(in[5], batch, 1), false)
					slot, keys := in[6], Reshape(in[7], batch, cache)
					if mode == packed {
						qkv := Concatenate([]*Node{Reshape(in[0], batch, c.heads*c.hd), Reshape(in[1], batch, c.kv*c.hd), Reshape(in[2], batch, c.kv*c.hd)}, -1)
						o, kk, vv := decodeAttentionPacked(cfg, qkv, kcn, vcn, slot, keys, cos, sin, 1/math.Sqrt(scaleDim))
						return []*Node{Reshape(o, batch*c.kv, c.heads/c.kv, c.hd), kk, vv}
					}
					if mode == inKernel {
						o, kk, vv := decodeAttentionWrite(cfg, qn, kcn, vcn, knew, vnew, slot, keys, cos, sin, 1/math.Sqrt(scaleDim))
						return []*Node{o, kk, vv}
					}
					qr := MulScalar(applyRope(qn, cos, sin, cfg.rotaryDim()), 1/math.Sqrt(scaleDim))
					kr := applyRope(Reshape(knew, batch, 1, c.kv, c.hd), cos, sin, cfg.rotaryDim())
					opts := &compute.ScaledDotProductAttentionConfig{
						Scale: 1, KeyMask: InternalBackendOutputs(keys)[0], Softcap: cfg.AttnSoftcap,
						NewKey: InternalBackendOutputs(Reshape(kr, batch*c.kv, c.hd))[0], NewValue: InternalBackendOutputs(vnew)[0],
						NewSlot: InternalBackendOutputs(slot)[0],
					}
					o, states := BackendFusedScaledDotProductAttention(Reshape(qr, batch, c.heads, 1, c.hd), kcn, vcn, compute.AttentionAxesLayoutBHSD, opts)
					return []*Node{Reshape(o, batch*c.kv, c.heads/c.kv, c.hd), states[1], states[2]}
				}, q, kn, vn, kc, vc, pos, slots, mask)
				res := make([][]float32, len(outs))
				for i, o := range outs {
					res[i] = tensors.MustCopyFlatData[float32](o)
				}
				return res
			}
			want := run(graphRope)
			for _, mode := range []int{inKernel, packed} {
				got := run(mode)
				for i, name := range []string{"output", "key cache", "value cache"} {
					for j := range want[i] {
						if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
							t.Fatalf("%s[%d] = %g (rope in the kernel, packed %v), %g with the graph's rope: want the same bits", name, j, got[i][j], mode == packed, want[i][j])
						}
					}
				}
			}
		})
	}
}
