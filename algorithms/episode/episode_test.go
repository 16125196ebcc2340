package episode

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/algorithms/tools"
)

// scripted is a Generator for unit tests of the episode logic: it answers each context with
// policy(context text), as byte tokens with log-probability -0.5 each, and records the options.
type scripted struct {
	policy func(ctx string) string
	seeds  map[string][]uint64 // prompt text → seeds its turns were sampled with
	budget []int
}

func (s *scripted) Generate(prompts [][]int, opts sample.Options) ([]model.Completion, error) {
	var codec tokenize.Byte
	out := make([]model.Completion, len(prompts))
	s.budget = append(s.budget, opts.MaxNewTokens)
	for i, p := range prompts {
		text := codec.Decode(p)
		key, _, _ := strings.Cut(text, "\n")
		if s.seeds != nil {
			s.seeds[key] = append(s.seeds[key], opts.Seeds[i])
		}
		toks := codec.Encode(s.policy(text))
		if len(toks) > opts.MaxNewTokens {
			toks = toks[:opts.MaxNewTokens]
		}
		lp := make([]float32, len(toks))
		for j := range lp {
			lp[j] = -0.5
		}
		out[i] = model.Completion{Tokens: toks, LogProbs: lp, StopReason: sample.StopToken}
	}
	return out, nil
}

