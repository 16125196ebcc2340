package loss

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// mutations are deliberate bugs in the correction, CISPO and mismatch code, each with the tests that
// must catch it: a test that passes with the bug in place cannot fail, which is a defect.
var mutations = []struct {
	name, file, from, to, tests string
}{
	{"cispo: no stop-gradient on the clipped weight", "cispo.go",
		"weight := StopGradient(ClipScalar(ratio, 1-epsLow, 1+epsHigh))", "weight := ClipScalar(ratio, 1-epsLow, 1+epsHigh)", "TestCISPO"},
	{"cispo: clip sides swapped", "cispo.go",
		"weight := StopGradient(ClipScalar(ratio, 1-epsLow, 1+epsHigh))", "weight := StopGradient(ClipScalar(ratio, 1-epsHigh, 1+epsLow))", "TestCISPO"},
	{"cispo: ratio inverted", "cispo.go",
		"Sub(logp, StopGradient(oldLogp))", "Sub(StopGradient(oldLogp), logp)", "TestCISPO"},
	{"cispo: no gradient through log-prob", "cispo.go",
		"perToken = Neg(Mul(Mul(weight, a), logp))", "perToken = Neg(Mul(Mul(weight, a), StopGradient(logp)))", "TestCISPO"},
	{"cispo: sequence-mean instead of token-level normalisation", "losscfg/policy.go",
		"c.ClipLow, c.ClipHigh, c.KLBeta, c.Aggregation = 1, 3, 0, AggTokenMean", "c.ClipLow, c.ClipHigh, c.KLBeta, c.Aggregation = 1, 3, 0, AggSeqMeanTokenMean",
		"TestCISPOConfig|TestDefaultPolicyConfigs"},
	{"tis: clipped on the wrong side", "tis.go",
		"w = Exp(MinScalar(logRatio, logC))", "w = Exp(MaxScalar(logRatio, logC))", "TestTIS|TestOffPolicyCorrection|TestPolicyLossMatchesReference"},
	{"tis: no stop-gradient on the weight", "tis.go",
		"logRatio := StopGradient(Sub(oldLogp, behaviourLogp))", "logRatio := Sub(oldLogp, behaviourLogp)", "TestTIS|TestOffPolicyCorrectionHandComputed"},
	{"correction: no stop-gradient on the weight", "correction.go",
		"ClipScalar(StopGradient(Sub(oldLogp, behaviourLogp)), -maxLogRatio, maxLogRatio)", "ClipScalar(Sub(oldLogp, behaviourLogp), -maxLogRatio, maxLogRatio)",
		"TestOffPolicyCorrectionHandComputed"},
	{"correction: mask inverted", "correction.go",
		"inside := LogicalNot(LogicalOr(below, above))", "inside := LogicalOr(below, above)", "TestOffPolicyCorrection"},
	{"correction: bounds on the wrong sides", "correction.go",
		"below, above := LessThan(judged, lnLow), GreaterThan(judged, lnHigh)", "below, above := LessThan(judged, lnHigh), GreaterThan(judged, lnLow)",
		"TestOffPolicyCorrection"},
	{"geo_mask: mean over the batch axis instead of the sequence", "correction.go",
		"judged = BroadcastToDims(ExpandAxes(SeqMean(logRatio, mw), -1), logRatio.Shape().Dimensions...)",
		"judged = BroadcastToDims(ExpandAxes(Div(ReduceSum(Mul(logRatio, mw), 0), MaxScalar(ReduceSum(mw, 0), 1)), 0), logRatio.Shape().Dimensions...)",
		"TestOffPolicyCorrection"},
	{"mis: rejected tokens stay in the denominators", "correction.go",
		"keep = Mul(mw, in01) // rejected: out of every denominator", "keep = mw", "TestOffPolicyCorrection|TestPolicyLossMatchesReference"},
	{"mis, icepop: mask without the IS weight", "correction.go",
		"w = Where(inside, Exp(logRatio), zeros)", "w = Where(inside, ones, zeros)", "TestOffPolicyCorrection"},
	{"policy loss: aggregated under the completion mask, not the keep mask", "pg.go",
		"agg := func(x *Node) *Node { return Aggregate(x, mask, cfg.Aggregation, cfg.MaxLen) }",
		"agg := func(x *Node) *Node { return Aggregate(x, in.Mask, cfg.Aggregation, cfg.MaxLen) }", "TestPolicyLossMatchesReference"},
	{"policy loss: correction weight dropped", "pg.go",
		"perToken = Mul(perToken, weight)", "perToken = Mul(perToken, OnesLike(weight))", "TestPolicyLossMatchesReference|TestPolicyLossBitIdentical"},
	{"policy loss: tis_threshold alias ignored", "losscfg/policy.go",
		`if c.Correction.Mode == "" && c.TISThreshold > 0 {`, `if false && c.TISThreshold > 0 {`,
		"TestCorrectionConfig|TestPolicyLossBitIdentical|TestPolicyLossMatchesReference"},
	{"config: tis_threshold and correction.mode both accepted", "losscfg/policy.go",
		`case c.TISThreshold != 0 && c.Correction.Mode != "":`, `case false:`, "TestCorrectionConfig"},
	{"mismatch (graph): k3 sign", "mismatch.go",
		"tokenMean(Sub(Expm1(dc), dc), w)", "tokenMean(Add(Expm1(dc), dc), w)", "TestMismatch"},
	{"mismatch (graph): log-ratio inverted", "mismatch.go",
		"d := StopGradient(Sub(trainerLogp, behaviourLogp))", "d := StopGradient(Sub(behaviourLogp, trainerLogp))", "TestMismatch"},
	{"mismatch (graph): max over the padding", "mismatch.go",
		"ReduceAllMax(Where(counted, abs, ZerosLike(abs)))", "ReduceAllMax(Where(LogicalNot(counted), abs, ZerosLike(abs)))", "TestMismatch"},
	{"mismatch (plain Go): mask inverted", "mismatch.go",
		"if mask != nil && !mask[i] {", "if mask != nil && mask[i] {", "TestMismatch"},
	{"mismatch (plain Go): k3 of the wrong direction", "mismatch.go",
		"s.SumK3 += math.Expm1(dc) - dc", "s.SumK3 += math.Expm1(-dc) + dc", "TestMismatch"},
	{"mismatch (plain Go): merge adds maxima", "mismatch.go",
		"MaxAbs: math.Max(s.MaxAbs, o.MaxAbs)", "MaxAbs: s.MaxAbs + o.MaxAbs", "TestMismatch"},
	{"mismatch (plain Go): mask length unchecked", "mismatch.go",
		"if mask != nil && len(mask) != len(trainer) {", "if false {", "TestMismatchOfErrorsAndMerge"},
}

