package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/temperml/temper/internal/bench"
	"github.com/temperml/temper/internal/pipeline"
	"github.com/temperml/temper/workflows"
)

func TestMain(m *testing.M) {
	// The test binary doubles as the temper binary for the subprocess tests (kill -9 of `temper dev`).
	if os.Getenv("TEMPER_TEST_MAIN") == "1" {
		main()
		os.Exit(0)
	}
	// Keep the default store and state of every test (and subprocess) out of the real ~/.temper.
	home, err := os.MkdirTemp("", "temper-home-")
	if err != nil {
		panic(err)
	}
	os.Setenv("TEMPER_HOME", home)
	code := m.Run()
	os.RemoveAll(home)
	os.Exit(code)
}

func cli(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := runCLI(context.Background(), args, &out, &errOut)
	return out.String() + errOut.String(), err
}

func writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunRejectsBadPipelinesBeforeStarting(t *testing.T) {
	dataDir := t.TempDir()
	good, bad, empty := filepath.Join(dataDir, "good.jsonl"), filepath.Join(dataDir, "bad.jsonl"), filepath.Join(dataDir, "empty.jsonl")
	for name, body := range map[string]string{
		good:  `{"prompt":"1+2=","completion":"3"}` + "\n",
		bad:   `{"prompt":"1+2=","completion":"3"}` + "\n" + `{"prompt":"1+2=","completoin":"3"}` + "\n",
		empty: "\n",
	} {
		if err := os.WriteFile(name, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct{ name, body, want string }{
		{"misspelled phase field", "phases:\n- name: a\n  kind: demo\n  config: {stepz: 3}\n", `phases[0].config.stepz: unknown field; did you mean "steps"?`},
		{"misspelled top field", "name: x\nphase:\n- {name: a, kind: demo}\n", `phase: unknown field; did you mean "phases"?`},
		{"unknown kind", "phases:\n- {name: a, kind: dem}\n", `phases[0].kind: unknown phase kind "dem"; did you mean "demo"?`},
		{"bad value", "phases:\n- {name: a, kind: demo, config: {steps: 0}}\n", `phases[0].config.steps: 0: want 1..1000000`},
		{"bad store", "store: /tmp/x\nphases:\n- {name: a, kind: demo}\n", `store: "/tmp/x": want file:///abs/dir or gs://bucket/prefix`},
		{"duplicate names", "phases:\n- {name: a, kind: demo}\n- {name: a, kind: demo}\n", `phases[1].name: "a" already names phases[0]`},
		{"nan learning rate", "phases:\n- {name: s, kind: sft, config: {data: {task: add2}, optimizer: {lr: .nan}}}\n", `phases[0].config.optimizer.lr: NaN is not a finite number`},
		{"infinite top-level number", "seed: .inf\nphases:\n- {name: a, kind: demo}\n", `seed: +Inf is not a finite number`},
		{"rl first without from", "phases:\n- {name: g, kind: grpo, config: {data: {task: add2}}}\n", `phases[0].from: grpo phase "g": an RL phase starts from a checkpoint`},
		{"preference first without from", "phases:\n- {name: d, kind: dpo, config: {data: {task: add2}}}\n", `phases[0].from: dpo phase "d": a preference phase starts from a checkpoint`},
		{"lora first without from", "phases:\n- {name: s, kind: sft, config: {data: {task: add2}, lora: {rank: 4}}}\n", `phases[0].from: sft phase "s": LoRA trains adapters`},
		{"from names a later phase", "phases:\n- {name: a, kind: demo, from: b}\n- {name: b, kind: demo}\n", `phases[0].from: "b" is neither a URI nor an earlier phase`},
		{"from names no phase", "phases:\n- {name: a, kind: demo}\n- {name: g, kind: grpo, from: sftt, config: {data: {task: add2}}}\n", `phases[1].from: "sftt" is neither a URI nor an earlier phase`},
		{"missing data file", "phases:\n- {name: s, kind: sft, config: {data: {train: file://" + dataDir + "/nope.jsonl}}}\n", `phases[0].config.data.train: open ` + dataDir + `/nope.jsonl: no such file`},
		{"malformed data line", "phases:\n- {name: s, kind: sft, config: {data: {train: file://" + good + ", heldout: file://" + bad + "}}}\n", bad + `:2: `},
		{"empty data file", "phases:\n- {name: s, kind: sft, config: {data: {train: file://" + empty + "}}}\n", `phases[0].config.data.train: ` + empty + ` has no examples`},
		{"malformed preference line", "phases:\n- {name: s, kind: sft, config: {data: {task: add2}}}\n- {name: d, kind: dpo, config: {data: {train: file://" + good + "}}}\n", `phases[1].config.data.train: ` + good + `:1: "completion" without "label"`},
	}
	for _, c := range cases {
		for _, dry := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/dry=%v", c.name, dry), func(t *testing.T) {
				// An unreachable server proves nothing was started: validation fails first.
				args := []string{"run", writeFile(t, "p.yaml", c.body), "--temporal", "127.0.0.1:1"}
				if dry {
					args = append(args, "--dry-run")
				}
				out, err := cli(t, args...)
				var ee *exitError
				if !errors.As(err, &ee) || ee.code != 2 {
					t.Fatalf("want exit code 2, got %v (output %q)", err, out)
				}
				if !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "p.yaml") {
					t.Fatalf("error %q should name the file and contain %q", err, c.want)
				}
			})
		}
	}
}

