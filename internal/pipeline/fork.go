package pipeline

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/internal/config"
	"github.com/temperml/temper/internal/usage"
	"github.com/temperml/temper/workflows"
)

// ForkSpec is what the user asked of a fork (`temper fork`'s flags).
type ForkSpec struct {
	At        string   // PHASE[@STEP]: a retained step of PHASE's directory (a branch's, grpo.b1, too), or PHASE's result
	FromPhase string   // the fork's first phase (default: the one after At's); alone, it re-runs this phase
	Name      string   // the fork's pipeline name (default: the parent's + "-fork")
	Sets      []string // key=value overrides of the first phase's config, or phases.… and top-level keys
}

// Fork builds a fork of run parentID (its input and finished phases' results): the phases from the
// fork's first on, the first starting from the chosen checkpoint (retained lists a checkpoint
// directory of the parent), with the overrides set and the lineage recorded. What cannot work is a
// usage error naming the flag.
func Fork(parentID string, parent workflows.PipelineInput, results map[string]workflows.PhaseResult,
	retained func(dir string) ([]ckpt.Ref, error), f ForkSpec) (workflows.PipelineInput, error) {
	index := map[string]int{}
	var names []string
	for i, p := range parent.Phases {
		index[p.Name], names = i, append(names, p.Name)
	}
	phaseIndex := func(flag, name string) (int, error) {
		i, ok := index[name]
		if !ok {
			return 0, usage.Errorf("fork: %s %q: %s has no such phase (phases: %s)", flag, name, parentID, strings.Join(names, ", "))
		}
		return i, nil
	}
	lin := workflows.Lineage{Run: parentID, Step: -1, Set: f.Sets}
	first := -1
	if f.FromPhase != "" {
		i, err := phaseIndex("--from-phase", f.FromPhase)
		if err != nil {
			return workflows.PipelineInput{}, err
		}
		first = i
	}
	if f.At != "" {
		j, uri, dir, step, err := forkCheckpoint(parentID, parent, results, retained, f.At, phaseIndex)
		if err != nil {
			return workflows.PipelineInput{}, err
		}
		if first < 0 {
			first = j + 1
		}
		if first >= len(parent.Phases) {
			return workflows.PipelineInput{}, usage.Errorf("fork: --at %s: no phase follows %s in %s: name the phase to run with --from-phase", f.At, parent.Phases[j].Name, parentID)
		}
		if first < j {
			return workflows.PipelineInput{}, usage.Errorf("fork: --from-phase %s comes before --at's phase %s", f.FromPhase, parent.Phases[j].Name)
		}
		lin.Phase, lin.Step, lin.Checkpoint = dir, step, uri
	} else {
		uri, err := phaseStart(parentID, parent, results, first)
		if err != nil {
			return workflows.PipelineInput{}, err
		}
		lin.Phase, lin.Checkpoint = parent.Phases[first].Name, uri
	}
	phases, err := forkPhases(parentID, parent, results, first, lin.Checkpoint)
	if err != nil {
		return workflows.PipelineInput{}, err
	}
	name := f.Name
	if name == "" {
		name = parent.Name + "-fork"
	}
	in := workflows.PipelineInput{Name: name, Store: parent.Store, Seed: parent.Seed, Phases: phases, Parent: &lin}
	return applyForkSets(in, f.Sets)
}

