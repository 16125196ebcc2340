package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/preference"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/workers"
)

func init() {
	register(&command{name: "data", summary: "datasets: `data gen TASK` writes a built-in task as JSONL; `data check FILE` validates one",
		usage: "gen TASK | check FILE.jsonl | tasks", subs: []string{"gen", "check", "tasks"}, flags: flagsOf[dataCmd]()})
}

type dataCmd struct {
	n, heldout, samples, pack       int
	seed                            uint64
	out, from                       string
	text, pairs, kto, chat, toolDem bool
}

func (c *dataCmd) bind(fs *flag.FlagSet) {
	fs.IntVar(&c.n, "n", 1000, "examples to generate")
	fs.IntVar(&c.heldout, "heldout", 0, "also write this many held-out examples (disjoint prompts) to OUT with .heldout before the extension")
	fs.Uint64Var(&c.seed, "seed", 1, "seed: same seed, same data")
	fs.StringVar(&c.out, "out", "", "output file (default: stdout)")
	fs.BoolVar(&c.text, "text", false, "write pretraining lines {\"text\": prompt+completion} instead of prompt/completion")
	fs.BoolVar(&c.pairs, "pairs", false, "write preference pairs {prompt, chosen, rejected}: the correct answer against a plausible mistake")
	fs.BoolVar(&c.kto, "kto", false, "with --pairs: write KTO's unpaired form {prompt, completion, label}")
	fs.StringVar(&c.from, "from", "", "with --pairs: pair verified-correct and incorrect samples of this checkpoint (URI or directory) instead of synthetic mistakes")
	fs.IntVar(&c.samples, "samples", 8, "with --from: completions sampled per prompt")
	fs.BoolVar(&c.chat, "chat", false, "pose each example as a chat (the prompt as the user's message, the completion as the assistant's), as agentic episodes are; with --text, write the rendered conversation as text; held-out prompts are rendered up to the assistant's turn")
	fs.IntVar(&c.pack, "pack", 1, "with --text: examples per text line")
	fs.BoolVar(&c.toolDem, "tools", false, "agentic task (bigmul, facts, route, add2check, addcheck): write tool-use demonstrations (multi-turn messages: user, assistant calling its tools, their results, assistant answer); held-out stays prompt/completion")
}

func (c *dataCmd) run(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageErr("usage: temper data gen TASK | data check FILE | data tasks")
	}
	switch args[0] {
	case "tasks":
		for _, name := range tasks.Names() {
			t, _ := tasks.Lookup(name)
			fmt.Fprintf(stdout, "  %-8s %s\n", name, t.Doc())
		}
		return nil
	case "check":
		return checkData(args)
	case "gen":
		return c.gen(ctx, args)
	}
	return usageErr("unknown data command %q (gen, check, tasks)", args[0])
}

// checkData is `temper data check FILE.jsonl`.
func checkData(args []string) error {
	if len(args) != 2 {
		return usageErr("usage: temper data check FILE.jsonl")
	}
	f, err := os.Open(args[1])
	if err != nil {
		return usageErr("%v", err)
	}
	defer f.Close()
	count := 0
	if err := tasks.ReadJSONL(f, args[1], func(int, tasks.Example) error { count++; return nil }); err != nil {
		return usageErr("%v", err)
	}
	fmt.Fprintf(stdout, "%s: %d examples, all valid\n", args[1], count)
	return nil
}

// gen is `temper data gen TASK`: preference pairs (synthetic or sampled from a model), or examples.
func (c *dataCmd) gen(ctx context.Context, args []string) error {
	if len(args) != 2 {
		return usageErr("usage: temper data gen TASK (tasks: `temper data tasks`)")
	}
	task, err := tasks.Lookup(args[1])
	if err != nil {
		return usageErr("%v", err)
	}
	if c.from != "" && !c.pairs {
		return usageErr("--from needs --pairs")
	}
	if c.pairs && c.from != "" {
		return writeModelPairs(ctx, task, c.from, c.n, c.samples, c.heldout, c.seed, c.kto, c.out)
	}
	if c.pairs {
		return writePairs(task, c.n, c.heldout, c.seed, c.kto, c.out)
	}
	return c.genExamples(task)
}

