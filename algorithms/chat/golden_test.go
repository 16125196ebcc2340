package chat

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type convCase struct {
	Name                string                     `json:"name"`
	Families            []string                   `json:"families"`
	Messages            json.RawMessage            `json:"messages"`
	Tools               []string                   `json:"tools"`
	AddGenerationPrompt bool                       `json:"add_generation_prompt"`
	Kwargs              map[string]json.RawMessage `json:"kwargs"`
}

type golden struct {
	Text   *string `json:"text"`
	Error  string  `json:"error"`
	IDs    []int   `json:"ids"`
	Source string  `json:"source"`
}

var families = []string{"qwen3", "llama3_1", "gemma3"}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func loadFamily(t *testing.T, family string) *Template {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", family, "tokenizer_config.json"))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := Load(family, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := ts.Select("", false)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func loadConversations(t *testing.T) (map[string]json.RawMessage, []convCase, map[string]map[string]golden) {
	var convs struct {
		Tools map[string]json.RawMessage `json:"tools"`
		Cases []convCase                 `json:"cases"`
	}
	readJSON(t, "testdata/conversations.json", &convs)
	var goldens map[string]map[string]golden
	readJSON(t, "testdata/goldens.json", &goldens)
	return convs.Tools, convs.Cases, goldens
}

func (c convCase) options(tools map[string]json.RawMessage) Options {
	o := Options{AddGenerationPrompt: c.AddGenerationPrompt, Kwargs: c.Kwargs}
	for _, n := range c.Tools {
		o.Tools = append(o.Tools, tools[n])
	}
	return o
}

// TestGoldenRenders: every committed conversation renders byte-identically to Hugging Face's
// rendering (scripts/goldens/chat: @huggingface/jinja, checked against transformers' Jinja2), and
// fails where the template raises.
func TestGoldenRenders(t *testing.T) {
	tools, cases, goldens := loadConversations(t)
	for _, fam := range families {
		tmpl := loadFamily(t, fam)
		n := 0
		for _, c := range cases {
			g, ok := goldens[fam][c.Name]
			if !ok {
				continue
			}
			n++
			t.Run(fam+"/"+c.Name, func(t *testing.T) {
				r, err := tmpl.Render(c.Messages, c.options(tools))
				if g.Text == nil {
					if err == nil || !strings.Contains(err.Error(), g.Error) {
						t.Fatalf("err = %v, want the template's error %q", err, g.Error)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if r.Text != *g.Text {
					i := 0
					for i < len(r.Text) && i < len(*g.Text) && r.Text[i] == (*g.Text)[i] {
						i++
					}
					t.Fatalf("render differs at byte %d:\n got  %q\n want %q", i, clip(r.Text, i), clip(*g.Text, i))
				}
			})
		}
		if n < 10 {
			t.Errorf("%s: %d golden conversations, want ≥ 10", fam, n)
		}
	}
}

func clip(s string, i int) string {
	return s[max(0, i-60):min(len(s), i+60)]
}
