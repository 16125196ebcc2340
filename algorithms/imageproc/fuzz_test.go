package imageproc

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// watchdog crashes the fuzz worker when one input runs away, so the fuzzer saves it.
func watchdog(n int) (stop func()) {
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			panic(fmt.Sprintf("ran over 20s on an input of %d bytes", n))
		}
	}()
	return func() { close(done) }
}

// fuzzLimits keep a fuzzed header from asking for more than a test can afford, as a worker's
// limits do at full scale.
var fuzzLimits = Limits{MaxPixels: 1 << 20, MaxBytes: 1 << 20}

// FuzzDecode: no input panics or runs away in Decode → Resize (every filter) → Normalize, and
// what decodes has the size its header claims. Seeds: every committed image, headers that claim
// too much, truncations. Run longer with:
//
//	go test -run XXX -fuzz FuzzDecode ./algorithms/imageproc/
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob("testdata/images/*")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
		f.Add(b[:len(b)*2/3])
	}
	f.Add(pngHeader(20000, 20000))
	f.Add(jpegHeader(20000, 20000))
	f.Add(pngHeader(1, 1))
	f.Add([]byte("GIF89a"))
	f.Fuzz(func(t *testing.T, data []byte) {
		defer watchdog(len(data))()
		format, w, h, herr := Header(data, fuzzLimits)
		img, err := Decode(data, fuzzLimits)
		if err != nil {
			return
		}
		if herr != nil || img.W != w || img.H != h || len(img.Pix) != 3*w*h || (format != FormatPNG && format != FormatJPEG) {
			t.Fatalf("decoded %dx%d (%d bytes) but the header said %s %dx%d (%v)", img.W, img.H, len(img.Pix), format, w, h, herr)
		}
		for r := Lanczos; r <= Hamming; r++ {
			out, err := Resize(img, 7, 5, r)
			if err != nil {
				t.Fatal(err)
			}
			p := Normalize(out, Default(7))
			if len(p.Values) != 3*7*5 {
				t.Fatalf("%d values", len(p.Values))
			}
		}
	})
}

// FuzzParseContent: no content value or image reference panics; accepted image parts carry a
// parsed reference, and data: URIs decode within the byte limit.
func FuzzParseContent(f *testing.F) {
	png, _ := os.ReadFile("testdata/images/palette-40x40.png")
	for _, s := range []string{
		`"plain"`, `[{"type":"text","text":"a"}]`, `[{"type":"image","image":"gs://bkt/a.png"}]`,
		`[{"type":"image","image":"file:///a%20b.png"}]`, `[{"type":"image","image":"data:image/png;base64,` + base64.StdEncoding.EncodeToString(png) + `"}]`,
		`[{"type":"image","image":"data:image/jpeg;base64,/9j/"}]`, `[{"type":"image_url"}]`, `[null]`, `{}`, `[[]]`,
		`[{"type":"image","image":"file:///%zz"}]`, `[{"type":"image","image":"gs://a/"}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		defer watchdog(len(s))()
		parts, err := ParseContent(json.RawMessage(s), "content", Limits{MaxBytes: 4096})
		if err != nil {
			return
		}
		for _, p := range Images(parts) {
			if p.Ref == nil || (p.Ref.Scheme == "data" && len(p.Ref.Data) > 4096) {
				t.Fatalf("image part %+v", p)
			}
		}
	})
}
