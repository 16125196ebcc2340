package datagen

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/internal/usage"
)

func TestPackText(t *testing.T) {
	exs := func(texts ...string) []tasks.Example {
		var out []tasks.Example
		for i, s := range texts {
			out = append(out, tasks.Example{ID: string(rune('a' + i)), Text: s})
		}
		return out
	}
	for _, tc := range []struct {
		in   []tasks.Example
		k    int
		want []string // each line's text; its ID is its first example's
	}{
		{exs("1\n", "2\n", "3\n"), 1, []string{"1\n", "2\n", "3\n"}},
		{exs("1\n", "2\n", "3\n", "4\n"), 2, []string{"1\n2\n", "3\n4\n"}},
		{exs("1\n", "2\n", "3\n"), 2, []string{"1\n2\n", "3\n"}},
		{exs("1\n"), 5, []string{"1\n"}},
	} {
		got := packText(tc.in, tc.k)
		var texts []string
		for i, ex := range got {
			texts = append(texts, ex.Text)
			if ex.ID != tc.in[i*tc.k].ID {
				t.Errorf("k=%d: line %d has ID %s, want %s", tc.k, i, ex.ID, tc.in[i*tc.k].ID)
			}
		}
		if !reflect.DeepEqual(texts, tc.want) {
			t.Errorf("k=%d: %q, want %q", tc.k, texts, tc.want)
		}
	}
}

func TestPaths(t *testing.T) {
	for in, want := range map[string]string{"a/train.jsonl": "a/train.heldout.jsonl", "x": "x.heldout", "p.d/f.json.gz": "p.d/f.json.heldout.gz"} {
		if got := heldoutPath(in); got != want {
			t.Errorf("heldoutPath(%q) = %q, want %q", in, got, want)
		}
	}
	abs, _ := filepath.Abs("ck")
	for in, want := range map[string]string{"gs://b/r/sft/step-000010/": "gs://b/r/sft/step-000010/", "ck": "file://" + abs + "/"} {
		if got, err := checkpointURI(in); err != nil || got != want {
			t.Errorf("checkpointURI(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}

// TestGen: what each mode writes (lines, held-out file, bytes from the seed) and the refusals of
// combinations that cannot work.
func TestGen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	gen := func(o Options) (string, error) {
		var b bytes.Buffer
		o.Stdout, o.Log = &b, &bytes.Buffer{}
		if o.Pack == 0 {
			o.Pack = 1
		}
		err := Gen(ctx, "add2", o)
		return b.String(), err
	}
	a, err := gen(Options{N: 4, Seed: 7})
	if err != nil || strings.Count(a, "\n") != 4 || !strings.Contains(a, `"completion"`) {
		t.Fatalf("examples: %v\n%s", err, a)
	}
	if b, _ := gen(Options{N: 4, Seed: 7}); b != a {
		t.Error("same seed, different bytes")
	}
	if txt, err := gen(Options{N: 4, Seed: 7, Text: true, Pack: 2}); err != nil || strings.Count(txt, "\n") != 2 || !strings.Contains(txt, `"text"`) {
		t.Errorf("--text --pack 2: %v\n%s", err, txt)
	}
	if kto, err := gen(Options{N: 3, Seed: 7, Pairs: true, KTO: true}); err != nil || !strings.Contains(kto, `"label"`) {
		t.Errorf("--pairs --kto: %v\n%s", err, kto)
	}
	out := filepath.Join(dir, "train.jsonl")
	if _, err := gen(Options{N: 3, Heldout: 2, Seed: 7, Out: out}); err != nil {
		t.Fatal(err)
	}
	held, err := os.ReadFile(filepath.Join(dir, "train.heldout.jsonl"))
	if err != nil || strings.Count(string(held), "\n") != 2 {
		t.Errorf("held-out file: %v\n%s", err, held)
	}
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{Options{N: 2, From: "ck"}, "--from needs --pairs"},
		{Options{N: 2, Pack: 2}, "--pack 2"},
		{Options{N: 2, Heldout: 1}, "--heldout needs --out"},
		{Options{N: 2, Heldout: 1, Pairs: true}, "--heldout needs --out"},
		{Options{N: 2, Tools: true}, "add2"}, // not an agentic task
	} {
		if _, err := gen(tc.o); !usage.Is(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want a usage error containing %q", tc.o, err, tc.want)
		}
	}
	if err := Gen(ctx, "no-such-task", Options{N: 1, Pack: 1}); !usage.Is(err) {
		t.Errorf("unknown task: %v, want a usage error", err)
	}
}

func TestCheck(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f.jsonl")
	os.WriteFile(p, []byte(`{"prompt":"1+1=","completion":"2"}`+"\n"), 0o644)
	var b bytes.Buffer
	if err := Check(p, &b); err != nil || !strings.Contains(b.String(), "1 examples, all valid") {
		t.Errorf("%v: %s", err, b.String())
	}
	os.WriteFile(p, []byte(`{"prompt":1}`+"\n"), 0o644)
	if err := Check(p, &b); !usage.Is(err) || !strings.Contains(err.Error(), "f.jsonl:1") {
		t.Errorf("bad line: %v, want a usage error naming the line", err)
	}
}
