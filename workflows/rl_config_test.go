package workflows

import (
	"strings"
	"testing"
)

// TestRLLearningRateSchedule: optimizer.warmup_steps and min_lr_ratio reach the policy step, which
// computes the rate (train.PolicyLR, tested in activities/train); the default warms up over 20
// iterations (every RL phase starts with a fresh AdamW), then stays constant.
func TestRLLearningRateSchedule(t *testing.T) {
	c, err := DecodePhaseConfig("grpo", []byte(`{"data":{"task":"add2"},"iterations":10,"optimizer":{"lr":0.001,"warmup_steps":4,"min_lr_ratio":0.1}}`), "config")
	if err != nil {
		t.Fatal(err)
	}
	if o := c.(*RLConfig).Optimizer; o.LR != 0.001 || o.WarmupSteps != 4 || o.MinLRRatio != 0.1 {
		t.Errorf("optimizer %+v: want lr 0.001, warmup_steps 4, min_lr_ratio 0.1", o)
	}
	d, _ := DecodePhaseConfig("grpo", []byte(`{"data":{"task":"add2"},"optimizer":{"lr":0.001}}`), "config")
	if o := d.(*RLConfig).Optimizer; o.WarmupSteps != 20 || o.MinLRRatio != 1 {
		t.Errorf("default optimizer warmup_steps %d, min_lr_ratio %g: want 20, 1", o.WarmupSteps, o.MinLRRatio)
	}
}

// TestRLSelfCorrectConfig: self_correct's bad values name their field and the allowed range.
func TestRLSelfCorrectConfig(t *testing.T) {
	for _, tc := range []struct{ cfg, path string }{
		{`{"retries": 2}`, ""},
		{`{"retries": 0, "max_samples": 0}`, ""},
		{`{"retries": 9}`, "self_correct.retries"},
		{`{"retries": -1}`, "self_correct.retries"},
		{`{"retries": 1, "max_samples": 0}`, "self_correct.max_samples"},
	} {
		_, err := DecodePhaseConfig("grpo", []byte(`{"data":{"task":"add2"},"self_correct":`+tc.cfg+`}`), "config")
		switch {
		case tc.path == "" && err != nil:
			t.Errorf("%s: %v", tc.cfg, err)
		case tc.path != "" && (err == nil || !strings.Contains(err.Error(), tc.path)):
			t.Errorf("%s: got %v, want an error naming %s", tc.cfg, err, tc.path)
		}
	}
}

// TestAgenticConfig: rollout.tools and eval.tools accept the built-in tools only, name the bad
// entry and its allowed values, and episode bounds need tools; an agentic phase evaluates with its
// rollout tools unless eval.tools says otherwise.
func TestAgenticConfig(t *testing.T) {
	for _, tc := range []struct{ cfg, path string }{
		{`"rollout":{"tools":["calc","check"],"max_turns":3}`, ""},
		{`"rollout":{"tools":["calc"]},"eval":{"tools":["calc"],"max_turns":2}`, ""},
		{`"rollout":{"tools":["calc","python3"]}`, "rollout.tools[1]"},
		{`"rollout":{"tools":["calc","python"]}`, ""},
		{`"rollout":{"tools":["calc","calc"]}`, "rollout.tools[1]"},
		{`"rollout":{"max_turns":3}`, "rollout.tools"},
		{`"rollout":{"tools":["calc"],"max_turns":99}`, "rollout.max_turns"},
		{`"rollout":{"tools":["calc"],"max_tokens":-1}`, "rollout.max_tokens"},
		{`"eval":{"tools":["lookup"]}`, "eval.tools[0]"}, // bigmul has no corpus
		{`"eval":{"tools":["search"]}`, "eval.tools[0]"},
		{`"rollout":{"tools":["check"]},"self_correct":{"retries":1}`, "self_correct.retries"},
	} {
		c, err := DecodePhaseConfig("grpo", []byte(`{"data":{"task":"bigmul"},`+tc.cfg+`}`), "config")
		switch {
		case tc.path == "" && err != nil:
			t.Errorf("%s: %v", tc.cfg, err)
		case tc.path != "" && (err == nil || !strings.Contains(err.Error(), tc.path)):
			t.Errorf("%s: got %v, want an error naming %s", tc.cfg, err, tc.path)
		case tc.path == "":
			cfg := c.(*RLConfig)
			if len(cfg.evalTools()) == 0 {
				t.Errorf("%s: evaluations without tools", tc.cfg)
			}
		}
	}
	if _, err := DecodePhaseConfig("grpo", []byte(`{"data":{"task":"route"},"rollout":{"tools":["image","video","audio","layout"]}}`), "config"); err != nil {
		t.Errorf("the studio engines on route: %v", err)
	}
	if _, err := DecodePhaseConfig("grpo", []byte(`{"data":{"task":"facts"},"rollout":{"tools":["lookup","check"]}}`), "config"); err != nil {
		t.Errorf("lookup on facts: %v", err)
	}
	if _, err := DecodePhaseConfig("sft", []byte(`{"data":{"task":"add2"},"eval":{"tools":["lookup"]}}`), "config"); err == nil || !strings.Contains(err.Error(), "eval.tools[0]") {
		t.Errorf("sft evaluating with lookup on add2: %v", err)
	}
	for _, tc := range []struct {
		cfg  string
		want int
	}{
		{`"max_new_tokens":72,"rollout":{"tools":["calc"]}`, 72},                               // episodes like the rollouts'
		{`"max_new_tokens":72,"rollout":{"tools":["calc"]},"eval":{"max_new_tokens":96}}`, 96}, // a larger budget stays
		{`"max_new_tokens":72,"rollout":{"tools":["calc"]},"eval":{"tools":["calc"]}}`, 8},     // its own tools: its own budget
		{`"max_new_tokens":72`, 8},
	} {
		c, err := DecodePhaseConfig("grpo", []byte(`{"data":{"task":"bigmul"},`+tc.cfg+`}`), "config")
		if err != nil {
			t.Fatal(err)
		}
		if got := c.(*RLConfig).evalMaxNewTokens(); got != tc.want {
			t.Errorf("%s: evaluation budget %d, want %d", tc.cfg, got, tc.want)
		}
	}
	if _, err := DecodePhaseConfig("sft", []byte(`{"data":{"task":"add2","tool_demos":true}}`), "config"); err == nil || !strings.Contains(err.Error(), "data.tool_demos") {
		t.Errorf("tool_demos on a task without demonstrations: %v", err)
	}
	if _, err := DecodePhaseConfig("sft", []byte(`{"data":{"task":"bigmul","tool_demos":true},"eval":{"tools":["calc"]}}`), "config"); err != nil {
		t.Errorf("sft on bigmul demonstrations: %v", err)
	}
}

