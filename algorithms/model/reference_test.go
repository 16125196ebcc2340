package model

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/model/modelcfg"
)

// tinyConfigs are small configs exercising every family feature.
func tinyConfigs() map[string]Config {
	base := Config{Vocab: 37, DModel: 32, Layers: 2, Heads: 4, KVHeads: 2, HeadDim: 8, FFN: 48, MaxSeq: 128,
		RopeTheta: 10000, NormEps: 1e-5, Activation: modelcfg.ActSiLU}
	llama := base
	llama.Family = modelcfg.FamilyLlama
	llama.TiedEmbeddings = false
	gemma := base
	gemma.Family = modelcfg.FamilyGemma
	gemma.KVHeads = 1
	gemma.Activation = modelcfg.ActGELU
	gemma.TiedEmbeddings, gemma.ScaleEmbeddings, gemma.NormPlusOne = true, true, true
	gemma.NormEps = 1e-6
	qwen := base
	qwen.Family = modelcfg.FamilyQwen2
	qwen.TiedEmbeddings, qwen.QKVBias = true, true
	qwen.RopeTheta = 1e6
	qwen.HeadDim = 16
	qwen.Heads, qwen.KVHeads = 2, 2
	return map[string]Config{"llama": llama, "gemma": gemma, "qwen2": qwen}
}

// randomWeights gives every variable random values (norm scales around their neutral value, biases
// non-zero) so that the reference test exercises every term.
func randomWeights(cfg Config, seed uint64, std float64) map[string][]float32 {
	rng := rand.New(rand.NewPCG(seed, 1))
	w := map[string][]float32{}
	for _, v := range cfg.Variables() {
		data := make([]float32, v.Size())
		for i := range data {
			x := rng.NormFloat64()
			switch {
			case strings.HasSuffix(v.Path, "/scale"):
				if cfg.NormPlusOne {
					data[i] = float32(0.2 * x)
				} else {
					data[i] = float32(1 + 0.2*x)
				}
			case strings.HasSuffix(v.Path, "_bias"):
				data[i] = float32(0.2 * x)
			default:
				data[i] = float32(std * x)
			}
		}
		w[v.Path] = data
	}
	return w
}

// ---- plain-Go reference (float64, loops only) ----

type refModel struct {
	cfg Config
	w   map[string][]float32
}

func (r refModel) at(path string) []float32 { return r.w[path] }

// matvec: x [in] · W [in, out] (row-major).
func matvec(x []float64, w []float32, in, out int) []float64 {
	y := make([]float64, out)
	for i := range in {
		xi := x[i]
		row := w[i*out : (i+1)*out]
		for j := range out {
			y[j] += xi * float64(row[j])
		}
	}
	return y
}

func (r refModel) rms(x []float64, w []float32) []float64 {
	var ms float64
	for _, v := range x {
		ms += v * v
	}
	ms /= float64(len(x))
	inv := 1 / math.Sqrt(ms+r.cfg.NormEps)
	y := make([]float64, len(x))
	for i, v := range x {
		s := float64(w[i])
		if r.cfg.NormPlusOne {
			s += 1
		}
		y[i] = v * inv * s
	}
	return y
}

func (r refModel) rope(x []float64, pos int) {
	hd := len(x)
	half := hd / 2
	for i := range half {
		invf := 1 / math.Pow(r.cfg.RopeTheta, float64(2*i)/float64(hd))
		a := float64(pos) * invf
		c, s := math.Cos(a), math.Sin(a)
		x1, x2 := x[i], x[i+half]
		x[i] = x1*c - x2*s
		x[i+half] = x2*c + x1*s
	}
}

func (r refModel) act(x float64) float64 {
	switch r.cfg.Activation {
	case modelcfg.ActSiLU:
		return x / (1 + math.Exp(-x))
	case modelcfg.ActGELU:
		return 0.5 * x * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x)))
	default:
		return 0.5 * x * (1 + math.Erf(x/math.Sqrt2))
	}
}

