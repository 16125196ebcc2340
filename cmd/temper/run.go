package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/internal/config"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workflows"
)

// multiFlag collects repeated --set flags.
type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

// loadPipeline reads a YAML or JSON pipeline file, applies --set overrides, decodes strictly and
// validates, so every error names its file and field before anything starts.
func loadPipeline(path string, sets []string, home string) (workflows.PipelineInput, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return workflows.PipelineInput{}, usageErr("read pipeline: %v", err)
	}
	return parsePipeline(path, data, sets, home)
}

func parsePipeline(name string, data []byte, sets []string, home string) (workflows.PipelineInput, error) {
	var in workflows.PipelineInput
	tree, err := config.ParseTree(data)
	if err != nil {
		return in, usageErr("%s: %v", name, err)
	}
	for _, s := range sets {
		if tree, err = config.Set(tree, s); err != nil {
			return in, usageErr("--set: %v", err)
		}
	}
	if err := config.Decode(tree, &in, ""); err != nil {
		return in, usageErr("%s: %v", name, err)
	}
	if in.State != nil {
		return in, usageErr("%s: state: set by the pipeline itself when it continues as new; remove it", name)
	}
	if in.Store == "" {
		in.Store = defaultStore(home)
	}
	if err := in.Validate(); err != nil {
		return in, usageErr("%s: %v", name, err)
	}
	if err := checkDataFiles(in); err != nil {
		return in, usageErr("%s: %v", name, err)
	}
	return in, nil
}

var idUnsafe = regexp.MustCompile(`[^a-zA-Z0-9_-]+`)

func newRunID(name string) string {
	if name == "" {
		name = "run"
	}
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%s-%s-%s", idUnsafe.ReplaceAllString(name, "-"), time.Now().UTC().Format("20060102-150405"), hex.EncodeToString(b))
}

func startPipeline(ctx context.Context, c client.Client, id string, in workflows.PipelineInput) (client.WorkflowRun, error) {
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:        id,
		TaskQueue: workflows.QueueTemper,
		Memo:      map[string]any{"name": in.Name},
	}, workflows.PipelineName, in)
	if err != nil {
		return nil, fmt.Errorf("start pipeline %s: %w", id, err)
	}
	return run, nil
}

func init() {
	register(&command{
		name:    "run",
		summary: "validate a pipeline (YAML/JSON) and start it; --wait follows it to the end",
		usage:   "PIPELINE.yaml",
		flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			var c clientFlags
			c.bind(fs)
			var sets multiFlag
			fs.Var(&sets, "set", "override a field: key.path=value (repeatable; list elements by index or name)")
			wait := fs.Bool("wait", false, "follow the run with a progress bar and print its result")
			asJSON := fs.Bool("json", false, "with --wait, end with one JSON line: run ID, elapsed seconds, per-phase results")
			id := fs.String("id", "", "workflow ID (default: NAME-UTCDATE-RANDOM)")
			home := fs.String("home", workers.Home(), "state directory; the default store is HOME/store")
			dry := fs.Bool("dry-run", false, "validate and print the workflow input JSON; start nothing")
			return func(ctx context.Context, args []string) error {
				if len(args) != 1 {
					return usageErr("run wants one pipeline file, got %d arguments", len(args))
				}
				in, err := loadPipeline(args[0], sets, *home)
				if err != nil {
					return err
				}
				if *dry {
					b, _ := json.MarshalIndent(in, "", "  ")
					fmt.Fprintln(stdout, string(b))
					return nil
				}
				cl, err := c.dial()
				if err != nil {
					return err
				}
				defer cl.Close()
				if *id == "" {
					*id = newRunID(in.Name)
				}
				run, err := startPipeline(ctx, cl, *id, in)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "run     %s\nweb ui  %s\n", run.GetID(), c.runURL(run.GetID()))
				if !*wait {
					return nil
				}
				return follow(ctx, cl, run, os.Stderr, *asJSON)
			}
		},
	})
	register(&command{
		name:    "status",
		summary: "describe a run (default: the newest): status, current phase and step, results",
		usage:   "[RUN]",
		flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			var c clientFlags
			c.bind(fs)
			wait := fs.Bool("wait", false, "follow the run to its end")
			asJSON := fs.Bool("json", false, "print JSON")
			return func(ctx context.Context, args []string) error {
				cl, err := c.dial()
				if err != nil {
					return err
				}
				defer cl.Close()
				id := ""
				if len(args) > 0 {
					id = args[0]
				} else {
					runs, err := listRuns(ctx, cl, 1)
					if err != nil {
						return err
					}
					if len(runs) == 0 {
						return errors.New("no runs yet: start one with `temper run PIPELINE.yaml` or `temper demo`")
					}
					id = runs[0].ID
				}
				if *wait {
					return follow(ctx, cl, cl.GetWorkflow(ctx, id, ""), os.Stderr, *asJSON)
				}
				return printStatus(ctx, cl, &c, id, *asJSON)
			}
		},
	})
	register(&command{
		name:    "ls",
		summary: "list pipeline runs, newest first; --kind/--where list the pipelines and phases a visibility query finds",
		flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			var c clientFlags
			c.bind(fs)
			n := fs.Int("n", 20, "how many runs")
			kind := fs.String("kind", "", "only workflows of this kind (a phase kind such as grpo, or pipeline): TemperKind = 'KIND'")
			where := fs.String("where", "", "a visibility query on Temper's search attributes, e.g. 'TemperExactMatch > 0.5' (TemperRun, TemperPhase, TemperKind, TemperStep, TemperExactMatch, TemperRewardMean, TemperBacktrack)")
			return func(ctx context.Context, args []string) error {
				if len(args) > 0 {
					return usageErr("ls takes no arguments, got %q (filter with --kind and --where)", args)
				}
				var query string
				if *kind != "" || *where != "" {
					q, err := searchQuery(*kind, *where)
					if err != nil {
						return err
					}
					query = q
				}
				cl, err := c.dial()
				if err != nil {
					return err
				}
				defer cl.Close()
				if query != "" {
					rows, err := listSearch(ctx, cl, &c, query, *n)
					if err != nil {
						return err
					}
					printSearch(rows)
					return nil
				}
				runs, err := listRuns(ctx, cl, *n)
				if err != nil {
					return err
				}
				fmt.Fprintf(stdout, "%-44s %-11s %-20s %s\n", "RUN", "STATUS", "STARTED (UTC)", "PHASE")
				for _, r := range runs {
					fmt.Fprintf(stdout, "%-44s %-11s %-20s %s\n", r.ID, r.Status, r.Start.UTC().Format("2006-01-02 15:04:05"), r.Phase)
				}
				return nil
			}
		},
	})
}

