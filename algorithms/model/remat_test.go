package model

import (
	"fmt"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"testing"
)

// TestRematBitIdentical: recomputing each layer (or each attention sub-block) in the backward pass
// gives the logits and gradients of keeping every activation bit for bit, with plain and blocked
// attention, for full training and for LoRA adapters (with dropout: its masks are recomputed from
// the same seed); the executor's estimate of the step's live memory goes down, so the
// recomputation is really in the graph; and the blocked kernel is not among what is recomputed
// (its inputs are kept: it is the quadratic part, and GoMLX would rebuild it twice).
func TestRematBitIdentical(t *testing.T) {
	cases := blockedCases(t)
	lora := &LoRA{Rank: 4, Dropout: 0.1, Seed: 7}
	for _, name := range []string{"llama", "gemma2"} {
		for _, attention := range []string{modelcfg.AttentionPlain, modelcfg.AttentionBlocked} {
			for _, adapters := range []*LoRA{nil, lora} {
				t.Run(fmt.Sprintf("%s/%s/lora=%v", name, attention, adapters != nil), func(t *testing.T) {
					cfg := cases[name].Clone()
					cfg.Attention = attention
					rows := raggedRows(cfg.Vocab)
					base := runStep(t, cfg, blockedWeights[name], rows, 150, true, adapters)
					for _, remat := range []string{modelcfg.RematLayer, modelcfg.RematAttention} {
						c := cfg.Clone()
						c.Remat = remat
						got := runStep(t, c, blockedWeights[name], rows, 150, true, adapters)
						if !bitsEqual(got.logits, base.logits) {
							t.Errorf("remat %s: logits differ", remat)
						}
						for path, want := range base.grads {
							if !bitsEqual(got.grads[path], want) {
								t.Errorf("remat %s: gradient of %s differs (max %.3g)", remat, path, relDiff(got.grads[path], want))
							}
						}
						if got.kernels != base.kernels {
							t.Errorf("remat %s: %d blocked attention forwards in the graph, %d without: the kernel is recomputed", remat, got.kernels, base.kernels)
						}
						if got.mem >= base.mem {
							t.Errorf("remat %s: estimated memory %d, not below %d without", remat, got.mem, base.mem)
						}
						t.Logf("remat %s: estimated memory %d → %d", remat, base.mem, got.mem)
					}
				})
			}
		}
	}
}
