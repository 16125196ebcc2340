package pipeline

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/temperml/temper/internal/usage"
)

// TestParse: overrides apply before validation; the default store is HOME/store; a bad file, field or
// dataset line is a usage error naming it.
func TestParse(t *testing.T) {
	home := t.TempDir()
	data := filepath.Join(home, "d.jsonl")
	if err := os.WriteFile(data, []byte(`{"prompt":"1+1=","completion":"2"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	body := "name: x\nphases:\n  - {name: sft, kind: sft, config: {data: {train: file://" + data + "}, steps: 10}}\n"
	in, err := Parse("p.yaml", []byte(body), []string{"seed=9"}, home)
	if err != nil || in.Seed != 9 || in.Store != "file://"+filepath.Join(home, "store") {
		t.Fatalf("%v: seed %d store %s", err, in.Seed, in.Store)
	}
	if err := os.WriteFile(data, []byte(`{"prompt":1}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ body, want string }{
		{body, "p.yaml: phases[0].config.data.train: " + data + ":1"},
		{"name: x\nphases: [{name: a, kind: nokind}]\n", "p.yaml: "},
		{"name: x\nstate: {next: 1}\nphases: []\n", "state: set by the pipeline itself"},
		{"name: [\n", "p.yaml: "},
	} {
		if _, err := Parse("p.yaml", []byte(tc.body), nil, home); !usage.Is(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want a usage error containing %q", tc.body, err, tc.want)
		}
	}
	if _, err := Load(filepath.Join(home, "none.yaml"), nil, home); !usage.Is(err) || !strings.Contains(err.Error(), "read pipeline") {
		t.Errorf("missing file: %v", err)
	}
	if id := NewRunID("my demo/1"); !regexp.MustCompile(`^my-demo-1-\d{8}-\d{6}-[0-9a-f]{4}$`).MatchString(id) {
		t.Errorf("NewRunID: %s", id)
	}
}
