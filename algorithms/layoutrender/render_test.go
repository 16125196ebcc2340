package layoutrender

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/temperml/temper/algorithms/imageproc"
	"github.com/temperml/temper/algorithms/verify"
)

var update = flag.Bool("update", false, "rewrite testdata/golden.json and the rendered PNGs")

// goldenCase is one committed layout and the options it is rendered with.
type goldenCase struct {
	File    string      `json:"file"`
	Canvas  verify.Size `json:"canvas"`
	Width   int         `json:"width"`
	Height  int         `json:"height"`
	Tag     string      `json:"tag,omitempty"`
	PNG     string      `json:"png_sha256"`
	Pixels  string      `json:"pixels_sha256"`
	Skipped []string    `json:"skipped,omitempty"`
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestGoldenRenders: each committed layout renders to the committed PNG bytes and pixels
// (testdata/rendered/*.png are those images, to look at). Regenerate after a deliberate change
// with go test -run TestGoldenRenders -update ./algorithms/layoutrender/.
func TestGoldenRenders(t *testing.T) {
	raw, err := os.ReadFile("testdata/golden.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	if len(cases) < 3 {
		t.Fatalf("%d golden cases", len(cases))
	}
	for i, c := range cases {
		src, err := os.ReadFile(filepath.Join("testdata/layouts", c.File))
		if err != nil {
			t.Fatal(err)
		}
		png, res, err := RenderPNG(string(src), Options{Canvas: c.Canvas, Width: c.Width, Height: c.Height, Tag: c.Tag})
		if err != nil {
			t.Fatalf("%s: %v", c.File, err)
		}
		out := filepath.Join("testdata/rendered", strings.TrimSuffix(c.File, filepath.Ext(c.File))+".png")
		if *update {
			cases[i].PNG, cases[i].Pixels, cases[i].Skipped = sha(png), sha(res.Image.Pix), res.Skipped
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(out, png, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if got := sha(res.Image.Pix); got != c.Pixels {
			t.Errorf("%s: pixels sha256 %s, want %s (run with -update after a deliberate change; look at %s)", c.File, got, c.Pixels, out)
		}
		if got := sha(png); got != c.PNG {
			t.Errorf("%s: PNG sha256 %s, want %s", c.File, got, c.PNG)
		}
		if strings.Join(res.Skipped, ",") != strings.Join(c.Skipped, ",") {
			t.Errorf("%s: skipped %v, want %v", c.File, res.Skipped, c.Skipped)
		}
	}
	if *update {
		b, _ := json.MarshalIndent(cases, "", "  ")
		if err := os.WriteFile("testdata/golden.json", append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeterministic: the same layout renders to the same bytes every time, also concurrently.
func TestDeterministic(t *testing.T) {
	src, err := os.ReadFile("testdata/layouts/poster.json")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Canvas: verify.Size{W: 100, H: 100}}
	first, _, err := RenderPNG(string(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	outs := make([][]byte, 6)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], _, _ = RenderPNG(string(src), opts)
		}()
	}
	wg.Wait()
	for i, o := range outs {
		if !bytes.Equal(o, first) {
			t.Fatalf("render %d differs", i)
		}
	}
}

// TestMalformedGetsTheVerifierFeedback: a layout the verifier cannot read gets its feedback,
// word for word, as a *LayoutError.
func TestMalformedGetsTheVerifierFeedback(t *testing.T) {
	v, err := verify.NewLayout(json.RawMessage(`{"canvas": {"w": 100, "h": 100}, "ids": ["a"]}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []string{"", "a poster with a title", `{"boxes": "none"}`, `[{"id": 3}]`,
		`[{"id": "a", "x": 1, "y": 1, "w": 1, "h": 1}, {"id": "a", "x": 1, "y": 1, "w": 1, "h": 1}]`, `{"shapes": []}`} {
		verdict, err := v.Verify(context.Background(), verify.Sample{Completion: c})
		if err != nil {
			t.Fatal(err)
		}
		_, err = Render(c, Options{Canvas: verify.Size{W: 100, H: 100}})
		var le *LayoutError
		if !errors.As(err, &le) || le.Feedback != verdict.Feedback {
			t.Errorf("%q: render error %v, verifier feedback %q", c, err, verdict.Feedback)
		}
	}
}

func TestBadAttributes(t *testing.T) {
	cases := []struct{ layout, want string }{
		{`[{"id": "t", "role": "heading", "x": 1, "y": 1, "w": 5, "h": 5}]`, `box 0 (id "t"): role: "heading": allowed values: background, button, caption, image, logo, shape, subtitle, text, title`},
		{`[{"id": "a", "x": 1, "y": 1, "w": 5, "h": 5}, {"id": "t", "color": "#12345", "x": 1, "y": 1, "w": 5, "h": 5}]`, `box 1 (id "t"): color: "#12345": want #rgb, #rgba, #rrggbb, #rrggbbaa or a name (black, blue,`},
		{`[{"id": "t", "color": "rgb(1,2,3)", "x": 1, "y": 1, "w": 5, "h": 5}]`, `box 0 (id "t"): color: "rgb(1,2,3)": want #rgb`},
		{`[{"id": "t", "text_color": 7, "x": 1, "y": 1, "w": 5, "h": 5}]`, `box 0 (id "t"): text_color: want a string`},
		{`[{"id": "t", "text": ["a"], "x": 1, "y": 1, "w": 5, "h": 5}]`, `box 0 (id "t"): text: want a string`},
		{`[{"id": "t", "text": "` + strings.Repeat("x", 301) + `", "x": 1, "y": 1, "w": 5, "h": 5}]`, `box 0 (id "t"): text: 301 characters: at most 300`},
		{`[{"id": "t", "role": 5, "x": 1, "y": 1, "w": 5, "h": 5}]`, `box 0 (id "t"): role: want a string`},
	}
	for _, c := range cases {
		_, err := Render(c.layout, Options{Canvas: verify.Size{W: 10, H: 10}})
		var le *LayoutError
		if !errors.As(err, &le) || !strings.HasPrefix(le.Feedback, c.want) {
			t.Errorf("%.50s: %v, want feedback starting %q", c.layout, err, c.want)
		}
		if cerr := Check(c.layout, ""); cerr == nil || cerr.Error() != err.Error() { // Check refuses what Render refuses
			t.Errorf("%.50s: Check %v, Render %v", c.layout, cerr, err)
		}
	}
	if err := Check(`<l>[{"id": "t", "role": "title", "color": "navy", "text": "Hi", "x": 1, "y": 1, "w": 5, "h": 5}, {"id": "u", "w": 0}]</l>`, "l"); err != nil {
		t.Errorf("Check of a drawable layout (one box skipped): %v", err)
	}
	for _, o := range []Options{{}, {Canvas: verify.Size{W: 10, H: -1}}, {Canvas: verify.Size{W: 10, H: 10}, Width: 5000}} {
		_, err := Render(`[]`, o)
		var le *LayoutError
		if err == nil || errors.As(err, &le) || !strings.HasPrefix(err.Error(), "layoutrender: options") {
			t.Errorf("options %+v: %v, want a plain options error", o, err)
		}
	}
}

// TestPixels: geometry, colours, roles and text land where the layout says.
func TestPixels(t *testing.T) {
	layout := `[
		{"id": "red", "x": 0, "y": 0, "w": 50, "h": 25, "color": "#ff0000"},
		{"id": "half", "x": 0, "y": 50, "w": 50, "h": 25, "color": "#0000ff80"},
		{"id": "btn", "role": "button", "x": 50, "y": 50, "w": 50, "h": 50},
		{"id": "t", "role": "title", "x": 50, "y": 0, "w": 50, "h": 25, "text": "HELLO"},
		{"id": "bad", "x": 1, "y": 1, "w": -5, "h": 5},
		{"id": "nan", "x": 1, "y": 1, "h": 5}
	]`
	res, err := Render(layout, Options{Canvas: verify.Size{W: 100, H: 100}, Width: 200, Height: 100})
	if err != nil {
		t.Fatal(err)
	}
	img := res.Image
	at := func(x, y int) color.RGBA { return img.RGBAAt(x, y) }
	checks := []struct {
		x, y int
		want color.RGBA
	}{
		{10, 10, color.RGBA{255, 0, 0, 255}},      // red box: canvas x 0..50 → pixels 0..100, y 0..25 → 0..25
		{99, 24, color.RGBA{255, 0, 0, 255}},      // its last pixel
		{100, 10, color.RGBA{255, 255, 255, 255}}, // title box: no fill
		{10, 60, color.RGBA{127, 127, 255, 255}},  // half-transparent blue over white
		{150, 60, color.RGBA{0x25, 0x63, 0xeb, 255}},
		{10, 90, color.RGBA{255, 255, 255, 255}},
	}
	for _, c := range checks {
		if got := at(c.x, c.y); got != c.want {
			t.Errorf("pixel (%d,%d) = %v, want %v", c.x, c.y, got, c.want)
		}
	}
	ink := 0
	for y := 0; y < 25; y++ {
		for x := 100; x < 200; x++ {
			if c := at(x, y); c.R < 128 {
				ink++
			}
		}
	}
	if ink < 50 {
		t.Errorf("title text: %d dark pixels in its box, want some", ink)
	}
	if strings.Join(res.Skipped, ",") != "bad,nan" {
		t.Errorf("skipped %v", res.Skipped)
	}
}

// TestRenderFeedsTheProcessor: a render at the processor's size goes through imageproc without a
// resize (the exact no-op), white to 1 and the red fill's green channel to -1.
func TestRenderFeedsTheProcessor(t *testing.T) {
	res, err := Render(`[{"id": "r", "x": 0, "y": 0, "w": 10, "h": 10, "color": "red"}]`, Options{Canvas: verify.Size{W: 100, H: 100}})
	if err != nil {
		t.Fatal(err)
	}
	px, err := imageproc.Process(imageproc.FromImage(res.Image), imageproc.Default(DefaultSize))
	if err != nil {
		t.Fatal(err)
	}
	plane := DefaultSize * DefaultSize
	if px.H != DefaultSize || px.Values[plane+5*DefaultSize+5] != -1 || px.Values[plane-1] != 1 {
		t.Fatalf("pixels %dx%d: green at (5,5) %v, red at the last pixel %v", px.H, px.W, px.Values[plane+5*DefaultSize+5], px.Values[plane-1])
	}
}
