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

// flashCase is one blocked-attention problem: query [b, h, s, d], key/value [b, hk, s, d].
type flashCase struct {
	name             string
	b, h, hk, s, d   int
	bq, bk           int     // block sizes
	window           int     // 0: none
	softcap, scale   float64 // 0: none / 1/√d
	pad              string  // per batch row: "" all real, "left:n", "right:n", "holes"
	randomMagnitudes bool    // scores large enough that the online softmax rescales often
}

func (c flashCase) keyMask(rng *rand.Rand) []bool {
	m := make([]bool, c.b*c.s)
	for i := range m {
		m[i] = true
	}
	for b := range c.b {
		row := m[b*c.s : (b+1)*c.s]
		switch {
		case b == 0 && strings.HasPrefix(c.pad, "left:"):
			var n int
			fmt.Sscanf(c.pad, "left:%d", &n)
			for j := range n {
				row[j] = false
			}
		case b == c.b-1 && strings.HasPrefix(c.pad, "right:"):
			var n int
			fmt.Sscanf(c.pad, "right:%d", &n)
			for j := c.s - n; j < c.s; j++ {
				row[j] = false
			}
		case c.pad == "holes":
			for j := range row {
				row[j] = rng.IntN(3) != 0
			}
		}
	}
	return m
}

var flashCases = []flashCase{
	{name: "one block", b: 1, h: 2, hk: 2, s: 5, d: 4, bq: 64, bk: 64},
	{name: "single token", b: 2, h: 2, hk: 1, s: 1, d: 8, bq: 8, bk: 8, pad: "right:1"},
	{name: "ragged GQA", b: 2, h: 4, hk: 2, s: 37, d: 16, bq: 8, bk: 8},
	{name: "uneven blocks", b: 1, h: 3, hk: 1, s: 29, d: 12, bq: 6, bk: 10},
	{name: "left padding", b: 2, h: 4, hk: 2, s: 33, d: 16, bq: 8, bk: 8, pad: "left:11"},
	{name: "right padding", b: 2, h: 2, hk: 2, s: 30, d: 8, bq: 8, bk: 4, pad: "right:9"},
	{name: "holes", b: 3, h: 2, hk: 1, s: 26, d: 8, bq: 4, bk: 8, pad: "holes"},
	{name: "window", b: 2, h: 4, hk: 2, s: 41, d: 16, bq: 8, bk: 8, window: 5, pad: "left:7"},
	{name: "window wider than blocks", b: 1, h: 2, hk: 1, s: 50, d: 8, bq: 8, bk: 8, window: 19},
	{name: "window ending at a block edge", b: 1, h: 2, hk: 1, s: 50, d: 8, bq: 8, bk: 8, window: 10},
	{name: "one-row blocks", b: 2, h: 2, hk: 1, s: 23, d: 8, bq: 1, bk: 3, window: 4, pad: "holes"},
	{name: "softcap", b: 2, h: 2, hk: 1, s: 27, d: 16, bq: 8, bk: 8, softcap: 2.5, pad: "holes", randomMagnitudes: true},
	{name: "softcap window scale", b: 1, h: 4, hk: 4, s: 35, d: 32, bq: 16, bk: 8, softcap: 4, window: 6, scale: 0.3},
	{name: "large scores", b: 1, h: 2, hk: 1, s: 40, d: 16, bq: 8, bk: 8, randomMagnitudes: true},
	{name: "default blocks", b: 1, h: 2, hk: 1, s: 150, d: 32, bq: 64, bk: 64, pad: "left:20", window: 70},
}

// flashRun builds and runs forward and backward: outputs out, lse, dq, dk, dv (flat).
func flashRun(t *testing.T, backend compute.Backend, c flashCase, q, k, v []float32, mask []bool, dOut []float32) [][]float32 {
	t.Helper()
	qs := shapes.Make(dtypes.Float32, c.b, c.h, c.s, c.d)
	ks := shapes.Make(dtypes.Float32, c.b, c.hk, c.s, c.d)
	ms := shapes.Make(dtypes.Bool, c.b, c.s)
	saved := [2]int{flashBlockQ, flashBlockK}
	flashBlockQ, flashBlockK = c.bq, c.bk
	defer func() { flashBlockQ, flashBlockK = saved[0], saved[1] }()

	builder := backend.Builder("flash")
	fn := builder.Main()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %+v", c.name, err)
		}
	}
	var params []compute.Value
	for i, s := range []shapes.Shape{qs, ks, ks, ms, qs} {
		p, err := fn.Parameter(fmt.Sprintf("p%d", i), s, nil)
		must(err)
		params = append(params, p)
	}
	opts := &compute.ScaledDotProductAttentionConfig{Causal: true, Scale: c.scale, KeyMask: params[3], Window: c.window, Softcap: c.softcap}
	out, states, err := fn.FusedScaledDotProductAttention(params[0], params[1], params[2], compute.AttentionAxesLayoutBHSD, opts)
	must(err)
	dq, dk, dv, err := fn.FusedScaledDotProductAttentionVJP(params[0], params[1], params[2], compute.AttentionAxesLayoutBHSD, opts, out, states, params[4])
	must(err)
	must(fn.Return([]compute.Value{out, states[0], dq, dk, dv}, nil))
	exec, err := builder.Compile()
	must(err)
	var in []compute.Buffer
	for i, flat := range []any{q, k, v, mask, dOut} {
		s := []shapes.Shape{qs, ks, ks, ms, qs}[i]
		buf, err := backend.BufferFromFlatData(0, flat, s)
		must(err)
		in = append(in, buf)
	}
	outs, err := exec.Execute(in, nil, 0)
	must(err)
	res := make([][]float32, len(outs))
	for i, o := range outs {
		s, err := o.Shape()
		must(err)
		res[i] = make([]float32, s.Size())
		must(o.ToFlatData(res[i]))
	}
	return res
}

