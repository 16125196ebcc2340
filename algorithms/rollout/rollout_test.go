package rollout

import (
	"bytes"
	"reflect"
	"strings"
	"testing"
)

func TestRoundTripAndGroups(t *testing.T) {
	rs := []Rollout{
		{ID: "a", Group: 1, Prompt: "1+1=", Tokens: []int{50, 258}, LogProbs: []float32{-0.5, -0.1}, Completion: "2"},
		{ID: "b", Group: 0, Prompt: "2+2=", Tokens: []int{52}, LogProbs: []float32{-1}},
		{ID: "c", Group: 1, Prompt: "1+1=", Tokens: []int{}, LogProbs: []float32{}},
	}
	var buf bytes.Buffer
	if err := Write(&buf, rs); err != nil {
		t.Fatal(err)
	}
	back, err := Read(&buf, "r.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(rs, back) {
		t.Fatalf("round trip changed rollouts:\n%+v\n%+v", rs, back)
	}
	if g := Groups(rs); !reflect.DeepEqual(g, [][]int{{1}, {0, 2}}) {
		t.Fatalf("groups %v", g)
	}
	_, err = Read(strings.NewReader(`{"id":"x","tokens":[1,2],"logprobs":[0]}`+"\n"), "bad.jsonl")
	if err == nil || !strings.Contains(err.Error(), "bad.jsonl:1") {
		t.Fatalf("want a line error, got %v", err)
	}
}
