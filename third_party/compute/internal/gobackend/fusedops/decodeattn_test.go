// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package fusedops

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
)

// decodeCase is one decode-attention problem: query [b, h, nq, d], key/value [b, hk, s, d] (or
// [b·hk, s, d] when flatKV), KeyMask [b, s] built by mask.
type decodeCase struct {
	name               string
	b, h, hk, nq, s, d int
	softcap, scale     float64 // 0: none / 1/√d
	flatKV             bool
	mask               string // "ragged": each row its own visible columns, the last row none; "all"; "holes"
	large              bool   // scores large enough to exercise the max shift and the cap
}

func (c decodeCase) keyMask(rng *rand.Rand) []bool {
	m := make([]bool, c.b*c.s)
	for b := range c.b {
		row := m[b*c.s : (b+1)*c.s]
		switch c.mask {
		case "all":
			for j := range row {
				row[j] = true
			}
		case "holes":
			for j := range row {
				row[j] = rng.IntN(3) != 0
			}
		case "ragged": // left padding of b·3 columns, then a filled part ending at a row-dependent column
			if b == c.b-1 && c.b > 1 {
				continue // no visible key at all
			}
			end := c.s - (b*5)%c.s
			for j := min(b*3, end-1); j < end; j++ {
				row[j] = true
			}
		}
	}
	return m
}

var decodeCases = []decodeCase{
	{name: "one row one key", b: 1, h: 1, hk: 1, nq: 1, s: 1, d: 8, mask: "all"},
	{name: "decode base shape", b: 4, h: 6, hk: 2, nq: 1, s: 96, d: 64, mask: "ragged"},
	{name: "decode base shape flat kv", b: 4, h: 6, hk: 2, nq: 1, s: 96, d: 64, mask: "ragged", flatKV: true},
	{name: "GQA 1 ragged", b: 3, h: 2, hk: 2, nq: 1, s: 37, d: 16, mask: "ragged"},
	{name: "GQA 3 three queries", b: 3, h: 6, hk: 2, nq: 3, s: 41, d: 16, mask: "ragged"},
	{name: "holes odd head_dim", b: 2, h: 4, hk: 1, nq: 2, s: 29, d: 12, mask: "holes"},
	{name: "short head_dim", b: 2, h: 3, hk: 1, nq: 1, s: 19, d: 5, mask: "holes", flatKV: true},
	{name: "softcap", b: 3, h: 6, hk: 2, nq: 1, s: 50, d: 32, mask: "ragged", softcap: 2.5, large: true},
	{name: "softcap three queries scale", b: 2, h: 4, hk: 4, nq: 3, s: 33, d: 24, mask: "holes", softcap: 4, scale: 0.3},
	{name: "large scores", b: 2, h: 6, hk: 2, nq: 1, s: 70, d: 64, mask: "ragged", large: true},
	{name: "fully masked row", b: 2, h: 2, hk: 1, nq: 2, s: 9, d: 8, mask: "ragged"},
}

func decodeInputs(c decodeCase, seed uint64) (q, k, v []float32, mask []bool) {
	rng := rand.New(rand.NewPCG(seed, 11))
	fill := func(n int, mag float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = (rng.Float32()*2 - 1) * mag
		}
		return x
	}
	mag := float32(1)
	if c.large {
		mag = 4
	}
	q, k, v = fill(c.b*c.h*c.nq*c.d, mag), fill(c.b*c.hk*c.s*c.d, mag), fill(c.b*c.hk*c.s*c.d, 1)
	return q, k, v, c.keyMask(rng)
}

// decodeRun builds and runs the decode attention: outputs out and lse (flat).
func decodeRun(t testing.TB, backend compute.Backend, c decodeCase, q, k, v []float32, mask []bool) [][]float32 {
	t.Helper()
	run := decodeCompile(t, backend, c, q, k, v, mask)
	outs, err := run()
	if err != nil {
		t.Fatalf("%s: %+v", c.name, err)
	}
	res := make([][]float32, len(outs))
	for i, o := range outs {
		s, err := o.Shape()
		if err != nil {
			t.Fatal(err)
		}
		res[i] = make([]float32, s.Size())
		if err := o.ToFlatData(res[i]); err != nil {
			t.Fatal(err)
		}
	}
	return res
}

