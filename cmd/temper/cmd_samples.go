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
	"github.com/temperml/temper/algorithms/layoutrender"
	"github.com/temperml/temper/algorithms/verify"
	"github.com/temperml/temper/internal/report"
	"github.com/temperml/temper/workers"
)

func init() {
	register(&command{name: "samples", summary: "print the samples (rollouts) an RL iteration produced, from the run's store",
		usage: "RUN PHASE", flags: flagsOf[samplesCmd]()})
}

type samplesCmd struct {
	cf     clientFlags
	iter   int
	store  string
	asJSON bool
	limit  int
	render renderFlags
}

// renderFlags draw the completions as layouts (--render-dir): report.RenderRollouts does it.
type renderFlags struct {
	dir, canvas, tag string
}

// options reads --canvas WxH into the renderer's options at the report's picture size.
func (f renderFlags) options() (layoutrender.Options, error) {
	var w, h float64
	if n, err := fmt.Sscanf(f.canvas, "%gx%g", &w, &h); err != nil || n != 2 || !(w > 0 && h > 0) {
		return layoutrender.Options{}, usageErr("--canvas %q: want WxH, the layout's canvas (e.g. 100x100)", f.canvas)
	}
	return layoutrender.Options{Canvas: verify.Size{W: w, H: h}, Tag: f.tag, Width: report.RenderSize, Height: report.RenderSize}, nil
}

func (c *samplesCmd) bind(fs *flag.FlagSet) {
	c.cf.bind(fs)
	fs.IntVar(&c.iter, "iter", -1, "iteration (default: the latest with rollouts)")
	fs.StringVar(&c.store, "store", "", "the run's store (default: the one in the run's input when its server answers, else $TEMPER_HOME/store)")
	fs.BoolVar(&c.asJSON, "json", false, "print the rollouts as stored (JSONL: `temper score` reads it)")
	fs.IntVar(&c.limit, "n", 64, "rollouts printed per object (0: all; text output only)")
	fs.StringVar(&c.render.dir, "render-dir", "", "also draw each completion as a layout (layoutrender) into DIR/ID.png")
	fs.StringVar(&c.render.canvas, "canvas", "100x100", "with --render-dir: the layouts' canvas, WxH")
	fs.StringVar(&c.render.tag, "tag", "", "with --render-dir: read each layout from inside <tag>…</tag>")
}

func (c *samplesCmd) run(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return usageErr("usage: temper samples RUN PHASE [--iter N]")
	}
	run, phase := args[0], args[1]
	if c.store == "" {
		c.store = c.runStore(ctx, run)
	}
	st, err := ckpt.Open(ctx, c.store, ckpt.Options{})
	if err != nil {
		return usageErr("--store %s: %v", c.store, err)
	}
	defer st.Close()
	byIter, iters, err := report.IterationObjects(ctx, st, run, phase)
	if err != nil {
		return err
	}
	n := c.iter
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
		rs, err := report.ReadRollouts(ctx, st, key)
		if err != nil {
			return err
		}
		if c.render.dir != "" {
			opts, err := c.render.options()
			if err != nil {
				return err
			}
			files, skipped, err := report.RenderRollouts(c.render.dir, rs, opts)
			if err != nil {
				return err
			}
			w := stdout
			if c.asJSON { // stdout is the rollouts' JSONL
				w = os.Stderr
			}
			fmt.Fprintf(w, "drew %d layouts into %s; %d could not be drawn\n", len(files), c.render.dir, len(skipped))
			for _, s := range skipped {
				fmt.Fprintln(w, "  "+s)
			}
		}
		if c.asJSON {
			for _, r := range rs {
				b, _ := json.Marshal(r)
				fmt.Fprintln(stdout, string(b))
			}
			continue
		}
		fmt.Fprintf(stdout, "run %s phase %s iteration %d (of %d..%d)\n", run, phase, n, iters[0], iters[len(iters)-1])
		report.WriteRollouts(stdout, st.URI(key), rs, c.limit)
	}
	return nil
}

// runStore is the store of run's input when its server answers, else $TEMPER_HOME/store.
func (c *samplesCmd) runStore(ctx context.Context, run string) string {
	store := workers.DefaultStoreURI()
	if workers.Reachable(c.cf.temporal) {
		if cl, err := c.cf.dial(); err == nil {
			if in, ok := report.RunInput(ctx, cl, run); ok && in.Store != "" {
				store = in.Store
			}
			cl.Close()
		}
	}
	return store
}
