package layoutrender

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/temperml/temper/algorithms/verify"
)

// watchdog crashes the fuzz worker when one input runs away, so the fuzzer saves it.
func watchdog(input string) (stop func()) {
	done := make(chan struct{})
	go func() {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			panic(fmt.Sprintf("ran over 20s on input %.300q", input))
		}
	}()
	return func() { close(done) }
}

// FuzzRender: no completion panics or runs away, every successful render has the requested
// size, and the same input renders the same pixels twice. Run longer with:
//
//	go test -run XXX -fuzz FuzzRender ./algorithms/layoutrender/
func FuzzRender(f *testing.F) {
	files, _ := filepath.Glob("testdata/layouts/*")
	for _, p := range files {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(b))
	}
	for _, s := range []string{
		"", "[]", `{"boxes": null}`, `[{"id": "a", "x": 1e308, "y": -1e308, "w": 1e308, "h": 1e-308}]`,
		`[{"id": "a", "x": 0, "y": 0, "w": 100, "h": 100, "text": "` + strings.Repeat("word ", 59) + `"}]`,
		`[{"id": "a", "x": 0, "y": 0, "w": 0.001, "h": 0.001, "text": "x", "role": "button"}]`,
		`[{"id": "a", "x": 0, "y": 0, "w": 100, "h": 100, "color": "#0000", "text_color": "#fff0", "text": "\n\n\n"}]`,
		`[{"id": "\u0000", "role": "image", "x": 10, "y": 10, "w": 1, "h": 90}]`, `<layout>[{"id":"a"}]</layout>`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		defer watchdog(s)()
		opts := Options{Canvas: verify.Size{W: 100, H: 100}, Width: 64, Height: 48}
		res, err := Render(s, opts)
		if err != nil {
			return
		}
		if b := res.Image.Bounds(); b.Dx() != 64 || b.Dy() != 48 {
			t.Fatalf("image %v", b)
		}
		again, err := Render(s, opts)
		if err != nil || string(again.Image.Pix) != string(res.Image.Pix) {
			t.Fatalf("second render differs (%v)", err)
		}
	})
}
