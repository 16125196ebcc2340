package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/internal/config"
	"github.com/temperml/temper/internal/report"
	"github.com/temperml/temper/workflows"
)

func init() {
	register(&command{name: "fork", summary: "start a new run from a retained checkpoint of another (--at PHASE[@STEP]), or re-run a phase (--from-phase), with other settings (--set); lineage recorded",
		usage: "RUN --at PHASE[@STEP] | --from-phase PHASE", flags: flagsOf[forkCmd]()})
}

type forkCmd struct {
	cf        clientFlags
	at        string
	fromPhase string
	sets      multiFlag
	name      string
	id        string
	store     string
	wait      bool
	asJSON    bool
	dry       bool
}

func (c *forkCmd) bind(fs *flag.FlagSet) {
	c.cf.bind(fs)
	fs.StringVar(&c.at, "at", "", "start from this checkpoint of RUN: PHASE@STEP (a retained step; PHASE may be a branch directory, grpo.b1) or PHASE (its result)")
	fs.StringVar(&c.fromPhase, "from-phase", "", "the fork's first phase (default: the one after --at's); without --at it re-runs this phase from the checkpoint it started from")
	fs.Var(&c.sets, "set", "override a field: key=value sets the first phase's config, phases.NAME.… or a top-level key (seed, name) the pipeline's (repeatable)")
	fs.StringVar(&c.name, "name", "", "the fork's pipeline name (default: RUN's name + \"-fork\")")
	fs.StringVar(&c.id, "id", "", "workflow ID (default: NAME-UTCDATE-RANDOM)")
	fs.StringVar(&c.store, "store", "", "RUN's store (default: the one in its input)")
	fs.BoolVar(&c.wait, "wait", false, "follow the fork to its end")
	fs.BoolVar(&c.asJSON, "json", false, "with --wait, end with one JSON line")
	fs.BoolVar(&c.dry, "dry-run", false, "print the fork's pipeline input JSON; start nothing")
}

func (c *forkCmd) run(ctx context.Context, args []string) error {
	if len(args) != 1 || (c.at == "" && c.fromPhase == "") {
		return usageErr("usage: temper fork RUN --at PHASE[@STEP] [--from-phase PHASE] [--set key=value...] (or --from-phase PHASE alone: re-run it)")
	}
	cl, err := c.cf.dial()
	if err != nil {
		return err
	}
	defer cl.Close()
	parentID := args[0]
	desc, err := cl.DescribeWorkflowExecution(ctx, parentID, "")
	if err != nil {
		return fmt.Errorf("fork: describe %s: %w", parentID, err)
	}
	parent, ok := report.RunInput(ctx, cl, parentID)
	if !ok {
		return usageErr("fork: %s: cannot read its pipeline input (is it a Temper pipeline?)", parentID)
	}
	if c.store != "" {
		parent.Store = c.store
	}
	results := report.PhaseResultsOf(ctx, cl, parentID, parent, desc.GetWorkflowExecutionInfo().GetStatus())
	retained := func(dir string) ([]ckpt.Ref, error) {
		cc := ckpt.New(ckpt.Options{})
		defer cc.Close()
		return cc.List(ctx, parent.Store, parentID, dir)
	}
	in, err := forkPipeline(parentID, parent, results, retained, forkSpec{at: c.at, fromPhase: c.fromPhase, sets: c.sets, name: c.name})
	if err != nil {
		return err
	}
	if c.dry {
		b, _ := json.MarshalIndent(in, "", "  ")
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	if c.id == "" {
		c.id = newRunID(in.Name)
	}
	run, err := startPipeline(ctx, cl, c.id, in)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "run     %s\nforked  from %s at %s (%s)\nweb ui  %s\n", run.GetID(), parentID, report.LineageAt(*in.Parent),
		in.Parent.Checkpoint, c.cf.runURL(run.GetID()))
	if !c.wait {
		return nil
	}
	return report.Follow(ctx, cl, run, os.Stderr, stdout, c.asJSON)
}

// forkSpec is what the user asked of a fork.
type forkSpec struct {
	at, fromPhase, name string
	sets                []string
}

// forkPipeline builds a fork of run parentID (its input and finished phases' results): the phases
// from the fork's first on, the first starting from the chosen checkpoint (retained lists a
// checkpoint directory of the parent), with the overrides set and the lineage recorded.
func forkPipeline(parentID string, parent workflows.PipelineInput, results map[string]workflows.PhaseResult,
	retained func(dir string) ([]ckpt.Ref, error), f forkSpec) (workflows.PipelineInput, error) {
	index := map[string]int{}
	var names []string
	for i, p := range parent.Phases {
		index[p.Name], names = i, append(names, p.Name)
	}
	phaseIndex := func(flag, name string) (int, error) {
		i, ok := index[name]
		if !ok {
			return 0, usageErr("fork: %s %q: %s has no such phase (phases: %s)", flag, name, parentID, strings.Join(names, ", "))
		}
		return i, nil
	}
	lin := workflows.Lineage{Run: parentID, Step: -1, Set: f.sets}
	first := -1
	if f.fromPhase != "" {
		i, err := phaseIndex("--from-phase", f.fromPhase)
		if err != nil {
			return workflows.PipelineInput{}, err
		}
		first = i
	}
	if f.at != "" {
		j, uri, dir, step, err := forkCheckpoint(parentID, parent, results, retained, f.at, phaseIndex)
		if err != nil {
			return workflows.PipelineInput{}, err
		}
		if first < 0 {
			first = j + 1
		}
		if first >= len(parent.Phases) {
			return workflows.PipelineInput{}, usageErr("fork: --at %s: no phase follows %s in %s: name the phase to run with --from-phase", f.at, parent.Phases[j].Name, parentID)
		}
		if first < j {
			return workflows.PipelineInput{}, usageErr("fork: --from-phase %s comes before --at's phase %s", f.fromPhase, parent.Phases[j].Name)
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
	name := f.name
	if name == "" {
		name = parent.Name + "-fork"
	}
	in := workflows.PipelineInput{Name: name, Store: parent.Store, Seed: parent.Seed, Phases: phases, Parent: &lin}
	return applyForkSets(in, f.sets)
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
			return 0, "", "", 0, usageErr("fork: --at %s: phase %s of %s has no result (yet); name a retained step: --at %s@STEP", at, base, parentID, dir)
		}
		return j, r.Checkpoint, base, -1, nil
	}
	step, err := strconv.Atoi(stepText)
	if err != nil || step < 0 {
		return 0, "", "", 0, usageErr("fork: --at %s: %q is not a step number", at, stepText)
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
	return 0, "", "", 0, usageErr("fork: --at %s: %s/%s has no checkpoint at step %d (retained: %s; keep_last decides how many stay)",
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
		return "", usageErr("fork: phase %s of %s has no result (yet) to start from", name, parentID)
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
			return nil, usageErr("fork: phase %s trains on the data of phase %s, which the fork leaves out: fork from an earlier phase", p.Name, p.FromData)
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
			return in, usageErr("fork --set: %v", err)
		}
	}
	var out workflows.PipelineInput
	if err := config.Decode(tree, &out, ""); err != nil {
		return in, usageErr("fork --set: %v", err)
	}
	if err := out.Validate(); err != nil {
		return in, usageErr("fork: %v", err)
	}
	return out, nil
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
