package pipeline

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/internal/usage"
	"github.com/temperml/temper/workflows"
)

// parent is a three-phase run (pretrain → sft → grpo) whose pretrain and sft finished; grpo's
// directory and a back-tracking branch's retain steps 50 and 100.
func parent(t *testing.T) (workflows.PipelineInput, map[string]workflows.PhaseResult, func(string) ([]ckpt.Ref, error)) {
	t.Helper()
	in, err := Parse("p.yaml", []byte(`name: p
seed: 3
store: file:///s
phases:
  - {name: pretrain, kind: pretrain, config: {model: {preset: tiny}, data: {task: add2}, steps: 10}}
  - {name: sft, kind: sft, config: {data: {task: add2}, steps: 10}}
  - {name: grpo, kind: grpo, config: {data: {task: add2}, iterations: 200}}
`), nil, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	results := map[string]workflows.PhaseResult{
		"pretrain": {Name: "pretrain", Checkpoint: "file:///s/r/pretrain/step-000010/"},
		"sft":      {Name: "sft", Checkpoint: "file:///s/r/sft/step-000010/"},
	}
	retained := func(dir string) ([]ckpt.Ref, error) {
		if dir != "grpo" && dir != "grpo.b1" {
			return nil, nil
		}
		return []ckpt.Ref{{URI: "file:///s/r/" + dir + "/step-000050/", Step: 50}, {URI: "file:///s/r/" + dir + "/step-000100/", Step: 100}}, nil
	}
	return in, results, retained
}

// TestFork: which phases a fork runs, from which checkpoint, with which lineage and overrides (each
// case worked out by hand from the parent above).
func TestFork(t *testing.T) {
	in, results, retained := parent(t)
	for _, tc := range []struct {
		name    string
		spec    ForkSpec
		phases  []string
		from    string // the first phase's
		lineage workflows.Lineage
	}{
		{"after a result", ForkSpec{At: "pretrain"}, []string{"sft", "grpo"}, "file:///s/r/pretrain/step-000010/",
			workflows.Lineage{Run: "r", Phase: "pretrain", Step: -1, Checkpoint: "file:///s/r/pretrain/step-000010/"}},
		{"a retained step, the phase again", ForkSpec{At: "grpo@50", FromPhase: "grpo", Sets: []string{"iterations=60"}}, []string{"grpo"},
			"file:///s/r/grpo/step-000050/", workflows.Lineage{Run: "r", Phase: "grpo", Step: 50, Checkpoint: "file:///s/r/grpo/step-000050/", Set: []string{"iterations=60"}}},
		{"a branch's step", ForkSpec{At: "grpo.b1@100", FromPhase: "grpo"}, []string{"grpo"}, "file:///s/r/grpo.b1/step-000100/",
			workflows.Lineage{Run: "r", Phase: "grpo.b1", Step: 100, Checkpoint: "file:///s/r/grpo.b1/step-000100/"}},
		{"re-run a phase", ForkSpec{FromPhase: "sft"}, []string{"sft", "grpo"}, "file:///s/r/pretrain/step-000010/",
			workflows.Lineage{Run: "r", Phase: "sft", Step: -1, Checkpoint: "file:///s/r/pretrain/step-000010/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := Fork("r", in, results, retained, tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range out.Phases {
				names = append(names, p.Name)
			}
			if !reflect.DeepEqual(names, tc.phases) || out.Phases[0].From != tc.from || out.Name != "p-fork" || out.Seed != 3 || out.Store != "file:///s" {
				t.Errorf("phases %v from %s, name %s seed %d store %s", names, out.Phases[0].From, out.Name, out.Seed, out.Store)
			}
			if out.Parent == nil || !reflect.DeepEqual(*out.Parent, tc.lineage) {
				t.Errorf("lineage %+v, want %+v", out.Parent, tc.lineage)
			}
			if len(tc.spec.Sets) > 0 && !strings.Contains(string(out.Phases[0].Config), `"iterations":60`) {
				t.Errorf("--set not applied: %s", out.Phases[0].Config)
			}
		})
	}
}

// TestForkRefusals: each flag that cannot work is a usage error naming it.
func TestForkRefusals(t *testing.T) {
	in, results, retained := parent(t)
	for _, tc := range []struct {
		spec ForkSpec
		want string
	}{
		{ForkSpec{At: "nope"}, `--at "nope": r has no such phase (phases: pretrain, sft, grpo)`},
		{ForkSpec{At: "grpo"}, "phase grpo of r has no result (yet)"},
		{ForkSpec{At: "grpo@x"}, `"x" is not a step number`},
		{ForkSpec{At: "grpo@70", FromPhase: "grpo"}, "no checkpoint at step 70 (retained: 50, 100;"},
		{ForkSpec{At: "grpo@50"}, "no phase follows grpo"},
		{ForkSpec{At: "sft", FromPhase: "pretrain"}, "--from-phase pretrain comes before --at's phase sft"},
		{ForkSpec{FromPhase: "grpo", Sets: []string{"iterations=-1"}}, "fork"},
		{ForkSpec{FromPhase: "sft", Sets: []string{"nosuch=1"}}, "fork: phases[0].config.nosuch: unknown field"},
		{ForkSpec{FromPhase: "sft", Sets: []string{"steps"}}, "fork --set"},
	} {
		_, err := Fork("r", in, results, retained, tc.spec)
		if !usage.Is(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want a usage error containing %q", tc.spec, err, tc.want)
		}
	}
	broken := func(string) ([]ckpt.Ref, error) { return nil, errors.New("store down") }
	if _, err := Fork("r", in, results, broken, ForkSpec{At: "grpo@50", FromPhase: "grpo"}); err == nil || usage.Is(err) {
		t.Errorf("a store that fails: %v, want a plain error", err)
	}
}
