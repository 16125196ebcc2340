package tasks

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/tokenize"
)

// TestBigMul: bigmul and smallmul draw operands of their digit counts, their answers are the exact
// products, and their demonstrations are the one calc call.
func TestBigMul(t *testing.T) {
	for _, c := range []struct {
		name       string
		minD, maxD int
	}{{"bigmul", 4, 6}, {"smallmul", 2, 3}} {
		task, err := Lookup(c.name)
		if err != nil {
			t.Fatal(err)
		}
		ag, ok := task.(Agentic)
		if !ok || !reflect.DeepEqual(ag.Tools(), []string{"calc"}) {
			t.Fatalf("%s is not agentic with calc: %T", c.name, task)
		}
		lens := map[int]bool{}
		for _, ex := range Generate(task, 200, 3, 0) {
			x, y, _ := strings.Cut(strings.TrimSuffix(ex.Prompt, "="), "*")
			a, _ := strconv.ParseInt(x, 10, 64)
			b, _ := strconv.ParseInt(y, 10, 64)
			if len(x) < c.minD || len(x) > c.maxD || len(y) < c.minD || len(y) > c.maxD || strconv.FormatInt(a*b, 10) != ex.Answer {
				t.Fatalf("%s: example %+v", c.name, ex)
			}
			lens[len(x)], lens[len(y)] = true, true
			if pass, _ := task.Check(ex, ex.Answer+"\n"); !pass {
				t.Fatalf("%s: the answer fails", ex.Prompt)
			}
			if pass, fb := task.Check(ex, ex.Answer+"1"); pass || !strings.Contains(fb, "wrong") {
				t.Fatalf("%s: a wrong answer: %v %q", ex.Prompt, pass, fb)
			}
			if d := ag.Demonstration(ex); len(d.Messages) != 4 || len(d.Messages[1].ToolCalls) != 1 || d.Messages[2].Content != ex.Answer {
				t.Fatalf("%s: demonstration %+v", ex.Prompt, d)
			}
		}
		if len(lens) != c.maxD-c.minD+1 {
			t.Fatalf("%s: operand lengths %v, want every one of %d-%d", c.name, lens, c.minD, c.maxD)
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

// TestSelfCheckDemonstrations: add2check demonstrations are valid conversations that end with the
// correct answer after a passing check; about half first check a plausible slip (weight 0: not
// trained on) that the task's verifier fails, with its feedback as the tool message; the same
// example always gives the same conversation.
func TestSelfCheckDemonstrations(t *testing.T) {
	task, err := Lookup("add2check")
	if err != nil {
		t.Fatal(err)
	}
	ag := task.(Agentic)
	if !reflect.DeepEqual(ag.Tools(), []string{"check"}) {
		t.Fatalf("tools %v", ag.Tools())
	}
	slips := 0
	exs := Generate(task, 400, 2, 0)
	for _, ex := range exs {
		m := validDemonstration(t, ag, ex)
		if last := m[len(m)-1]; last.Content != ex.Answer || m[len(m)-2].Content != "pass" {
			t.Fatalf("%s: ends %+v", ex.Prompt, m[len(m)-2:])
		}
		switch len(m) {
		case 4:
		case 6:
			slips++
			var a struct{ Answer string }
			_ = json.Unmarshal(m[1].ToolCalls[0].Arguments, &a)
			pass, fb := task.Check(ex, a.Answer)
			if pass || m[2].Content != "fail: "+fb || m[1].Weight == nil || *m[1].Weight != 0 || m[1].Trained() {
				t.Fatalf("%s: slip %q: %+v %+v", ex.Prompt, a.Answer, m[1], m[2])
			}
		default:
			t.Fatalf("%s: %d messages", ex.Prompt, len(m))
		}
	}
	if slips < 160 || slips > 240 {
		t.Fatalf("%d of 400 demonstrations start with a slip, want about half", slips)
	}
}

// validDemonstration returns ex's demonstration after checking that it is a valid conversation and
// the same every time.
func validDemonstration(t *testing.T, ag Agentic, ex Example) []tokenize.Message {
	t.Helper()
	d := ag.Demonstration(ex)
	if err := checkMessages(d.Messages); err != nil {
		t.Fatalf("%s: %v", ex.Prompt, err)
	}
	if !reflect.DeepEqual(d, ag.Demonstration(ex)) {
		t.Fatalf("%s: two different demonstrations", ex.Prompt)
	}
	return d.Messages
}

// TestMulCheckDemonstrations: mulcheck mixes easy (×1, ×10, ×100) and big products about half and
// half; an easy demonstration checks the product and answers after "pass"; a big one checks a guess
// (the operands side by side) that the verifier fails, with its feedback as the tool message, then calls calc on the
// prompt's expression and answers with the product; each is a valid conversation, the same every time.
func TestMulCheckDemonstrations(t *testing.T) {
	task, err := Lookup("mulcheck")
	if err != nil {
		t.Fatal(err)
	}
	ag := task.(Agentic)
	if !reflect.DeepEqual(ag.Tools(), []string{"check", "calc"}) {
		t.Fatalf("tools %v", ag.Tools())
	}
	big := 0
	for _, ex := range Generate(task, 400, 3, 0) {
		m := validDemonstration(t, ag, ex)
		if last := m[len(m)-1]; last.Content != ex.Answer || len(last.ToolCalls) != 0 || !last.Trained() {
			t.Fatalf("%s: ends %+v", ex.Prompt, last)
		}
		var a struct{ Answer, Expr string }
		_ = json.Unmarshal(m[1].ToolCalls[0].Arguments, &a)
		pass, fb := task.Check(ex, a.Answer)
		switch len(m) {
		case 4: // easy
			if !mulCheckEasy(ex.Prompt) || !pass || m[2].Content != "pass" || !m[1].Trained() || m[1].Content != "" {
				t.Fatalf("%s: %+v", ex.Prompt, m)
			}
		case 6:
			big++
			x, y, _ := strings.Cut(strings.TrimSuffix(ex.Prompt, "="), "*")
			if mulCheckEasy(ex.Prompt) || pass || m[2].Content != "fail: "+fb || !strings.HasPrefix(a.Answer, x+y) {
				t.Fatalf("%s: slip %q: %+v %+v", ex.Prompt, a.Answer, m[1], m[2])
			}
			c := m[3].ToolCalls
			if len(c) != 1 || c[0].Name != "calc" || m[4].Content != ex.Answer {
				t.Fatalf("%s: recovery %+v %+v", ex.Prompt, m[3], m[4])
			}
			_ = json.Unmarshal(c[0].Arguments, &a)
			if a.Expr+"=" != ex.Prompt {
				t.Fatalf("%s: calc on %q", ex.Prompt, a.Expr)
			}
		default:
			t.Fatalf("%s: %d messages", ex.Prompt, len(m))
		}
	}
	if big < 160 || big > 240 {
		t.Fatalf("%d of 400 are big products, want about half", big)
	}
}

// TestFacts: every prompt's answer is in the corpus under the key its demonstration looks up,
// the corpus is the same every time, values are not guessable from the prompt, and Check wants
// the value exactly.
func TestFacts(t *testing.T) {
	task, err := Lookup("facts")
	if err != nil {
		t.Fatal(err)
	}
	corpus := task.(Corpus).Corpus()
	if len(corpus) != factsEntities*len(factsRelations) {
		t.Fatalf("corpus of %d facts, want %d", len(corpus), factsEntities*len(factsRelations))
	}
	if !reflect.DeepEqual(corpus, Facts{}.Corpus()) {
		t.Fatal("the corpus changed between calls")
	}
	values := map[string]bool{}
	for _, v := range corpus {
		values[v] = true
	}
	if len(values) < len(corpus)/4 {
		t.Fatalf("only %d distinct values: too guessable", len(values))
	}
	for _, ex := range Generate(task, 100, 4, 1) {
		d := task.(Agentic).Demonstration(ex)
		if err := checkMessages(d.Messages); err != nil {
			t.Fatal(err)
		}
		var a struct{ Key string }
		_ = json.Unmarshal(d.Messages[1].ToolCalls[0].Arguments, &a)
		if corpus[a.Key] != ex.Answer || d.Messages[2].Content != ex.Answer {
			t.Fatalf("%q: looks up %q → %q, answer %q", ex.Prompt, a.Key, corpus[a.Key], ex.Answer)
		}
		if pass, _ := task.Check(ex, ex.Answer+"\n"); !pass {
			t.Fatalf("%q: its answer fails", ex.Prompt)
		}
		if pass, fb := task.Check(ex, strings.ToLower(ex.Answer)+"x"); pass || !strings.Contains(fb, "look it up") {
			t.Fatalf("%q: a wrong answer: %v %q", ex.Prompt, pass, fb)
		}
	}
}

// TestMulCheckVerifier: mulcheck's verifier wants the exact product on the first line; the plausible
// wrong answers a policy (or a reward hacker) writes fail: the demonstrations' guess, a leading zero,
// a sign, an extra digit, the expression itself, the answer after other text, a near miss.
func TestMulCheckVerifier(t *testing.T) {
	task, _ := Lookup("mulcheck")
	var ex Example
	for _, e := range Generate(task, 20, 4, 0) {
		if !mulCheckEasy(e.Prompt) {
			ex = e
			break
		}
	}
	if ex.Answer == "" {
		t.Fatal("no hard product among 20 examples")
	}
	x, y, _ := strings.Cut(strings.TrimSuffix(ex.Prompt, "="), "*")
	for _, tc := range []struct {
		completion string
		pass       bool
	}{
		{ex.Answer, true}, {" " + ex.Answer + " \nanything", true},
		{x + y, false}, {"0" + ex.Answer, false}, {"+" + ex.Answer, false}, {"-" + ex.Answer, false},
		{ex.Answer + "0", false}, {x + "*" + y, false}, {"answer: " + ex.Answer, false},
		{ex.Answer[:len(ex.Answer)-1], false}, {"", false}, {"\n" + ex.Answer, false},
		{ex.Answer + ".0", false}, {ex.Answer + " " + ex.Answer, false}, {ex.Answer[:3] + "," + ex.Answer[3:], false},
	} {
		if pass, _ := task.Check(ex, tc.completion); pass != tc.pass {
			t.Errorf("%s: Check(%q) = %v, want %v", ex.Prompt, tc.completion, pass, tc.pass)
		}
	}
}
