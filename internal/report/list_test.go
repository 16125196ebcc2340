package report

import (
	"strings"
	"testing"

	"github.com/temperml/temper/internal/usage"
)

func TestSearchQuery(t *testing.T) {
	for _, tc := range []struct {
		kind, where string
		waiting     bool
		want        string
	}{
		{"", "", false, ""},
		{"grpo", "", false, "TemperKind = 'grpo'"},
		{"pipeline", " TemperExactMatch > 0.5 ", false, "TemperKind = 'pipeline' AND (TemperExactMatch > 0.5)"},
		{"", "", true, "(" + WaitingQuery + ")"},
		{"sft", "TemperStep > 3", true, "TemperKind = 'sft' AND (TemperStep > 3) AND (" + WaitingQuery + ")"},
	} {
		got, err := SearchQuery(tc.kind, tc.where, tc.waiting)
		if err != nil || got != tc.want {
			t.Errorf("SearchQuery(%q, %q, %v) = %q, %v; want %q", tc.kind, tc.where, tc.waiting, got, err, tc.want)
		}
	}
	if _, err := SearchQuery("grpoo", "", false); !usage.Is(err) || !strings.Contains(err.Error(), `--kind "grpoo": want one of pipeline,`) {
		t.Errorf("unknown kind: %v", err)
	}
}