// forwardRow returns logits [seq][vocab] for one row (padded positions included; their values are
// not compared).
func (r refModel) forwardRow(tokens, positions []int, valid []bool) [][]float64 {
	c := r.cfg
	d, seq := c.DModel, len(tokens)
	nh, nkv, hd := c.Heads, c.KVHeads, c.HeadDim
	grp := nh / nkv
	emb := r.at(VarEmbed)
	x := make([][]float64, seq)
	for t, tok := range tokens {
		x[t] = make([]float64, d)
		for i := range d {
			x[t][i] = float64(emb[tok*d+i])
			if c.ScaleEmbeddings {
				x[t][i] *= math.Sqrt(float64(d))
			}
		}
	}
	width := c.qkvWidth()
	for l := range c.Layers {
		p := func(s string) []float32 { return r.at(layerPath(s, l)) }
		qs := make([][][]float64, seq) // [t][head][hd]
		ks := make([][][]float64, seq)
		vs := make([][][]float64, seq)
		for t := range seq {
			h := r.rms(x[t], p(VarAttnNorm))
			qkv := matvec(h, p(VarQKV), d, width)
			if c.QKVBias {
				for j, b := range p(VarQKVBias) {
					qkv[j] += float64(b)
				}
			}
			qs[t] = make([][]float64, nh)
			for hh := range nh {
				qs[t][hh] = append([]float64(nil), qkv[hh*hd:(hh+1)*hd]...)
				r.rope(qs[t][hh], positions[t])
			}
			ks[t] = make([][]float64, nkv)
			vs[t] = make([][]float64, nkv)
			for kh := range nkv {
				off := nh*hd + kh*hd
				ks[t][kh] = append([]float64(nil), qkv[off:off+hd]...)
				r.rope(ks[t][kh], positions[t])
				off = (nh+nkv)*hd + kh*hd
				vs[t][kh] = append([]float64(nil), qkv[off:off+hd]...)
			}
		}
		for t := range seq {
			concat := make([]float64, nh*hd)
			for hh := range nh {
				kh := hh / grp
				var keys []int
				for j := 0; j <= t; j++ {
					if valid[j] || j == t {
						keys = append(keys, j)
					}
				}
				scores := make([]float64, len(keys))
				mx := math.Inf(-1)
				for n, j := range keys {
					var s float64
					for i := range hd {
						s += qs[t][hh][i] * ks[j][kh][i]
					}
					scores[n] = s / math.Sqrt(float64(hd))
					mx = math.Max(mx, scores[n])
				}
				var z float64
				for n := range scores {
					scores[n] = math.Exp(scores[n] - mx)
					z += scores[n]
				}
				for n, j := range keys {
					for i := range hd {
						concat[hh*hd+i] += scores[n] / z * vs[j][kh][i]
					}
				}
			}
			o := matvec(concat, p(VarAttnOut), nh*hd, d)
			for i := range d {
				x[t][i] += o[i]
			}
			h := r.rms(x[t], p(VarMLPNorm))
			gu := matvec(h, p(VarGateUp), d, 2*c.FFN)
			a := make([]float64, c.FFN)
			for i := range c.FFN {
				a[i] = r.act(gu[i]) * gu[c.FFN+i]
			}
			o = matvec(a, p(VarDown), c.FFN, d)
			for i := range d {
				x[t][i] += o[i]
			}
		}
	}
	logits := make([][]float64, seq)
	for t := range seq {
		h := r.rms(x[t], r.at(VarFinalNorm))
		if c.TiedEmbeddings {
			logits[t] = make([]float64, c.Vocab)
			for v := range c.Vocab {
				var s float64
				for i := range d {
					s += h[i] * float64(emb[v*d+i])
				}
				logits[t][v] = s
			}
		} else {
			logits[t] = matvec(h, r.at(VarLMHead), d, c.Vocab)
		}
	}
	return logits
}

// ---- helpers shared by the tests ----

// newStore returns a store with cfg's variables set from w.
func newStore(t testing.TB, cfg Config, w map[string][]float32) *gm.Store {
	t.Helper()
	store := gm.NewStore()
	if err := ImportWeights(store.RootScope(), cfg, w); err != nil {
		t.Fatal(err)
	}
	return store
}

// paddedCompletions left-pads each prompt followed by its completion to the longest of them
// (leftPadded), and returns that length.
func paddedCompletions(prompts [][]int, out []Completion) (tok, pos [][]int32, mask [][]bool, longest int) {
	seqs := make([][]int, len(out))
	for i, c := range out {
		seqs[i] = append(slices.Clone(prompts[i]), c.Tokens...)
		longest = max(longest, len(seqs[i]))
	}
	tok, pos, mask = leftPadded(seqs, longest)
	return tok, pos, mask, longest
}

// leftPadded builds [batch, seq] tokens/positions/mask for rows left-padded to seq.
func leftPadded(rows [][]int, seq int) (tok, pos [][]int32, mask [][]bool) {
	for _, r := range rows {
		pad := seq - len(r)
		tr, pr, mr := make([]int32, seq), make([]int32, seq), make([]bool, seq)
		for i, v := range r {
			tr[pad+i] = int32(v)
			pr[pad+i] = int32(i)
			mr[pad+i] = true
		}
		tok, pos, mask = append(tok, tr), append(pos, pr), append(mask, mr)
	}
	return
}

// runForward runs Forward (an inference graph) on store's root scope.
func runForward(t testing.TB, cfg Config, store *gm.Store, tok, pos [][]int32, mask [][]bool) []float32 {
	t.Helper()
	return loraForward(t, cfg, store, tok, pos, mask, -1)
}

func TestForwardMatchesReference(t *testing.T) {
	rows := [][]int{
		{1, 5, 9, 2, 33, 7, 4, 11},
		{3, 3, 8, 20, 1},
		{36, 0},
		{17},
	}
	const seq = 8
	for name, cfg := range tinyConfigs() {
		t.Run(name, func(t *testing.T) {
			if err := cfg.Validate(); err != nil {
				t.Fatal(err)
			}
			w := randomWeights(cfg, 7, 0.15)
			store := newStore(t, cfg, w)
			tok, pos, mask := leftPadded(rows, seq)
			got := runForward(t, cfg, store, tok, pos, mask)
			ref := refModel{cfg, w}
			var maxDiff float64
			for b, r := range rows {
				toks := make([]int, seq)
				poss := make([]int, seq)
				for i := range seq {
					toks[i], poss[i] = int(tok[b][i]), int(pos[b][i])
				}
				want := ref.forwardRow(toks, poss, mask[b])
				for ti := seq - len(r); ti < seq; ti++ {
					for v := range cfg.Vocab {
						g := float64(got[(b*seq+ti)*cfg.Vocab+v])
						diff := math.Abs(g - want[ti][v])
						maxDiff = math.Max(maxDiff, diff)
						if diff > 1e-4 {
							t.Fatalf("row %d pos %d vocab %d: got %.6f want %.6f", b, ti, v, g, want[ti][v])
						}
					}
				}
			}
			t.Logf("%s: max |Δlogit| = %.2e", name, maxDiff)
		})
	}
}
