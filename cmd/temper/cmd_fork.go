package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/internal/pipeline"
	"github.com/temperml/temper/internal/report"
)

func init() {
	register(&command{name: "fork", summary: "start a new run from a retained checkpoint of another (--at PHASE[@STEP]), or re-run a phase (--from-phase), with other settings (--set); lineage recorded",
		usage: "RUN --at PHASE[@STEP] | --from-phase PHASE", flags: flagsOf[forkCmd]()})
}

type forkCmd struct {
	startFlags
	at, fromPhase string
	name, store   string
}

func (c *forkCmd) bind(fs *flag.FlagSet) {
	c.startFlags.bind(fs, startHelp{
		set:  "override a field: key=value sets the first phase's config, phases.NAME.… or a top-level key (seed, name) the pipeline's (repeatable)",
		wait: "follow the fork to its end", json: "with --wait, end with one JSON line", dry: "print the fork's pipeline input JSON; start nothing"})
	fs.StringVar(&c.at, "at", "", "start from this checkpoint of RUN: PHASE@STEP (a retained step; PHASE may be a branch directory, grpo.b1) or PHASE (its result)")
	fs.StringVar(&c.fromPhase, "from-phase", "", "the fork's first phase (default: the one after --at's); without --at it re-runs this phase from the checkpoint it started from")
	fs.StringVar(&c.name, "name", "", "the fork's pipeline name (default: RUN's name + \"-fork\")")
	fs.StringVar(&c.store, "store", "", "RUN's store (default: the one in its input)")
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
	in, err := pipeline.Fork(parentID, parent, results, retained, pipeline.ForkSpec{At: c.at, FromPhase: c.fromPhase, Sets: c.sets, Name: c.name})
	if err != nil {
		return err
	}
	if c.dryRun(in) {
		return nil
	}
	return c.start(ctx, cl, in, fmt.Sprintf("forked  from %s at %s (%s)\n", parentID, report.LineageAt(*in.Parent), in.Parent.Checkpoint))
}