// genExamples writes the task's training examples (as demonstrations, chats or text, packed) and
// its held-out ones.
func (c *dataCmd) genExamples(task tasks.Task) error {
	train, held := tasks.Split(task, c.n, c.heldout, c.seed)
	var err error
	if c.toolDem {
		if c.text || c.pairs {
			return usageErr("--tools writes demonstrations: not with --text or --pairs")
		}
		if train, err = tasks.Demonstrations(task, train); err != nil {
			return usageErr("%v", err)
		}
	}
	if c.pack < 1 || (c.pack > 1 && !c.text) {
		return usageErr("--pack %d: want ≥ 1, and more than 1 only with --text", c.pack)
	}
	if c.chat {
		if c.toolDem {
			return usageErr("--tools demonstrations are chats already: not with --chat")
		}
		for i := range train {
			if train[i], err = asChatExample(train[i], c.text); err != nil {
				return usageErr("%v", err)
			}
		}
		for i := range held {
			if held[i], err = asChatPrompt(held[i]); err != nil {
				return usageErr("%v", err)
			}
		}
	} else if c.text {
		for i := range train {
			train[i] = tasks.AsText(train[i])
		}
	}
	if c.text && c.pack > 1 {
		train = packText(train, c.pack)
	}
	if err := writeExamples(c.out, train); err != nil {
		return err
	}
	if c.heldout > 0 {
		if c.out == "" {
			return usageErr("--heldout needs --out")
		}
		hp := heldoutPath(c.out)
		if err := writeExamples(hp, held); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %d examples to %s and %d held-out to %s\n", len(train), c.out, len(held), hp)
	}
	return nil
}

// heldoutPath is out with .heldout before its extension.
func heldoutPath(out string) string {
	ext := filepath.Ext(out)
	return out[:len(out)-len(ext)] + ".heldout" + ext
}

// asChatExample poses a prompt/completion example as a user/assistant conversation; as text, the
// conversation rendered by the models' chat template (what an episode's tokens decode to).
func asChatExample(ex tasks.Example, text bool) (tasks.Example, error) {
	msgs := []tokenize.Message{{Role: tokenize.RoleUser, Content: ex.Prompt}, {Role: tokenize.RoleAssistant, Content: ex.Completion}}
	if !text {
		return tasks.Example{ID: ex.ID, Task: ex.Task, Answer: ex.Answer, Messages: msgs}, nil
	}
	enc := train.Encoder()
	ids, _, err := enc.Chat.Render(enc.Tok, msgs)
	if err != nil {
		return tasks.Example{}, err
	}
	return tasks.Example{ID: ex.ID, Task: ex.Task, Text: enc.Tok.Decode(ids) + "\n"}, nil
}

// asChatPrompt is a held-out example whose prompt is its chat rendering up to the assistant's
// turn, so that an evaluation of a model trained on chats asks in the same format.
func asChatPrompt(ex tasks.Example) (tasks.Example, error) {
	enc := train.Encoder()
	ids, err := enc.Chat.Prompt(enc.Tok, []tokenize.Message{{Role: tokenize.RoleUser, Content: ex.Prompt}})
	if err != nil {
		return tasks.Example{}, err
	}
	ex.Prompt = enc.Tok.Decode(ids)
	return ex, nil
}

// packText joins every k consecutive text examples into one line.
func packText(exs []tasks.Example, k int) []tasks.Example {
	var out []tasks.Example
	for i := 0; i < len(exs); i += k {
		ex := exs[i]
		for _, e := range exs[i+1 : min(i+k, len(exs))] {
			ex.Text += e.Text
		}
		out = append(out, ex)
	}
	return out
}

