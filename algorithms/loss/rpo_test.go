package loss

import (
	"fmt"
	"math"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive

	"github.com/temperml/temper/algorithms/loss/losscfg"
)

// TestSFTCoefAddsChosenNLL: with sft_coef α the pair losses (dpo, ipo, simpo) and kto equal the plain
// loss plus α × the token-mean NLL of the chosen (desirable) completions, computed in plain Go; sft_nll
// reports that NLL, and α = 0 leaves the loss and metrics untouched.
func TestSFTCoefAddsChosenNLL(t *testing.T) {
	const alpha = 0.7
	for _, pc := range prefCases {
		o := pc.rows()
		wantNLL := o.nllSum / math.Max(o.nllCnt, 1)
		for _, kind := range []string{losscfg.PrefDPO, losscfg.PrefIPO, losscfg.PrefSimPO} {
			with, without := losscfg.DefaultPreference(kind), losscfg.DefaultPreference(kind)
			with.SFTCoef = alpha
			gotWith, mWith := evalLoss(t, func(in []*Node) (*Node, Metrics) { return PairLoss(with, pairInputs(in)) }, pc.inputs()...)
			gotWithout, mWithout := evalLoss(t, func(in []*Node) (*Node, Metrics) { return PairLoss(without, pairInputs(in)) }, pc.inputs()...)
			t.Run(fmt.Sprintf("%s/%s", kind, pc.name), func(t *testing.T) {
				if d := gotWith - gotWithout - alpha*wantNLL; math.Abs(d) > 1e-4*(1+math.Abs(gotWith)) {
					t.Errorf("loss with α %v, without %v: difference %v, want α·NLL = %v", gotWith, gotWithout, gotWith-gotWithout, alpha*wantNLL)
				}
				if math.Abs(mWith["sft_nll"]-wantNLL) > 1e-4*(1+wantNLL) {
					t.Errorf("sft_nll = %v, want %v", mWith["sft_nll"], wantNLL)
				}
				if _, ok := mWithout["sft_nll"]; ok {
					t.Error("sft_nll reported with sft_coef 0")
				}
			})
		}
	}
	for _, c := range ktoCases {
		var s, n float64
		for i := range c.lp {
			for j := range c.lp[i] {
				w := c.m[i][j] * c.des[i]
				s -= w * f32(c.lp[i][j])
				n += w
			}
		}
		wantNLL := s / math.Max(n, 1)
		with, without := losscfg.DefaultPreference(losscfg.PrefKTO), losscfg.DefaultPreference(losscfg.PrefKTO)
		with.SFTCoef = alpha
		gotWith, mWith := evalLoss(t, func(in []*Node) (*Node, Metrics) { return KTOLoss(with, ktoInputs(in, true)) }, c.inputs()...)
		gotWithout, _ := evalLoss(t, func(in []*Node) (*Node, Metrics) { return KTOLoss(without, ktoInputs(in, true)) }, c.inputs()...)
		t.Run("kto/"+c.name, func(t *testing.T) {
			if d := gotWith - gotWithout - alpha*wantNLL; math.Abs(d) > 1e-4*(1+math.Abs(gotWith)) {
				t.Errorf("difference %v, want α·NLL = %v", gotWith-gotWithout, alpha*wantNLL)
			}
			if math.Abs(mWith["sft_nll"]-wantNLL) > 1e-4*(1+wantNLL) {
				t.Errorf("sft_nll = %v, want %v", mWith["sft_nll"], wantNLL)
			}
		})
	}
	bad := losscfg.DefaultPreference(losscfg.PrefORPO)
	bad.SFTCoef = 1
	if err := bad.Validate(); err == nil {
		t.Error("orpo with sft_coef must be rejected (it has its own NLL term)")
	}
	neg := losscfg.DefaultPreference(losscfg.PrefDPO)
	neg.SFTCoef = -1
	if err := neg.Validate(); err == nil {
		t.Error("negative sft_coef must be rejected")
	}
}
