package loss

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive

	"github.com/temperml/temper/algorithms/loss/losscfg"
)

func refDPO(pc prefCase, beta, eps float64) (float64, map[string]float64) {
	o := pc.rows()
	losses := make([]float64, len(o.w))
	for i := range o.w {
		losses[i] = refSigmoidLoss(beta*(o.sumDC[i]-o.sumDR[i]), eps)
	}
	m := refRewardMetrics(scaled(o.sumDC, beta), scaled(o.sumDR, beta), o.w)
	m["kl_ref"] = refMean(o.sumDC, o.w)
	return refMean(losses, o.w), m
}

func TestDPOMatchesReference(t *testing.T) {
	for _, pc := range prefCases {
		for _, p := range []struct{ beta, eps float64 }{{0.1, 0}, {0.5, 0.2}, {1, 0.45}} {
			got, gotM := evalLoss(t, func(in []*Node) (*Node, Metrics) { return DPO(pairInputs(in), p.beta, p.eps) }, pc.inputs()...)
			want, wantM := refDPO(pc, p.beta, p.eps)
			t.Run(fmt.Sprintf("%s/β=%g,ε=%g", pc.name, p.beta, p.eps), func(t *testing.T) { checkLoss(t, got, gotM, want, wantM) })
		}
	}
}

// TestDPOHandComputed pins the reference itself to values computed by hand.
func TestDPOHandComputed(t *testing.T) {
	one := [][]float64{{1}}
	cases := []struct {
		name                 string
		lc, lr, beta, eps    float64 // policy − reference log-ratios of chosen and rejected
		want, margin, reward float64
	}{
		// h = 0: −log σ(0) = log 2 whatever ε.
		{"h=0", 0, 0, 0.1, 0, math.Ln2, 0, 0},
		{"h=0 smoothed", 0, 0, 0.1, 0.3, math.Ln2, 0, 0},
		// β = 1, log-ratios ±1: h = 2, loss = log(1 + e⁻²).
		{"h=2", 1, -1, 1, 0, math.Log1p(math.Exp(-2)), 2, 1},
		// cDPO: 0.75·log(1+e⁻²) + 0.25·log(1+e²).
		{"h=2 eps=.25", 1, -1, 1, 0.25, 0.75*math.Log1p(math.Exp(-2)) + 0.25*math.Log1p(math.Exp(2)), 2, 1},
		// β = 0.5, chosen ratio −2, rejected 0: h = −1, loss = log(1 + e).
		{"h=-1", -2, 0, 0.5, 0, math.Log1p(math.E), -1, -1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			pc := prefCase{c: [][]float64{{c.lc}}, cm: one, r: [][]float64{{c.lr}}, rm: one,
				rc: [][]float64{{0}}, rr: [][]float64{{0}}}
			want, wantM := refDPO(pc, c.beta, c.eps)
			if !near(want, c.want, 1e-12) || !near(wantM["rewards/margin"], c.margin, 1e-12) || !near(wantM["rewards/chosen"], c.reward, 1e-12) {
				t.Fatalf("reference %v %v, hand %v margin %v reward %v", want, wantM, c.want, c.margin, c.reward)
			}
			got, gotM := evalLoss(t, func(in []*Node) (*Node, Metrics) { return DPO(pairInputs(in), c.beta, c.eps) }, pc.inputs()...)
			checkLoss(t, got, gotM, c.want, wantM)
		})
	}
}

func TestDPOAllPaddingBatch(t *testing.T) {
	pc := prefCases[2] // keep only its padding row
	pc = prefCase{c: pc.c[2:], cm: pc.cm[2:], r: pc.r[2:], rm: pc.rm[2:], rc: pc.rc[2:], rr: pc.rr[2:]}
	got, gotM := evalLoss(t, func(in []*Node) (*Node, Metrics) { return DPO(pairInputs(in), 0.1, 0) }, pc.inputs()...)
	if got != 0 {
		t.Errorf("loss of an all-padding batch = %v, want 0", got)
	}
	for k, v := range gotM {
		if v != 0 {
			t.Errorf("metric %s of an all-padding batch = %v, want 0", k, v)
		}
	}
}