// flashReference is attention and its gradient in float64 over the whole score matrix.
func flashReference(c flashCase, q, k, v []float32, mask []bool, dOut []float32) (out, lse, dq, dk, dv []float64) {
	scale := c.scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(c.d))
	}
	s, d := c.s, c.d
	out, lse, dq = make([]float64, len(q)), make([]float64, c.b*c.h*s), make([]float64, len(q))
	dk, dv = make([]float64, len(k)), make([]float64, len(k))
	visible := func(b, i, j int) bool {
		return j <= i && (c.window == 0 || i-j < c.window) && (j == i || mask[b*s+j])
	}
	for b := range c.b {
		for h := range c.h {
			kh := h / (c.h / c.hk)
			qo, ko := (b*c.h+h)*s*d, (b*c.hk+kh)*s*d
			for i := range s {
				sc, tc, p := make([]float64, s), make([]float64, s), make([]float64, s)
				mx := math.Inf(-1)
				for j := range s {
					if !visible(b, i, j) {
						continue
					}
					var dot float64
					for x := range d {
						dot += float64(q[qo+i*d+x]) * float64(k[ko+j*d+x])
					}
					sc[j] = dot * scale
					if c.softcap > 0 {
						tc[j] = math.Tanh(sc[j] / c.softcap)
						sc[j] = c.softcap * tc[j]
					}
					mx = max(mx, sc[j])
				}
				var sum float64
				for j := range s {
					if visible(b, i, j) {
						p[j] = math.Exp(sc[j] - mx)
						sum += p[j]
					}
				}
				lse[(b*c.h+h)*s+i] = mx + math.Log(sum)
				dp := make([]float64, s)
				var pdp float64
				for j := range s {
					p[j] /= sum
					for x := range d {
						out[qo+i*d+x] += p[j] * float64(v[ko+j*d+x])
						dp[j] += float64(dOut[qo+i*d+x]) * float64(v[ko+j*d+x])
					}
					pdp += p[j] * dp[j]
				}
				for j := range s {
					if p[j] == 0 {
						continue
					}
					ds := p[j] * (dp[j] - pdp)
					if c.softcap > 0 {
						ds *= 1 - tc[j]*tc[j]
					}
					ds *= scale
					for x := range d {
						dq[qo+i*d+x] += ds * float64(k[ko+j*d+x])
						dk[ko+j*d+x] += ds * float64(q[qo+i*d+x])
						dv[ko+j*d+x] += p[j] * float64(dOut[qo+i*d+x])
					}
				}
			}
		}
	}
	return
}

func flashInputs(c flashCase, seed uint64) (q, k, v []float32, mask []bool, dOut []float32) {
	rng := rand.New(rand.NewPCG(seed, 7))
	fill := func(n int, mag float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = (rng.Float32()*2 - 1) * mag
		}
		return x
	}
	mag := float32(1)
	if c.randomMagnitudes {
		mag = 4
	}
	q, k = fill(c.b*c.h*c.s*c.d, mag), fill(c.b*c.hk*c.s*c.d, mag)
	v, dOut = fill(c.b*c.hk*c.s*c.d, 1), fill(c.b*c.h*c.s*c.d, 1)
	return q, k, v, c.keyMask(rng), dOut
}

// TestFlashAttentionMatchesReference: forward (outputs and log-sum-exp) and backward of the blocked
// attention against a float64 computation over the whole score matrix, on ragged shapes: lengths
// that are not multiples of the blocks, unequal query and key blocks, GQA, left/right padding and
// holes (a padded query sees only itself), sliding windows, soft-capping, scales.
func TestFlashAttentionMatchesReference(t *testing.T) {
	backend, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Finalize()
	for _, c := range flashCases {
		t.Run(c.name, func(t *testing.T) {
			q, k, v, mask, dOut := flashInputs(c, 1)
			got := flashRun(t, backend, c, q, k, v, mask, dOut)
			out, lse, dq, dk, dv := flashReference(c, q, k, v, mask, dOut)
			for i, want := range [][]float64{out, lse, dq, dk, dv} {
				name := []string{"output", "log-sum-exp", "dQuery", "dKey", "dValue"}[i]
				var worst float64
				for j, w := range want {
					worst = max(worst, math.Abs(float64(got[i][j])-w)/(1+math.Abs(w)))
				}
				if worst > 1e-5 {
					t.Errorf("%s: max relative error %.3g > 1e-5", name, worst)
				}
			}
		})
	}
}