// forkCheckpoint resolves --at PHASE[@STEP] to the phase's index, the checkpoint URI, its
// directory and step (-1: the phase's result).
func forkCheckpoint(parentID string, parent workflows.PipelineInput, results map[string]workflows.PhaseResult,
	retained func(dir string) ([]ckpt.Ref, error), at string, phaseIndex func(flag, name string) (int, error)) (int, string, string, int, error) {
	dir, stepText, hasStep := strings.Cut(at, "@")
	base := dir
	if i := strings.LastIndex(dir, ".b"); i > 0 {
		if _, err := strconv.Atoi(dir[i+2:]); err == nil {
			base = dir[:i] // a back-tracking branch's directory
		}
	}
	j, err := phaseIndex("--at", base)
	if err != nil {
		return 0, "", "", 0, err
	}
	if !hasStep {
		r, ok := results[base]
		if !ok || r.Checkpoint == "" || r.Skipped != "" {
			return 0, "", "", 0, usage.Errorf("fork: --at %s: phase %s of %s has no result (yet); name a retained step: --at %s@STEP", at, base, parentID, dir)
		}
		return j, r.Checkpoint, base, -1, nil
	}
	step, err := strconv.Atoi(stepText)
	if err != nil || step < 0 {
		return 0, "", "", 0, usage.Errorf("fork: --at %s: %q is not a step number", at, stepText)
	}
	refs, err := retained(dir)
	if err != nil {
		return 0, "", "", 0, fmt.Errorf("fork: list the checkpoints of %s/%s: %w", parentID, dir, err)
	}
	var have []string
	for _, r := range refs {
		if int(r.Step) == step {
			return j, r.URI, dir, step, nil
		}
		have = append(have, strconv.FormatInt(r.Step, 10))
	}
	return 0, "", "", 0, usage.Errorf("fork: --at %s: %s/%s has no checkpoint at step %d (retained: %s; keep_last decides how many stay)",
		at, parentID, dir, step, orNone(have))
}

// phaseStart is the checkpoint phase i of the parent started from ("" for a phase from scratch).
func phaseStart(parentID string, parent workflows.PipelineInput, results map[string]workflows.PhaseResult, i int) (string, error) {
	spec := parent.Phases[i]
	switch {
	case strings.Contains(spec.From, "://"):
		return spec.From, nil
	case spec.From != "":
		return resultCheckpoint(parentID, results, spec.From)
	case i == 0:
		return "", nil
	}
	return resultCheckpoint(parentID, results, parent.Phases[i-1].Name)
}

func resultCheckpoint(parentID string, results map[string]workflows.PhaseResult, name string) (string, error) {
	r, ok := results[name]
	if !ok || r.Checkpoint == "" {
		return "", usage.Errorf("fork: phase %s of %s has no result (yet) to start from", name, parentID)
	}
	return r.Checkpoint, nil
}

// forkPhases are the parent's phases from first on: the first starts from uri (a gate condition
// on it has no earlier phase to read and is dropped), and a later phase's from naming a phase left
// out becomes that phase's checkpoint.
func forkPhases(parentID string, parent workflows.PipelineInput, results map[string]workflows.PhaseResult, first int, uri string) ([]workflows.PhaseSpec, error) {
	kept := map[string]bool{}
	var phases []workflows.PhaseSpec
	for i, p := range parent.Phases[first:] {
		if i == 0 {
			p.From = uri
			if p.Gate != nil && p.Gate.When != "" {
				p.Gate = nil
			}
		} else if p.From != "" && !strings.Contains(p.From, "://") && !kept[p.From] {
			cp, err := resultCheckpoint(parentID, results, p.From)
			if err != nil {
				return nil, err
			}
			p.From = cp
		}
		if p.FromData != "" && !kept[p.FromData] {
			return nil, usage.Errorf("fork: phase %s trains on the data of phase %s, which the fork leaves out: fork from an earlier phase", p.Name, p.FromData)
		}
		kept[p.Name] = true
		phases = append(phases, p)
	}
	return phases, nil
}

// applyForkSets applies the overrides: key=value to the first phase's config, phases.… and the
// top-level keys to the pipeline; then decodes and validates the result.
func applyForkSets(in workflows.PipelineInput, sets []string) (workflows.PipelineInput, error) {
	b, err := json.Marshal(in)
	if err != nil {
		return in, err
	}
	tree, err := config.ParseTree(b)
	if err != nil {
		return in, err
	}
	for _, s := range sets {
		key, _, _ := strings.Cut(s, "=")
		top, _, _ := strings.Cut(key, ".")
		if top != "phases" && top != "name" && top != "seed" && top != "store" {
			s = "phases.0.config." + s
		}
		if tree, err = config.Set(tree, s); err != nil {
			return in, usage.Errorf("fork --set: %v", err)
		}
	}
	var out workflows.PipelineInput
	if err := config.Decode(tree, &out, ""); err != nil {
		return in, usage.Errorf("fork --set: %v", err)
	}
	if err := out.Validate(); err != nil {
		return in, usage.Errorf("fork: %v", err)
	}
	return out, nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
