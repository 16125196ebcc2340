// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package fusedops

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// writeCase is a decode attention with cache writes: decodeCase's problem plus the new rows'
// layout ([b·hk, d], or [b, hk, 1, d] when rows4) and the slots (per row, or one for all rows).
type writeCase struct {
	decodeCase
	rows4, scalarSlot bool
}

var writeCases = []writeCase{
	{decodeCase: decodeCase{name: "base shape flat kv", b: 4, h: 6, hk: 2, nq: 1, s: 96, d: 64, mask: "ragged", flatKV: true}},
	{decodeCase: decodeCase{name: "base shape flat kv scalar slot", b: 4, h: 6, hk: 2, nq: 1, s: 96, d: 64, mask: "all", flatKV: true}, scalarSlot: true},
	{decodeCase: decodeCase{name: "4d kv rows4", b: 3, h: 6, hk: 2, nq: 1, s: 37, d: 16, mask: "holes"}, rows4: true},
	{decodeCase: decodeCase{name: "4d kv flat rows softcap", b: 3, h: 4, hk: 4, nq: 3, s: 33, d: 24, mask: "holes", softcap: 4, scale: 0.3}},
	{decodeCase: decodeCase{name: "one row", b: 1, h: 1, hk: 1, nq: 1, s: 5, d: 8, mask: "all", flatKV: true}, scalarSlot: true},
	{decodeCase: decodeCase{name: "odd head_dim", b: 2, h: 3, hk: 1, nq: 1, s: 19, d: 5, mask: "holes", flatKV: true}, rows4: true},
}

