package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/reward/sandbox"
	"github.com/temperml/temper/activities/rollout/agenttest"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/internal/pipeline"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// agentBasePipeline is the agentic SFT base (agenticSFTConfig: the tiny model taught the tool-call
// template on bigmul demonstrations) that the agent phases start from.
func agentBasePipeline(store string) workflows.PipelineInput {
	return workflows.PipelineInput{Name: "agent-base", Store: store, Seed: 3, Phases: []workflows.PhaseSpec{
		{Name: "sft", Kind: "sft", Config: json.RawMessage(agenticSFTConfig)},
	}}
}

// agentGRPOConfig is a GRPO phase on bigmul whose rollouts are the Python example agent's episodes
// (scripts/agents/python, its own calculator) against the policy; extra is spliced into
// rollout.agent, rest into the phase.
func agentGRPOConfig(t *testing.T, iterations, heldout int, extra, rest string) string {
	t.Helper()
	dir, err := filepath.Abs("../../scripts/agents/python")
	if err != nil {
		t.Fatal(err)
	}
	return agentGRPOConfigIn(dir, "agent.py", iterations, heldout, extra, rest)
}

// agentGRPOConfigIn is agentGRPOConfig with the Python program script of directory dir as the agent.
func agentGRPOConfigIn(dir, script string, iterations, heldout int, extra, rest string) string {
	d, _ := json.Marshal(dir)
	return fmt.Sprintf(`{"data":{"task":"bigmul","heldout_examples":%d},"mode":"sync","iterations":%d,"prompts":4,"group":4,
	"max_new_tokens":64,"rollout":{"agent":{"command":["python3",%q],"dir":%s,"retries":1,"timeout":"2m"%s}},
	%s,"heartbeat_timeout":"10s"}`, heldout, iterations, script, d, extra, rest)
}

// agentStack skips under -short outside CI (why says what the test does) and where there is no
// sandbox, starts every role on the embedded stack, and returns it, a fresh store directory and a
// run-id prefix unique to this run.
func agentStack(t *testing.T, why, prefix string) (env *testenv.Env, dir, ids string) {
	t.Helper()
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip(why + "; runs in CI and without -short")
	}
	agentSandbox(t)
	env = testenv.Get(t)
	env.Roles(t)
	return env, t.TempDir(), fmt.Sprintf("%s-%d", prefix, time.Now().UnixNano())
}

// agentSandbox skips a test where the agent cannot run: it needs the isolated code sandbox with python.
func agentSandbox(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("agent episodes run in the isolated sandbox: Linux, as root")
	}
	sb, err := sandbox.New(sandbox.Config{BaseDir: t.TempDir()})
	if errors.Is(err, sandbox.ErrUnavailable) {
		t.Skipf("no sandbox: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	if sb.Mode() != sandbox.ModeIsolated || sb.Config().Python == "" {
		t.Skipf("agent episodes need the isolated sandbox with python (%s %s)", sb.Mode(), sb.ModeReason())
	}
}

// toolGap is what lies between two model-written runs of one trajectory: the tool message the
// agent sent and the template's turn markers, nothing the model wrote.
var toolGap = regexp.MustCompile(`^\n<\|tool\|>\n[^\n]*\n<\|assistant\|>\n$`)