// TestMutationsAreCaught builds the package once per mutation with the mutated file swapped in
// (go test -overlay, so the source tree is never touched) and requires the mutation's tests to fail;
// a baseline run first requires them all to pass unmutated. It compiles the package ~20 times, so it
// runs only when asked:
//
//	TEMPER_MUTATIONS=1 go test -count=1 -run TestMutationsAreCaught ./algorithms/loss/
func TestMutationsAreCaught(t *testing.T) {
	if os.Getenv("TEMPER_MUTATIONS") == "" {
		t.Skip("set TEMPER_MUTATIONS=1 to run the mutation table (slow: one build per mutation)")
	}
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	env := []string{}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "TEMPER_MUTATIONS=") {
			env = append(env, kv)
		}
	}
	run := func(t *testing.T, tests string, overlay map[string]string) (string, bool) {
		t.Helper()
		args := []string{"test", "-short", "-count=1", "-timeout=300s", "-run", tests}
		if overlay != nil {
			js, err := json.Marshal(map[string]any{"Replace": overlay})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), "overlay.json")
			if err := os.WriteFile(path, js, 0o644); err != nil {
				t.Fatal(err)
			}
			args = append(args, "-overlay="+path)
		}
		cmd := exec.Command(goBin, append(args, ".")...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err == nil
	}
	var all []string
	for _, mu := range mutations {
		all = append(all, mu.tests)
	}
	if out, ok := run(t, strings.Join(all, "|"), nil); !ok {
		t.Fatalf("baseline: the tests fail without any mutation:\n%s", out)
	}
	for _, mu := range mutations {
		t.Run(mu.name, func(t *testing.T) {
			src, err := os.ReadFile(mu.file)
			if err != nil {
				t.Fatal(err)
			}
			if n := strings.Count(string(src), mu.from); n != 1 {
				t.Fatalf("%s: %q occurs %d times, want once (the mutation table is stale)", mu.file, mu.from, n)
			}
			mutated := filepath.Join(t.TempDir(), filepath.Base(mu.file))
			if err := os.WriteFile(mutated, []byte(strings.Replace(string(src), mu.from, mu.to, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			abs, err := filepath.Abs(mu.file)
			if err != nil {
				t.Fatal(err)
			}
			out, ok := run(t, mu.tests, map[string]string{abs: mutated})
			switch {
			case ok:
				t.Errorf("mutation survived: %s pass with %q → %q", mu.tests, mu.from, mu.to)
			case strings.Contains(out, "[build failed]") || strings.Contains(out, "[setup failed]"):
				t.Errorf("mutation does not build (fix the table):\n%s", out)
			case strings.Contains(out, "panic: test timed out"):
				t.Errorf("mutation hangs the tests instead of failing them:\n%s", out)
			default:
				var failed []string // the top-level tests that failed
				for _, line := range strings.Split(out, "\n") {
					if name, ok := strings.CutPrefix(line, "--- FAIL: "); ok {
						failed = append(failed, strings.Fields(name)[0])
					}
				}
				if len(failed) == 0 {
					failed = []string{"(panicked)"}
				}
				t.Logf("caught by %s", strings.Join(failed, ", "))
			}
		})
	}
}
