package model

import (
	"math"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"
	"github.com/gomlx/gomlx/ml/train/optimizer"

	"github.com/temperml/temper/algorithms/testbackend"
)

func refLogSoftmax(logits []float64) []float64 {
	mx := math.Inf(-1)
	for _, v := range logits {
		mx = math.Max(mx, v)
	}
	var z float64
	for _, v := range logits {
		z += math.Exp(v - mx)
	}
	out := make([]float64, len(logits))
	for i, v := range logits {
		out[i] = v - mx - math.Log(z)
	}
	return out
}

func TestTokenLogProbsAndEntropy(t *testing.T) {
	cases := []struct {
		name    string
		logits  []float32
		target  int32
		logp    float64 // hand-computed
		entropy float64
	}{
		{"uniform2", []float32{0, 0}, 1, -math.Ln2, math.Ln2},
		{"uniform4", []float32{3, 3, 3, 3}, 2, -math.Log(4), math.Log(4)},
		{"peaked", []float32{1000, 0, 0}, 0, 0, 0},
		{"peaked-miss", []float32{1000, 0, 0}, 2, -1000, 0},
		{"ramp", []float32{1, 2, 3}, 2, 3 - math.Log(math.Exp(1)+math.Exp(2)+math.Exp(3)), math.NaN()},
		{"negative", []float32{-50, -51}, 1, -math.Log1p(math.E), math.NaN()},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vocab := len(c.logits)
			lg := tensors.FromFlatDataAndDimensions(c.logits, 1, 1, vocab)
			tg := tensors.FromFlatDataAndDimensions([]int32{c.target}, 1, 1)
			outs := MustExecOnceN(testbackend.Sequential(), func(l, tt *Node) []*Node {
				return []*Node{TokenLogProbs(l, tt), Entropy(l)}
			}, lg, tg)
			logp := float64(tensors.MustCopyFlatData[float32](outs[0])[0])
			ent := float64(tensors.MustCopyFlatData[float32](outs[1])[0])
			lf := make([]float64, vocab)
			for i, v := range c.logits {
				lf[i] = float64(v)
			}
			ls := refLogSoftmax(lf)
			wantEnt := c.entropy
			if math.IsNaN(wantEnt) {
				wantEnt = 0
				for _, l := range ls {
					wantEnt -= math.Exp(l) * l
				}
			}
			if math.Abs(logp-c.logp) > 1e-4 || math.Abs(ls[c.target]-c.logp) > 1e-9 {
				t.Errorf("logp = %v, want %v (ref %v)", logp, c.logp, ls[c.target])
			}
			if math.Abs(ent-wantEnt) > 1e-5 {
				t.Errorf("entropy = %v, want %v", ent, wantEnt)
			}
		})
	}
}

func TestCrossEntropyMasked(t *testing.T) {
	// batch 1, seq 3, vocab 2; mask keeps positions 0 and 2.
	logits := tensors.FromFlatDataAndDimensions([]float32{0, 0, 5, -5, 0, math.Ln2}, 1, 3, 2)
	targets := tensors.FromFlatDataAndDimensions([]int32{0, 1, 1}, 1, 3)
	mask := tensors.FromFlatDataAndDimensions([]float32{1, 0, 1}, 1, 3)
	zero := tensors.FromFlatDataAndDimensions([]float32{0, 0, 0}, 1, 3)
	out := MustExecOnceN(testbackend.Sequential(), func(l, tg, m, z *Node) []*Node {
		return []*Node{CrossEntropy(l, tg, m), CrossEntropy(l, tg, z), NextTokenLoss(l, tg, m)}
	}, logits, targets, mask, zero)
	// position 0: -log(1/2); position 2: -log(2/3).
	want := (math.Ln2 + math.Log(1.5)) / 2
	if got := float64(tensors.ToScalar[float32](out[0])); math.Abs(got-want) > 1e-5 {
		t.Errorf("CrossEntropy = %v, want %v", got, want)
	}
	if got := tensors.ToScalar[float32](out[1]); got != 0 {
		t.Errorf("CrossEntropy with empty mask = %v, want 0", got)
	}
	// NextTokenLoss: logits[:,0] predicts targets[:,1]=1 (mask[1]=0, skipped); logits[:,1] predicts
	// targets[:,2]=1 with mask[2]=1: -log softmax([5,-5])[1] = 10 + log(1+e^-10).
	want = 10 + math.Log1p(math.Exp(-10))
	if got := float64(tensors.ToScalar[float32](out[2])); math.Abs(got-want) > 1e-4 {
		t.Errorf("NextTokenLoss = %v, want %v", got, want)
	}
}

// TestTrainLossDecreases runs 50 AdamW steps on a tiny model over a repetitive sequence.
func TestTrainLossDecreases(t *testing.T) {
	cfg := tinyConfigs()["llama"]
	store := gm.NewStore()
	if err := InitWeights(store.RootScope(), cfg, 1, 0.02); err != nil {
		t.Fatal(err)
	}
	opt := optimizer.Adam().LearningRate(3e-3).WeightDecay(0.01).Done()
	step, err := gm.NewExec(testbackend.Sequential(), store, func(scope *gm.Scope, tok, pos, mask *Node) *Node {
		logits := Forward(scope, cfg, tok, pos, mask)
		loss := NextTokenLoss(logits, tok, mask)
		opt.UpdateGraph(scope, tok.Graph(), loss)
		return loss
	})
	if err != nil {
		t.Fatal(err)
	}
	const batch, seq = 4, 32
	var rows [][]int
	for b := range batch {
		r := make([]int, seq-b) // ragged rows: left padding is exercised too
		for i := range r {
			r[i] = 1 + (i+b)%5
		}
		rows = append(rows, r)
	}
	tok, pos, mask := leftPadded(rows, seq)
	var first, last float32
	for i := range 50 {
		out, err := step.Call(tok, pos, mask)
		if err != nil {
			t.Fatal(err)
		}
		l := tensors.ToScalar[float32](out[0])
		if i == 0 {
			first = l
		}
		last = l
	}
	t.Logf("loss %.4f → %.4f after 50 AdamW steps", first, last)
	if !(last < first/4) || math.IsNaN(float64(last)) {
		t.Fatalf("loss did not drop enough: %.4f → %.4f", first, last)
	}
}
