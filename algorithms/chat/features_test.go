package chat

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestFeatureGoldens: small templates that exercise each construct the interpreter implements
// render as Python Jinja2 set up like transformers renders them (scripts/goldens/chat/features.py).
func TestFeatureGoldens(t *testing.T) {
	var spec struct {
		Vars  map[string]json.RawMessage `json:"vars"`
		Cases []struct {
			Name     string `json:"name"`
			Template string `json:"template"`
		} `json:"cases"`
	}
	readJSON(t, "testdata/features.json", &spec)
	var goldens map[string]golden
	readJSON(t, "testdata/features_goldens.json", &goldens)
	msgs := spec.Vars["msgs"]
	kw := map[string]json.RawMessage{}
	for k, v := range spec.Vars {
		if k != "msgs" {
			kw[k] = v
		}
	}
	for _, c := range spec.Cases {
		t.Run(c.Name, func(t *testing.T) {
			g, ok := goldens[c.Name]
			if !ok {
				t.Fatal("no golden: run scripts/goldens/chat/regen.sh")
			}
			// The spec's variables go in as kwargs; msgs is renamed so Render's messages stay a list.
			tmpl, err := Parse(c.Name, strings.ReplaceAll(c.Template, "msgs", "messages"), nil)
			if err != nil {
				t.Fatal(err)
			}
			r, err := tmpl.Render(msgs, Options{Kwargs: kw})
			if g.Text == nil {
				if err == nil || !strings.Contains(err.Error(), g.Error) {
					t.Fatalf("err = %v, want %q", err, g.Error)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.Text != *g.Text {
				t.Fatalf("got  %q\nwant %q", r.Text, *g.Text)
			}
		})
	}
}