// decodeCompile builds the decode attention of c and returns a function that runs it on the given
// inputs (kept on the backend, not donated).
func decodeCompile(t testing.TB, backend compute.Backend, c decodeCase, q, k, v []float32, mask []bool) func() ([]compute.Buffer, error) {
	t.Helper()
	qs := shapes.Make(dtypes.Float32, c.b, c.h, c.nq, c.d)
	ks := shapes.Make(dtypes.Float32, c.b, c.hk, c.s, c.d)
	if c.flatKV {
		ks = shapes.Make(dtypes.Float32, c.b*c.hk, c.s, c.d)
	}
	ms := shapes.Make(dtypes.Bool, c.b, c.s)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %+v", c.name, err)
		}
	}
	builder := backend.Builder("decode")
	fn := builder.Main()
	all := []shapes.Shape{qs, ks, ks, ms}
	var params []compute.Value
	for i, s := range all {
		p, err := fn.Parameter(fmt.Sprintf("p%d", i), s, nil)
		must(err)
		params = append(params, p)
	}
	opts := &compute.ScaledDotProductAttentionConfig{Scale: c.scale, KeyMask: params[3], Softcap: c.softcap}
	out, states, err := fn.FusedScaledDotProductAttention(params[0], params[1], params[2], compute.AttentionAxesLayoutBHSD, opts)
	must(err)
	must(fn.Return([]compute.Value{out, states[0]}, nil))
	exec, err := builder.Compile()
	must(err)
	var in []compute.Buffer
	for i, flat := range []any{q, k, v, mask} {
		buf, err := backend.BufferFromFlatData(0, flat, all[i])
		must(err)
		in = append(in, buf)
	}
	return func() ([]compute.Buffer, error) { return exec.Execute(in, nil, 0) }
}

// decodeReference is decode attention in float64: zeros and -Inf for a row with no visible key.
func decodeReference(c decodeCase, q, k, v []float32, mask []bool) (out, lse []float64) {
	scale := c.scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(c.d))
	}
	s, d, grp := c.s, c.d, c.h/c.hk
	out, lse = make([]float64, len(q)), make([]float64, c.b*c.h*c.nq)
	for b := range c.b {
		for h := range c.h {
			ko := (b*c.hk + h/grp) * s * d
			for i := range c.nq {
				r := (b*c.h+h)*c.nq + i
				sc := make([]float64, s)
				mx := math.Inf(-1)
				for j := range s {
					if !mask[b*s+j] {
						continue
					}
					var dot float64
					for x := range d {
						dot += float64(q[r*d+x]) * float64(k[ko+j*d+x])
					}
					sc[j] = dot * scale
					if c.softcap > 0 {
						sc[j] = c.softcap * math.Tanh(sc[j]/c.softcap)
					}
					mx = max(mx, sc[j])
				}
				if math.IsInf(mx, -1) {
					lse[r] = mx
					continue
				}
				var sum float64
				p := make([]float64, s)
				for j := range s {
					if mask[b*s+j] {
						p[j] = math.Exp(sc[j] - mx)
						sum += p[j]
					}
				}
				lse[r] = mx + math.Log(sum)
				for j := range s {
					for x := range d {
						out[r*d+x] += p[j] / sum * float64(v[ko+j*d+x])
					}
				}
			}
		}
	}
	return out, lse
}