// TestAgentGRPOPipeline runs a GRPO phase whose rollouts are the Python example agent's episodes on
// the embedded stack (every role in this process, the agent in the code sandbox), from the agentic
// SFT base, and checks its first iteration's rollouts, which the policy step trains on: every
// model-written token and its behaviour log-probability is exactly what the server returned to the
// agent (the agent prints each response after its answer), the loss mask (the policy marks) covers
// those tokens only (the gaps are the tool messages, log-prob 0), and the run reports its agent
// metrics (no failure, no dropped group).
func TestAgentGRPOPipeline(t *testing.T) {
	env, dir, ids := agentStack(t, "trains a base model and runs agents", "agent-grpo")
	store := "file://" + dir
	start := time.Now()
	base := waitRun(t, mustStart(t, env.Client, ids+"-base", agentBasePipeline(store)))
	t.Logf("base in %.1fs: %v", time.Since(start).Seconds(), base.Phases[0].Metrics)
	// The digits verifier reads the answer's first line: the responses the agent logs after it do not count.
	cfg := agentGRPOConfig(t, 2, 16, `,"env":{"TEMPER_AGENT_LOG":"-"}`,
		`"reward":{"verifiers":[{"name":"digits"}]},"eval_every":0,"eval":{"examples":4,"before":false}`)
	start = time.Now()
	out := waitRun(t, mustStart(t, env.Client, ids+"-grpo", rlGRPOPipelineWith(store, base.Phases[0].Checkpoint, cfg)))
	m := out.Phases[0].Metrics
	t.Logf("agent GRPO in %.1fs: %v", time.Since(start).Seconds(), m)
	if m["iterations"] != 2 || m["version"] != 2 || m["agent_groups_dropped"] != 0 || m["agent_failures"] != 0 {
		t.Fatalf("metrics %v: want 2 iterations, 2 versions, no agent failure", m)
	}
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rolloutapi.RolloutsKey(out.RunID, "grpo", 0, rolloutapi.ShardTag(0)))))
	if err != nil {
		t.Fatal(err)
	}
	var bt tokenize.Byte
	calls, gaps := 0, 0
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<24)
	n := 0
	for sc.Scan() {
		var r rollout.Rollout
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		n++
		_, log, _ := strings.Cut(r.Completion, "\n")
		served, err := agenttest.Responses(log)
		if err != nil {
			t.Fatalf("%s: %v", r.ID, err)
		}
		// The model-written runs of every segment, in call order.
		type run struct {
			toks []int
			lps  []float32
		}
		var runs []run
		segs := append([]rollout.Segment{{PromptTokens: r.PromptTokens, Tokens: r.Tokens, LogProbs: r.LogProbs, Policy: r.Policy}}, r.Segments...)
		for s, seg := range segs {
			if len(seg.Policy) != len(seg.Tokens) || len(seg.LogProbs) != len(seg.Tokens) {
				t.Fatalf("%s segment %d: %d tokens, %d policy marks, %d log-probs", r.ID, s, len(seg.Tokens), len(seg.Policy), len(seg.LogProbs))
			}
			var gap []int
			for i, tok := range seg.Tokens {
				if !seg.Policy[i] {
					if seg.LogProbs[i] != 0 {
						t.Errorf("%s segment %d token %d: not the model's but log-prob %v", r.ID, s, i, seg.LogProbs[i])
					}
					gap = append(gap, tok)
					continue
				}
				if i == 0 || !seg.Policy[i-1] {
					if i > 0 {
						if g := bt.Decode(gap); !toolGap.MatchString(g) {
							t.Errorf("%s segment %d: masked tokens %q before a call: want only a tool message", r.ID, s, g)
						}
						gaps++
					}
					gap = nil
					runs = append(runs, run{})
				}
				runs[len(runs)-1].toks = append(runs[len(runs)-1].toks, tok)
				runs[len(runs)-1].lps = append(runs[len(runs)-1].lps, seg.LogProbs[i])
			}
			if len(gap) > 0 {
				t.Errorf("%s segment %d ends on %d tokens the model did not write (%q)", r.ID, s, len(gap), bt.Decode(gap))
			}
		}
		if len(runs) != len(served) || r.Ep == nil || r.Ep.Calls != len(served) {
			t.Fatalf("%s: %d model-written runs, %d responses served, episode %+v", r.ID, len(runs), len(served), r.Ep)
		}
		for c, resp := range served {
			ch := resp.Choices[0]
			got, want := runs[c], ch.Logprobs.Content
			// A call that ended on the end-of-sequence token trained on it too: the response's text
			// and log-probs end before it.
			extra := len(got.toks) - len(want)
			if extra != 0 && !(extra == 1 && got.toks[len(got.toks)-1] == tokenize.ByteEOS && ch.FinishReason == "stop") {
				t.Fatalf("%s call %d: trained %d tokens, served %d (finish %s)", r.ID, c, len(got.toks), len(want), ch.FinishReason)
			}
			for j, w := range want {
				tb := []byte(bt.Decode([]int{got.toks[j]}))
				wb := make([]byte, len(w.Bytes))
				for k, x := range w.Bytes {
					wb[k] = byte(x)
				}
				if !bytes.Equal(tb, wb) || got.lps[j] != w.Logprob {
					t.Fatalf("%s call %d token %d: trained %q (log-prob %v), served %q (log-prob %v)", r.ID, c, j, tb, got.lps[j], wb, w.Logprob)
				}
			}
			calls++
		}
	}
	if n != 16 {
		t.Fatalf("%d rollouts in the first iteration, want 16", n)
	}
	t.Logf("16 episodes, %d calls checked token by token, %d tool messages masked", calls, gaps)
	if gaps == 0 {
		t.Fatalf("no episode called its calculator: the mask check saw no tool message")
	}
}

