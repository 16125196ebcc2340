package datagen

import (
	"context"
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
	"github.com/temperml/temper/internal/usage"
	"github.com/temperml/temper/workers"
)

// Options are `temper data gen`'s flags; the messages of a refusal name them.
type Options struct {
	N, Heldout int    // training and held-out examples (or pairs)
	Seed       uint64 // same seed, same data
	Out        string // the file to write ("": Stdout); held-out ones go beside it, .heldout before the extension
	Text       bool   // pretraining lines {"text": …}
	Pack       int    // with Text: examples per line
	Pairs, KTO bool   // preference pairs; KTO: their unpaired form
	From       string // with Pairs: a checkpoint to sample, verify and pair instead of synthetic mistakes
	Samples    int    // with From: completions per prompt
	Chat       bool   // examples as user/assistant conversations
	Tools      bool   // an agentic task's tool-use demonstrations
	Stdout     io.Writer
	Log        io.Writer // what was written, for people
}

// Check is `temper data check FILE.jsonl`: every line parses as an example; the count goes to out.
func Check(path string, out io.Writer) error {
	f, err := os.Open(path)
	if err != nil {
		return usage.Wrap(err)
	}
	defer f.Close()
	count := 0
	if err := tasks.ReadJSONL(f, path, func(int, tasks.Example) error { count++; return nil }); err != nil {
		return usage.Wrap(err)
	}
	fmt.Fprintf(out, "%s: %d examples, all valid\n", path, count)
	return nil
}

// Gen is `temper data gen TASK`: preference pairs (synthetic or sampled from a model), or examples.
func Gen(ctx context.Context, taskName string, c Options) error {
	task, err := tasks.Lookup(taskName)
	if err != nil {
		return usage.Wrap(err)
	}
	if c.From != "" && !c.Pairs {
		return usage.Errorf("--from needs --pairs")
	}
	if c.Pairs && c.From != "" {
		return c.writeModelPairs(ctx, task)
	}
	if c.Pairs {
		train, held, err := tasks.PrefSplit(task, c.N, c.Heldout, c.Seed)
		if err != nil {
			return usage.Wrap(err)
		}
		return c.writePrefSets(train, held)
	}
	return c.genExamples(task)
}

// genExamples writes the task's training examples (as demonstrations, chats or text, packed) and
// its held-out ones.
func (c Options) genExamples(task tasks.Task) error {
	train, held := tasks.Split(task, c.N, c.Heldout, c.Seed)
	var err error
	if c.Tools {
		if c.Text || c.Pairs {
			return usage.Errorf("--tools writes demonstrations: not with --text or --pairs")
		}
		if train, err = tasks.Demonstrations(task, train); err != nil {
			return usage.Wrap(err)
		}
	}
	if c.Pack < 1 || (c.Pack > 1 && !c.Text) {
		return usage.Errorf("--pack %d: want ≥ 1, and more than 1 only with --text", c.Pack)
	}
	if c.Chat {
		if c.Tools {
			return usage.Errorf("--tools demonstrations are chats already: not with --chat")
		}
		for i := range train {
			if train[i], err = asChatExample(train[i], c.Text); err != nil {
				return usage.Wrap(err)
			}
		}
		for i := range held {
			if held[i], err = asChatPrompt(held[i]); err != nil {
				return usage.Wrap(err)
			}
		}
	} else if c.Text {
		for i := range train {
			train[i] = tasks.AsText(train[i])
		}
	}
	if c.Text && c.Pack > 1 {
		train = packText(train, c.Pack)
	}
	if err := c.writeExamples(c.Out, train); err != nil {
		return err
	}
	if c.Heldout > 0 {
		if c.Out == "" {
			return usage.Errorf("--heldout needs --out")
		}
		hp := heldoutPath(c.Out)
		if err := c.writeExamples(hp, held); err != nil {
			return err
		}
		fmt.Fprintf(c.Log, "wrote %d examples to %s and %d held-out to %s\n", len(train), c.Out, len(held), hp)
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

func (c Options) writeExamples(path string, exs []tasks.Example) error {
	return c.writeTo(path, func(w io.Writer) error {
		if err := tasks.WriteJSONL(w, exs); err != nil {
			return fmt.Errorf("data: write %s: %w", path, err)
		}
		return nil
	})
}

// writeTo runs write on the file path, created, or on Stdout when path is "".
func (c Options) writeTo(path string, write func(io.Writer) error) error {
	if path == "" {
		return write(c.Stdout)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("data: create %s: %w", path, err)
	}
	defer f.Close()
	return write(f)
}

// writeModelPairs samples a checkpoint on n training prompts of the task (and the held-out ones), checks
// every sample with the task's verifier and pairs a correct completion with an incorrect one: the same
// code a preference phase with data.from_model runs (train.PreferencesFromModel), here in-process with a
// scratch store.
func (c Options) writeModelPairs(ctx context.Context, task tasks.Task) error {
	uri, err := checkpointURI(c.From)
	if err != nil {
		return usage.Errorf("--from: %v", err)
	}
	scratch, err := os.MkdirTemp("", "temper-data-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	a := &preference.Activities{Activities: &train.Activities{Ckpt: ckpt.New(ckpt.Options{}), NewEngine: workers.NewTrainEngine(workers.EngineOptions{})}}
	res, err := a.PreferencesFromModel(ctx, trainapi.PrefFromModelInput{
		Store: "file://" + scratch, Run: "data", Phase: "gen", Checkpoint: uri, Seed: c.Seed,
		Data:     trainapi.PrefDataSpec{Task: task.Name(), HeldoutExamples: c.Heldout},
		Sampling: trainapi.PrefSampling{Prompts: c.N, Samples: c.Samples, SyntheticHeldout: c.Heldout == 0},
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
	fmt.Fprintf(c.Log, "%d pairs from %d prompts (%.0f%% of samples correct; %d prompts all correct, dropped; %d with no correct sample, paired with the reference answer); %d held-out pairs\n",
		res.Pairs, res.Prompts, 100*res.SampleRate, res.AllCorrect, res.NoneCorrect, res.HeldoutPairs)
	return c.writePrefSets(trainPairs, held)
}

// writePrefSets writes train pairs to Out (Stdout when empty) and, when Heldout > 0, the held-out
// ones next to it with .heldout before the extension; KTO writes the unpaired form.
func (c Options) writePrefSets(train, held []tasks.PrefExample) error {
	if c.KTO {
		train, held = tasks.Unpair(train), tasks.Unpair(held)
	}
	write := func(path string, exs []tasks.PrefExample) error {
		return c.writeTo(path, func(w io.Writer) error { return tasks.WritePrefJSONL(w, exs) })
	}
	if err := write(c.Out, train); err != nil {
		return err
	}
	if c.Heldout > 0 {
		if c.Out == "" {
			return usage.Errorf("--heldout needs --out")
		}
		return write(heldoutPath(c.Out), held)
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