// TestDecodeAttentionMatchesReference: the decode attention (KeyMask without Causal) against a
// float64 computation on ragged masks (every batch row its own visible columns, one row with none),
// cache lengths that are not multiples of anything, GQA groups of 1, 2, 3 and 4, one and several
// query rows, head dims of whole vectors and not, soft-capping, both key/value layouts.
func TestDecodeAttentionMatchesReference(t *testing.T) {
	backend, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Finalize()
	for _, c := range decodeCases {
		t.Run(c.name, func(t *testing.T) {
			q, k, v, mask := decodeInputs(c, 1)
			got := decodeRun(t, backend, c, q, k, v, mask)
			out, lse := decodeReference(c, q, k, v, mask)
			for i, want := range [][]float64{out, lse} {
				name := []string{"output", "log-sum-exp"}[i]
				var worst float64
				for j, w := range want {
					g := float64(got[i][j])
					if math.IsInf(w, -1) {
						if !math.IsInf(g, -1) {
							t.Fatalf("%s[%d] = %g, want -Inf (no visible key)", name, j, g)
						}
						continue
					}
					worst = max(worst, math.Abs(g-w)/(1+math.Abs(w)))
				}
				if worst > 1e-5 {
					t.Errorf("%s: max relative error %.3g > 1e-5", name, worst)
				}
			}
			if c.mask == "ragged" && c.b > 1 { // the last batch row sees no key: zeros
				n := c.h * c.nq * c.d
				for j, x := range got[0][(c.b-1)*n:] {
					if x != 0 {
						t.Fatalf("fully masked row: output element %d = %g, want 0", j, x)
					}
				}
			}
		})
	}
}

// TestDecodeAttentionBitStable: the same bits with one worker or several, run after run.
func TestDecodeAttentionBitStable(t *testing.T) {
	c := decodeCase{name: "stable", b: 8, h: 6, hk: 2, nq: 2, s: 67, d: 64, mask: "holes", softcap: 3}
	q, k, v, mask := decodeInputs(c, 5)
	var first [][]float32
	for _, parallelism := range []string{"", "parallelism=1", "parallelism=-1", ""} {
		backend, err := gobackend.New(parallelism)
		if err != nil {
			t.Fatal(err)
		}
		got := decodeRun(t, backend, c, q, k, v, mask)
		backend.Finalize()
		if first == nil {
			first = got
			continue
		}
		for i := range got {
			for j := range got[i] {
				if math.Float32bits(got[i][j]) != math.Float32bits(first[i][j]) {
					t.Fatalf("%q: output %d element %d: %g, first run %g", parallelism, i, j, got[i][j], first[i][j])
				}
			}
		}
	}
}