// TestAgentConfig: rollout.agent's bad fields, and the settings an agent phase cannot honour, are
// refused naming the field and what is allowed; unknown fields inside it too.
func TestAgentConfig(t *testing.T) {
	for _, tc := range []struct{ cfg, path, msg string }{
		{`"max_new_tokens":72,"rollout":{"agent":{"command":["python3","agent.py"],"dir":"scripts/agents/python","timeout":"30s","retries":2,"env":{"A_B":"1"}}}`, "", ""},
		{`"rollout":{"agent":{"command":["node","agent.mjs"],"max_calls":4,"memory_mib":256,"address_space_gib":16}},"kind":"ppo"`, "", ""},
		{`"rollout":{"agent":{}}`, "rollout.agent.command", "required"},
		{`"rollout":{"agent":{"command":[""]}}`, "rollout.agent.command", "required"},
		{`"rollout":{"agent":{"command":["a"],"timeout":"10ms"}}`, "rollout.agent.timeout", "1s to 1h"},
		{`"rollout":{"agent":{"command":["a"],"timeout":"2h"}}`, "rollout.agent.timeout", "1s to 1h"},
		{`"rollout":{"agent":{"command":["a"],"retries":11}}`, "rollout.agent.retries", "0 to 10"},
		{`"rollout":{"agent":{"command":["a"],"max_calls":-1}}`, "rollout.agent.max_calls", "1024"},
		{`"rollout":{"agent":{"command":["a"],"memory_mib":8}}`, "rollout.agent.memory_mib", "16 to 65536"},
		{`"rollout":{"agent":{"command":["a"],"address_space_gib":2000}}`, "rollout.agent.address_space_gib", "1024"},
		{`"rollout":{"agent":{"command":["a"],"env":{"OPENAI_BASE_URL":"x"}}}`, "rollout.agent.env", "the gateway's"},
		{`"rollout":{"agent":{"command":["a"],"env":{"1X":"x"}}}`, "rollout.agent.env", "not a variable name"},
		{`"rollout":{"agent":{"command":["a"],"cwd":"/"}}`, "rollout.agent.cwd", ""},
		{`"rollout":{"agent":{"command":["a"]},"tools":["calc"]}`, "rollout.agent", "rollout.tools"},
		{`"rollout":{"agent":{"command":["a"]}},"self_correct":{"retries":1}`, "self_correct.retries", "agent"},
		{`"rollout":{"agent":{"command":["a"]}},"eval":{"tools":["calc"]}`, "eval.tools", "by its agent"},
		{`"rollout":{"agent":{"command":["a"]}},"eval":{"pass_k":4}`, "eval.pass_k", "want 1"},
	} {
		kind, body := "grpo", tc.cfg
		if strings.HasSuffix(body, `,"kind":"ppo"`) {
			kind, body = "ppo", strings.TrimSuffix(body, `,"kind":"ppo"`)
		}
		c, err := DecodePhaseConfig(kind, []byte(`{"data":{"task":"bigmul"},`+body+`}`), "config")
		switch {
		case tc.path == "" && err != nil:
			t.Errorf("%s: %v", tc.cfg, err)
		case tc.path != "" && (err == nil || !strings.Contains(err.Error(), tc.path) || !strings.Contains(err.Error(), tc.msg)):
			t.Errorf("%s: got %v, want an error naming %s (%q)", tc.cfg, err, tc.path, tc.msg)
		case tc.path == "":
			if cfg := c.(*RLConfig); cfg.evalMaxNewTokens() != cfg.MaxNewTokens || len(cfg.evalTools()) != 0 {
				t.Errorf("%s: evaluation budget %d (want max_new_tokens %d), tools %v", tc.cfg, cfg.evalMaxNewTokens(), cfg.MaxNewTokens, cfg.evalTools())
			}
		}
	}
}

