package tasks

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestArithmeticExamplesAreCorrect(t *testing.T) {
	cases := []struct {
		prompt, answer string
	}{{"12+345=", "357"}, {"3-15=", "-12"}, {"(2+3)*4=", "20"}, {"2+(3*4)=", "14"}, {"7*8=", "56"}}
	for _, c := range cases {
		got := evalPrompt(t, c.prompt)
		if got != c.answer {
			t.Errorf("reference eval of %s = %s, want %s", c.prompt, got, c.answer)
		}
	}
	for _, name := range []string{"add2", "sum2", "add", "addsub", "mul", "expr3"} {
		task, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, ex := range Generate(task, 300, 7, 0) {
			if want := evalPrompt(t, ex.Prompt); ex.Answer != want || ex.Completion != want {
				t.Fatalf("%s: %q answer %q, reference says %q", name, ex.Prompt, ex.Answer, want)
			}
			if ok, _ := task.Check(ex, ex.Completion+"\nleftover"); !ok {
				t.Fatalf("%s: own completion fails check: %+v", name, ex)
			}
		}
	}
}

// evalPrompt is a plain reference evaluator for "a op b=" and the two parenthesised shapes.
func evalPrompt(t *testing.T, p string) string {
	t.Helper()
	p = strings.TrimSuffix(p, "=")
	var tokens []string
	num := ""
	for i := 0; i < len(p); i++ {
		c := p[i]
		if c >= '0' && c <= '9' {
			num += string(c)
			continue
		}
		if num != "" {
			tokens = append(tokens, num)
			num = ""
		}
		tokens = append(tokens, string(c))
	}
	if num != "" {
		tokens = append(tokens, num)
	}
	pos := 0
	var expr func() int64
	atom := func() int64 {
		if tokens[pos] == "(" {
			pos++
			v := expr()
			pos++ // ")"
			return v
		}
		var v int64
		for _, c := range tokens[pos] {
			v = v*10 + int64(c-'0')
		}
		pos++
		return v
	}
	expr = func() int64 { // left to right: prompts are parenthesised wherever precedence would matter
		v := atom()
		for pos < len(tokens) && tokens[pos] != ")" {
			op := tokens[pos]
			pos++
			w := atom()
			switch op {
			case "+":
				v += w
			case "-":
				v -= w
			case "*":
				v *= w
			}
		}
		return v
	}
	return fmtInt(expr())
}

func fmtInt(v int64) string {
	if v < 0 {
		return "-" + fmtInt(-v)
	}
	if v < 10 {
		return string(rune('0' + v))
	}
	return fmtInt(v/10) + string(rune('0'+v%10))
}

func TestChecks(t *testing.T) {
	add, _ := Lookup("add")
	r, _ := Lookup("router")
	ex := Example{Prompt: "2+2=", Answer: "4"}
	rex := Example{Answer: `{"engine":"video","params":{"seconds":10,"subject":"a fox running"}}`}
	cases := []struct {
		task       Task
		ex         Example
		completion string
		pass       bool
		feedback   string
	}{
		{add, ex, "4", true, ""},
		{add, ex, " 4 \nmore", true, ""},
		{add, ex, "44", false, "44 is wrong"},
		{add, ex, "", false, "missing"},
		{add, ex, "four", false, "not an integer"},
		{add, ex, "4.0", false, "not an integer"},
		{r, rex, `{"params":{"subject":"a fox running","seconds":10},"engine":"video"}`, true, ""},
		{r, rex, `{"engine":"video","params":{"seconds":15,"subject":"a fox running"}}`, false, "wrong params"},
		{r, rex, `{"engine":"image","params":{}}`, false, `wrong engine: this request needs "video"`},
		{r, rex, `{"engine":"video"`, false, "not valid JSON"},
		{r, rex, `{"engine":"video","params":{"seconds":10,"subject":"a fox running"}} {"x":1}`, false, "not valid JSON"},
	}
	for i, c := range cases {
		pass, fb := c.task.Check(c.ex, c.completion)
		if pass != c.pass || !strings.Contains(fb, c.feedback) {
			t.Errorf("case %d (%s %q): got %v %q", i, c.task.Name(), c.completion, pass, fb)
		}
	}
}

func TestRouterExamplesCheck(t *testing.T) {
	r, _ := Lookup("router")
	engines := map[string]int{}
	for _, ex := range Generate(r, 400, 3, 0) {
		if ok, fb := r.Check(ex, ex.Completion); !ok {
			t.Fatalf("own completion fails: %s (%+v)", fb, ex)
		}
		if strings.Contains(ex.Prompt, "%!") {
			t.Fatalf("bad template: %q", ex.Prompt)
		}
		engines[ex.Completion[11:16]]++
	}
	if len(engines) != 4 {
		t.Fatalf("want all four engines drawn, got %v", engines)
	}
}

