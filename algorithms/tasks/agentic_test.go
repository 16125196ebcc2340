package tasks

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/tokenize"
)

func TestBigMul(t *testing.T) {
	task, err := Lookup("bigmul")
	if err != nil {
		t.Fatal(err)
	}
	ag, ok := task.(Agentic)
	if !ok || !reflect.DeepEqual(ag.Tools(), []string{"calc"}) {
		t.Fatalf("bigmul is not agentic with calc: %T", task)
	}
	for _, ex := range Generate(task, 200, 3, 0) {
		x, y, _ := strings.Cut(strings.TrimSuffix(ex.Prompt, "="), "*")
		a, _ := strconv.ParseInt(x, 10, 64)
		b, _ := strconv.ParseInt(y, 10, 64)
		if len(x) < 4 || len(x) > 6 || len(y) < 4 || len(y) > 6 || strconv.FormatInt(a*b, 10) != ex.Answer {
			t.Fatalf("example %+v", ex)
		}
		if pass, _ := task.Check(ex, ex.Answer+"\n"); !pass {
			t.Fatalf("%s: the answer fails", ex.Prompt)
		}
		if pass, fb := task.Check(ex, ex.Answer+"1"); pass || !strings.Contains(fb, "wrong") {
			t.Fatalf("%s: a wrong answer: %v %q", ex.Prompt, pass, fb)
		}
	}
}

// TestDemonstrationRoundTrip: a demonstration is a valid multi-turn JSONL line, and rendered it
// reads user prompt, the calc call, the product as the tool's result, the product as the answer.
func TestDemonstrationRoundTrip(t *testing.T) {
	task, _ := Lookup("bigmul")
	ex := Generate(task, 1, 1, 0)[0]
	demo := task.(Agentic).Demonstration(ex)
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, []Example{demo}); err != nil {
		t.Fatal(err)
	}
	back, err := ReadAll(&buf, "demo.jsonl")
	if err != nil || !reflect.DeepEqual(back[0], demo) {
		t.Fatalf("round trip: %v\n%+v\n%+v", err, back, demo)
	}
	ids, _, err := tokenize.DefaultChat().Render(tokenize.Byte{}, demo.Messages)
	if err != nil {
		t.Fatal(err)
	}
	want := "<|user|>\n" + ex.Prompt + "\n<|assistant|>\n" + `<tool>{"name":"calc","arguments":{"expr":"` + strings.TrimSuffix(ex.Prompt, "=") +
		`"}}</tool>` + "\n<|tool|>\n" + ex.Answer + "\n<|assistant|>\n" + ex.Answer
	if got := (tokenize.Byte{}).Decode(ids); got != want {
		t.Fatalf("rendered %q\nwant     %q", got, want)
	}
}
