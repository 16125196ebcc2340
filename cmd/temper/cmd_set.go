package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/user"
	"strings"

	"github.com/temperml/temper/internal/pipeline"
	"github.com/temperml/temper/workflows"
)

func init() {
	register(&command{name: "set", summary: "change live fields of a run's running phase (applied at its next iteration or chunk boundary; `config explain KIND` marks them [live])",
		usage: "RUN [PHASE] key=value [key=value...]", flags: flagsOf[setCmd]()})
}

type setCmd struct {
	sf steerFlags
	at int
}

func (c *setCmd) bind(fs *flag.FlagSet) {
	c.sf.bind(fs)
	fs.IntVar(&c.at, "at", 0, "apply at this boundary (after this many iterations or steps) instead of the next one; repeats a change exactly")
}

func (c *setCmd) run(ctx context.Context, args []string) error {
	if len(args) < 2 {
		return usageErr("usage: temper set RUN [PHASE] key=value [key=value...] (live fields: temper config explain KIND)")
	}
	req := workflows.SteerRequest{At: c.at}
	for _, a := range args[1:] {
		if !strings.Contains(a, "=") {
			if req.Phase != "" || len(req.Set) > 0 {
				return usageErr("set %q: want key=value (the phase, if any, comes first)", a)
			}
			req.Phase = a
			continue
		}
		req.Set = append(req.Set, a)
	}
	if len(req.Set) == 0 {
		return usageErr("usage: temper set RUN [PHASE] key=value [key=value...]: no key=value given")
	}
	return c.sf.send(ctx, args[0], workflows.UpdateSet, req)
}

// steerFlags are the flags of the steering commands (set, pause, resume, approve, reject).
type steerFlags struct {
	cf     clientFlags
	note   string
	asJSON bool
}

func (f *steerFlags) bind(fs *flag.FlagSet) {
	f.cf.bind(fs)
	fs.StringVar(&f.note, "note", "", "why: kept with the event in the history, the metrics log and the report")
	fs.BoolVar(&f.asJSON, "json", false, "print the reply as JSON")
}

// send sends the steering Update name to run id (a pipeline, which forwards set, pause and resume
// to its running phase; a phase workflow ID also works) and prints the reply. A refusal is bad
// input (exit code 2) and says why.
func (f *steerFlags) send(ctx context.Context, id, name string, req workflows.SteerRequest) error {
	req.Note, req.By = f.note, whoAmI()
	cl, err := f.cf.dial()
	if err != nil {
		return err
	}
	defer cl.Close()
	reply, err := pipeline.Steer(ctx, cl, id, name, req)
	if err != nil {
		return err
	}
	if f.asJSON {
		b, _ := json.Marshal(reply)
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	fmt.Fprintln(stdout, reply.Message)
	return nil
}

// whoAmI names the person steering: user@host.
func whoAmI() string {
	name := "someone"
	if u, err := user.Current(); err == nil && u.Username != "" {
		name = u.Username
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		name += "@" + h
	}
	return name
}