// TestDecodeRowVectorMatchesScalar: the AVX2 loops of the decode attention (rowScoresVector,
// rowAccumulateVector, groupScoresVector with its blocks of eight keys, groupAccumulateVector, and
// at head_dim 32 and 64 the AVX-512 groupAccumulate512) give the scalar
// loops' bits (vecDot, vecAxpy in key order), so a machine without AVX2 decodes the same; on key
// counts that leave remainders (of 2, 4) and head dims with and without a last lone vector.
func TestDecodeRowVectorMatchesScalar(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	fill := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = rng.Float32()*2 - 1
		}
		return x
	}
	const s = 23
	for _, d := range []int{64, 32, 24, 8, 12} {
		for _, nr := range []int{1, 2, 3} {
			for _, vis := range [][]int32{{0, 2, 3, 7, 11, 12, 20, 22}, {1, 4, 5, 6, 9, 10, 13, 15, 17, 18, 21}, {5}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 19}} {
				n := len(vis)
				q, keys, vals, p := fill(nr*d), fill(s*d), fill(s*d), fill(nr*n)
				sc := make([]float32, nr*n)
				o := make([]float32, nr*d)
				groupScores(sc, q, nr, keys, vis)
				groupAccumulate(o, p, nr, vals, vis)
				for r := range nr {
					for t2, j := range vis {
						want := vecDotScalar(q[r*d:(r+1)*d], keys[int(j)*d:int(j)*d+d])
						if got := sc[r*n+t2]; math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("d=%d rows=%d keys=%d: score (%d, %d): %g, scalar %g", d, nr, n, r, t2, got, want)
						}
					}
					for i := range d {
						var want float32
						for t2, j := range vis {
							want += float32(p[r*n+t2] * vals[int(j)*d+i])
						}
						if got := o[r*d+i]; math.Float32bits(got) != math.Float32bits(want) {
							t.Fatalf("d=%d rows=%d keys=%d: output (%d, %d): %g, scalar %g", d, nr, n, r, i, got, want)
						}
					}
				}
			}
		}
	}
	// The AVX-512 scores (groupScores512: blocks of eight keys, the last ones padded) and weighted
	// sums (groupAccumulate512) at every key count from 1 to 100, visible columns consecutive, with gaps and out of order, some products
	// exactly zero (signed zeros in the lanes).
	const cols = 220
	for _, d := range []int{64, 32} {
		for _, nr := range []int{2, 3} {
			q, keys := fill(nr*d), fill(cols*d)
			for i := 0; i < len(keys); i += 7 {
				keys[i] = 0
			}
			for i := 0; i < len(q); i += 11 {
				q[i] = float32(math.Copysign(0, float64(q[i])))
			}
			for n := 1; n <= 100; n++ {
				for pattern := range 3 {
					vis := make([]int32, n)
					for i := range vis {
						switch pattern {
						case 0:
							vis[i] = int32(i)
						case 1:
							vis[i] = int32(2*i + i%3)
						default:
							vis[i] = int32(cols - 1 - rng.IntN(cols))
						}
					}
					sc := make([]float32, nr*n+5)
					groupScores(sc[:nr*n], q, nr, keys, vis)
					for r := range nr {
						for t2, j := range vis {
							want := vecDotScalar(q[r*d:(r+1)*d], keys[int(j)*d:int(j)*d+d])
							if got := sc[r*n+t2]; math.Float32bits(got) != math.Float32bits(want) {
								t.Fatalf("d=%d rows=%d keys=%d pattern %d: score (%d, %d): %g, scalar %g", d, nr, n, pattern, r, t2, got, want)
							}
						}
					}
					for i := nr * n; i < len(sc); i++ {
						if sc[i] != 0 {
							t.Fatalf("d=%d rows=%d keys=%d: wrote past the scores (%d)", d, nr, n, i)
						}
					}
					// The weighted sum of the same rows (groupAccumulate512 at these shapes), onto
					// a nonzero output.
					p := fill(nr * n)
					o0 := fill(nr * d)
					o := append([]float32(nil), o0...)
					groupAccumulate(o, p, nr, keys, vis)
					for r := range nr {
						for i := range d {
							want := o0[r*d+i]
							for t2, j := range vis {
								want += float32(p[r*n+t2] * keys[int(j)*d+i])
							}
							if got := o[r*d+i]; math.Float32bits(got) != math.Float32bits(want) {
								t.Fatalf("d=%d rows=%d keys=%d pattern %d: output (%d, %d): %g, scalar %g", d, nr, n, pattern, r, i, got, want)
							}
						}
					}
				}
			}
		}
	}
}

// vecDotScalar is vecDot without its vector loop.
func vecDotScalar(x, y []float32) float32 {
	var lanes [8]float32
	i := 0
	for ; i+8 <= len(x); i += 8 {
		for j := range 8 {
			lanes[j] += float32(x[i+j] * y[i+j])
		}
	}
	s := ((lanes[0] + lanes[4]) + (lanes[1] + lanes[5])) + ((lanes[2] + lanes[6]) + (lanes[3] + lanes[7]))
	for ; i < len(x); i++ {
		s += float32(x[i] * y[i])
	}
	return s
}