// dyingAgentDir is an agent directory holding the Python example agent and wrapper.py, the test
// wrapper (activities/rollout/testdata/dying_agent.py) whose agent kills itself after its first
// model call on the first attempt of training episodes whose id matches FAIL_FIRST and on every
// attempt of those matching FAIL_ALWAYS.
func dyingAgentDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil { // the agent reads it as a sandbox uid
		t.Fatal(err)
	}
	for name, src := range map[string]string{"agent.py": "../../scripts/agents/python/agent.py", "wrapper.py": "../../activities/rollout/testdata/dying_agent.py"} {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// retryDropSFTConfig is a base that only has to answer calls: two SFT steps of the tiny model.
const retryDropSFTConfig = `{"model":{"preset":"tiny"},"data":{"task":"bigmul","tool_demos":true,"train_examples":16,"heldout_examples":4},
	"batch":{"rows":4,"seq":160},"steps":2,"chunk_steps":2,"optimizer":{"lr":0.01,"warmup_steps":1},"eval":{"examples":2,"max_new_tokens":8,"before":false}}`

// TestAgentRetryDropPipeline runs a GRPO iteration of agent episodes on the embedded stack (every
// role in this process, the agents in the code sandbox) whose agent dies on purpose: the first
// attempt of every group's second episode (id ending -1) is killed after its first model call and
// retried in a fresh sandbox, and every attempt of the first episode of groups 1 and 3 fails, so
// those two groups are dropped. The rollouts the policy
// step trains on hold the retried episodes (their second attempt) and no episode of a dropped
// group, and the phase's metrics count both: agent_groups_dropped, and agent_failures = one per
// retried episode plus two per episode that failed past its retry.
func TestAgentRetryDropPipeline(t *testing.T) {
	env, dir, ids := agentStack(t, "runs agents on the embedded stack", "agent-retry")
	store := "file://" + dir
	base := waitRun(t, mustStart(t, env.Client, ids+"-base", workflows.PipelineInput{Name: "agent-retry-base", Store: store, Seed: 3,
		Phases: []workflows.PhaseSpec{{Name: "sft", Kind: "sft", Config: json.RawMessage(retryDropSFTConfig)}}}))
	// Episode ids are it<iteration>-<group>-<sample>.
	const retried, dropped, drops = `-1$`, `^it0-[13]-0$`, 2
	cfg := agentGRPOConfigIn(dyingAgentDir(t), "wrapper.py", 1, 4, `,"env":{"FAIL_FIRST":"`+retried+`","FAIL_ALWAYS":"`+dropped+`"}`,
		`"reward":{"verifiers":[{"name":"digits"}]},"eval_every":0,"eval":{"examples":2,"before":false}`)
	start := time.Now()
	out := waitRun(t, mustStart(t, env.Client, ids+"-grpo", rlGRPOPipelineWith(store, base.Phases[0].Checkpoint, cfg)))
	m := out.Phases[0].Metrics
	t.Logf("agent GRPO in %.1fs: %v", time.Since(start).Seconds(), m)
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rolloutapi.RolloutsKey(out.RunID, "grpo", 0, rolloutapi.ShardTag(0)))))
	if err != nil {
		t.Fatal(err)
	}
	reRetried, reDropped := regexp.MustCompile(retried), regexp.MustCompile(dropped)
	groups := map[int]int{}
	again := 0
	var seen []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		var r rollout.Rollout
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		groups[r.Group]++
		seen = append(seen, r.ID)
		want := 1
		if reRetried.MatchString(r.ID) {
			want, again = 2, again+1
		}
		switch {
		case reDropped.MatchString(r.ID):
			t.Errorf("%s failed on every attempt, but its group was trained", r.ID)
		case r.Ep == nil || r.Ep.Attempts != want || r.Ep.Calls == 0 || len(r.Tokens) == 0:
			t.Errorf("%s: episode %+v with %d tokens: want %d attempts and a model call", r.ID, r.Ep, len(r.Tokens), want)
		}
	}
	for g, n := range groups {
		if n != 4 {
			t.Errorf("group %d trained with %d of its 4 episodes", g, n)
		}
	}
	t.Logf("%d groups trained (%d retried episodes among them): %v", len(groups), again, seen)
	if len(groups) != 4-drops || again != len(groups) {
		t.Fatalf("%d groups trained with %d retried episodes (%v): want %d groups, each with its retried episode", len(groups), again, seen, 4-drops)
	}
	if m["iterations"] != 1 || m["version"] != 1 || m["agent_groups_dropped"] != float64(drops) || m["agent_failures"] != float64(4+2*drops) {
		t.Fatalf("metrics %v: want 1 iteration trained, %d groups dropped, %d failed attempts", m, drops, 4+2*drops)
	}
}

