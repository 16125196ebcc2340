package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/temperml/temper/internal/report"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// waitCLI runs the command until its output contains want (a minute at most) and returns it.
func waitCLI(t *testing.T, want string, args ...string) string {
	t.Helper()
	var out string
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		out, _ = cli(t, args...)
		if strings.Contains(out, want) {
			return out
		}
	}
	t.Fatalf("temper %s never said %q; last:\n%s", strings.Join(args, " "), want, out)
	return ""
}

// TestSteerCLI (issue 40, acceptance 2–4 through the commands): an sft phase is paused with
// `temper pause` (status: "paused at step N since …", `ls --waiting` lists it), given more steps
// with `temper set`, resumed; a non-live field and a bad value are refused naming the field; the
// next phase waits at its approval gate (status, `ls --waiting`; set is refused: nothing runs)
// until `temper approve`; the last phase's when: gate fails and stops the run with a result
// naming the metric. `temper config explain` marks the live fields.
func TestSteerCLI(t *testing.T) {
	env := testenv.Get(t)
	ws := env.Roles(t)
	addr := env.Server.FrontendAddr()
	p := writeFile(t, "p.yaml", `name: gates
phases:
- name: a
  kind: sft
  config: {model: {preset: tiny}, data: {task: add2, train_examples: 300, heldout_examples: 16}, batch: {rows: 8, seq: 32},
           steps: 20, chunk_steps: 2, eval: {examples: 16, max_new_tokens: 4, before: false}}
- {name: b, kind: demo, config: {steps: 2, step_duration: 10ms}, gate: {require: approval, timeout: 10m}}
- {name: c, kind: demo, config: {steps: 2, step_duration: 10ms}, gate: {when: "steps >= 100 or a.heldout_exact_match > 2"}}
`)
	id := fmt.Sprintf("cli-steer-%d", time.Now().UnixNano())
	if out, err := cli(t, "run", p, "--temporal", addr, "--id", id); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	waitCLI(t, "phase 1/3 a", "status", id, "--temporal", addr)
	if out, err := cli(t, "pause", id, "--temporal", addr, "--note", "look at the loss"); err != nil || !strings.Contains(out, "pauses after step") {
		t.Fatalf("pause: %v\n%s", err, out)
	}
	status := waitCLI(t, "paused at step", "status", id, "--temporal", addr)
	if !regexp.MustCompile(`paused at step \d since 20\d\d-.*look at the loss`).MatchString(status) {
		t.Errorf("status while paused:\n%s", status)
	}
	waitCLI(t, id+".a", "ls", "--waiting", "--temporal", addr)
	// With every worker stopped the run's query goes unanswered; status still says it is paused.
	workers.StopAll(ws)
	start := time.Now()
	status, err := cli(t, "status", id, "--temporal", addr)
	if err != nil || !strings.Contains(status, "no workflow worker answers") || !strings.Contains(status, "paused=after step") {
		t.Errorf("status with no workers: %v\n%s", err, status)
	}
	t.Logf("status with no workers took %v", time.Since(start).Round(time.Millisecond))
	env.Roles(t)
	for _, bad := range []struct{ set, words string }{{"model.layers=2", "model.layers: not a live field"}, {"optimizer.lr=-1", "want 0 < lr < 10"}} {
		out, err := cli(t, "set", id, "a", bad.set, "--temporal", addr)
		if ee, ok := err.(*exitError); !ok || ee.code != 2 || !strings.Contains(err.Error(), bad.words) {
			t.Errorf("set %s: %v (%s), want a usage error naming %q", bad.set, err, out, bad.words)
		}
	}
	out, err := cli(t, "set", id, "a", "steps=24", "--temporal", addr, "--json")
	var reply workflows.SteerReply
	if err != nil || json.Unmarshal([]byte(out), &reply) != nil || reply.Unit != "step" || reply.At != reply.Done || reply.Changes[0].Old != "20" {
		t.Fatalf("set steps=24: %v\n%s", err, out)
	}
	if out, err := cli(t, "resume", id, "--temporal", addr); err != nil || !strings.Contains(out, "resumes") {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	status = waitCLI(t, "waiting: approval before phase b", "status", id, "--temporal", addr)
	if !strings.Contains(status, "temper approve "+id) {
		t.Errorf("status at the gate:\n%s", status)
	}
	waitCLI(t, "approval", "ls", "--waiting", "--temporal", addr)
	if _, err := cli(t, "set", id, "optimizer.lr=0.01", "--temporal", addr); err == nil || !strings.Contains(err.Error(), "waits at the gate before phase b") {
		t.Errorf("set at the gate: %v", err)
	}
	if out, err := cli(t, "approve", id, "--temporal", addr, "--note", "sft looks fine"); err != nil || !strings.Contains(out, "approved: phase b starts") {
		t.Fatalf("approve: %v\n%s", err, out)
	}
	final := waitCLI(t, "completed", "status", id, "--temporal", addr)
	for _, want := range []string{"stopped: gate before phase c", `steps = 2 (phase b)`, "a.heldout_exact_match = ", "steps                    24"} {
		if !strings.Contains(final, want) {
			t.Errorf("final status lacks %q:\n%s", want, final)
		}
	}
	if _, err := cli(t, "approve", id, "--temporal", addr); err == nil {
		t.Error("approve of a finished run was accepted")
	}
	explain, err := cli(t, "config", "explain", "grpo")
	if err != nil || !regexp.MustCompile(`(?m)^optimizer\.lr .*\[live\]`).MatchString(explain) || regexp.MustCompile(`(?m)^group .*\[live\]`).MatchString(explain) {
		t.Errorf("config explain grpo does not mark exactly the live fields: %v\n%s", err, explain)
	}
}

// TestForkCLI (issue 40, acceptance 5): `temper fork RUN --at sft@3 --set optimizer.lr=…` starts a
// new run whose GRPO phase starts from the retained SFT checkpoint at step 3 with another learning
// rate; it runs to completion, its input records the lineage, and the reports of parent and child
// link each other. Steps that are not retained and forks with no phase to run are refused.
func TestForkCLI(t *testing.T) {
	env := testenv.Get(t)
	env.Roles(t)
	addr := env.Server.FrontendAddr()
	store := t.TempDir()
	p := writeFile(t, "p.yaml", fmt.Sprintf(`name: base
store: file://%s
seed: 3
phases:
- name: sft
  kind: sft
  config: {model: {preset: tiny}, data: {task: add2, train_examples: 300, heldout_examples: 16}, batch: {rows: 8, seq: 32},
           steps: 6, chunk_steps: 3, eval: {examples: 16, max_new_tokens: 4, before: false}}
- name: grpo
  kind: grpo
  config: {data: {task: add2, heldout_examples: 16}, iterations: 2, prompts: 4, group: 4, max_new_tokens: 4, eval_every: 0,
           eval: {examples: 16, max_new_tokens: 4, before: false}}
`, store))
	parent := fmt.Sprintf("cli-fork-%d", time.Now().UnixNano())
	if out, err := cli(t, "run", p, "--temporal", addr, "--id", parent, "--wait"); err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	for _, bad := range []struct{ args, words string }{
		{"--at sft@4", "has no checkpoint at step 4 (retained: 0, 3, 6;"},
		{"--at grpo", "no phase follows grpo"},
		{"--at nope@1", `"nope": ` + parent + " has no such phase (phases: sft, grpo)"},
		{"--at sft@3 --set model.layers=2", "model"},
	} {
		_, err := cli(t, append([]string{"fork", parent, "--temporal", addr}, strings.Fields(bad.args)...)...)
		if err == nil || !strings.Contains(err.Error(), bad.words) {
			t.Errorf("fork %s: %v, want %q", bad.args, err, bad.words)
		}
	}
	child := parent + "-fork"
	out, err := cli(t, "fork", parent, "--at", "sft@3", "--set", "optimizer.lr=0.0002", "--temporal", addr, "--id", child, "--wait")
	if err != nil || !strings.Contains(out, child+" completed") {
		t.Fatalf("fork: %v\n%s", err, out)
	}
	in, ok := report.RunInput(context.Background(), env.Client, child)
	if !ok || len(in.Phases) != 1 || in.Phases[0].Name != "grpo" || !strings.HasSuffix(in.Phases[0].From, "/runs/"+parent+"/sft/step-000003/") ||
		in.Parent == nil || in.Parent.Run != parent || in.Parent.Step != 3 || !strings.Contains(string(in.Phases[0].Config), `"lr":0.0002`) {
		t.Fatalf("fork input %+v (parent %+v)", in, in.Parent)
	}
	dir := t.TempDir()
	if out, err := cli(t, "report", child, "--temporal", addr, "--out", filepath.Join(dir, "report-"+child)); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	page, _ := os.ReadFile(filepath.Join(dir, "report-"+child, "index.html"))
	for _, want := range []string{fmt.Sprintf(`forked from run <a href="../report-%s/index.html">%s</a> at <code>sft@3</code>`, parent, parent),
		"<td>fork</td>", "optimizer.lr=0.0002"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("child's report lacks %q", want)
		}
	}
	// The parent's page lists its forks (a visibility query: it may take a moment to see the child).
	var ppage []byte
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		if _, err := cli(t, "report", parent, "--temporal", addr, "--out", filepath.Join(dir, "report-"+parent)); err != nil {
			t.Fatal(err)
		}
		ppage, _ = os.ReadFile(filepath.Join(dir, "report-"+parent, "index.html"))
		if strings.Contains(string(ppage), fmt.Sprintf(`<a href="../report-%s/index.html">%s</a>`, child, child)) {
			return
		}
	}
	t.Errorf("the parent's report does not link its fork %s", child)
}
