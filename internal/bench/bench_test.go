package bench

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/temperml/temper/internal/usage"
)

// TestReportsPrint: each pipeline benchmark's report prints its figures as text and as the one JSON
// object scripts read (keys as before the move to this package).
func TestReportsPrint(t *testing.T) {
	rl := &RLReport{Iterations: 3, Values: map[string]float64{"iterations": 3, "sync_seconds_per_iteration": 2, "async_seconds_per_iteration": 1.5,
		"async_over_sync": 0.75, "sync_seconds_generate_wait": 1, "sync_seconds_score": 0.25, "sync_seconds_policy_step": 0.5,
		"async_seconds_generate_wait": 0.5, "async_seconds_score": 0.25, "async_seconds_policy_step": 0.5,
		"sync_fresh_mismatch_abs_mean": 2e-7, "sync_fresh_mismatch_abs_max": 9.5e-7, "sync_fresh_mismatch_tokens": 1200,
		"async_stale_mismatch_abs_mean": 0.012, "async_stale_mismatch_abs_max": 0.5, "async_stale_mismatch_tokens": 1100}}
	ro := &RolloutReport{Iterations: 4, Workers: []int{1, 2}, Values: map[string]float64{"iterations": 4,
		"workers_1_generate_seconds": 2, "workers_1_speedup": 1, "workers_1_shards": 4, "workers_1_reward_mean": 0.1,
		"workers_2_generate_seconds": 1.25, "workers_2_speedup": 1.6, "workers_2_shards": 4, "workers_2_reward_mean": 0.1}}
	di := &DistillReport{Arms: []DistillArm{{Seed: 1, Arm: "sft", Final: 0.5, Steps: 100, Seconds: 60}}, Summary: DistillSummary{TeacherEM: -1, Seconds: 60}}
	for _, c := range []struct {
		name     string
		rep      Report
		text     []string
		jsonKeys []string
	}{
		{"rl", rl, []string{"GRPO, 3 iterations each", "  sync   2.000 s/iteration (generate 1.000, score 0.250, policy step 0.500)",
			"  async  1.500 s/iteration", "  async/sync = 0.75", "  sync          mean 2e-07  max 9.5e-07  k3 0  out 0  (1200 tokens)",
			"  async, stale  mean 0.012  max 0.5"}, []string{"async_over_sync", "sync_seconds_policy_step", "sync_fresh_mismatch_abs_max"}},
		{"rollout", ro, []string{"median of iterations 2..4", "  2 worker(s): 1.250 s (4 shards)  speed-up 1.60× vs 1"}, []string{"workers_2_speedup", "iterations"}},
		{"distill", di, []string{"  sft/1             100       60      0.500"}, []string{"arms", "summary"}},
	} {
		var b bytes.Buffer
		c.rep.Text(&b)
		for _, w := range c.text {
			if !strings.Contains(b.String(), w) {
				t.Errorf("%s: text lacks %q:\n%s", c.name, w, b.String())
			}
		}
		js, err := c.rep.JSON()
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var m map[string]any
		if err := json.Unmarshal(js, &m); err != nil {
			t.Fatalf("%s: %v\n%s", c.name, err, js)
		}
		for _, k := range c.jsonKeys {
			if _, ok := m[k]; !ok {
				t.Errorf("%s: JSON lacks %q: %s", c.name, k, js)
			}
		}
	}
}

func TestMergeJSON(t *testing.T) {
	for _, c := range []struct{ base, extra, want string }{
		{`{"a":1,"b":{"c":2,"d":3}}`, ``, `{"a":1,"b":{"c":2,"d":3}}`},
		{`{"a":1,"b":{"c":2,"d":3}}`, `{"b":{"c":5},"e":true}`, `{"a":1,"b":{"c":5,"d":3},"e":true}`},
		{`{"a":{"b":1}}`, `{"a":7}`, `{"a":7}`},
	} {
		got, err := mergeJSON(c.base, c.extra)
		if err != nil || string(got) != c.want {
			t.Errorf("mergeJSON(%s, %s) = %s, %v; want %s", c.base, c.extra, got, err, c.want)
		}
	}
	if _, err := mergeJSON(`{}`, `{"a":`); err == nil {
		t.Error("a malformed override must be an error")
	}
}

func TestParseCounts(t *testing.T) {
	if got, err := parseCounts("1, 2"); err != nil || !reflect.DeepEqual(got, []int{1, 2}) {
		t.Errorf("parseCounts(1, 2) = %v, %v", got, err)
	}
	for _, bad := range []string{"0", "x", "1,", "99999"} {
		if _, err := parseCounts(bad); !usage.Is(err) || !strings.Contains(err.Error(), "--rollout-workers") {
			t.Errorf("parseCounts(%q): %v, want a usage error naming the flag", bad, err)
		}
	}
}
