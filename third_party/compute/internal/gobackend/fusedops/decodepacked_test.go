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

// packedRun runs one decode attention with cache writes (and RoPE when rotary ≥ 0) either with
// the query, new key and new value rows apart or packed in one query input (PackedQKV, the
// fused projection's layout: per batch row the heads' query rows, then the kv heads' key rows,
// then their value rows), the caches donated; it returns out, lse and both caches.
func packedRun(t *testing.T, backend compute.Backend, b, h, hk, s, d, rotary int, softcap float64, packed bool,
	q, nk, nv, k, v []float32, mask []bool, slots []int32, cos, sin []float32) [][]float32 {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%+v", err)
		}
	}
	ks := shapes.Make(dtypes.Float32, b*hk, s, d)
	var all []shapes.Shape
	var flats []any
	if packed {
		w := (h + 2*hk) * d
		qkv := make([]float32, b*w)
		for bi := range b {
			copy(qkv[bi*w:], q[bi*h*d:(bi+1)*h*d])
			copy(qkv[bi*w+h*d:], nk[bi*hk*d:(bi+1)*hk*d])
			copy(qkv[bi*w+(h+hk)*d:], nv[bi*hk*d:(bi+1)*hk*d])
		}
		all = []shapes.Shape{shapes.Make(dtypes.Float32, b, w), ks, ks, shapes.Make(dtypes.Bool, b, s), shapes.Make(dtypes.Int32, b)}
		flats = []any{qkv, k, v, mask, slots}
	} else {
		rs := shapes.Make(dtypes.Float32, b*hk, d)
		all = []shapes.Shape{shapes.Make(dtypes.Float32, b, h, 1, d), ks, ks, shapes.Make(dtypes.Bool, b, s), rs, rs, shapes.Make(dtypes.Int32, b)}
		flats = []any{q, k, v, mask, nk, nv, slots}
	}
	if rotary >= 0 {
		all = append(all, shapes.Make(dtypes.Float32, b, d), shapes.Make(dtypes.Float32, b, d))
		flats = append(flats, cos, sin)
	}
	builder := backend.Builder("packed")
	fn := builder.Main()
	var p []compute.Value
	for i, sh := range all {
		x, err := fn.Parameter(fmt.Sprintf("p%d", i), sh, nil)
		must(err)
		p = append(p, x)
	}
	opts := &compute.ScaledDotProductAttentionConfig{Scale: 0.125, KeyMask: p[3], Softcap: softcap}
	next := 4
	if packed {
		opts.PackedQKV, opts.NewSlot = true, p[4]
		next = 5
	} else {
		opts.NewKey, opts.NewValue, opts.NewSlot = p[4], p[5], p[6]
		next = 7
	}
	if rotary >= 0 {
		opts.RopeCos, opts.RopeSin, opts.RopeRotary, opts.QueryScale = p[next], p[next+1], rotary, 0.3
	}
	out, states, err := fn.FusedScaledDotProductAttention(p[0], p[1], p[2], compute.AttentionAxesLayoutBHSD, opts)
	must(err)
	must(fn.Return(append([]compute.Value{out}, states...), nil))
	exec, err := builder.Compile()
	must(err)
	var in []compute.Buffer
	for i, flat := range flats {
		if f, ok := flat.([]float32); ok {
			flat = append([]float32(nil), f...)
		}
		buf, err := backend.BufferFromFlatData(0, flat, all[i])
		must(err)
		in = append(in, buf)
	}
	donated := make([]bool, len(in))
	donated[1], donated[2] = true, true
	got, err := exec.Execute(in, donated, 0)
	must(err)
	var res [][]float32
	for _, o := range got {
		sh, err := o.Shape()
		must(err)
		flat := make([]float32, sh.Size())
		must(o.ToFlatData(flat))
		res = append(res, flat)
	}
	if sh, _ := got[0].Shape(); !sh.Equal(shapes.Make(dtypes.Float32, b, h, 1, d)) {
		t.Fatalf("output shape %s, want [%d, %d, 1, %d]", sh, b, h, d)
	}
	return res
}

