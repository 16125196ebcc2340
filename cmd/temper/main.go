package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"sort"
	"strings"
	"syscall"

	"github.com/temperml/temper/internal/usage"
)

// command is one subcommand. flags binds its options into a fresh FlagSet; the docker-compose test parses
// service commands with the same FlagSets, so a flag that exists only in docs fails a test.
type command struct {
	name    string
	summary string
	usage   string   // positional arguments, for help
	subs    []string // the subcommands it takes as its first argument (`temper data gen`), if any
	flags   func(fs *flag.FlagSet) func(ctx context.Context, args []string) error
}

// commands is the table of commands: each registers itself from its own file (cmd_NAME.go).
var commands = map[string]*command{}

func register(c *command) { commands[c.name] = c }

// runner is a command's flag struct: bind declares its flags, run is the command.
type runner interface {
	bind(fs *flag.FlagSet)
	run(ctx context.Context, args []string) error
}

// flagsOf is the flags function of the command whose flag struct is T: a fresh T per parse.
func flagsOf[T any, P interface {
	*T
	runner
}]() func(*flag.FlagSet) func(context.Context, []string) error {
	return func(fs *flag.FlagSet) func(context.Context, []string) error {
		c := P(new(T))
		c.bind(fs)
		return c.run
	}
}

// exitError carries a process exit code; 2 is bad usage or bad input (a *usage.Error, from
// whichever package refused it).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, a ...any) error { return usage.Errorf(format, a...) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := runCLI(ctx, os.Args[1:], os.Stdout, os.Stderr)
	if err == nil {
		return
	}
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	fmt.Fprintln(os.Stderr, "temper:", err)
	var ee *exitError
	if errors.As(err, &ee) {
		os.Exit(ee.code)
	}
	os.Exit(1)
}

// stdout is where commands print results; tests swap it.
var stdout io.Writer = os.Stdout

func runCLI(ctx context.Context, args []string, out, errOut io.Writer) error {
	stdout = out
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		printHelp(out)
		return nil
	}
	c, ok := commands[args[0]]
	if !ok {
		return usageErr("unknown command %q (commands: %s)", args[0], strings.Join(commandNames(), ", "))
	}
	fs := flag.NewFlagSet("temper "+c.name, flag.ContinueOnError)
	fs.SetOutput(errOut)
	run := c.flags(fs)
	fs.Usage = func() {
		fmt.Fprintf(errOut, "usage: temper %s [flags] %s\n%s\n\nflags:\n", c.name, c.usage, c.summary)
		fs.PrintDefaults()
	}
	pos, err := parseInterspersed(fs, args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return &exitError{code: 2, err: err}
	}
	return exitCode(run(ctx, pos))
}

// exitCode gives a usage error, wherever it was made, exit code 2.
func exitCode(err error) error {
	var ee *exitError
	if usage.Is(err) && !errors.As(err, &ee) {
		return &exitError{code: 2, err: err}
	}
	return err
}

// parseInterspersed lets flags follow positional arguments (`temper run p.yaml --wait`).
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

func commandNames() []string {
	var names []string
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func printHelp(w io.Writer) {
	fmt.Fprintln(w, "temper: LLM post-training where every phase is a durable Temporal workflow.\n\nusage: temper COMMAND [flags] [args]\n\ncommands:")
	for _, n := range commandNames() {
		c := commands[n]
		fmt.Fprintf(w, "  %-8s %s\n", n, c.summary)
	}
	fmt.Fprintln(w, "\n`temper COMMAND -h` shows a command's flags.")
}