// TestRunChecksGoodDataFiles: valid local data files pass the pre-start check (the check is not a
// blanket refusal of files).
func TestRunChecksGoodDataFiles(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.jsonl")
	pairs := filepath.Join(dir, "pairs.jsonl")
	os.WriteFile(good, []byte(`{"prompt":"1+2=","completion":"3"}`+"\n"), 0o644)
	os.WriteFile(pairs, []byte(`{"prompt":"1+2=","chosen":"3","rejected":"4"}`+"\n"), 0o644)
	body := "phases:\n- {name: s, kind: sft, config: {data: {train: file://" + good + ", heldout: file://" + good + "}}}\n" +
		"- {name: d, kind: dpo, config: {data: {train: file://" + pairs + "}}}\n"
	if out, err := cli(t, "run", writeFile(t, "p.yaml", body), "--dry-run"); err != nil {
		t.Fatalf("valid data files rejected: %v\n%s", err, out)
	}
}

func TestSetOverridesAndDryRun(t *testing.T) {
	p := writeFile(t, "p.json", `{"name":"x","phases":[{"name":"a","kind":"demo"}]}`)
	out, err := cli(t, "run", p, "--dry-run", "--set", "phases.a.config.steps=7", "--set", "seed=3", "--home", "/tmp/h")
	if err != nil {
		t.Fatal(err)
	}
	var in workflows.PipelineInput
	if err := json.Unmarshal([]byte(out), &in); err != nil {
		t.Fatalf("dry run output is not the input JSON: %v\n%s", err, out)
	}
	var compact bytes.Buffer
	_ = json.Compact(&compact, in.Phases[0].Config)
	if in.Seed != 3 || compact.String() != `{"steps":7}` || in.Store != "file:///tmp/h/store" {
		t.Fatalf("overrides not applied: %+v", in)
	}
}

func TestConfigExplain(t *testing.T) {
	out, err := cli(t, "config", "explain", "demo")
	if err != nil || !strings.Contains(out, "step_duration") || !strings.Contains(out, "250ms") {
		t.Fatalf("explain demo: %v\n%s", err, out)
	}
	out, err = cli(t, "config", "explain", "pipeline")
	if err != nil || !strings.Contains(out, "phases[].kind") {
		t.Fatalf("explain pipeline: %v\n%s", err, out)
	}
	if _, err := cli(t, "config", "explain", "nosuch"); err == nil {
		t.Fatal("want an error for an unknown kind")
	}
}

func TestUnknownCommandAndFlag(t *testing.T) {
	if _, err := cli(t, "rn"); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("got %v", err)
	}
	if _, err := cli(t, "dev", "--prot", "1"); err == nil {
		t.Fatal("want an error for an unknown flag")
	}
}

