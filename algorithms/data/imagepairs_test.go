package data

import (
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/imageproc"
)

// TestReadImagePairs: lines of image pairs are read with their line numbers and references; bad
// lines are refused naming the file, the line and the field.
func TestReadImagePairs(t *testing.T) {
	const png = "iVBORw0KGgo=" // a PNG signature: enough for ParseRef's magic-byte check
	img := func(ref string) string { return `[{"type":"image","image":"` + ref + `"}]` }
	line := func(c, r string) string { return `{"chosen":` + c + `,"rejected":` + r + `}` }
	for _, c := range []struct {
		name, in string
		n        int
		want     string
	}{
		{"two pairs and a blank line", line(img("file:///a.png"), img("gs://bkt/c.png")) + "\n\n" +
			`{"id":"x","prompt":"","chosen":` + img("data:image/png;base64,"+png) + `,"rejected":` + img("file:///d.png") + "}\n", 2, ""},
		{"missing rejected", `{"chosen":` + img("file:///a.png") + "}", 0, "pairs.jsonl:1: imageproc: rejected: missing"},
		{"relative path", line(img("file:///a.png"), img("b.png")), 0, "pairs.jsonl:1: imageproc: rejected[0].image"},
		{"http", line(img("https://x/a.png"), img("file:///b.png")), 0, "pairs.jsonl:1: imageproc: chosen[0].image"},
		{"two images", line(`[{"type":"image","image":"file:///a.png"},{"type":"image","image":"file:///b.png"}]`, img("file:///c.png")), 0, "chosen: 2 parts with 2 images"},
		{"string side", line(`"a poster"`, img("file:///c.png")), 0, "chosen: 1 parts with 0 images"},
		{"prompt", `{"prompt":"jazz","chosen":` + img("file:///a.png") + `,"rejected":` + img("file:///b.png") + `}`, 0, "pairs.jsonl:1: prompt: text prompts are not implemented"},
		{"unknown field", `{"label":true,"chosen":` + img("file:///a.png") + `,"rejected":` + img("file:///b.png") + `}`, 0, `field "label" is not read`},
		{"not an object", "\n[1,2]", 0, "pairs.jsonl:2: want a JSON object"},
		{"image_url part", line(`[{"type":"image_url","image_url":{"url":"file:///a.png"}}]`, img("file:///b.png")), 0, "pairs.jsonl:1: imageproc: chosen[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := ReadImagePairs(strings.NewReader(c.in), "pairs.jsonl", imageproc.Limits{})
			if c.want != "" {
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("error %v, want it to contain %q", err, c.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != c.n {
				t.Fatalf("%d pairs, want %d", len(got), c.n)
			}
			if got[0].Line != 1 || got[1].Line != 3 || got[0].ID != "pairs.jsonl:1" || got[1].ID != "x" ||
				got[0].Chosen.Ref.String() != "file:///a.png" || got[0].Rejected.Ref.String() != "gs://bkt/c.png" ||
				got[1].Chosen.Ref.Scheme != "data" || got[1].Chosen.Field != "chosen[0]" {
				t.Fatalf("pairs %+v", got)
			}
		})
	}
}

// FuzzReadImagePairs: any input is read or refused with an error naming the file, never a panic.
func FuzzReadImagePairs(f *testing.F) {
	f.Add(`{"chosen":[{"type":"image","image":"file:///a.png"}],"rejected":[{"type":"image","image":"gs://bkt/b.png"}]}`)
	f.Add(`{"id":"x","chosen":[{"type":"image","image":"data:image/png;base64,iVBORw0KGgo="}],"rejected":"text"}`)
	f.Add("\n\n{\"prompt\":\"p\"}\n[1]")
	f.Fuzz(func(t *testing.T, in string) {
		pairs, err := ReadImagePairs(strings.NewReader(in), "f.jsonl", imageproc.Limits{})
		if err != nil {
			if !strings.HasPrefix(err.Error(), "f.jsonl") {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for _, p := range pairs {
			if p.Chosen.Ref == nil || p.Rejected.Ref == nil || p.Line < 1 {
				t.Fatalf("pair %+v without references or line", p)
			}
		}
	})
}
