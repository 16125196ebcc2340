package tasks

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

func TestReadPrefJSONL(t *testing.T) {
	good := `{"prompt":"1+1=","chosen":"2","rejected":"3"}`
	cases := []struct {
		name, body string
		n          int
		err        string // substring of the error, "" for none
	}{
		{"pairs and labels", good + "\n\n" + `{"prompt":"1+2=","completion":"3","label":true}` + "\n" + `{"prompt":"1+2=","completion":"4","label":false}`, 3, ""},
		{"typo", good + "\n" + `{"prompt":"1+1=","chosen":"2","rejectd":"3"}`, 0, `d.jsonl:2: unknown field "rejectd"; did you mean "rejected"?`},
		{"half pair", `{"prompt":"1+1=","chosen":"2"}`, 0, `d.jsonl:1: a pair needs both "chosen" and "rejected"`},
		{"same", `{"prompt":"1+1=","chosen":"2","rejected":"2"}`, 0, `"chosen" equals "rejected"`},
		{"mixed", `{"prompt":"1+1=","chosen":"2","rejected":"3","label":true}`, 0, "mixes the paired form"},
		{"no label", `{"prompt":"1+1=","completion":"2"}`, 0, `"completion" without "label"`},
		{"label only", `{"prompt":"1+1=","label":false}`, 0, `"label" without "completion"`},
		{"no prompt", `{"chosen":"2","rejected":"3"}`, 0, `"prompt" is required`},
		{"empty", `{"prompt":"1+1="}`, 0, `no "chosen"/"rejected" pair`},
		{"label type", `{"prompt":"1+1=","completion":"2","label":"yes"}`, 0, "d.jsonl:1: invalid JSON"},
		{"two values", good + good, 0, "more than one JSON value"},
	}
	for _, c := range cases {
		exs, err := ReadPrefAll(strings.NewReader(c.body), "d.jsonl")
		if c.err == "" {
			if err != nil || len(exs) != c.n {
				t.Errorf("%s: %d examples, %v; want %d", c.name, len(exs), err, c.n)
			}
			continue
		}
		var le *LineError
		if err == nil || !strings.Contains(err.Error(), c.err) || !errors.As(err, &le) {
			t.Errorf("%s: got %v, want a *LineError containing %q", c.name, err, c.err)
		}
	}
}

func TestPrefWriteReadUnpairPairUp(t *testing.T) {
	yes, no := true, false
	in := []PrefExample{
		{ID: "a", Task: "add2", Prompt: "1+1=", Chosen: "2", Rejected: "3", Answer: "2"},
		{ID: "b", Prompt: "2+2=", Completion: "4", Label: &yes},
		{ID: "c", Prompt: "2+2=", Completion: "5", Label: &no},
		{ID: "d", Prompt: "3+3=", Completion: "7", Label: &no}, // no desirable partner: dropped by PairUp
	}
	var buf bytes.Buffer
	if err := WritePrefJSONL(&buf, in); err != nil {
		t.Fatal(err)
	}
	back, err := ReadPrefAll(&buf, "x")
	if err != nil || !reflect.DeepEqual(back, in) {
		t.Fatalf("round trip: %+v, %v", back, err)
	}
	un := Unpair(in)
	if len(un) != 5 || un[0].Completion != "2" || !un[0].Desirable() || un[1].Completion != "3" || un[1].Desirable() ||
		un[0].ID != "a-d" || un[1].ID != "a-u" || un[0].Answer != "2" || un[2].ID != "b" {
		t.Fatalf("unpair: %+v", un)
	}
	for i, ex := range un {
		if err := ex.Check(); err != nil || ex.Paired() {
			t.Fatalf("unpaired %d: %+v: %v", i, ex, err)
		}
	}
	pairs := PairUp(un)
	want := []PrefExample{
		{ID: "a-d", Task: "add2", Prompt: "1+1=", Chosen: "2", Rejected: "3", Answer: "2"},
		{ID: "b", Prompt: "2+2=", Chosen: "4", Rejected: "5"},
	}
	if !reflect.DeepEqual(pairs, want) {
		t.Fatalf("pair up: %+v, want %+v", pairs, want)
	}
}

// TestMistakes: every built-in task with synthetic pairs writes rejected answers its own checker
// rejects, in the task's answer format, deterministically from the seed.
func TestMistakes(t *testing.T) {
	for _, name := range []string{"add2", "add", "addsub", "mul", "expr3", "router"} {
		task, err := Lookup(name)
		if err != nil {
			t.Fatal(err)
		}
		tr, he, err := PrefSplit(task, 300, 50, 11)
		if err != nil {
			t.Fatal(err)
		}
		tr2, _, _ := PrefSplit(task, 300, 50, 11)
		if !reflect.DeepEqual(tr, tr2) {
			t.Fatalf("%s: not deterministic", name)
		}
		distinct := map[string]bool{}
		for _, p := range append(tr, he...) {
			ex := p.AsExample(p.Chosen)
			if ok, _ := task.Check(ex, p.Chosen); !ok {
				t.Fatalf("%s: chosen %q fails for %q", name, p.Chosen, p.Prompt)
			}
			if ok, _ := task.Check(ex, p.Rejected); ok {
				t.Fatalf("%s: rejected %q passes for %q", name, p.Rejected, p.Prompt)
			}
			if name == "router" {
				var v map[string]any
				if err := json.Unmarshal([]byte(p.Rejected), &v); err != nil || v["engine"] == nil {
					t.Fatalf("router: rejected %q is not a route call", p.Rejected)
				}
			} else if _, err := strconv.ParseInt(p.Rejected, 10, 64); err != nil || (len(p.Rejected) > 1 && strings.HasPrefix(strings.TrimPrefix(p.Rejected, "-"), "0")) {
				t.Fatalf("%s: rejected %q is not a well-formed integer", name, p.Rejected)
			}
			distinct[p.Rejected] = true
		}
		if len(distinct) < 40 {
			t.Errorf("%s: only %d distinct rejected answers in 350 pairs", name, len(distinct))
		}
	}
}
