package loss

import (
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
)

// IPO is Identity Preference Optimisation, the squared-loss ΨPO of Azar et al. 2023 ("A General
// Theoretical Paradigm to Understand Learning from Human Preferences"), which regresses the policy's
// log-ratio margin onto a fixed target instead of pushing it to infinity as DPO does on deterministic
// preferences:
//
//	Δ    = (log πθ(y_w|x) − log πref(y_w|x)) − (log πθ(y_l|x) − log πref(y_l|x))
//	loss = mean over pairs of  (Δ − 1/(2β))²        (the paper's τ is β; h = β·Δ gives (h/β − 1/(2β))²)
//
// The paper defines the log-probs as per-sequence sums (averageLogProbs = false). With averageLogProbs
// = true each log-ratio is instead the masked mean over the completion's tokens, as TRL's "ipo" loss
// does: the target 1/(2β) is then a per-token margin, independent of the completion lengths, which is
// what keeps β = 0.1 meaningful across datasets (Preference.AverageLogProbs defaults to true).
//
// Unlike DPO the gradient changes sign once Δ passes 1/(2β): IPO pulls the chosen log-ratio down again
// when the margin overshoots the target.
//
// Inputs: see PrefPair (reference log-probs required); β > 0. Metrics as DPO, with the rewards
// β·(log-ratio) computed from the same (averaged or summed) log-ratios; kl_ref is always the summed
// per-sequence log-ratio of the chosen completions.
func IPO(p PrefPair, beta float64, averageLogProbs bool) (*Node, Metrics) {
	p.check("IPO", true)
	w := p.rows()
	dc := Sub(p.Chosen, p.RefChosen)
	dr := Sub(p.Rejected, p.RefRejected)
	sumC := SeqSum(dc, p.ChosenMask)
	lc, lr := sumC, SeqSum(dr, p.RejectedMask)
	if averageLogProbs {
		lc, lr = SeqMean(dc, p.ChosenMask), SeqMean(dr, p.RejectedMask)
	}
	loss := prefRowMean(Square(AddScalar(Sub(lc, lr), -1/(2*beta))), w)
	m := prefRewardMetrics(MulScalar(lc, beta), MulScalar(lr, beta), w)
	m["kl_ref"] = prefRowMean(sumC, w)
	return loss, m
}