// TestFlashAttentionBitStable: the same inputs give the same bits run after run, with one worker
// or several (each element is computed by one work item in a fixed order of blocks).
func TestFlashAttentionBitStable(t *testing.T) {
	c := flashCase{name: "stable", b: 2, h: 4, hk: 2, s: 77, d: 16, bq: 8, bk: 8, window: 30, softcap: 3, pad: "holes"}
	q, k, v, mask, dOut := flashInputs(c, 3)
	var first [][]float32
	for _, parallelism := range []string{"", "parallelism=1", "parallelism=-1", ""} {
		backend, err := gobackend.New(parallelism)
		if err != nil {
			t.Fatal(err)
		}
		got := flashRun(t, backend, c, q, k, v, mask, dOut)
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

// TestFlashAttentionRefusesBadRequests: a KeyMask request that the kernel cannot honour fails when
// the graph is built, naming what is wrong.
func TestFlashAttentionRefusesBadRequests(t *testing.T) {
	backend, err := gobackend.New("")
	if err != nil {
		t.Fatal(err)
	}
	defer backend.Finalize()
	qs := shapes.Make(dtypes.Float32, 1, 2, 6, 4)
	for _, tc := range []struct {
		name   string
		mask   shapes.Shape
		key    shapes.Shape
		layout compute.AttentionAxesLayout
		edit   func(o *compute.ScaledDotProductAttentionConfig, extra compute.Value)
		want   string
	}{
		// Temper fork: KeyMask without Causal is the decode attention (decodeattn.go), which takes no Window.
		{"not causal with a window", shapes.Make(dtypes.Bool, 1, 6), qs, compute.AttentionAxesLayoutBHSD,
			func(o *compute.ScaledDotProductAttentionConfig, _ compute.Value) { o.Causal, o.Window = false, 3 }, "takes none"},
		{"with a mask", shapes.Make(dtypes.Bool, 1, 6), qs, compute.AttentionAxesLayoutBHSD,
			func(o *compute.ScaledDotProductAttentionConfig, x compute.Value) { o.Mask = x }, "cannot be combined"},
		{"negative window", shapes.Make(dtypes.Bool, 1, 6), qs, compute.AttentionAxesLayoutBHSD,
			func(o *compute.ScaledDotProductAttentionConfig, _ compute.Value) { o.Window = -1 }, "Window=-1"},
		{"infinite softcap", shapes.Make(dtypes.Bool, 1, 6), qs, compute.AttentionAxesLayoutBHSD,
			func(o *compute.ScaledDotProductAttentionConfig, _ compute.Value) { o.Softcap = math.Inf(1) }, "Softcap=+Inf"},
		{"mask shape", shapes.Make(dtypes.Bool, 6), qs, compute.AttentionAxesLayoutBHSD, nil, "KeyMask (Bool)[6]: want Bool [1, 6]"},
		{"layout", shapes.Make(dtypes.Bool, 1, 6), qs, compute.AttentionAxesLayoutBSHD, nil, "needs layout BHSD"},
		{"kv heads", shapes.Make(dtypes.Bool, 1, 6), shapes.Make(dtypes.Float32, 1, 3, 6, 4), compute.AttentionAxesLayoutBHSD, nil, "does not fit query"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fn := backend.Builder("bad").Main()
			q, _ := fn.Parameter("q", qs, nil)
			k, _ := fn.Parameter("k", tc.key, nil)
			m, _ := fn.Parameter("m", tc.mask, nil)
			x, _ := fn.Parameter("x", shapes.Make(dtypes.Bool, 6, 6), nil)
			o := &compute.ScaledDotProductAttentionConfig{Causal: true, KeyMask: m}
			if tc.edit != nil {
				tc.edit(o, x)
			}
			_, _, err := fn.FusedScaledDotProductAttention(q, k, k, tc.layout, o)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// BenchmarkFlashAttention: forward and backward of one layer's attention at the small preset's
// head shapes (4 heads, 2 KV heads, head_dim 32), batch 1, per sequence length.
//
//	GOEXPERIMENT=simd go test ./internal/gobackend/fusedops/ -run '^$' -bench FlashAttention -benchtime 3x
func BenchmarkFlashAttention(b *testing.B) {
	backend, err := gobackend.New("")
	if err != nil {
		b.Fatal(err)
	}
	defer backend.Finalize()
	for _, s := range []int{512, 2048, 8192} {
		c := flashCase{b: 1, h: 4, hk: 2, s: s, d: 32, bq: flashBlockQ, bk: flashBlockK, pad: "right:7"}
		q, k, v, mask, dOut := flashInputs(c, 1)
		t := &testing.T{}
		b.Run(fmt.Sprintf("seq%d", s), func(b *testing.B) {
			for range b.N {
				flashRun(t, backend, c, q, k, v, mask, dOut)
			}
			// Causal attention: 2·s²·d·h multiply-adds forward (scores, values), 3.5× that backward.
			b.ReportMetric(float64(b.N)*4.5*2*float64(s*s)*float64(c.d*c.h)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
