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

// TestSegments: an agent's further segments round-trip, and a malformed one is refused naming its
// line and segment.
func TestSegments(t *testing.T) {
	good := Rollout{ID: "a", Prompt: "p", PromptTokens: []int{1}, Tokens: []int{2}, LogProbs: []float32{-1}, Policy: []bool{true},
		Segments: []Segment{{PromptTokens: []int{1, 5}, Tokens: []int{6, 7}, LogProbs: []float32{-0.5, 0}, Policy: []bool{true, false}}}}
	var buf bytes.Buffer
	if err := Write(&buf, []Rollout{good}); err != nil {
		t.Fatal(err)
	}
	back, err := Read(&buf, "r.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, []Rollout{good}) {
		t.Fatalf("round trip changed the segments: %+v", back)
	}
	cases := []struct {
		name string
		seg  Segment
	}{
		{"log-probs", Segment{PromptTokens: []int{1}, Tokens: []int{6, 7}, LogProbs: []float32{0}, Policy: []bool{true, true}}},
		{"mask", Segment{PromptTokens: []int{1}, Tokens: []int{6}, LogProbs: []float32{0}, Policy: []bool{}}},
		{"prompt", Segment{Tokens: []int{6}, LogProbs: []float32{0}, Policy: []bool{true}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := good
			bad.Segments = []Segment{good.Segments[0], c.seg}
			var buf bytes.Buffer
			if err := Write(&buf, []Rollout{good, bad}); err != nil {
				t.Fatal(err)
			}
			_, err := Read(&buf, "bad.jsonl")
			if err == nil || !strings.Contains(err.Error(), "bad.jsonl:2: segment 2") {
				t.Fatalf("got %v, want an error naming bad.jsonl:2: segment 2", err)
			}
		})
	}
}

// TestVersions: a partial rollout's per-token versions survive the file, a mismatched array is
// refused with its file and line, and a rollout without them reads every token as PolicyVersion's.
func TestVersions(t *testing.T) {
	for _, c := range []struct {
		name, line string
		want       []int  // VersionOf each token
		err        string // a substring of the error, or ""
	}{
		{"partial", `{"id":"p","tokens":[1,2,3],"logprobs":[0,0,0],"policy_version":2,"versions":[2,2,4]}`, []int{2, 2, 4}, ""},
		{"whole", `{"id":"w","tokens":[1,2],"logprobs":[0,0],"policy_version":3}`, []int{3, 3}, ""},
		{"short", `{"id":"s","tokens":[1,2],"logprobs":[0,0],"versions":[1]}`, nil, "v.jsonl:1: versions of 1 for 2 tokens"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs, err := Read(strings.NewReader(c.line+"\n"), "v.jsonl")
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("got %v, want an error with %q", err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for i := range rs[0].Tokens {
				got = append(got, rs[0].VersionOf(i))
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("versions %v, want %v", got, c.want)
			}
			var buf bytes.Buffer
			if err := Write(&buf, rs); err != nil {
				t.Fatal(err)
			}
			if strings.Contains(buf.String(), "versions") != (c.name == "partial") {
				t.Fatalf("written back as %s", buf.String())
			}
		})
	}
}
