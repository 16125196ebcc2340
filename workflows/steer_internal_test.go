package workflows

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestConditions: when: expressions parse and evaluate as written (precedence: not, and, or).
func TestConditions(t *testing.T) {
	vals := map[string]float64{"em": 0.5, "loss": 2, "sft.em": 0.25}
	for _, c := range []struct {
		expr    string
		want    bool
		metrics string
	}{
		{"em >= 0.5", true, "em"},
		{"em > 0.5", false, "em"},
		{"em < 0.6 and loss <= 2", true, "em,loss"},
		{"em < 0.4 or loss == 2", true, "em,loss"},
		{"em < 0.4 or loss == 2 and em > 1", false, "em,loss,em"},
		{"(em < 0.4 or loss == 2) and em > 0.1", true, "em,loss,em"},
		{"not em > 0.4", false, "em"},
		{"!(em != 0.5) && sft.em < .3", true, "em,sft.em"},
		{"0.5 <= em || -1e3 > loss", true, "em,loss"},
		{"loss == 2.0e0", true, "loss"},
	} {
		cond, err := parseCondition(c.expr)
		if err != nil {
			t.Errorf("%q: %v", c.expr, err)
			continue
		}
		if got := cond.eval(vals); got != c.want {
			t.Errorf("%q = %v, want %v", c.expr, got, c.want)
		}
		if got := strings.Join(cond.metrics(nil), ","); got != c.metrics {
			t.Errorf("%q reads %s, want %s", c.expr, got, c.metrics)
		}
	}
	for _, c := range []struct{ expr, want string }{
		{"", "empty condition"},
		{"em", `at 2: want a comparison (<, <=, >, >=, ==, !=) after "em", got the end`},
		{"em >", "at 4: want a number or a metric name, got the end"},
		{"em = 1", `at 3: unexpected "=" (compare with ==)`},
		{"em > 1 loss < 2", `at 7: unexpected "loss" after a complete condition`},
		{"(em > 1", "at 7: want ) to close"},
		{"em > 1 and", "want a number or a metric name, got the end"},
		{"em >= $x", `at 6: unexpected "$"`},
	} {
		_, err := parseCondition(c.expr)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want %q", c.expr, err, c.want)
		}
	}
}

// TestChangePlan: a set is checked against the kind's live fields and the effective config, and
// answers each field's old and new value.
func TestChangePlan(t *testing.T) {
	rl := json.RawMessage(`{"data":{"task":"add2"},"iterations":20,"optimizer":{"lr":0.0003},"reward":{"verifiers":[{"name":"exact"},{"name":"digits","as":"dig","weight":0.5}]}}`)
	before := []Assignment{{Key: "loss.kl_beta", Path: "loss.kl_beta", Value: 0.1}}
	for _, c := range []struct {
		kind, set string
		at        int
		changes   string // key old→new, or the error's words
	}{
		{"grpo", "optimizer.lr=1e-4", 5, "optimizer.lr 0.0003→0.0001"},
		{"grpo", "loss.kl_beta=0.02", 5, "loss.kl_beta 0.1→0.02"},
		{"grpo", "reward.verifiers.dig.weight=2", 5, "reward.verifiers.dig.weight 0.5→2"},
		{"grpo", "reward.verifiers.exact.weight=3", 5, "reward.verifiers.exact.weight 1→3"},
		{"grpo", "iterations=30", 5, "iterations 20→30"},
		{"grpo", "iterations=5", 5, "iterations 20→5"},
		{"grpo", "iterations=4", 5, "iterations: 4: want >= 5"},
		{"grpo", "iterations=4", -1, "iterations 20→4"},
		{"grpo", "iterations=2.5", 0, "iterations: 2.5: want an integer >= 1"},
		{"grpo", "loss.clip_low=1", 0, "loss.clip_low: 1: want 0 <= clip_low < 1"},
		{"grpo", "reward.verifiers.math.weight=1", 0, `no verifier labelled "math" (labels: exact, dig)`},
		{"grpo", "model.layers=2", 0, "model.layers: not a live field"},
		{"grpo", "group=4", 0, "group: not a live field"},
		{"grpo", "optimizer.lr", 0, "want key=value"},
		{"sft", "steps=400", 100, "steps 200→400"},
		{"sft", "eval.every_chunks=2", 0, "eval.every_chunks 0→2"},
		{"sft", "temperature=1", 0, "temperature: not a live field"},
		{"search", "iterations=3", 0, "a search phase takes no live changes"},
	} {
		raw := rl
		if c.kind != "grpo" {
			raw = json.RawMessage(`{"data":{"task":"add2"}}`)
		}
		b := before
		if c.kind != "grpo" {
			b = nil
		}
		_, changes, err := changePlan("p", c.kind, raw, b, []string{c.set}, c.at)
		got := ""
		if err != nil {
			got = err.Error()
		}
		for _, ch := range changes {
			got += ch.Key + " " + ch.Old + "→" + ch.New
		}
		if !strings.Contains(got, c.changes) {
			t.Errorf("%s %s at %d: %q, want %q", c.kind, c.set, c.at, got, c.changes)
		}
	}
}