func TestDeterminismAndSplit(t *testing.T) {
	task, _ := Lookup("addsub")
	a, b := Generate(task, 50, 1, 0), Generate(task, 50, 1, 0)
	if !reflect.DeepEqual(a, b) {
		t.Fatal("same seed gave different data")
	}
	if reflect.DeepEqual(a, Generate(task, 50, 2, 0)) {
		t.Fatal("different seeds gave the same data")
	}
	train, held := Split(task, 500, 100, 9)
	if len(train) != 500 || len(held) != 100 {
		t.Fatalf("sizes %d %d", len(train), len(held))
	}
	heldSet := map[string]bool{}
	for _, ex := range held {
		heldSet[ex.Prompt] = true
	}
	for _, ex := range train {
		if heldSet[ex.Prompt] {
			t.Fatalf("held-out prompt %q leaked into train", ex.Prompt)
		}
	}
}

func TestReadJSONLErrorsNameFileAndLine(t *testing.T) {
	cases := []struct{ in, want string }{
		{"{\"prompt\":\"a\",\"completion\":\"b\"}\n\n{\"promt\":\"x\"}\n", `d.jsonl:3: unknown field "promt"; did you mean "prompt"?`},
		{"{\"text\":\"a\"}\n{bad json\n", "d.jsonl:2: invalid JSON"},
		{"{\"id\":\"x\"}\n", `d.jsonl:1: no "text", "prompt"/"completion" or "messages" field`},
		{"{\"text\":\"a\",\"prompt\":\"b\"}\n", "d.jsonl:1: mixes text and prompt/completion"},
		{"{\"completion\":\"b\"}\n", `d.jsonl:1: "completion" without "prompt"`},
		{"{\"messages\":[{\"role\":\"bot\",\"content\":\"x\"}]}\n", `d.jsonl:1: messages[0].role "bot": allowed values`},
		{"{\"text\":\"a\"} {\"text\":\"b\"}\n", "d.jsonl:1: more than one JSON value"},
		// multi-turn tool use
		{`{"messages":[{"role":"user","content":"x"},{"role":"tool","content":"1"}]}` + "\n", "d.jsonl:1: messages[1]: a tool message must follow an assistant message with tool_calls"},
		{"\n" + `{"messages":[{"role":"assistant","content":"","tool_calls":[{"arguments":{}}]},{"role":"tool","content":"1"}]}` + "\n", "d.jsonl:2: messages[0].tool_calls[0].name: missing"},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[{"name":"calc","arguments":"1+1"}]}]}` + "\n", `d.jsonl:1: messages[0].tool_calls[0].arguments: must be a JSON object`},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[{"name":"calc","arguments":{}}]},{"role":"assistant","content":"2"}]}` + "\n", `d.jsonl:1: messages[1].role "assistant": the call in messages[0] needs its result`},
		{`{"messages":[{"role":"user","content":"x","tool_calls":[{"name":"calc","arguments":{}}]}]}` + "\n", "d.jsonl:1: messages[0]: tool_calls on a user message"},
		// parallel calls: one tool message per call, in order
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[{"name":"calc","arguments":{}},{"name":"calc","arguments":{}}]},{"role":"tool","content":"1"},{"role":"assistant","content":"2"}]}` + "\n", `d.jsonl:1: messages[2].role "assistant": the call in messages[0] needs its result: a tool message (1 of its 2 calls unanswered)`},
		{`{"messages":[{"role":"assistant","content":"","tool_calls":[{"name":"calc","arguments":{}}]},{"role":"tool","content":"1"},{"role":"tool","content":"2"}]}` + "\n", "d.jsonl:1: messages[2]: a tool message beyond the 1 call(s) of messages[0]"},
		{`{"messages":[{"role":"assistant","content":"","tool_call":[]}]}` + "\n", `d.jsonl:1: unknown field "tool_call"; did you mean "tool_calls"?`},
	}
	for _, c := range cases {
		_, err := ReadAll(strings.NewReader(c.in), "d.jsonl")
		var le *LineError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("input %q: got %v, want %q", c.in, err, c.want)
		}
	}
}

func TestJSONLRoundTrip(t *testing.T) {
	task, _ := Lookup("router")
	exs := Generate(task, 20, 5, 0)
	exs = append(exs, AsText(exs[0]))
	var buf bytes.Buffer
	if err := WriteJSONL(&buf, exs); err != nil {
		t.Fatal(err)
	}
	back, err := ReadAll(&buf, "x")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(exs, back) {
		t.Fatal("round trip changed examples")
	}
}

func TestLookupSuggests(t *testing.T) {
	if _, err := Lookup("ad"); err == nil || !strings.Contains(err.Error(), `did you mean "add"`) {
		t.Fatalf("got %v", err)
	}
}

// TestSum2Operands: sum2's operands are two-digit and cover 10..99 about uniformly (no one-digit
// facts, unlike add2, where a quarter of the draws are).
func TestSum2Operands(t *testing.T) {
	task, err := Lookup("sum2")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	const n = 9000
	for _, ex := range Generate(task, n, 3, 0) {
		var x, y int64
		if _, err := fmt.Sscanf(ex.Prompt, "%d+%d=", &x, &y); err != nil {
			t.Fatalf("%q: %v", ex.Prompt, err)
		}
		for _, v := range []int64{x, y} {
			if v < 10 || v > 99 {
				t.Fatalf("%q: operand %d outside 10..99", ex.Prompt, v)
			}
			seen[v]++
		}
		if ex.Answer != fmt.Sprint(x+y) {
			t.Fatalf("%q: answer %q", ex.Prompt, ex.Answer)
		}
	}
	// 18,000 operands over 90 values: 200 each on average; every value is drawn, none twice as often.
	for v := int64(10); v <= 99; v++ {
		if c := seen[v]; c < 100 || c > 300 {
			t.Errorf("operand %d drawn %d times of %d, want ~200", v, c, 2*n)
		}
	}
}

// TestArithmeticPartialCredit: hand-computed digit-place credit; the correct answer, malformed
// answers and wrong signs earn nothing here.
func TestArithmeticPartialCredit(t *testing.T) {
	add, err := Lookup("add2")
	if err != nil {
		t.Fatal(err)
	}
	sub, err := Lookup("addsub")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		task       Task
		ex         Example
		completion string
		want       float64
	}{
		{add, Example{Prompt: "50+7=", Answer: "57"}, "57", 0},
		{add, Example{Prompt: "50+7=", Answer: "57"}, "52", 0.25},
		{add, Example{Prompt: "50+7=", Answer: "57"}, "47", 0.25},
		{add, Example{Prompt: "50+7=", Answer: "57"}, "75", 0},
		{add, Example{Prompt: "50+7=", Answer: "57"}, "157", 1.0 / 3},
		{add, Example{Prompt: "50+7=", Answer: "57"}, "7", 0.25},
		{add, Example{Prompt: "99+9=", Answer: "108"}, "118", 1.0 / 3},
		{add, Example{Prompt: "99+9=", Answer: "108"}, "98", 0.5 / 3},
		{add, Example{Prompt: "50+7=", Answer: "57"}, "057", 0},
		{add, Example{Prompt: "50+7=", Answer: "57"}, "+57", 0},
		{add, Example{Prompt: "50+7=", Answer: "57"}, "5 7", 0},
		{add, Example{Prompt: "50+7=", Answer: "57"}, "", 0},
		{add, Example{Prompt: "50+7=", Answer: "57"}, "-57", 0},
		{add, Example{Prompt: "50+7=", Answer: "57"}, "52\nmore", 0.25},
		{sub, Example{Prompt: "5-62=", Answer: "-57"}, "-52", 0.25},
		{sub, Example{Prompt: "5-62=", Answer: "-57"}, "57", 0},
		{sub, Example{Prompt: "62-5=", Answer: "57"}, "-57", 0},
		{add, Example{Prompt: "0+0=", Answer: "0"}, "1", 0},
		{add, Example{Prompt: "5+5=", Answer: "10"}, "0", 0.25},
		{add, Example{Prompt: "5+5=", Answer: "10"}, "20", 0.25},
	} {
		pc, ok := c.task.(PartialCredit)
		if !ok {
			t.Fatalf("%s has no partial credit", c.task.Name())
		}
		if got := pc.Partial(c.ex, c.completion); abs(got-c.want) > 1e-12 {
			t.Errorf("%s %q for %q: partial %g, want %g", c.task.Name(), c.completion, c.ex.Answer, got, c.want)
		}
	}
}

// TestParallelToolCalls: an assistant message with several calls, answered by one tool message per
// call, is a valid conversation (the model's own template renders it; the fixed formats refuse it
// when rendering).
func TestParallelToolCalls(t *testing.T) {
	in := `{"messages":[{"role":"user","content":"2+3 and 4+5?"},{"role":"assistant","content":"","tool_calls":[{"name":"calc","arguments":{"expr":"2+3"}},{"name":"calc","arguments":{"expr":"4+5"}}]},{"role":"tool","content":"5"},{"role":"tool","content":"9"},{"role":"assistant","content":"5 and 9"}]}` + "\n"
	exs, err := ReadAll(strings.NewReader(in), "d.jsonl")
	if err != nil || len(exs) != 1 || len(exs[0].Messages[1].ToolCalls) != 2 {
		t.Fatalf("parallel calls: %v %+v", err, exs)
	}
}