// TestAgentRLExactResumeAfterSIGKILL is TestRLExactResumeAfterSIGKILL for agent episodes: the Python
// example agent plays every rollout against the policy served by the rollout worker; killing that
// worker mid-iteration (its agents die with it; the retried activity replays each episode in a fresh
// sandbox, every request seeded by the episode) and the trainer mid-step ends on the same rollouts,
// held-out accuracy, weights and optimizer state as an undisturbed run.
func TestAgentRLExactResumeAfterSIGKILL(t *testing.T) {
	agentSandbox(t)
	cfg := agentGRPOConfig(t, 7, 16, "",
		`"reward":{"verifiers":[{"name":"exact"},{"name":"digits","weight":0.5}]},"eval_every":0,"eval":{"examples":8,"before":false}`)
	rlExactResume(t, agentBasePipeline, cfg, func(t *testing.T, base workflows.PipelineOutput, rollouts []byte) {
		if n := strings.Count(string(rollouts), `"calls":2`); n == 0 {
			t.Fatalf("no episode of the first iteration called the agent's calculator")
		}
	})
}

// TestAgentHeldoutCurve runs scripts/agents/curve-python.yaml (SFT on smallmul demonstrations, then
// GRPO on the Python example agent's episodes) on the embedded stack, logs the SFT's evaluations,
// the agent's held-out exact match at every evaluation and each iteration's mean reward, and
// asserts that the held-out accuracy rose: the last evaluation above the first by more than twice
// the standard error of the difference of two proportions over the held-out prompts (measured in
// docs/agent-gateway.md). TEMPER_AGENT_CURVE=1 runs the file as it is; a larger number sets the
// GRPO phase's iterations.
//
//	TEMPER_AGENT_CURVE=1 go test -run TestAgentHeldoutCurve -v -timeout 3h ./cmd/temper/
func TestAgentHeldoutCurve(t *testing.T) {
	iters := 0
	if _, err := fmt.Sscan(os.Getenv("TEMPER_AGENT_CURVE"), &iters); err != nil || iters <= 0 {
		t.Skip("set TEMPER_AGENT_CURVE=1 to measure the curve")
	}
	var sets []string
	if iters > 1 {
		sets = append(sets, fmt.Sprintf("phases.grpo.config.iterations=%d", iters))
	}
	dir, out := runAgentPipelineFile(t, "curve-python.yaml", sets...)
	type point struct{ acc, n float64 }
	var curve []point
	for _, phase := range []string{"sft", "grpo"} {
		f, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(ckpt.MetricsLogKey(out.RunID, phase))))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(f)), "\n") {
			var rec ckpt.MetricsRecord
			if err := json.Unmarshal([]byte(l), &rec); err != nil {
				t.Fatal(err)
			}
			switch {
			case rec.Kind == ckpt.RecordEval && phase == "sft":
				t.Logf("SFT step %d: heldout_exact_match %.4f (built-in loop, calc)", rec.Step, rec.Metrics["heldout_exact_match"])
			case rec.Kind == ckpt.RecordEval:
				p := point{rec.Metrics["heldout_exact_match"], rec.Metrics["heldout_n"]}
				curve = append(curve, p)
				t.Logf("CURVE iteration %d: heldout_exact_match %.4f ± %.4f (standard error) of %.0f, calls/episode %.2f, failed %.3f", rec.Step,
					p.acc, math.Sqrt(p.acc*(1-p.acc)/p.n), p.n, rec.Metrics["heldout_agent_calls"], rec.Metrics["heldout_agent_failed"])
			case rec.Kind == ckpt.RecordTrain && phase == "grpo":
				t.Logf("iteration %d: reward_mean %.4f, reward_std %.4f", rec.Step, rec.Metrics["reward_mean"], rec.Metrics["reward_std"])
			}
		}
	}
	if len(curve) < 2 || curve[0].n < 64 {
		t.Fatalf("held-out evaluations %v: want one before training and one after, of at least 64 prompts", curve)
	}
	first, last := curve[0], curve[len(curve)-1]
	se := math.Sqrt(first.acc*(1-first.acc)/first.n + last.acc*(1-last.acc)/last.n)
	t.Logf("held-out exact match %.4f -> %.4f: rise %+.4f, standard error of the difference %.4f", first.acc, last.acc, last.acc-first.acc, se)
	if last.acc-first.acc <= 2*se {
		t.Fatalf("held-out exact match %.4f -> %.4f: the rise is not above twice its standard error (%.4f)", first.acc, last.acc, se)
	}
}