// TestDecodePackedMatchesUnpacked: the decode attention reading its query, new key and new value
// rows from one packed input (PackedQKV) gives the bits of the same request with the rows apart:
// outputs, log-sum-exps and both written caches; base and small preset shapes, one kv head per
// head, an odd head_dim, RoPE full and partial, soft-capping, on one to three workers.
func TestDecodePackedMatchesUnpacked(t *testing.T) {
	rng := rand.New(rand.NewPCG(71, 3))
	fill := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = rng.Float32()*2 - 1
		}
		return x
	}
	for _, c := range []struct {
		name           string
		b, h, hk, s, d int
		rotary         int // -1: no RoPE
		softcap        float64
	}{
		{"base", 4, 6, 2, 96, 64, 64, 0},
		{"base no rope", 4, 6, 2, 96, 64, -1, 0},
		{"small partial rotary", 3, 4, 2, 64, 32, 16, 0},
		{"mha softcap", 2, 3, 3, 33, 16, 16, 5},
		{"odd head_dim", 2, 3, 1, 19, 5, -1, 0},
	} {
		for _, par := range []int{1, 2, 3} {
			backend, err := gobackend.New(fmt.Sprintf("parallelism=%d", par))
			if err != nil {
				t.Fatal(err)
			}
			q, nk, nv := fill(c.b*c.h*c.d), fill(c.b*c.hk*c.d), fill(c.b*c.hk*c.d)
			k, v := fill(c.b*c.hk*c.s*c.d), fill(c.b*c.hk*c.s*c.d)
			mask := make([]bool, c.b*c.s)
			slots := make([]int32, c.b)
			for bi := range c.b {
				slots[bi] = int32(c.s - 1 - bi)
				for j := range c.s {
					mask[bi*c.s+j] = j <= int(slots[bi]) && (j%7 != 3)
				}
				for hh := range c.hk { // the slot column is zero until written
					clear(k[((bi*c.hk+hh)*c.s+int(slots[bi]))*c.d:][:c.d])
					clear(v[((bi*c.hk+hh)*c.s+int(slots[bi]))*c.d:][:c.d])
				}
			}
			cos, sin := fill(c.b*c.d), fill(c.b*c.d)
			want := packedRun(t, backend, c.b, c.h, c.hk, c.s, c.d, c.rotary, c.softcap, false, q, nk, nv, k, v, mask, slots, cos, sin)
			got := packedRun(t, backend, c.b, c.h, c.hk, c.s, c.d, c.rotary, c.softcap, true, q, nk, nv, k, v, mask, slots, cos, sin)
			for i := range want {
				for j := range want[i] {
					if math.Float32bits(got[i][j]) != math.Float32bits(want[i][j]) {
						t.Fatalf("%s p=%d: output %d [%d] = %g, unpacked %g", c.name, par, i, j, got[i][j], want[i][j])
					}
				}
			}
			backend.Finalize()
		}
	}
}

// TestDecodePackedRefuses: a PackedQKV request that does not fit is refused when built, naming
// what is wrong.
func TestDecodePackedRefuses(t *testing.T) {
	backend, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Finalize()
	ks := shapes.Make(dtypes.Float32, 4, 10, 8) // batch 2, kv heads 2, head_dim 8
	for _, tc := range []struct {
		name string
		q    shapes.Shape
		edit func(o *compute.ScaledDotProductAttentionConfig, r compute.Value)
		want string
	}{
		{"with new key", shapes.Make(dtypes.Float32, 2, 64), func(o *compute.ScaledDotProductAttentionConfig, r compute.Value) { o.NewKey = r }, "PackedQKV takes NewSlot"},
		{"without slot", shapes.Make(dtypes.Float32, 2, 64), func(o *compute.ScaledDotProductAttentionConfig, r compute.Value) { o.NewSlot = nil }, "PackedQKV takes NewSlot"},
		{"rank-4 query", shapes.Make(dtypes.Float32, 2, 4, 1, 8), nil, "PackedQKV: query"},
		{"width not whole heads", shapes.Make(dtypes.Float32, 2, 60), nil, "does not fit"},
		{"no query heads", shapes.Make(dtypes.Float32, 2, 32), nil, "does not fit"},
		{"heads not a multiple of kv heads", shapes.Make(dtypes.Float32, 2, 56), nil, "does not fit"},
		{"causal", shapes.Make(dtypes.Float32, 2, 64), func(o *compute.ScaledDotProductAttentionConfig, r compute.Value) { o.Causal = true }, "need the decode attention"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fn := backend.Builder("bad").Main()
			q, _ := fn.Parameter("q", tc.q, nil)
			k, _ := fn.Parameter("k", ks, nil)
			m, _ := fn.Parameter("m", shapes.Make(dtypes.Bool, 2, 10), nil)
			r, _ := fn.Parameter("r", shapes.Make(dtypes.Float32, 4, 8), nil)
			s, _ := fn.Parameter("s", shapes.Make(dtypes.Int32, 2), nil)
			o := &compute.ScaledDotProductAttentionConfig{KeyMask: m, NewSlot: s, PackedQKV: true}
			if tc.edit != nil {
				tc.edit(o, r)
			}
			_, _, err := fn.FusedScaledDotProductAttention(q, k, k, compute.AttentionAxesLayoutBHSD, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