// TestDPOGradients checks signs without label smoothing. With ε > 0 the sign flips once h passes
// log((1−ε)/ε), where cDPO's optimum lies (as on the large-margins case), so there only the finite
// difference is checked.
func TestDPOGradients(t *testing.T) {
	checkSmoothedGrads(t, func(in []*Node, eps float64) (*Node, Metrics) { return DPO(pairInputs(in), 0.5, eps) },
		func(pc prefCase, eps float64) float64 { l, _ := refDPO(pc, 0.5, eps); return l })
}

// checkSmoothedGrads runs checkPairGrads on every case with label smoothing ε = 0 (the chosen
// side's gradient negative, the rejected side's positive) and ε = 0.1 (finite differences only).
func checkSmoothedGrads(t *testing.T, loss func(in []*Node, eps float64) (*Node, Metrics), ref func(pc prefCase, eps float64) float64) {
	t.Helper()
	for _, pc := range prefCases {
		for _, eps := range []float64{0, 0.1} {
			sign := 1.0
			if eps != 0 {
				sign = 0
			}
			t.Run(fmt.Sprintf("%s/ε=%g", pc.name, eps), func(t *testing.T) {
				checkPairGrads(t, pc, func(in []*Node) (*Node, Metrics) { return loss(in, eps) },
					func(pc prefCase) float64 { return ref(pc, eps) }, -sign, sign)
			})
		}
	}
}

func TestDPOSGDStep(t *testing.T) {
	checkSGDPair(t, func(p PrefPair) (*Node, Metrics) { return DPO(p, 0.1, 0) })
}

func TestPreferenceValidate(t *testing.T) {
	with := func(kind string, f func(*losscfg.Preference)) losscfg.Preference {
		c := losscfg.DefaultPreference(kind)
		f(&c)
		return c
	}
	cases := []struct {
		name string
		cfg  losscfg.Preference
		want string // substring of the error; "" for valid
	}{
		{"dpo default", losscfg.DefaultPreference(losscfg.PrefDPO), ""},
		{"ipo default", losscfg.DefaultPreference(losscfg.PrefIPO), ""},
		{"orpo default", losscfg.DefaultPreference(losscfg.PrefORPO), ""},
		{"simpo default", losscfg.DefaultPreference(losscfg.PrefSimPO), ""},
		{"kto default", losscfg.DefaultPreference(losscfg.PrefKTO), ""},
		{"explicit beta", with(losscfg.PrefDPO, func(c *losscfg.Preference) { c.Beta = 0.5 }), ""},
		{"dpo smoothed", with(losscfg.PrefDPO, func(c *losscfg.Preference) { c.LabelSmoothing = 0.49 }), ""},
		{"simpo no margin", with(losscfg.PrefSimPO, func(c *losscfg.Preference) { c.GammaBetaRatio = 0 }), ""},
		{"dpo ignores lambda", with(losscfg.PrefDPO, func(c *losscfg.Preference) { c.Lambda = -1 }), ""},
		{"unknown kind", with("rlhf", func(*losscfg.Preference) {}), `kind="rlhf": allowed ["dpo" "ipo" "orpo" "simpo" "kto"]`},
		{"empty kind", losscfg.Preference{}, `kind="": allowed`},
		{"negative beta", with(losscfg.PrefDPO, func(c *losscfg.Preference) { c.Beta = -0.1 }), "beta=-0.1: must be > 0"},
		{"nan beta", with(losscfg.PrefKTO, func(c *losscfg.Preference) { c.Beta = math.NaN() }), "beta=NaN: must be > 0"},
		{"inf beta", with(losscfg.PrefSimPO, func(c *losscfg.Preference) { c.Beta = math.Inf(1) }), "beta=+Inf: must be > 0"},
		{"orpo beta", with(losscfg.PrefORPO, func(c *losscfg.Preference) { c.Beta = 0.1 }), "beta=0.1: orpo has no β"},
		{"eps negative", with(losscfg.PrefDPO, func(c *losscfg.Preference) { c.LabelSmoothing = -0.1 }), "label_smoothing=-0.1: must be in [0, 0.5)"},
		{"eps half", with(losscfg.PrefDPO, func(c *losscfg.Preference) { c.LabelSmoothing = 0.5 }), "label_smoothing=0.5: must be in [0, 0.5)"},
		{"eps nan", with(losscfg.PrefSimPO, func(c *losscfg.Preference) { c.LabelSmoothing = math.NaN() }), "label_smoothing=NaN"},
		{"eps on ipo", with(losscfg.PrefIPO, func(c *losscfg.Preference) { c.LabelSmoothing = 0.1 }), "label_smoothing=0.1: only dpo and simpo use it"},
		{"eps on kto", with(losscfg.PrefKTO, func(c *losscfg.Preference) { c.LabelSmoothing = 0.1 }), "only dpo and simpo"},
		{"simpo ratio negative", with(losscfg.PrefSimPO, func(c *losscfg.Preference) { c.GammaBetaRatio = -1 }), "gamma_beta_ratio=-1: must be ≥ 0"},
		{"orpo lambda 0", with(losscfg.PrefORPO, func(c *losscfg.Preference) { c.Lambda = 0 }), "lambda=0: must be > 0"},
		{"orpo lambda inf", with(losscfg.PrefORPO, func(c *losscfg.Preference) { c.Lambda = math.Inf(1) }), "lambda=+Inf"},
		{"kto desirable 0", with(losscfg.PrefKTO, func(c *losscfg.Preference) { c.DesirableWeight = 0 }), "desirable_weight=0: must be > 0"},
		{"kto undesirable negative", with(losscfg.PrefKTO, func(c *losscfg.Preference) { c.UndesirableWeight = -2 }), "undesirable_weight=-2: must be > 0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.cfg.Validate()
			switch {
			case c.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
				t.Errorf("Validate() = %v, want an error containing %q", err, c.want)
			case err != nil && !strings.HasPrefix(err.Error(), "loss: preference "):
				t.Errorf("Validate() = %v, want the prefix %q", err, "loss: preference ")
			}
		})
	}
}