// writeRun builds and runs either the fused node (decode attention with NewKey, NewValue, NewSlot)
// or the pair it replaces (two ScatterSums as the model wrote them, then the decode attention),
// with the caches donated or not. It returns the four outputs (out, lse, key cache, value cache)
// and whether each returned cache is the input cache's memory.
func writeRun(t *testing.T, backend compute.Backend, c writeCase, fused, donate bool, q, k, v []float32, mask []bool,
	nk, nv []float32, slots []int32) (res [][]float32, inPlace [2]bool) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %+v", c.name, err)
		}
	}
	qs := shapes.Make(dtypes.Float32, c.b, c.h, c.nq, c.d)
	ks := shapes.Make(dtypes.Float32, c.b, c.hk, c.s, c.d)
	if c.flatKV {
		ks = shapes.Make(dtypes.Float32, c.b*c.hk, c.s, c.d)
	}
	ms := shapes.Make(dtypes.Bool, c.b, c.s)
	rs := shapes.Make(dtypes.Float32, c.b*c.hk, c.d)
	if c.rows4 {
		rs = shapes.Make(dtypes.Float32, c.b, c.hk, 1, c.d)
	}
	all := []shapes.Shape{qs, ks, ks, ms, rs, rs}
	flats := []any{q, k, v, mask, nk, nv}
	if fused {
		if c.scalarSlot {
			all, flats = append(all, shapes.Make(dtypes.Int32)), append(flats, slots[:1])
		} else {
			all, flats = append(all, shapes.Make(dtypes.Int32, c.b)), append(flats, slots)
		}
	} else { // ScatterSum indices of the cache rows: (row, slot) or (batch, kv head, slot)
		var idx []int32
		for r := range c.b * c.hk {
			sl := slots[0]
			if !c.scalarSlot {
				sl = slots[r/c.hk]
			}
			if c.flatKV {
				idx = append(idx, int32(r), sl)
			} else {
				idx = append(idx, int32(r/c.hk), int32(r%c.hk), sl)
			}
		}
		if c.flatKV {
			all, flats = append(all, shapes.Make(dtypes.Int32, c.b*c.hk, 2)), append(flats, idx)
			all[4] = shapes.Make(dtypes.Float32, c.b*c.hk, c.d)
		} else {
			all, flats = append(all, shapes.Make(dtypes.Int32, c.b, c.hk, 3)), append(flats, idx)
			all[4] = shapes.Make(dtypes.Float32, c.b, c.hk, c.d)
		}
		all[5] = all[4]
	}
	builder := backend.Builder("decodewrite")
	fn := builder.Main()
	var p []compute.Value
	for i, s := range all {
		x, err := fn.Parameter(fmt.Sprintf("p%d", i), s, nil)
		must(err)
		p = append(p, x)
	}
	opts := &compute.ScaledDotProductAttentionConfig{Scale: c.scale, KeyMask: p[3], Softcap: c.softcap}
	var outs []compute.Value
	if fused {
		opts.NewKey, opts.NewValue, opts.NewSlot = p[4], p[5], p[6]
		out, states, err := fn.FusedScaledDotProductAttention(p[0], p[1], p[2], compute.AttentionAxesLayoutBHSD, opts)
		must(err)
		if len(states) != 3 {
			t.Fatalf("%s: %d trailing outputs, want 3 (lse, key, value)", c.name, len(states))
		}
		outs = append([]compute.Value{out}, states...)
	} else {
		ixAxis := 1
		win, ins := []int{1}, []int{0, 1}
		if !c.flatKV {
			ixAxis, win, ins = 2, []int{2}, []int{0, 1, 2}
		}
		kk, err := fn.ScatterSum(p[1], p[6], p[4], ixAxis, win, ins, ins, true, true)
		must(err)
		vv, err := fn.ScatterSum(p[2], p[6], p[5], ixAxis, win, ins, ins, true, true)
		must(err)
		out, states, err := fn.FusedScaledDotProductAttention(p[0], kk, vv, compute.AttentionAxesLayoutBHSD, opts)
		must(err)
		outs = []compute.Value{out, states[0], kk, vv}
	}
	must(fn.Return(outs, nil))
	exec, err := builder.Compile()
	must(err)
	var in []compute.Buffer
	for i, flat := range flats {
		buf, err := backend.BufferFromFlatData(0, flat, all[i])
		must(err)
		in = append(in, buf)
	}
	mem := func(b compute.Buffer) *byte { return &b.(*gobackend.Buffer).RawBytes[0] }
	kMem, vMem := mem(in[1]), mem(in[2])
	donated := make([]bool, len(in))
	donated[1], donated[2] = donate, donate
	got, err := exec.Execute(in, donated, 0)
	must(err)
	inPlace = [2]bool{mem(got[2]) == kMem, mem(got[3]) == vMem}
	for _, o := range got {
		s, err := o.Shape()
		must(err)
		flat := make([]float32, s.Size())
		must(o.ToFlatData(flat))
		res = append(res, flat)
	}
	if !donate { // the caches the caller kept are unchanged
		for i, want := range [][]float32{k, v} {
			flat := make([]float32, len(want))
			must(in[1+i].ToFlatData(flat))
			for j := range flat {
				if math.Float32bits(flat[j]) != math.Float32bits(want[j]) {
					t.Fatalf("%s: input cache %d changed at %d", c.name, i, j)
				}
			}
		}
	}
	return res, inPlace
}

