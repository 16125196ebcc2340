package bench

import (
	"context"
	"os"
	"regexp"
	"strconv"
	"testing"

	"github.com/temperml/temper/algorithms/loss"
)

// syncMismatchClaim is the figure docs/benchmarks.md claims for sync-mode mismatch: the line
// "sync-mode mismatch claim: abs_max ≤ X" in its bench rl section.
func syncMismatchClaim(t *testing.T) float64 {
	t.Helper()
	doc, err := os.ReadFile("../../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`sync-mode mismatch claim: abs_max ≤ ([0-9.eE+-]+)`).FindSubmatch(doc)
	if m == nil {
		t.Fatal(`docs/benchmarks.md states no "sync-mode mismatch claim: abs_max ≤ X"`)
	}
	claim, err := strconv.ParseFloat(string(m[1]), 64)
	if err != nil {
		t.Fatalf("docs/benchmarks.md's sync-mode mismatch claim %q: %v", m[1], err)
	}
	return claim
}

// TestRLSyncMismatchWithinClaim runs a small `bench rl` on a real in-process stack (a tiny model,
// a short SFT, three GRPO iterations each of sync, async and deep async) and fails if the sync-mode mismatch of its rollouts
// (the rollout engine's log-probs against the trainer's) exceeds what docs/benchmarks.md claims, or
// if the async phase reports no stale rollouts (the split would then prove nothing).
func TestRLSyncMismatchWithinClaim(t *testing.T) {
	if testing.Short() {
		t.Skip("a real stack and three RL iterations each way")
	}
	claim := syncMismatchClaim(t)
	in, err := RLPipeline(3, `{"prompts":8,"group":4,"max_new_tokens":16}`)
	if err != nil {
		t.Fatal(err)
	}
	if in.Phases[0].Config, err = mergeJSON(string(in.Phases[0].Config), `{"steps":20,"chunk_steps":20}`); err != nil {
		t.Fatal(err)
	}
	rep, err := runRL(context.Background(), RLOptions{Iterations: 3}, in)
	if err != nil {
		t.Fatal(err)
	}
	v := rep.Values
	t.Logf("%v", v)
	const sync, stale, deep = "sync_fresh_mismatch_", "async_stale_mismatch_", "deep_stale_mismatch_"
	if v[sync+loss.MismatchTokens] == 0 || v[stale+loss.MismatchTokens] == 0 || v[deep+loss.MismatchTokens] == 0 {
		t.Fatalf("sync fresh tokens %v, async stale tokens %v, deep stale tokens %v: want all measured",
			v[sync+loss.MismatchTokens], v[stale+loss.MismatchTokens], v[deep+loss.MismatchTokens])
	}
	if got := v[sync+loss.MismatchAbsMax]; !(got <= claim) {
		t.Errorf("sync-mode mismatch abs_max %.3g exceeds the %.3g docs/benchmarks.md claims", got, claim)
	}
}