func registry(t *testing.T) *tools.Registry {
	t.Helper()
	r, err := tools.NewRegistry(tools.CalcTool(), tools.CheckTool(func(_ context.Context, a string) (bool, string, error) {
		if a == "83810205" {
			return true, "", nil
		}
		return false, "wrong product", nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

var cfg = Config{MaxTurns: 4, TurnTokens: 80, MaxTokens: 400}

// TestToolUseEpisode: the policy delegates the product to calc and copies the result; tool tokens
// are masked out and carry no behaviour log-probability.
func TestToolUseEpisode(t *testing.T) {
	gen := &scripted{policy: func(ctx string) string {
		if i := strings.LastIndex(ctx, DefaultToolOpen); i >= 0 {
			res := ctx[i+len(DefaultToolOpen):]
			res, _, _ = strings.Cut(res, "\n")
			return res
		}
		return `<tool>{"name":"calc","arguments":{"expr":"12345*6789"}}</tool>`
	}}
	var codec tokenize.Byte
	eps, err := Run(context.Background(), gen, codec, registry(t), [][]int{codec.Encode("12345*6789=\n")}, sample.Options{Seed: 1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ep := eps[0]
	if ep.End != EndAnswer || ep.Turns != 2 || len(ep.Calls) != 1 || ep.ToolErrors != 0 || ep.Final != "83810205" {
		t.Fatalf("episode: %+v", ep)
	}
	want := new(big.Int).Mul(big.NewInt(12345), big.NewInt(6789)).String()
	if ep.Calls[0].Result.Output != want {
		t.Fatalf("calc said %q, want %s", ep.Calls[0].Result.Output, want)
	}
	call := `<tool>{"name":"calc","arguments":{"expr":"12345*6789"}}</tool>`
	tool := DefaultToolOpen + want + DefaultToolClose
	if got := codec.Decode(ep.Tokens); got != call+tool+want {
		t.Fatalf("tokens spell %q", got)
	}
	if len(ep.Policy) != len(ep.Tokens) || len(ep.LogProbs) != len(ep.Tokens) {
		t.Fatalf("parallel slices differ: %d tokens, %d mask, %d logprobs", len(ep.Tokens), len(ep.Policy), len(ep.LogProbs))
	}
	for k := range ep.Tokens {
		inTool := k >= len(call) && k < len(call)+len(tool)
		if ep.Policy[k] == inTool {
			t.Fatalf("token %d (%q): policy=%v", k, codec.Decode(ep.Tokens[k:k+1]), ep.Policy[k])
		}
		if inTool != (ep.LogProbs[k] == 0) {
			t.Fatalf("token %d: logprob %g with policy=%v", k, ep.LogProbs[k], ep.Policy[k])
		}
	}
}

// TestSelfCorrection: the policy checks a wrong answer, reads the failure, checks the right one and
// answers; the episode records that it checked and that its last check passed.
func TestSelfCorrection(t *testing.T) {
	gen := &scripted{policy: func(ctx string) string {
		switch {
		case strings.Contains(ctx, DefaultToolOpen+"pass"):
			return "83810205"
		case strings.Contains(ctx, "fail: wrong product"):
			return `<tool>{"name":"check","arguments":{"answer":"83810205"}}</tool>`
		}
		return `<tool>{"name":"check","arguments":{"answer":"83810204"}}</tool>`
	}}
	var codec tokenize.Byte
	eps, err := Run(context.Background(), gen, codec, registry(t), [][]int{codec.Encode("12345*6789=\n")}, sample.Options{}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ep := eps[0]
	if ep.End != EndAnswer || ep.Turns != 3 || !ep.Checked || !ep.CheckPassed || ep.Final != "83810205" {
		t.Fatalf("episode: %+v", ep)
	}
	if ep.Calls[0].Result.Output != "fail: wrong product" || ep.Calls[1].Result.Output != "pass" {
		t.Fatalf("calls: %+v", ep.Calls)
	}
}

// TestToolErrorsAndLimits: malformed and refused calls are tool errors the policy reads; an
// episode that never answers ends at max_turns, and the token budget ends another.
func TestToolErrorsAndLimits(t *testing.T) {
	var codec tokenize.Byte
	gen := &scripted{policy: func(ctx string) string {
		switch {
		case strings.HasPrefix(ctx, "bad"):
			return `<tool>{"name":"calc","arguments":{"expr":"1/0"}}</tool>`
		case strings.HasPrefix(ctx, "malformed"):
			return `<tool>calc(1+1)</tool>`
		case strings.HasPrefix(ctx, "unknown"):
			return `<tool>{"name":"search","arguments":{}}</tool>`
		}
		return `<tool>{"name":"calc","arguments":{"expr":"` + strings.Repeat("1+", 30) + `1"}}</tool>`
	}}
	prompts := [][]int{codec.Encode("bad\n"), codec.Encode("malformed\n"), codec.Encode("unknown\n")}
	eps, err := Run(context.Background(), gen, codec, registry(t), prompts, sample.Options{}, Config{MaxTurns: 3, TurnTokens: 120, MaxTokens: 1000})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"division by zero", "not a JSON object", `unknown tool "search"`} {
		ep := eps[i]
		if ep.End != EndTurns || ep.Turns != 3 || ep.ToolErrors != 3 || !strings.Contains(ep.Calls[0].Result.Err, want) {
			t.Errorf("episode %d: end %s, %d turns, %d errors, first %+v; want an error containing %q", i, ep.End, ep.Turns, ep.ToolErrors, ep.Calls[0].Result, want)
		}
		if !strings.Contains(codec.Decode(ep.Tokens), DefaultToolOpen+"error: ") {
			t.Errorf("episode %d: the policy never saw the error", i)
		}
	}
	gen.budget = nil
	long, err := Run(context.Background(), gen, codec, registry(t), [][]int{codec.Encode("long\n")}, sample.Options{}, Config{MaxTurns: 10, TurnTokens: 120, MaxTokens: 250})
	if err != nil {
		t.Fatal(err)
	}
	// Turn 1 writes its call and gets "31" back; turn 2 may write only the tokens left, which cuts
	// its call short (a tool error), and the budget is spent.
	call := `<tool>{"name":"calc","arguments":{"expr":"` + strings.Repeat("1+", 30) + `1"}}</tool>`
	first := len(call) + len(DefaultToolOpen+"31"+DefaultToolClose)
	ep := long[0]
	if ep.End != EndTokens || ep.Turns != 2 || !slices.Equal(gen.budget, []int{120, 250 - first}) || ep.ToolErrors != 1 {
		t.Errorf("long episode: end %s after %d tokens, %d turns, budgets %v, %d tool errors", ep.End, len(ep.Tokens), ep.Turns, gen.budget, ep.ToolErrors)
	}
}

// TestSeedsFollowTheEpisode: with a seed per prompt, an episode's turns sample with the same seeds
// alone or in a batch, and different turns with different seeds.
func TestSeedsFollowTheEpisode(t *testing.T) {
	var codec tokenize.Byte
	policy := func(ctx string) string {
		if strings.Count(ctx, "<tool>") < 2 {
			return `<tool>{"name":"calc","arguments":{"expr":"2*3"}}</tool>`
		}
		return "6"
	}
	run := func(prompts []string, seeds []uint64) map[string][]uint64 {
		gen := &scripted{policy: policy, seeds: map[string][]uint64{}}
		ps := make([][]int, len(prompts))
		for i, p := range prompts {
			ps[i] = codec.Encode(p + "\n")
		}
		if _, err := Run(context.Background(), gen, codec, registry(t), ps, sample.Options{Seeds: seeds}, cfg); err != nil {
			t.Fatal(err)
		}
		return gen.seeds
	}
	batch := run([]string{"a", "b"}, []uint64{11, 22})
	alone := run([]string{"b"}, []uint64{22})
	if !slices.Equal(batch["b"], alone["b"]) || len(alone["b"]) != 3 {
		t.Fatalf("episode b's seeds: in a batch %v, alone %v", batch["b"], alone["b"])
	}
	if batch["b"][0] == batch["b"][1] || batch["a"][0] == batch["b"][0] {
		t.Fatalf("seeds repeat: %v %v", batch["a"], batch["b"])
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{TurnTokens: 1, MaxTokens: 1}, "max_turns"},
		{Config{MaxTurns: 1, MaxTokens: 1}, "turn_tokens"},
		{Config{MaxTurns: 1, TurnTokens: 5, MaxTokens: 4}, "max_tokens"},
		{Config{MaxTurns: 1, TurnTokens: 5, MaxTokens: 5, MaxToolChars: -1}, "max_tool_chars"},
	} {
		if err := c.cfg.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want an error naming %s", c.cfg, err, c.want)
		}
	}
	if _, err := Run(context.Background(), &scripted{}, tokenize.Byte{}, nil, nil, sample.Options{}, cfg); err == nil {
		t.Error("no registry accepted")
	}
}

// TestConcurrentCallsLandInOrder: the calls of one turn run at once (a slow tool does not hold up
// the others: all four are in flight together), each knows its episode and turn, and the episodes
// come out as if the calls had run one after another.
func TestConcurrentCallsLandInOrder(t *testing.T) {
	var mu sync.Mutex
	inFlight, most := 0, 0
	seen := map[string]bool{}
	gate := make(chan struct{})
	slow := tools.Tool{Name: "slow", LongRunning: true, Run: func(ctx context.Context, args json.RawMessage) (string, error) {
		i, _ := Index(ctx)
		turn, _ := Turn(ctx)
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		seen[fmt.Sprintf("%d/%d", i, turn)] = true
		if inFlight == 4 {
			close(gate)
		}
		mu.Unlock()
		select {
		case <-gate:
		case <-time.After(5 * time.Second):
		}
		mu.Lock()
		inFlight--
		mu.Unlock()
		return fmt.Sprintf("r%d", i), nil
	}}
	reg, err := tools.NewRegistry(slow)
	if err != nil {
		t.Fatal(err)
	}
	var codec tokenize.Byte
	g := &scripted{policy: func(ctx string) string {
		if strings.Contains(ctx, DefaultToolOpen) {
			return "done"
		}
		return `<tool>{"name":"slow"}</tool>`
	}}
	prompts := [][]int{codec.Encode("a\n"), codec.Encode("b\n"), codec.Encode("c\n"), codec.Encode("d\n")}
	eps, err := Run(context.Background(), g, codec, reg, prompts, sample.Options{Seed: 1}, Config{MaxTurns: 2, TurnTokens: 40, MaxTokens: 200})
	if err != nil {
		t.Fatal(err)
	}
	if most != 4 || len(seen) != 4 || !seen["3/0"] {
		t.Fatalf("calls in flight at once %d, sites %v: want 4 concurrent calls of turn 0", most, seen)
	}
	for i, ep := range eps {
		want := `<tool>{"name":"slow"}</tool>` + DefaultToolOpen + fmt.Sprintf("r%d", i) + DefaultToolClose + "done"
		if got := codec.Decode(ep.Tokens); got != want || ep.End != EndAnswer {
			t.Fatalf("episode %d: %q (%s), want %q", i, got, ep.End, want)
		}
	}
}

// TestMaxContext: an episode with no room left in the model's context for a whole turn ends
// (EndTokens) instead of asking the model for more than its context holds; the others go on.
func TestMaxContext(t *testing.T) {
	reg := registry(t)
	var codec tokenize.Byte
	long := strings.Repeat("x", 60)
	g := &scripted{policy: func(ctx string) string {
		if strings.Count(ctx, DefaultToolOpen) >= 3 {
			return "done"
		}
		return `<tool>{"name":"calc","arguments":{"expr":"1+1"}}</tool>`
	}}
	cfg := Config{MaxTurns: 6, TurnTokens: 48, MaxTokens: 1000, MaxContext: 200}
	eps, err := Run(context.Background(), g, codec, reg, [][]int{codec.Encode("a\n"), codec.Encode(long + "\n")}, sample.Options{Seed: 1}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i, ep := range eps {
		n := len(codec.Encode("a\n")) + len(ep.Tokens)
		if i == 1 {
			n += len(long)
		}
		if ep.End != EndTokens || n > cfg.MaxContext {
			t.Errorf("episode %d: end %s, %d tokens of context: want EndTokens within %d", i, ep.End, n, cfg.MaxContext)
		}
	}
	if eps[1].Turns >= eps[0].Turns {
		t.Errorf("the long prompt's episode had %d turns, the short one %d: want fewer", eps[1].Turns, eps[0].Turns)
	}
	for _, b := range g.budget {
		if b > cfg.TurnTokens {
			t.Errorf("asked for %d tokens in a turn", b)
		}
	}
}