// TestDecodeWriteMatchesScatterSum: the decode attention that writes the new key and value rows
// gives the bits of the two ScatterSums it replaces followed by the decode attention: the same
// caches, outputs and log-sum-exps; with per-row slots and one slot for all rows, new rows
// [b·hk, d] and [b, hk, 1, d], flat and 4-d caches; in place when the caches are donated, on
// copies (inputs untouched) when not; with one worker and several.
func TestDecodeWriteMatchesScatterSum(t *testing.T) {
	for _, parallelism := range []string{"parallelism=1", ""} {
		backend, err := gobackend.New(parallelism)
		if err != nil {
			t.Fatal(err)
		}
		for ci, c := range writeCases {
			for _, donate := range []bool{true, false} {
				t.Run(fmt.Sprintf("%s/%s/donate=%v", parallelism, c.name, donate), func(t *testing.T) {
					q, k, v, mask := decodeInputs(c.decodeCase, uint64(ci)+7)
					rng := rand.New(rand.NewPCG(uint64(ci), 99))
					nk, nv := make([]float32, c.b*c.hk*c.d), make([]float32, c.b*c.hk*c.d)
					for i := range nk {
						nk[i], nv[i] = rng.Float32()*2-1, rng.Float32()*2-1
					}
					slots := make([]int32, c.b)
					for i := range slots {
						slots[i] = int32(rng.IntN(c.s))
						mask[i*c.s+int(slots[i])] = true // the written column is visible, as in decoding
					}
					if c.scalarSlot {
						for i := range slots {
							slots[i] = slots[0]
							mask[i*c.s+int(slots[0])] = true
						}
					}
					// -0 added into a +0 of the cache: ScatterSum's sum gives +0 (a copy would give -0).
					nk[0], k[int(slots[0])*c.d] = float32(math.Copysign(0, -1)), 0
					want, _ := writeRun(t, backend, c, false, donate, q, k, v, mask, nk, nv, slots)
					got, inPlace := writeRun(t, backend, c, true, donate, q, k, v, mask, nk, nv, slots)
					if inPlace != [2]bool{donate, donate} {
						t.Errorf("caches written in place: %v, want %v (donated: %v)", inPlace, [2]bool{donate, donate}, donate)
					}
					for i, name := range []string{"output", "log-sum-exp", "key cache", "value cache"} {
						if len(got[i]) != len(want[i]) {
							t.Fatalf("%s: %d elements, want %d", name, len(got[i]), len(want[i]))
						}
						for j := range got[i] {
							if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
								t.Fatalf("%s element %d: %g, ScatterSum then attention %g", name, j, got[i][j], want[i][j])
							}
						}
					}
				})
			}
		}
		backend.Finalize()
	}
}