// TestCISPOKind: cispo is an RL phase kind with CISPO's loss defaults (MiniMax-M1: no lower bound on
// the IS weight, the weight capped at 1+3, token-mean), and a grpo phase may also choose it.
func TestCISPOKind(t *testing.T) {
	if _, ok := LookupPhase("cispo"); !ok {
		t.Fatal("no cispo phase kind")
	}
	c, err := DecodePhaseConfig("cispo", []byte(`{"data":{"task":"add2"}}`), "config")
	if err != nil {
		t.Fatal(err)
	}
	if l := c.(*RLConfig).Loss; l.Algorithm != "cispo" || l.ClipLow != 1 || l.ClipHigh != 3 || l.KLBeta != 0 || l.Aggregation != "token-mean" {
		t.Errorf("cispo defaults %+v", l)
	}
	if _, err := DecodePhaseConfig("grpo", []byte(`{"data":{"task":"add2"},"loss":{"algorithm":"cispo","clip_low":1,"clip_high":3}}`), "config"); err != nil {
		t.Errorf("grpo phase with loss.algorithm cispo: %v", err)
	}
}

// TestRLSamplingConfig: the sampling block's bad values name their field and the allowed values;
// stop strings with tools are refused by name.
func TestRLSamplingConfig(t *testing.T) {
	for _, tc := range []struct{ cfg, want string }{
		{`"sampling":{"top_p":0.9,"top_k":20,"min_p":0.05,"repetition_penalty":1.1,"stop":["\n\n"]}`, ""},
		{`"sampling":{"top_p":1.5}`, "top_p"},
		{`"sampling":{"top_k":-1}`, "top_k"},
		{`"sampling":{"min_p":2}`, "min_p"},
		{`"sampling":{"repetition_penalty":-1}`, "repetition_penalty"},
		{`"sampling":{"stop":[""]}`, "stop"},
		{`"sampling":{"stop":["x"]},"rollout":{"tools":["calc"]}`, "sampling.stop"},
		{`"sampling":{"typical_p":0.9}`, "typical_p"},
	} {
		_, err := DecodePhaseConfig("grpo", []byte(`{"data":{"task":"add2"},`+tc.cfg+`}`), "config")
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.cfg, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: got %v, want an error naming %s", tc.cfg, err, tc.want)
		}
	}
}

// TestOnlineDPOConfig: online_dpo's loss is under preference (dpo or ipo), and settings only the
// policy-gradient step reads are refused by name; no other kind takes preference.
func TestOnlineDPOConfig(t *testing.T) {
	for _, tc := range []struct{ kind, cfg, path string }{
		{KindOnlineDPO, `{}`, ""},
		{KindOnlineDPO, `{"preference":{"kind":"ipo","beta":0.5},"group":4}`, ""},
		{KindOnlineDPO, `{"preference":{"kind":"kto"}}`, "preference.kind"},
		{KindOnlineDPO, `{"preference":{"beta":-1}}`, "preference"},
		{KindOnlineDPO, `{"preference":null}`, "preference"},
		{KindOnlineDPO, `{"loss":{"kl_beta":0.1}}`, "loss"},
		{KindOnlineDPO, `{"dynamic_sampling":true}`, "dynamic_sampling"},
		{KindOnlineDPO, `{"group":1}`, "group"},
		{KindOnlineDPO, `{"rollout":{"tools":["calc"]}}`, "rollout"},
		{"grpo", `{"preference":{"kind":"dpo"}}`, "preference"},
	} {
		_, err := DecodePhaseConfig(tc.kind, []byte(`{"data":{"task":"add2"},`+tc.cfg[1:]), "config")
		switch {
		case tc.path == "" && err != nil:
			t.Errorf("%s %s: %v", tc.kind, tc.cfg, err)
		case tc.path != "" && (err == nil || !strings.Contains(err.Error(), "config."+tc.path+":")):
			t.Errorf("%s %s: got %v, want an error naming %s", tc.kind, tc.cfg, err, tc.path)
		}
	}
	c, _ := DecodePhaseConfig(KindOnlineDPO, []byte(`{"data":{"task":"add2"}}`), "config")
	if rc := c.(*RLConfig); rc.Group != 2 || rc.Preference.Kind != "dpo" || rc.Preference.BetaOrDefault() != 0.1 {
		t.Errorf("defaults: group %d, preference %+v; want 2, dpo with β 0.1", rc.Group, rc.Preference)
	}
}
