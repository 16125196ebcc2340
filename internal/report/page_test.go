package report

import (
	"bytes"
	"html"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/workflows"
)

// records is a phase's metrics log: a training record per step from first to last (loss falling,
// entropy 0: not measured) and an evaluation at each multiple of 2.
func records(first, last int, t0 float64) []ckpt.MetricsRecord {
	var out []ckpt.MetricsRecord
	for s := first; s <= last; s++ {
		out = append(out, ckpt.MetricsRecord{Kind: ckpt.RecordTrain, Step: s, Time: t0 + float64(s),
			Metrics: map[string]float64{"loss": 3 - 0.1*float64(s), "lr": 0.01, "reward_mean": 0.1 * float64(s), "entropy": 0}})
		if s%2 == 0 {
			out = append(out, ckpt.MetricsRecord{Kind: ckpt.RecordEval, Step: s, Time: t0 + float64(s) + 0.5,
				Metrics: map[string]float64{"heldout_exact_match": 0.05 * float64(s)}})
		}
	}
	return out
}

// TestWritePage renders a page from gathered data without a server: a phase with a back-tracking
// branch gets figures against step and time (a PNG file each, inlined in the page), the branch's
// origin, the note on an unmeasured curve, its samples; a phase with nothing in the store gets no
// figure.
func TestWritePage(t *testing.T) {
	d := &Data{RunID: "r1", Name: "p", Status: "completed", Store: "file:///s", Config: `{"seed": 5}`, Phases: []Phase{
		{Name: "grpo", Kind: "grpo", Result: &workflows.PhaseResult{Name: "grpo", Checkpoint: "file:///s/runs/r1/grpo.b1/step-000006/", Seconds: 12},
			Metrics: []kv{{"heldout_exact_match", "0.3"}},
			Series:  []series{{Dir: "grpo", Records: records(1, 3, 100)}, {Dir: "grpo.b1", Records: records(4, 6, 100), At: 3, Reason: "non-finite loss at iteration 3"}},
			Samples: []rollout.Rollout{{ID: "i6-0", Prompt: "12+34=", Completion: "46", Answer: "46", StopReason: "eos", PolicyVersion: 6}}, SamplesFrom: "file:///s/x.jsonl"},
		{Name: "later", Kind: "sft"},
	}}
	dir := filepath.Join(t.TempDir(), "out")
	files, err := Write(d, dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"index.html", "01-grpo-by-step.png", "01-grpo-by-time.png"}
	if len(files) != len(want) {
		t.Fatalf("files %v, want %v", files, want)
	}
	for i, f := range files {
		if f != filepath.Join(dir, want[i]) {
			t.Errorf("file %d: %s, want %s", i, f, want[i])
		}
		if !strings.HasSuffix(f, ".png") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if img, err := png.Decode(bytes.NewReader(b)); err != nil || img.Bounds().Dx() < 800 {
			t.Errorf("%s: %v", f, err)
		}
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	page := html.UnescapeString(string(b))
	for _, w := range []string{"Run r1", "data:image/png;base64,", "phase grpo against step: training loss, held-out exact match, reward mean, learning rate",
		"<td>grpo.b1</td><td>3</td><td>non-finite loss at iteration 3</td>", "entropy not drawn: every record says 0",
		"i6-0", "file:///s/runs/r1/grpo.b1/step-000006/", `{"seed": 5}`, "no result yet"} {
		if !strings.Contains(page, w) {
			t.Errorf("page lacks %q", w)
		}
	}
	if strings.Count(page, "<figure>") != 2 {
		t.Errorf("%d figures, want 2 (the later phase has no data)", strings.Count(page, "<figure>"))
	}
}

// TestWritePageSteering: a phase's control records are listed (and drawn as markers), a fork's
// page links its parent and a parent's page its forks, and a gate's stop is said.
func TestWritePageSteering(t *testing.T) {
	recs := append(records(1, 6, 100), ckpt.MetricsRecord{Kind: ckpt.RecordControl, Step: 3, Time: 103.5, Seq: 1, Event: "set",
		Label: "set optimizer.lr 0.0003→0.0001", Metrics: map[string]float64{"optimizer.lr": 1e-4}})
	d := &Data{RunID: "child", Name: "p", Status: "completed", Store: "file:///s", Stopped: "gate before phase dpo: rejected",
		Parent: &workflows.Lineage{Run: "parent", Phase: "sft", Step: 6, Checkpoint: "file:///s/runs/parent/sft/step-000006/", Set: []string{"optimizer.lr=1e-4"}},
		Forks:  []string{"grandchild"},
		Phases: []Phase{{Name: "grpo", Kind: "grpo", Series: []series{{Dir: "grpo", Records: recs}}}}}
	for _, r := range recs {
		if r.Kind == ckpt.RecordControl {
			d.Phases[0].Controls = append(d.Phases[0].Controls, control{Dir: "grpo", Step: r.Step, Event: r.Event, Label: r.Label})
		}
	}
	files, err := Write(d, filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	page := html.UnescapeString(string(b))
	for _, w := range []string{`forked from run <a href="../report-parent/index.html">parent</a> at <code>sft@6</code>`,
		"with <code>optimizer.lr=1e-4</code>", `<a href="../report-grandchild/index.html">grandchild</a>`,
		"<td>grpo</td><td>3</td><td>set</td><td>set optimizer.lr 0.0003→0.0001</td>", "stopped: gate before phase dpo: rejected"} {
		if !strings.Contains(page, w) {
			t.Errorf("page lacks %q", w)
		}
	}
	// The marker changes the figure: the same curves without the control record draw another image.
	plain, _, _, err := phaseFigure("grpo", []series{{Dir: "grpo", Records: records(1, 6, 100)}}, false)
	if err != nil {
		t.Fatal(err)
	}
	marked, _, _, err := phaseFigure("grpo", []series{{Dir: "grpo", Records: recs}}, false)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(plain, marked) {
		t.Error("the control record drew no marker")
	}
}