// TestComposeCommandsAreReal parses docker-compose.yml and checks that every service built from this
// repo runs a real temper subcommand with flags that subcommand accepts.
func TestComposeCommandsAreReal(t *testing.T) {
	data, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Build   any      `yaml:"build"`
			Command []string `yaml:"command"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(data, &compose); err != nil {
		t.Fatal(err)
	}
	roles := map[string]bool{}
	for name, svc := range compose.Services {
		if svc.Build == nil {
			continue
		}
		if len(svc.Command) == 0 {
			t.Errorf("%s: no command", name)
			continue
		}
		c, ok := commands[svc.Command[0]]
		if !ok {
			t.Errorf("%s: %q is not a temper command", name, svc.Command[0])
			continue
		}
		fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
		fs.SetOutput(&bytes.Buffer{})
		c.flags(fs)
		if _, err := parseInterspersed(fs, svc.Command[1:]); err != nil {
			t.Errorf("%s: temper %s: %v", name, strings.Join(svc.Command, " "), err)
		}
		if f := fs.Lookup("roles"); f != nil {
			roles[f.Value.String()] = true
		}
	}
	for _, r := range workflows.Roles {
		if !roles[r] {
			t.Errorf("docker-compose.yml runs no worker for role %q", r)
		}
	}
}

// TestReadmeTemporalCLIExample checks that the README's `temporal workflow start` example carries a
// valid pipeline input.
func TestReadmeTemporalCLIExample(t *testing.T) {
	in := readmeTemporalInput(t)
	if err := in.Validate(); err != nil {
		t.Fatalf("README example input: %v", err)
	}
}

var inputRe = regexp.MustCompile(`(?s)temporal workflow start[^\n]*--type Pipeline[^']*--input '([^']+)'`)

func readmeTemporalInput(t *testing.T) workflows.PipelineInput {
	t.Helper()
	data, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := inputRe.FindSubmatch(data)
	if m == nil {
		t.Fatal("README has no `temporal workflow start --type Pipeline ... --input '...'` example")
	}
	var in workflows.PipelineInput
	dec := json.NewDecoder(bytes.NewReader(m[1]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		t.Fatalf("README example input is not pipeline JSON: %v\n%s", err, m[1])
	}
	return in
}

func TestDemoPipelineIsValid(t *testing.T) {
	in, err := pipeline.Parse("demo.yaml", demoPipeline, nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Phases) != 3 || in.Phases[0].Kind != "pretrain" || in.Phases[1].Kind != "sft" || in.Phases[2].Kind != "grpo" {
		t.Fatalf("demo pipeline: %d phases, want pretrain → sft → grpo", len(in.Phases))
	}
}

// TestRLTrialsPipelineIsValid: scripts/rl-trials.yaml, which docs/lab-notes/rl-settings.md and issue notes cite, still
// parses and validates, and its base is the bench's (same data seed, held-out prompts, steps and optimizer).
func TestRLTrialsPipelineIsValid(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "scripts", "rl-trials.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	in, err := pipeline.Parse("rl-trials.yaml", data, nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	benchPhases, err := bench.RLvsSFTPhases(bench.RLvsSFTOptions{Task: "add2", SFTExamples: 500, SFTSteps: 400, Pretrain: 2000, Seconds: 1, Algo: "grpo", Heldout: 200}, "")
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"pretrain", "base"} {
		var got, want struct {
			Data      json.RawMessage `json:"data"`
			Steps     int             `json:"steps"`
			Optimizer json.RawMessage `json:"optimizer"`
		}
		if in.Phases[i].Name != name || json.Unmarshal(in.Phases[i].Config, &got) != nil || json.Unmarshal(benchPhases[i].Config, &want) != nil ||
			got.Steps != want.Steps || !jsonEqual(got.Data, want.Data) || !jsonEqual(got.Optimizer, want.Optimizer) {
			t.Errorf("phase %d %s: %s, want the bench's %s", i, in.Phases[i].Name, in.Phases[i].Config, benchPhases[i].Config)
		}
	}
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && reflect.DeepEqual(x, y)
}

// scriptPipeline is one of scripts/DIR/*.yaml, parsed and validated.
type scriptPipeline struct {
	file string
	in   workflows.PipelineInput
}

// scriptPipelines parses and validates every scripts/DIR/*.yaml; there must be at least min of them.
func scriptPipelines(t *testing.T, dir string, min int) []scriptPipeline {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "..", "scripts", dir, "*.yaml"))
	if err != nil || len(files) < min {
		t.Fatalf("scripts/%s: %v, %v", dir, files, err)
	}
	var out []scriptPipeline
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		in, err := pipeline.Parse(filepath.Base(f), data, nil, t.TempDir())
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, scriptPipeline{f, in})
	}
	return out
}

// TestDemoTrialsPipelinesAreValid: scripts/demo-trials/*.yaml, which docs/lab-notes/demo-sizing.md cites for issue 21's
// measurements, still parse and validate, and every phase holds out and evaluates 500 prompts (the
// figures quoted are on 500).
func TestDemoTrialsPipelinesAreValid(t *testing.T) {
	for _, sp := range scriptPipelines(t, "demo-trials", 4) {
		f, in := sp.file, sp.in
		for _, p := range in.Phases {
			var c struct {
				Data struct {
					Heldout int `json:"heldout_examples"`
				} `json:"data"`
				Eval struct {
					Examples int `json:"examples"`
				} `json:"eval"`
			}
			if err := json.Unmarshal(p.Config, &c); err != nil || c.Data.Heldout != 500 || c.Eval.Examples != 500 {
				t.Errorf("%s phase %s: %d held out, %d evaluated (%v); want 500, 500", f, p.Name, c.Data.Heldout, c.Eval.Examples, err)
			}
		}
	}
}

// TestAgenticPipelinesAreValid: scripts/agentic/*.yaml (issue 19's measurements, cited by
// docs/agentic.md) parse and validate, and the runs with and without tools evaluate the same 200 held-out
// prompts of bigmul (same task, seed and held-out count); mulcheck.yaml's second phase is mulcheck.
func TestAgenticPipelinesAreValid(t *testing.T) {
	for _, sp := range scriptPipelines(t, "agentic", 3) {
		f, in := sp.file, sp.in
		for _, p := range in.Phases {
			var c struct {
				Data struct {
					Task    string `json:"task"`
					Heldout int    `json:"heldout_examples"`
				} `json:"data"`
			}
			want := "bigmul"
			if filepath.Base(f) == "mulcheck.yaml" && p.Name == "sft_check" { // self-correction after bigmul's SFT
				want = "mulcheck"
			}
			if err := json.Unmarshal(p.Config, &c); err != nil || c.Data.Task != want || c.Data.Heldout != 200 || in.Seed != 1 {
				t.Errorf("%s phase %s: task %q, %d held out, seed %d (%v); want %s, 200, 1", f, p.Name, c.Data.Task, c.Data.Heldout, in.Seed, err, want)
			}
		}
	}
}
