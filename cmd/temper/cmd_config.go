package main

import (
	"context"
	"flag"
	"fmt"

	"github.com/temperml/temper/internal/config"
	"github.com/temperml/temper/workflows"
)

func init() {
	register(&command{name: "config", summary: "explain configuration: `config explain` lists phase kinds, `config explain KIND|pipeline` its fields",
		usage: "explain [KIND|pipeline]", subs: []string{"explain"}, flags: flagsOf[configCmd]()})
}

type configCmd struct{}

func (c *configCmd) bind(*flag.FlagSet) {}

func (c *configCmd) run(ctx context.Context, args []string) error {
	if len(args) == 0 || args[0] != "explain" {
		return usageErr("usage: temper config explain [KIND|pipeline]")
	}
	if len(args) == 1 {
		fmt.Fprintln(stdout, "pipeline: the top level of a pipeline file (temper config explain pipeline)\n\nphase kinds:")
		for _, k := range workflows.PhaseKinds() {
			fmt.Fprintf(stdout, "  %-10s %s\n", k.Kind, k.Doc)
		}
		return nil
	}
	if args[1] == "pipeline" {
		fmt.Fprint(stdout, config.Explain(workflows.PipelineInput{}))
		return nil
	}
	s, err := workflows.ExplainPhase(args[1])
	if err != nil {
		return usageErr("%v", err)
	}
	fmt.Fprint(stdout, s)
	return nil
}