// result is the one JSON line that `--json` prints at the end of a run.
type result struct {
	RunID          string        `json:"run_id"`
	Status         string        `json:"status"`
	ElapsedSeconds float64       `json:"elapsed_seconds"`
	Phases         []phaseResult `json:"phases"`
	Error          string        `json:"error,omitempty"`
}

type phaseResult struct {
	Name       string                 `json:"name"`
	Kind       string                 `json:"kind"`
	Checkpoint string                 `json:"checkpoint"`
	Seconds    float64                `json:"seconds"`
	Metrics    map[string]float64     `json:"metrics,omitempty"`
	Curve      []workflows.CurvePoint `json:"curve,omitempty"` // held-out exact match over training time
}

func toResult(id string, out workflows.PipelineOutput, elapsed time.Duration, err error) result {
	r := result{RunID: id, Status: "completed", ElapsedSeconds: elapsed.Seconds()}
	for _, p := range out.Phases {
		r.Phases = append(r.Phases, phaseResult{Name: p.Name, Kind: p.Kind, Checkpoint: p.Checkpoint, Seconds: p.Seconds, Metrics: p.Metrics, Curve: p.Curve})
	}
	if err != nil {
		r.Status, r.Error = "failed", err.Error()
	}
	return r
}

func printResult(w io.Writer, r result, asJSON bool) {
	if asJSON {
		b, _ := json.Marshal(r)
		fmt.Fprintln(w, string(b))
		return
	}
	fmt.Fprintf(w, "%s %s in %.1fs\n", r.RunID, r.Status, r.ElapsedSeconds)
	for _, p := range r.Phases {
		fmt.Fprintf(w, "  %-12s %-8s %6.1fs  %s\n", p.Name, p.Kind, p.Seconds, p.Checkpoint)
		for _, k := range sortedKeys(p.Metrics) {
			fmt.Fprintf(w, "      %-24s %s\n", k, fmtMetric(p.Metrics[k]))
		}
	}
	if line := exactMatchLine(r.Phases); line != "" {
		fmt.Fprintln(w, line)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "error: %s\n", r.Error)
	}
}

// fmtMetric prints a metric for people: whole numbers (steps) and large ones (tokens/s) as integers,
// others with 4 significant digits, since a float64's 16 digits are noise to a reader. JSON output keeps
// full precision.
func fmtMetric(v float64) string {
	if a := math.Abs(v); a < 1e15 && (v == math.Trunc(v) || a >= 1000) {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// exactMatchLine summarises held-out exact match along the pipeline ("held-out exact match: start
// 0.000 → pretrain 0.045 → sft 0.120 → grpo 0.190"), or "" when no phase evaluated it.
func exactMatchLine(phases []phaseResult) string {
	var parts []string
	for i, p := range phases {
		v, ok := p.Metrics["heldout_exact_match"]
		if !ok {
			continue
		}
		if b, ok := p.Metrics["heldout_exact_match_before"]; ok && i == 0 {
			parts = append(parts, fmt.Sprintf("start %.3f", b))
		}
		parts = append(parts, fmt.Sprintf("%s %.3f", p.Name, v))
	}
	if len(parts) == 0 {
		return ""
	}
	return "held-out exact match: " + strings.Join(parts, " → ")
}