// TestDecodeAttentionRefuses: a decode request the kernel cannot honour fails when the graph is
// built, naming what is wrong; its VJP is not implemented.
func TestDecodeAttentionRefuses(t *testing.T) {
	backend, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Finalize()
	qs := shapes.Make(dtypes.Float32, 2, 4, 1, 8)
	ks := shapes.Make(dtypes.Float32, 2, 2, 10, 8)
	for _, tc := range []struct {
		name string
		key  shapes.Shape
		mask shapes.Shape
		edit func(o *compute.ScaledDotProductAttentionConfig)
		want string
	}{
		{"window", ks, shapes.Make(dtypes.Bool, 2, 10), func(o *compute.ScaledDotProductAttentionConfig) { o.Window = 4 }, "takes none"},
		{"mask length", ks, shapes.Make(dtypes.Bool, 2, 9), nil, "want Bool [2, 10]"},
		{"kv heads", shapes.Make(dtypes.Float32, 2, 3, 10, 8), shapes.Make(dtypes.Bool, 2, 10), nil, "does not fit query"},
		{"flat kv rows", shapes.Make(dtypes.Float32, 5, 10, 8), shapes.Make(dtypes.Bool, 2, 10), nil, "does not fit query"},
		{"head dim", shapes.Make(dtypes.Float32, 2, 2, 10, 4), shapes.Make(dtypes.Bool, 2, 10), nil, "does not fit query"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fn := backend.Builder("bad").Main()
			q, _ := fn.Parameter("q", qs, nil)
			k, _ := fn.Parameter("k", tc.key, nil)
			m, _ := fn.Parameter("m", tc.mask, nil)
			o := &compute.ScaledDotProductAttentionConfig{KeyMask: m}
			if tc.edit != nil {
				tc.edit(o)
			}
			_, _, err := fn.FusedScaledDotProductAttention(q, k, k, compute.AttentionAxesLayoutBHSD, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
	t.Run("vjp", func(t *testing.T) {
		fn := backend.Builder("vjp").Main()
		q, _ := fn.Parameter("q", qs, nil)
		k, _ := fn.Parameter("k", ks, nil)
		m, _ := fn.Parameter("m", shapes.Make(dtypes.Bool, 2, 10), nil)
		o := &compute.ScaledDotProductAttentionConfig{KeyMask: m}
		out, states, err := fn.FusedScaledDotProductAttention(q, k, k, compute.AttentionAxesLayoutBHSD, o)
		if err != nil {
			t.Fatal(err)
		}
		_, _, _, err = fn.FusedScaledDotProductAttentionVJP(q, k, k, compute.AttentionAxesLayoutBHSD, o, out, states, out)
		if !errors.Is(err, compute.ErrNotImplemented) {
			t.Fatalf("VJP: got %v, want ErrNotImplemented", err)
		}
	})
}

// BenchmarkDecodeAttention: one layer's decode attention at the decode shapes of the base preset
// (64 rows, 6 heads, 2 KV heads, head_dim 64) and the small one (4 heads, head_dim 32), per cache
// length.
//
//	GOEXPERIMENT=simd go test ./internal/gobackend/fusedops/ -run '^$' -bench DecodeAttention
func BenchmarkDecodeAttention(b *testing.B) {
	backend, err := gobackend.New("")
	if err != nil {
		b.Fatal(err)
	}
	defer backend.Finalize()
	for _, c := range []decodeCase{
		{name: "base/cache32", b: 64, h: 6, hk: 2, nq: 1, s: 32, d: 64, mask: "all", flatKV: true},
		{name: "base/cache64", b: 64, h: 6, hk: 2, nq: 1, s: 64, d: 64, mask: "all", flatKV: true},
		{name: "base/cache96", b: 64, h: 6, hk: 2, nq: 1, s: 96, d: 64, mask: "all", flatKV: true},
		{name: "small/cache64", b: 64, h: 4, hk: 2, nq: 1, s: 64, d: 32, mask: "all", flatKV: true},
	} {
		s := c.s
		q, k, v, mask := decodeInputs(c, 1)
		b.Run(c.name, func(b *testing.B) {
			run := decodeCompile(b, backend, c, q, k, v, mask)
			for range b.N {
				outs, err := run()
				if err != nil {
					b.Fatal(err)
				}
				for _, o := range outs {
					if err := o.Finalize(); err != nil {
						b.Fatal(err)
					}
				}
			}
			// Scores and weighted values: 2·s·d multiply-adds per query row.
			b.ReportMetric(float64(b.N)*4*float64(s*c.d*c.b*c.h)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkDecodeRows: one work item's compute (decodeRows) with its data in L1, at the decode
// shapes of the base preset (three query rows, head_dim 64) and the small one (two, head_dim 32),
// 48 visible keys.
//
//	GOEXPERIMENT=simd go test ./internal/gobackend/fusedops/ -run '^$' -bench DecodeRows -cpu 1
func BenchmarkDecodeRows(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		name     string
		nr, d, s int
	}{{"base", 3, 64, 64}, {"small", 2, 32, 64}} {
		fill := func(n int) []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = rng.Float32()*2 - 1
			}
			return x
		}
		q, k, v := fill(c.nr*c.d), fill(c.s*c.d), fill(c.s*c.d)
		vis := make([]int32, 48)
		for i := range vis {
			vis[i] = int32(i)
		}
		o, lse, sc := make([]float32, c.nr*c.d), make([]float32, c.nr), make([]float32, c.nr*len(vis))
		data := &flashAttnData{scale: 0.125}
		b.Run(c.name, func(b *testing.B) {
			for range b.N {
				decodeRows(data, o, lse, q, k, v, vis, sc)
			}
		})
	}
}

// TestVecScaleMax: the one-pass scale and maximum of the decode attention gives vecScale's
// elements and vecMax's maximum, with and without its vector loop; prefetchRange, a hint, leaves
// memory as it was on ragged lengths and offsets.
func TestVecScaleMax(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for n := range 40 {
		x := make([]float32, n)
		for i := range x {
			x[i] = rng.Float32()*20 - 10
		}
		want := append([]float32(nil), x...)
		for i := range want {
			want[i] *= 0.3
		}
		wantMax := negInf
		for _, v := range want {
			wantMax = max(wantMax, v)
		}
		got := append([]float32(nil), x...)
		if m := vecScaleMax(got, 0.3); m != wantMax {
			t.Fatalf("n=%d: max %g, want %g", n, m, wantMax)
		}
		for i := range got {
			if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
				t.Fatalf("n=%d: element %d: %g, want %g", n, i, got[i], want[i])
			}
		}
		if n > 0 {
			before := append([]float32(nil), x...)
			for off := range min(n, 5) {
				prefetchRange(unsafe.Pointer(&x[off]), uintptr(n-off)*4)
			}
			prefetchRange(unsafe.Pointer(&x[0]), 0)
			for i := range x {
				if x[i] != before[i] {
					t.Fatalf("prefetchRange changed element %d", i)
				}
			}
		}
	}
}

// BenchmarkDecodeAttentionCold: as BenchmarkDecodeAttention, but each op takes the next of twelve
// layers' inputs in turn (48 MB of base-preset caches at cache64), so the caches come from far
// cache or memory as in a generation graph instead of staying in L2.
//
//	GOEXPERIMENT=simd go test ./internal/gobackend/fusedops/ -run '^$' -bench DecodeAttentionCold
func BenchmarkDecodeAttentionCold(b *testing.B) {
	backend, err := gobackend.New("")
	if err != nil {
		b.Fatal(err)
	}
	defer backend.Finalize()
	for _, c := range []decodeCase{
		{name: "base/cache64", b: 64, h: 6, hk: 2, nq: 1, s: 64, d: 64, mask: "all", flatKV: true},
		{name: "small/cache64", b: 64, h: 4, hk: 2, nq: 1, s: 64, d: 32, mask: "all", flatKV: true},
	} {
		b.Run(c.name, func(b *testing.B) {
			const layers = 12
			var runs []func() ([]compute.Buffer, error)
			for l := range layers {
				q, k, v, mask := decodeInputs(c, uint64(l+1))
				runs = append(runs, decodeCompile(b, backend, c, q, k, v, mask))
			}
			b.ResetTimer()
			for i := range b.N {
				outs, err := runs[i%layers]()
				if err != nil {
					b.Fatal(err)
				}
				for _, o := range outs {
					if err := o.Finalize(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
