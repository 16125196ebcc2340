package objective

import (
	"slices"
	"testing"

	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/loss/losscfg"
)

// TestPolicyNamesKeyTheCorrection: the name keys compiled executables, so two policy (or PPO)
// objectives whose corrections build different graphs must have different names, and the deprecated
// tis_threshold must name the graph its correction {mode: tis} builds.
func TestPolicyNamesKeyTheCorrection(t *testing.T) {
	with := func(algo string, f func(*losscfg.PolicyConfig)) losscfg.PolicyConfig {
		c := losscfg.DefaultPolicyConfig(algo)
		f(&c)
		return c
	}
	for _, algo := range []string{losscfg.AlgoGRPO, losscfg.AlgoCISPO, losscfg.AlgoPPO} {
		configs := []struct {
			name string
			cfg  losscfg.PolicyConfig
		}{
			{"unset", with(algo, func(*losscfg.PolicyConfig) {})},
			{"tis", with(algo, func(c *losscfg.PolicyConfig) { c.Correction.Mode = losscfg.CorrectionTIS })},
			{"tis 3", with(algo, func(c *losscfg.PolicyConfig) { c.Correction = losscfg.Correction{Mode: losscfg.CorrectionTIS, High: 3} })},
			{"mis", with(algo, func(c *losscfg.PolicyConfig) { c.Correction.Mode = losscfg.CorrectionMIS })},
			{"mis wide", with(algo, func(c *losscfg.PolicyConfig) {
				c.Correction = losscfg.Correction{Mode: losscfg.CorrectionMIS, Low: 0.25, High: 4}
			})},
			{"geo_mask", with(algo, func(c *losscfg.PolicyConfig) { c.Correction.Mode = losscfg.CorrectionGeoMask })},
			{"icepop", with(algo, func(c *losscfg.PolicyConfig) { c.Correction.Mode = losscfg.CorrectionIcePop })},
		}
		name := func(c losscfg.PolicyConfig) string {
			if algo == losscfg.AlgoPPO {
				return PPO(c).Name
			}
			return Policy(c).Name
		}
		seen := map[string]string{}
		for _, c := range configs {
			if err := c.cfg.Validate(); err != nil {
				t.Fatalf("%s %s: %v", algo, c.name, err)
			}
			n := name(c.cfg)
			if other, ok := seen[n]; ok {
				t.Errorf("%s: configs %q and %q share the objective name %q", algo, other, c.name, n)
			}
			seen[n] = c.name
		}
		alias := with(algo, func(c *losscfg.PolicyConfig) { c.TISThreshold = 2 })
		if got, want := name(alias), name(configs[1].cfg); got != want {
			t.Errorf("%s: tis_threshold 2 is named %q, correction {mode: tis} %q: the same graph", algo, got, want)
		}
		none := with(algo, func(c *losscfg.PolicyConfig) { c.Correction.Mode = losscfg.CorrectionNone })
		if got, want := name(none), name(configs[0].cfg); got != want {
			t.Errorf("%s: mode none is named %q, unset %q: the same graph", algo, got, want)
		}
	}
}

// TestPolicyMetricsListCorrectionAndMismatch: the correction's and the mismatch's metrics are reported
// by both policy objectives, once each.
func TestPolicyMetricsListCorrectionAndMismatch(t *testing.T) {
	for name, list := range map[string][]string{"policy": PolicyMetrics, "ppo": PPOMetrics} {
		for _, k := range append(slices.Clone(loss.CorrectionMetrics), loss.MismatchNames(loss.MismatchPrefix)...) {
			if n := countOf(list, k); n != 1 {
				t.Errorf("%s metrics list %q %d times, want once", name, k, n)
			}
		}
	}
}

func countOf(list []string, k string) (n int) {
	for _, x := range list {
		if x == k {
			n++
		}
	}
	return n
}
