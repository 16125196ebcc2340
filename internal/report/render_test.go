package report

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/rollout"
)

// TestLayoutRenders: a phase whose critic renders layouts gets its first and last evaluations'
// held-out completions drawn side by side, as files beside the page and inline; a layout that
// cannot be drawn says why; samples --render-dir draws rollouts the same way.
func TestLayoutRenders(t *testing.T) {
	cfg := json.RawMessage(`{"reward":{"verifiers":[{"name":"layout"},{"name":"critic","params":{"checkpoint":"critic","render":"layout","canvas":{"w":100,"h":100}}}]}}`)
	opts, ok := LayoutOptions(cfg)
	if !ok || opts.Canvas.W != 100 || opts.Width != RenderSize {
		t.Fatalf("layout options %+v, %v", opts, ok)
	}
	if _, ok := LayoutOptions(json.RawMessage(`{"reward":{"verifiers":[{"name":"math"}]}}`)); ok {
		t.Fatal("a phase without a rendering verifier is drawn")
	}
	ctx := context.Background()
	st, err := ckpt.New(ckpt.Options{}).Store(ctx, "file://"+t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	good := `{"boxes":[{"id":"b0","x":10,"y":10,"w":50,"h":20,"color":"navy"}]}`
	put := func(step int, completions ...string) {
		var b bytes.Buffer
		for i, c := range completions {
			line, _ := json.Marshal(trainapi.EvalSample{Index: i, Prompt: "layout 1 boxes: navy\n", Completion: c, Score: 0.5, Partial: map[string]float64{"critic": 0.5}})
			b.Write(append(line, '\n'))
		}
		if _, err := st.Put(ctx, trainapi.EvalSamplesKey("r", "grpo", step), &b); err != nil {
			t.Fatal(err)
		}
	}
	put(0, "not a layout", good)
	put(5, good, good)
	put(10, good, good)
	g, err := renders(ctx, st, "r", []string{"grpo"}, opts)
	if err != nil || g == nil {
		t.Fatalf("renders: %v, %v", g, err)
	}
	if g.StartStep != 0 || g.EndStep != 10 || len(g.Rows) != 2 || g.Rows[0].Start.png != nil || g.Rows[0].Start.Note == "" || g.Rows[0].End.png == nil {
		t.Fatalf("grid %+v", g)
	}
	dir := t.TempDir()
	files, err := Write(&Data{RunID: "r", Phases: []Phase{{Name: "grpo", Kind: "grpo", Renders: g}}}, dir)
	if err != nil {
		t.Fatal(err)
	}
	page, _ := os.ReadFile(filepath.Join(dir, "index.html"))
	if len(files) != 1+3 || !strings.Contains(string(page), "Held-out layouts drawn") || strings.Count(string(page), "data:image/png;base64,") != 3 ||
		!strings.Contains(string(page), "not drawn: ") {
		t.Fatalf("files %v; page:\n%s", files, page)
	}
	drawn, skipped, err := RenderRollouts(filepath.Join(dir, "samples"), []rollout.Rollout{{ID: "p0/s1", Completion: good}, {ID: "p0/s2", Completion: "{"}}, opts)
	if err != nil || len(drawn) != 1 || filepath.Base(drawn[0]) != "p0_s1.png" || len(skipped) != 1 || !strings.HasPrefix(skipped[0], "p0/s2: ") {
		t.Fatalf("drawn %v, skipped %v, %v", drawn, skipped, err)
	}
}
