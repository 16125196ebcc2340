package imageproc

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"testing"
)

// TestLoadNamesTheField: acceptance 4 — a missing image file, a truncated PNG and a
// 20,000×20,000 image are refused with an error naming the field and the reference, before any
// pixel of the oversized one is decoded.
func TestLoadNamesTheField(t *testing.T) {
	good := readFile(t, "testdata/images/rgb-37x29.png")
	files := map[string][]byte{
		"/data/good.png":      good,
		"/data/truncated.png": good[:len(good)/2],
		"/data/huge.png":      pngHeader(20000, 20000),
	}
	fetch := func(ref Ref, maxBytes int64) ([]byte, error) {
		b, ok := files[ref.Path]
		if !ok {
			return nil, fmt.Errorf("open %s: %w", ref.Path, fs.ErrNotExist)
		}
		return b, nil
	}
	content := func(uri string) []Part {
		parts, err := ParseContent(json.RawMessage(`[{"type": "text", "text": "x"}, {"type": "image", "image": "`+uri+`"}]`), "chosen", Limits{})
		if err != nil {
			t.Fatal(err)
		}
		return Images(parts)
	}
	cfg := Default(16)
	cases := []struct{ uri, want string }{
		{"file:///data/missing.png", "imageproc: chosen[1].image: file:///data/missing.png: open /data/missing.png: file does not exist"},
		{"file:///data/truncated.png", "imageproc: chosen[1].image: file:///data/truncated.png: decode png (37x29): truncated or corrupt image data"},
		{"file:///data/huge.png", "imageproc: chosen[1].image: file:///data/huge.png: png image of 20000x20000 = 400000000 pixels is over the limit of 40000000 pixels (limits.max_pixels); refused before decoding"},
		{"data:image/png;base64," + base64.StdEncoding.EncodeToString(pngHeader(20000, 20000)), "imageproc: chosen[1].image: data:image/png;base64,… (33 bytes): png image of 20000x20000"},
	}
	for _, c := range cases {
		_, _, err := PreprocessPart(content(c.uri)[0], fetch, cfg)
		var fe *FieldError
		if err == nil || !strings.HasPrefix(err.Error(), c.want) || !asFieldError(err, &fe) || fe.Field != "chosen[1].image" {
			t.Errorf("%.40s: %v, want an error starting %q", c.uri, err, c.want)
		}
	}
	px, key, err := PreprocessPart(content("file:///data/good.png")[0], fetch, cfg)
	if err != nil || px.H != 16 || key != CacheKey(good, cfg) {
		t.Fatalf("good image: %v %q", err, key)
	}
	small := cfg
	small.Limits.MaxBytes = 100
	if _, _, err := PreprocessPart(content("file:///data/good.png")[0], fetch, small); err == nil || !strings.Contains(err.Error(), "more than the limit of 100 bytes") {
		t.Errorf("over the byte limit: %v", err)
	}
	if _, _, err := PreprocessPart(content("gs://bkt/a.png")[0], nil, cfg); err == nil || !strings.Contains(err.Error(), "no fetcher for gs references") {
		t.Errorf("no fetcher: %v", err)
	}
}

func asFieldError(err error, fe **FieldError) bool {
	e, ok := err.(*FieldError)
	*fe = e
	return ok
}
