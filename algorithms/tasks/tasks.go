package tasks

import (
	"fmt"
	"math/rand/v2"
	"sort"
	"strings"

	"github.com/temperml/temper/internal/config"
)

// Task generates examples and checks completions exactly.
type Task interface {
	Name() string
	Doc() string
	// Example draws one example; it must use only rng, so a seed fixes the dataset.
	Example(rng *rand.Rand) Example
	// Check says whether completion answers ex, with feedback a model can read when it fails.
	Check(ex Example, completion string) (pass bool, feedback string)
}

// PartialCredit is a task whose verifier gives partial credit: a score in [0, 1) for a completion
// that Check rejects but that is partly right. RL rewards can use it (the "task" verifier with
// {"partial": true}); held-out exact match never does.
type PartialCredit interface {
	Partial(ex Example, completion string) float64
}

var registry = map[string]Task{}

func register(t Task) { registry[t.Name()] = t }

// Names lists the built-in tasks, sorted.
func Names() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Lookup returns a built-in task or an error naming the allowed ones.
func Lookup(name string) (Task, error) {
	if t, ok := registry[name]; ok {
		return t, nil
	}
	msg := fmt.Sprintf("unknown task %q", name)
	if s := config.Closest(name, Names()); s != "" {
		msg += fmt.Sprintf("; did you mean %q?", s)
	}
	return nil, fmt.Errorf("tasks: %s (allowed: %s)", msg, strings.Join(Names(), ", "))
}

// NewRNG is the generator every task uses: PCG seeded by (seed, stream), so train/held-out splits drawn
// with different streams never share a draw sequence.
func NewRNG(seed, stream uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, stream)) }

// Generate draws n examples of t with the given seed and stream, numbering their IDs.
func Generate(t Task, n int, seed, stream uint64) []Example {
	rng := NewRNG(seed, stream)
	out := make([]Example, n)
	for i := range out {
		ex := t.Example(rng)
		ex.ID = fmt.Sprintf("%s-%d-%d-%d", t.Name(), seed, stream, i)
		ex.Task = t.Name()
		out[i] = ex
	}
	return out
}

// Split draws disjoint train and held-out sets: held-out prompts never appear in train.
func Split(t Task, nTrain, nHeldout int, seed uint64) (train, heldout []Example) {
	heldout = Generate(t, nHeldout, seed, 1)
	seen := make(map[string]bool, len(heldout))
	for _, ex := range heldout {
		seen[ex.Prompt+ex.Text] = true
	}
	rng := NewRNG(seed, 0)
	for i := 0; len(train) < nTrain && i < 50*nTrain+100; i++ {
		ex := t.Example(rng)
		if seen[ex.Prompt+ex.Text] {
			continue
		}
		ex.ID = fmt.Sprintf("%s-%d-0-%d", t.Name(), seed, len(train))
		ex.Task = t.Name()
		train = append(train, ex)
	}
	return train, heldout
}

// AsText turns a prompt/completion example into a pretraining line "prompt+completion".
func AsText(ex Example) Example {
	return Example{ID: ex.ID, Task: ex.Task, Text: ex.Prompt + ex.Completion, Answer: ex.Answer}
}

// FirstLine is how completions are read for checking: up to the first newline, spaces trimmed.
func FirstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return strings.TrimSpace(s)
}
