package lm

import (
	"testing"

	"github.com/temperml/temper/algorithms/episode"
	"github.com/temperml/temper/algorithms/tools"
)

// TestFirstCheckedAnswer: an episode's first answer is the answer of its first well-formed check
// call; calls of other tools and refused calls do not count.
func TestFirstCheckedAnswer(t *testing.T) {
	call := func(name, args string, kind tools.ErrKind) episode.CallRecord {
		return episode.CallRecord{Name: name, Args: args, Result: tools.Result{Kind: kind}}
	}
	for _, c := range []struct {
		calls []episode.CallRecord
		want  string
		ok    bool
	}{
		{nil, "", false},
		{[]episode.CallRecord{call("calc", `{"expr":"1+1"}`, "")}, "", false},
		{[]episode.CallRecord{call("check", `{"answer":"13"}`, ""), call("check", `{"answer":"14"}`, "")}, "13", true},
		{[]episode.CallRecord{call("check", `{"answer":7}`, tools.ErrArguments), call("check", `{"answer":"14"}`, "")}, "14", true},
		{[]episode.CallRecord{call("calc", `{"expr":"7+7"}`, ""), call("check", `{"answer":"14"}`, "")}, "14", true},
	} {
		got, ok := firstCheckedAnswer(episode.Episode{Calls: c.calls})
		if got != c.want || ok != c.ok {
			t.Errorf("%+v: %q %v, want %q %v", c.calls, got, ok, c.want, c.ok)
		}
	}
}