func writeExamples(path string, exs []tasks.Example) error {
	return writeTo(path, func(w io.Writer) error {
		if err := tasks.WriteJSONL(w, exs); err != nil {
			return fmt.Errorf("data: write %s: %w", path, err)
		}
		return nil
	})
}

// writeTo runs write on the file path, created, or on stdout when path is "".
func writeTo(path string, write func(io.Writer) error) error {
	if path == "" {
		return write(stdout)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("data: create %s: %w", path, err)
	}
	defer f.Close()
	return write(f)
}

func writePairs(task tasks.Task, n, heldout int, seed uint64, kto bool, out string) error {
	train, held, err := tasks.PrefSplit(task, n, heldout, seed)
	if err != nil {
		return usageErr("%v", err)
	}
	return writePrefSets(train, held, heldout, kto, out)
}

// writeModelPairs samples a checkpoint on n training prompts of the task (and the held-out ones), checks
// every sample with the task's verifier and pairs a correct completion with an incorrect one: the same
// code a preference phase with data.from_model runs (train.PreferencesFromModel), here in-process with a
// scratch store.
func writeModelPairs(ctx context.Context, task tasks.Task, from string, n, samples, heldout int, seed uint64, kto bool, out string) error {
	uri, err := checkpointURI(from)
	if err != nil {
		return usageErr("--from: %v", err)
	}
	scratch, err := os.MkdirTemp("", "temper-data-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	a := &preference.Activities{Activities: &train.Activities{Ckpt: ckpt.New(ckpt.Options{}), NewEngine: workers.NewTrainEngine(workers.EngineOptions{})}}
	res, err := a.PreferencesFromModel(ctx, trainapi.PrefFromModelInput{
		Store: "file://" + scratch, Run: "data", Phase: "gen", Checkpoint: uri, Seed: seed,
		Data:     trainapi.PrefDataSpec{Task: task.Name(), HeldoutExamples: heldout},
		Sampling: trainapi.PrefSampling{Prompts: n, Samples: samples, SyntheticHeldout: heldout == 0},
	})
	if err != nil {
		return err
	}
	read := func(uri string) ([]tasks.PrefExample, error) {
		if uri == "" {
			return nil, nil
		}
		path := strings.TrimPrefix(uri, "file://")
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		return tasks.ReadPrefAll(f, path)
	}
	trainPairs, err := read(res.Train)
	if err != nil {
		return err
	}
	held, err := read(res.Heldout)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%d pairs from %d prompts (%.0f%% of samples correct; %d prompts all correct, dropped; %d with no correct sample, paired with the reference answer); %d held-out pairs\n",
		res.Pairs, res.Prompts, 100*res.SampleRate, res.AllCorrect, res.NoneCorrect, res.HeldoutPairs)
	return writePrefSets(trainPairs, held, heldout, kto, out)
}

// writePrefSets writes train pairs to out (stdout when empty) and, when heldout > 0, the held-out
// ones next to it with .heldout before the extension; kto writes the unpaired form.
func writePrefSets(train, held []tasks.PrefExample, heldout int, kto bool, out string) error {
	if kto {
		train, held = tasks.Unpair(train), tasks.Unpair(held)
	}
	write := func(path string, exs []tasks.PrefExample) error {
		return writeTo(path, func(w io.Writer) error { return tasks.WritePrefJSONL(w, exs) })
	}
	if err := write(out, train); err != nil {
		return err
	}
	if heldout > 0 {
		if out == "" {
			return usageErr("--heldout needs --out")
		}
		return write(heldoutPath(out), held)
	}
	return nil
}

// checkpointURI accepts a checkpoint URI (file:///…/step-NNNNNN/, gs://…) or a local directory.
func checkpointURI(s string) (string, error) {
	if strings.Contains(s, "://") {
		return s, nil
	}
	abs, err := filepath.Abs(s)
	if err != nil {
		return "", err
	}
	return "file://" + filepath.ToSlash(abs) + "/", nil
}