func TestPreferenceDefaultsAndTags(t *testing.T) {
	for kind, beta := range map[string]float64{losscfg.PrefDPO: 0.1, losscfg.PrefIPO: 0.1, losscfg.PrefKTO: 0.1, losscfg.PrefSimPO: 2, losscfg.PrefORPO: 0} {
		c := losscfg.DefaultPreference(kind)
		if c.Beta != 0 || c.BetaOrDefault() != beta || losscfg.DefaultBeta(kind) != beta {
			t.Errorf("%s: default β %v (BetaOrDefault %v), want 0 and %v", kind, c.Beta, c.BetaOrDefault(), beta)
		}
		if c.Beta = 0.25; c.BetaOrDefault() != 0.25 {
			t.Errorf("%s: β 0.25 → %v", kind, c.BetaOrDefault())
		}
		if got, want := c.UsesReference(), kind == losscfg.PrefDPO || kind == losscfg.PrefIPO || kind == losscfg.PrefKTO; got != want {
			t.Errorf("%s: UsesReference = %v", kind, got)
		}
	}
	d := losscfg.DefaultPreference(losscfg.PrefSimPO)
	if d.GammaBetaRatio*d.BetaOrDefault() != 1 || d.Lambda != 0.1 || d.DesirableWeight != 1 || d.UndesirableWeight != 1 ||
		!d.AverageLogProbs || d.LabelSmoothing != 0 {
		t.Errorf("defaults %+v", d)
	}
	// Every field has JSON, default and help tags, and the default tags agree with DefaultPreference.
	typ := reflect.TypeOf(losscfg.Preference{})
	raw, err := json.Marshal(losscfg.DefaultPreference(losscfg.PrefDPO))
	if err != nil {
		t.Fatal(err)
	}
	var asJSON map[string]any
	if err := json.Unmarshal(raw, &asJSON); err != nil {
		t.Fatal(err)
	}
	for i := range typ.NumField() {
		f := typ.Field(i)
		name := f.Tag.Get("json")
		def, help := f.Tag.Get("default"), f.Tag.Get("help")
		if name == "" || def == "" || help == "" {
			t.Errorf("field %s: json %q default %q help %q: all are required", f.Name, name, def, help)
			continue
		}
		var want any
		if err := json.Unmarshal([]byte(def), &want); err != nil {
			want = def // a bare string such as dpo
		}
		if !reflect.DeepEqual(asJSON[name], want) {
			t.Errorf("field %s: default tag %q, DefaultPreference has %v", name, def, asJSON[name])
		}
	}
	// Decoding onto the defaults keeps what the document leaves out.
	c := losscfg.DefaultPreference(losscfg.PrefDPO)
	if err := json.Unmarshal([]byte(`{"kind":"ipo","beta":0.2}`), &c); err != nil || c.Kind != losscfg.PrefIPO || c.Beta != 0.2 || !c.AverageLogProbs {
		t.Errorf("decoded %+v, %v", c, err)
	}
	c = losscfg.DefaultPreference(losscfg.PrefDPO)
	if err := json.Unmarshal([]byte(`{"kind":"simpo"}`), &c); err != nil || c.BetaOrDefault() != 2 || c.Validate() != nil {
		t.Errorf("decoded %+v (β %v), %v", c, c.BetaOrDefault(), err)
	}
}

