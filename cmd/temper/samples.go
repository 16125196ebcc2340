package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/temperml/temper/activities/ckpt"
	actrollout "github.com/temperml/temper/activities/rollout"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/workers"
)

// rolloutName matches the objects activities/rollout writes (RolloutsKey): iter-NNNNNN.jsonl, or with a
// tag (shards, self-correction rounds) iter-NNNNNN-TAG.jsonl; not the verdicts beside them (TAG.verdicts).
var rolloutName = regexp.MustCompile(`^iter-(\d+)(?:-[^/.]+)?\.jsonl$`)

// iterationObjects lists the rollouts objects of a phase by iteration.
func iterationObjects(ctx context.Context, st ckpt.Store, run, phase string) (map[int][]string, []int, error) {
	dir := path.Dir(actrollout.RolloutsKey(run, phase, 0, "")) + "/"
	objs, err := st.List(ctx, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", st.URI(dir), err)
	}
	byIter := map[int][]string{}
	for _, o := range objs {
		m := rolloutName.FindStringSubmatch(path.Base(o.Key))
		if m == nil || path.Dir(o.Key)+"/" != dir {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		byIter[n] = append(byIter[n], o.Key)
	}
	iters := make([]int, 0, len(byIter))
	for n, keys := range byIter {
		iters = append(iters, n)
		sort.Slice(keys, func(i, j int) bool { // the iteration's own rollouts first, then its tagged rounds
			if li, lj := len(keys[i]), len(keys[j]); li != lj {
				return li < lj
			}
			return keys[i] < keys[j]
		})
	}
	sort.Ints(iters)
	if len(iters) == 0 {
		return nil, nil, fmt.Errorf("no rollouts under %s: is %s an RL phase of run %s, and is this its store (--store)?", st.URI(dir), phase, run)
	}
	return byIter, iters, nil
}

func quoted(s string, max int) string {
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strconv.Quote(s)
}

func printRollouts(uri string, rs []rollout.Rollout, limit int) {
	fmt.Fprintf(stdout, "%s: %d rollouts\n", uri, len(rs))
	group := -1
	for i, r := range rs {
		if limit > 0 && i >= limit {
			fmt.Fprintf(stdout, "  … %d more (-n 0 prints all)\n", len(rs)-limit)
			return
		}
		if r.Group != group {
			group = r.Group
			line := fmt.Sprintf("  group %d  prompt %s", r.Group, quoted(r.Prompt, 200))
			if r.Answer != "" {
				line += "  answer " + quoted(r.Answer, 80)
			}
			fmt.Fprintln(stdout, line)
		}
		line := fmt.Sprintf("    %-10s policy v%d  %-6s %3d tokens  %s", r.ID, r.PolicyVersion, r.StopReason, len(r.Tokens), quoted(r.Completion, 400))
		if r.Attempt > 0 {
			line += fmt.Sprintf("  (retry %d after: %s)", r.Attempt, quoted(r.Feedback, 200))
		}
		fmt.Fprintln(stdout, line)
		if ep := r.Ep; ep != nil { // an agentic episode: its counts and the whole transcript
			check := ""
			if ep.Checked {
				check = fmt.Sprintf("  checked (last check passed: %v)", ep.CheckPass)
			}
			fmt.Fprintf(stdout, "               episode: %d turns, %d tool calls, %d tool errors, ended by %s%s\n", ep.Turns, ep.ToolCalls, ep.ToolErrors, ep.End, check)
			fmt.Fprintf(stdout, "               transcript %s\n", quoted(ep.Transcript, 1200))
		}
	}
}

func init() {
	register(&command{
		name:    "samples",
		summary: "print the samples (rollouts) an RL iteration produced, from the run's store",
		usage:   "RUN PHASE",
		flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			var c clientFlags
			c.bind(fs)
			iter := fs.Int("iter", -1, "iteration (default: the latest with rollouts)")
			storeURI := fs.String("store", "", "the run's store (default: the one in the run's input when its server answers, else $TEMPER_HOME/store)")
			asJSON := fs.Bool("json", false, "print the rollouts as stored (JSONL: `temper score` reads it)")
			limit := fs.Int("n", 64, "rollouts printed per object (0: all; text output only)")
			return func(ctx context.Context, args []string) error {
				if len(args) != 2 {
					return usageErr("usage: temper samples RUN PHASE [--iter N]")
				}
				run, phase := args[0], args[1]
				if *storeURI == "" {
					*storeURI = workers.DefaultStoreURI()
					if workers.Reachable(c.temporal) {
						if cl, err := c.dial(); err == nil {
							if in, ok := runInput(ctx, cl, run); ok && in.Store != "" {
								*storeURI = in.Store
							}
							cl.Close()
						}
					}
				}
				st, err := ckpt.Open(ctx, *storeURI, ckpt.Options{})
				if err != nil {
					return usageErr("--store %s: %v", *storeURI, err)
				}
				defer st.Close()
				byIter, iters, err := iterationObjects(ctx, st, run, phase)
				if err != nil {
					return err
				}
				n := *iter
				if n < 0 {
					n = iters[len(iters)-1]
				}
				keys, ok := byIter[n]
				if !ok {
					have := make([]string, len(iters))
					for i, x := range iters {
						have[i] = strconv.Itoa(x)
					}
					return usageErr("--iter %d: %s %s has rollouts for iterations %s", n, run, phase, strings.Join(have, ", "))
				}
				for _, key := range keys {
					rc, err := st.Get(ctx, key)
					if err != nil {
						return fmt.Errorf("read %s: %w", st.URI(key), err)
					}
					rs, err := rollout.Read(rc, st.URI(key))
					rc.Close()
					if err != nil {
						return err
					}
					if *asJSON {
						for _, r := range rs {
							b, _ := json.Marshal(r)
							fmt.Fprintln(stdout, string(b))
						}
						continue
					}
					fmt.Fprintf(stdout, "run %s phase %s iteration %d (of %d..%d)\n", run, phase, n, iters[0], iters[len(iters)-1])
					printRollouts(st.URI(key), rs, *limit)
				}
				return nil
			}
		},
	})
}