// TestDecodeWriteRefuses: the cache writes need all three operands, the decode mode, and rows and
// slots of the right shapes; RoPE needs both tables of the right shape, the cache writes, an even
// rotary width within head_dim and a query scale >= 0; a slot outside the cache fails at execution.
func TestDecodeWriteRefuses(t *testing.T) {
	backend, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Finalize()
	qs := shapes.Make(dtypes.Float32, 2, 4, 1, 8)
	ks := shapes.Make(dtypes.Float32, 4, 10, 8)
	ms := shapes.Make(dtypes.Bool, 2, 10)
	rows := shapes.Make(dtypes.Float32, 4, 8)
	slot := shapes.Make(dtypes.Int32, 2)
	for _, tc := range []struct {
		name       string
		rows, slot shapes.Shape
		edit       func(o *compute.ScaledDotProductAttentionConfig)
		want       string
	}{
		{"no slot", rows, slot, func(o *compute.ScaledDotProductAttentionConfig) { o.NewSlot = nil }, "come together"},
		{"causal", rows, slot, func(o *compute.ScaledDotProductAttentionConfig) { o.Causal = true }, "need the decode attention"},
		{"no key mask", rows, slot, func(o *compute.ScaledDotProductAttentionConfig) { o.KeyMask = nil }, "need the decode attention"},
		{"rows", shapes.Make(dtypes.Float32, 2, 8), slot, nil, "NewKey"},
		{"rows dtype", shapes.Make(dtypes.Float64, 4, 8), slot, nil, "NewKey"},
		{"slot shape", rows, shapes.Make(dtypes.Int32, 4), nil, "NewSlot"},
		{"slot dtype", rows, shapes.Make(dtypes.Int64, 2), nil, "NewSlot"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fn := backend.Builder("bad").Main()
			q, _ := fn.Parameter("q", qs, nil)
			k, _ := fn.Parameter("k", ks, nil)
			m, _ := fn.Parameter("m", ms, nil)
			r, _ := fn.Parameter("r", tc.rows, nil)
			s, _ := fn.Parameter("s", tc.slot, nil)
			o := &compute.ScaledDotProductAttentionConfig{KeyMask: m, NewKey: r, NewValue: r, NewSlot: s}
			if tc.edit != nil {
				tc.edit(o)
			}
			_, _, err := fn.FusedScaledDotProductAttention(q, k, k, compute.AttentionAxesLayoutBHSD, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// Temper fork: RoPE in the decode attention (RopeCos, RopeSin, RopeRotary, QueryScale).
	table := shapes.Make(dtypes.Float32, 2, 8)
	for _, tc := range []struct {
		name  string
		table shapes.Shape
		edit  func(o *compute.ScaledDotProductAttentionConfig)
		want  string
	}{
		{"cos without sin", table, func(o *compute.ScaledDotProductAttentionConfig) { o.RopeSin = nil }, "come together"},
		{"rope without writes", table, func(o *compute.ScaledDotProductAttentionConfig) {
			o.NewKey, o.NewValue, o.NewSlot = nil, nil, nil
		}, "need the cache writes"},
		{"rope with causal", table, func(o *compute.ScaledDotProductAttentionConfig) { o.Causal = true }, "need the decode attention"},
		{"table shape", shapes.Make(dtypes.Float32, 2, 4), nil, "RopeCos"},
		{"table dtype", shapes.Make(dtypes.Float64, 2, 8), nil, "RopeCos"},
		{"odd rotary", table, func(o *compute.ScaledDotProductAttentionConfig) { o.RopeRotary = 3 }, "RopeRotary=3"},
		{"rotary past head_dim", table, func(o *compute.ScaledDotProductAttentionConfig) { o.RopeRotary = 10 }, "RopeRotary=10"},
		{"negative query scale", table, func(o *compute.ScaledDotProductAttentionConfig) { o.QueryScale = -1 }, "QueryScale=-1"},
		{"query scale in the blocked attention", table, func(o *compute.ScaledDotProductAttentionConfig) {
			o.NewKey, o.NewValue, o.NewSlot, o.RopeCos, o.RopeSin = nil, nil, nil, nil, nil
			o.Causal, o.QueryScale = true, 0.5
		}, "need the decode attention"},
		{"query scale without tables", table, func(o *compute.ScaledDotProductAttentionConfig) {
			o.RopeCos, o.RopeSin = nil, nil
			o.QueryScale = 0.5
		}, "without RopeCos"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fn := backend.Builder("bad").Main()
			q, _ := fn.Parameter("q", qs, nil)
			k, _ := fn.Parameter("k", ks, nil)
			m, _ := fn.Parameter("m", ms, nil)
			r, _ := fn.Parameter("r", rows, nil)
			s, _ := fn.Parameter("s", slot, nil)
			c, _ := fn.Parameter("c", tc.table, nil)
			o := &compute.ScaledDotProductAttentionConfig{KeyMask: m, NewKey: r, NewValue: r, NewSlot: s, RopeCos: c, RopeSin: c}
			if tc.edit != nil {
				tc.edit(o)
			}
			_, _, err := fn.FusedScaledDotProductAttention(q, k, k, compute.AttentionAxesLayoutBHSD, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
	t.Run("slot out of range", func(t *testing.T) {
		builder := backend.Builder("range")
		fn := builder.Main()
		var p []compute.Value
		for i, s := range []shapes.Shape{qs, ks, ks, ms, rows, rows, slot} {
			x, _ := fn.Parameter(fmt.Sprintf("p%d", i), s, nil)
			p = append(p, x)
		}
		o := &compute.ScaledDotProductAttentionConfig{KeyMask: p[3], NewKey: p[4], NewValue: p[5], NewSlot: p[6]}
		out, states, err := fn.FusedScaledDotProductAttention(p[0], p[1], p[2], compute.AttentionAxesLayoutBHSD, o)
		if err != nil {
			t.Fatal(err)
		}
		if err := fn.Return(append([]compute.Value{out}, states...), nil); err != nil {
			t.Fatal(err)
		}
		exec, err := builder.Compile()
		if err != nil {
			t.Fatal(err)
		}
		var in []compute.Buffer
		for _, x := range []struct {
			flat  any
			shape shapes.Shape
		}{
			{make([]float32, qs.Size()), qs}, {make([]float32, ks.Size()), ks}, {make([]float32, ks.Size()), ks},
			{make([]bool, ms.Size()), ms}, {make([]float32, rows.Size()), rows}, {make([]float32, rows.Size()), rows},
			{[]int32{3, 10}, slot},
		} {
			buf, err := backend.BufferFromFlatData(0, x.flat, x.shape)
			if err != nil {
				t.Fatal(err)
			}
			in = append(in, buf)
		}
		if _, err := exec.Execute(in, nil, 0); err == nil || !strings.Contains(err.Error(), "out of range") {
			t.Fatalf("got error %v, want a slot out of range", err)
		}
	})
}