// TestPreferencePairLossDispatch checks that the config calls each loss with its parameters (SimPO's
// γ = ratio·β in particular) and refuses KTO.
func TestPreferencePairLossDispatch(t *testing.T) {
	pc := prefCases[1]
	for _, c := range []struct {
		cfg    losscfg.Preference
		direct func(PrefPair) (*Node, Metrics)
	}{
		{losscfg.DefaultPreference(losscfg.PrefDPO), func(p PrefPair) (*Node, Metrics) { return DPO(p, 0.1, 0) }},
		{losscfg.Preference{Kind: losscfg.PrefDPO, LabelSmoothing: 0.2}, func(p PrefPair) (*Node, Metrics) { return DPO(p, 0.1, 0.2) }},
		{losscfg.Preference{Kind: losscfg.PrefIPO, Beta: 0.3}, func(p PrefPair) (*Node, Metrics) { return IPO(p, 0.3, false) }},
		{losscfg.DefaultPreference(losscfg.PrefIPO), func(p PrefPair) (*Node, Metrics) { return IPO(p, 0.1, true) }},
		{losscfg.DefaultPreference(losscfg.PrefORPO), func(p PrefPair) (*Node, Metrics) { return ORPO(p, 0.1) }},
		{losscfg.DefaultPreference(losscfg.PrefSimPO), func(p PrefPair) (*Node, Metrics) { return SimPO(p, 2, 1, 0) }},
	} {
		got, _ := evalLoss(t, func(in []*Node) (*Node, Metrics) { return PairLoss(c.cfg, pairInputs(in)) }, pc.inputs()...)
		want, _ := evalLoss(t, func(in []*Node) (*Node, Metrics) { return c.direct(pairInputs(in)) }, pc.inputs()...)
		if got != want {
			t.Errorf("%+v: PairLoss %v, direct %v", c.cfg, got, want)
		}
	}
	defer func() {
		if recover() == nil {
			t.Errorf("PairLoss with kind kto did not panic")
		}
	}()
	evalLoss(t, func(in []*Node) (*Node, Metrics) {
		return PairLoss(losscfg.DefaultPreference(losscfg.PrefKTO), pairInputs(in))
	}, pc.inputs()...)
}

// TestPairLossesBoolMasks: Bool masks give the same losses and metrics as 0/1 float masks.
func TestPairLossesBoolMasks(t *testing.T) {
	pc := prefCases[2] // padding inside rows and a padding row
	toBool := func(in []*Node) []*Node {
		out := slices.Clone(in)
		out[1], out[3] = GreaterThan(in[1], ZerosLike(in[1])), GreaterThan(in[3], ZerosLike(in[3]))
		return out
	}
	for name, loss := range map[string]func(PrefPair) (*Node, Metrics){
		"dpo":   func(p PrefPair) (*Node, Metrics) { return DPO(p, 0.1, 0.1) },
		"ipo":   func(p PrefPair) (*Node, Metrics) { return IPO(p, 0.1, true) },
		"orpo":  func(p PrefPair) (*Node, Metrics) { return ORPO(p, 0.1) },
		"simpo": func(p PrefPair) (*Node, Metrics) { return SimPO(p, 2, 1, 0) },
	} {
		t.Run(name, func(t *testing.T) {
			want, wantM := evalLoss(t, func(in []*Node) (*Node, Metrics) { return loss(pairInputs(in)) }, pc.inputs()...)
			got, gotM := evalLoss(t, func(in []*Node) (*Node, Metrics) { return loss(pairInputs(toBool(in))) }, pc.inputs()...)
			checkLoss(t, got, gotM, want, wantM)
		})
	}
}