// runAgentPipelineFile runs the example pipeline scripts/agents/file on the embedded stack (every
// role in this process, its agent in the code sandbox), its agent directory made absolute, with
// sets applied; it returns the store's directory and the run's output.
func runAgentPipelineFile(t *testing.T, file string, sets ...string) (string, workflows.PipelineOutput) {
	t.Helper()
	agentSandbox(t)
	data, err := os.ReadFile(filepath.Join("..", "..", "scripts", "agents", file))
	if err != nil {
		t.Fatal(err)
	}
	in, err := pipeline.Parse(file, data, nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var cfg workflows.RLConfig
	if len(in.Phases) != 2 || json.Unmarshal(in.Phases[1].Config, &cfg) != nil || cfg.Rollout.Agent == nil {
		t.Fatalf("%s: want an SFT phase, then an agent phase", file)
	}
	agentDir, err := filepath.Abs(filepath.Join("..", "..", cfg.Rollout.Agent.Dir))
	if err != nil {
		t.Fatal(err)
	}
	env := testenv.Get(t)
	env.Roles(t)
	dir := t.TempDir()
	sets = append([]string{"store=file://" + dir, "phases.grpo.config.rollout.agent.dir=" + agentDir}, sets...)
	if in, err = pipeline.Parse(file, data, sets, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	run := mustStart(t, env.Client, fmt.Sprintf("agent-%s-%d", strings.TrimSuffix(file, ".yaml"), time.Now().UnixNano()), in)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Hour)
	defer cancel()
	var out workflows.PipelineOutput
	if err := run.Get(ctx, &out); err != nil {
		t.Fatalf("run %s: %v", run.GetID(), err)
	}
	t.Logf("%s in %.0fs; sft %v; grpo %v", file, time.Since(start).Seconds(), out.Phases[0].Metrics, out.Phases[1].Metrics)
	return dir, out
}

// TestAgentNodePipeline runs scripts/agents/bigmul-node.yaml (the Node example agent on the
// official openai client) end to end on the embedded stack, shortened (TEMPER_NODE_TEST=1: 60 SFT
// steps, 2 GRPO iterations, 8 held-out prompts; TEMPER_NODE_TEST=full: the file as it is): every
// episode and every held-out episode played by the agent without a failure, and trained on.
// It needs `cd scripts/agents/node && npm ci` first.
//
//	TEMPER_NODE_TEST=1 go test -run TestAgentNodePipeline -v -timeout 1h ./cmd/temper/
func TestAgentNodePipeline(t *testing.T) {
	mode := os.Getenv("TEMPER_NODE_TEST")
	if mode == "" {
		t.Skip("set TEMPER_NODE_TEST=1 (after npm ci in scripts/agents/node) to run the Node agent's pipeline")
	}
	if _, err := os.Stat("../../scripts/agents/node/node_modules/openai/package.json"); err != nil {
		t.Fatalf("the openai package is not installed: cd scripts/agents/node && npm ci (%v)", err)
	}
	var sets []string
	if mode != "full" {
		sets = []string{"phases.sft.config.steps=60", "phases.sft.config.chunk_steps=60", "phases.grpo.config.iterations=2",
			"phases.grpo.config.eval_every=0", "phases.grpo.config.eval.examples=8"}
	}
	_, out := runAgentPipelineFile(t, "bigmul-node.yaml", sets...)
	m := out.Phases[1].Metrics
	if m["agent_failures"] != 0 || m["agent_groups_dropped"] != 0 || m["heldout_agent_failed"] != 0 || m["heldout_agent_calls"] < 1 || m["version"] != m["iterations"] {
		t.Fatalf("grpo metrics %v: want every episode played by the Node agent, none failed, every iteration trained", m)
	}
}

// TestAgentPipelinesAreValid: the example pipelines of the agent gateway (scripts/agents/*.yaml,
// cited by docs/agent-gateway.md) parse and validate, and each trains its own example agent.
func TestAgentPipelinesAreValid(t *testing.T) {
	for _, c := range []struct{ file, command, dir string }{
		{"bigmul-python.yaml", "python3 agent.py", "scripts/agents/python"},
		{"bigmul-node.yaml", "node agent.mjs", "scripts/agents/node"},
		{"curve-python.yaml", "python3 agent.py", "scripts/agents/python"},
	} {
		t.Run(c.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("..", "..", "scripts", "agents", c.file))
			if err != nil {
				t.Fatal(err)
			}
			in, err := pipeline.Parse(c.file, data, nil, t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			var cfg workflows.RLConfig
			if len(in.Phases) != 2 || in.Phases[1].Kind != "grpo" || json.Unmarshal(in.Phases[1].Config, &cfg) != nil || cfg.Rollout.Agent == nil {
				t.Fatalf("%s: want an SFT phase, then a GRPO phase with rollout.agent", c.file)
			}
			a := cfg.Rollout.Agent
			if got := strings.Join(a.Command, " "); got != c.command || a.Dir != c.dir {
				t.Fatalf("%s: agent %q in %q, want %q in %q", c.file, got, a.Dir, c.command, c.dir)
			}
			if _, err := os.Stat(filepath.Join("..", "..", a.Dir, a.Command[1])); err != nil {
				t.Fatal(err)
			}
		})
	}
}
