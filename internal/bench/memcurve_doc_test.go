package bench

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// TestEngineMemoryPicture: docs/engine-memory.svg is the SVG of docs/engine-memory-curve.json (the
// measured curve: `temper bench model --presets small,base --seq 512,2048,8192,16384 --batch 1
// --remat layer --json`). After measuring again, rewrite the picture with
//
//	TEMPER_WRITE_DOCS=1 GOEXPERIMENT=simd go test ./internal/bench/ -run TestEngineMemoryPicture
func TestEngineMemoryPicture(t *testing.T) {
	docs := filepath.Join("..", "..", "docs")
	js, err := os.ReadFile(filepath.Join(docs, "engine-memory-curve.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep MemoryCurveReport
	if err := json.Unmarshal(js, &rep); err != nil {
		t.Fatalf("docs/engine-memory-curve.json: %v", err)
	}
	if len(rep.Points) == 0 {
		t.Fatal("docs/engine-memory-curve.json: no points")
	}
	want := rep.SVG()
	path := filepath.Join(docs, "engine-memory.svg")
	if os.Getenv("TEMPER_WRITE_DOCS") != "" {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("docs/engine-memory.svg is not the picture of docs/engine-memory-curve.json: rerun with TEMPER_WRITE_DOCS=1")
	}
}
