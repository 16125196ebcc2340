package bench

import (
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"strings"
	"testing"
)

func TestParseSeqs(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []int
		err  bool
	}{
		{"512", []int{512}, false},
		{"512, 2048,16384", []int{512, 2048, 16384}, false},
		{"0", nil, true},
		{"512,", nil, true},
		{"2k", nil, true},
	} {
		got, err := ParseSeqs(tc.in)
		if tc.err {
			if err == nil || !strings.Contains(err.Error(), "--seq") {
				t.Errorf("ParseSeqs(%q) = %v, %v; want an error naming --seq", tc.in, got, err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("ParseSeqs(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}

// TestMemoryPointChild is one point of TestMemoryCurve, run as its child process.
func TestMemoryPointChild(t *testing.T) {
	spec := os.Getenv("TEMPER_TEST_MEMORY_POINT")
	if spec == "" {
		t.Skip("run by TestMemoryCurve")
	}
	var o MemoryPointOptions
	if _, err := fmt.Sscanf(spec, "%s %d %d %d %s", &o.Preset, &o.Seq, &o.Batch, &o.Steps, &o.Remat); err != nil {
		t.Fatal(err)
	}
	res, err := MemoryPoint(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	res.Text(os.Stdout)
}

// TestMemoryCurve: each point runs in its own process (this test binary) and comes back with its
// peak RSS and speed, in the order of presets and lengths; a child that fails or prints no result
// fails the curve with its output.
func TestMemoryCurve(t *testing.T) {
	if testing.Short() {
		t.Skip("compiles training steps in child processes")
	}
	child := func(env string) func(p MemoryPointOptions) *exec.Cmd {
		return func(p MemoryPointOptions) *exec.Cmd {
			cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryPointChild$", "-test.v")
			cmd.Env = append(os.Environ(), fmt.Sprintf("TEMPER_TEST_MEMORY_POINT=%s %d %d %d %s", p.Preset, p.Seq, p.Batch, p.Steps, p.Remat))
			if env != "" {
				cmd.Env = append(cmd.Env, env)
			}
			return cmd
		}
	}
	o := MemoryCurveOptions{Presets: []string{"tiny"}, Seqs: []int{16, 64}, Point: MemoryPointOptions{Batch: 1, Steps: 1, Remat: "layer"},
		Child: child("")}
	rep, err := MemoryCurve(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Points) != 2 {
		t.Fatalf("points %+v, want 2", rep.Points)
	}
	for i, p := range rep.Points {
		if p.Preset != "tiny" || p.Seq != o.Seqs[i] || p.Batch != 1 || p.Remat != "layer" || p.PeakRSS < 1<<20 ||
			p.EstimateBytes <= 0 || !(p.TokensPerSec > 0) || !(p.StepCPUSeconds > 0) {
			t.Errorf("point %d: %+v", i, p)
		}
	}
	var sb strings.Builder
	rep.Text(&sb)
	if !strings.Contains(sb.String(), "tiny") || strings.Count(sb.String(), "\n") != 4 {
		t.Errorf("text:\n%s", sb.String())
	}

	o.Seqs = []int{16}
	o.Child = child("TEMPER_TEST_MEMORY_POINT=nonesuch 16 1 1 layer")
	if _, err := MemoryCurve(context.Background(), o); err == nil || !strings.Contains(err.Error(), "nonesuch") {
		t.Errorf("a failing child: %v, want its error (unknown preset)", err)
	}
	o.Child = func(MemoryPointOptions) *exec.Cmd { return exec.Command("true") }
	if _, err := MemoryCurve(context.Background(), o); err == nil || !strings.Contains(err.Error(), "printed no") {
		t.Errorf("a child without a result: %v", err)
	}
}

// TestMemoryCurveSVG: a well-formed picture with one line per preset in each panel, through
// every point of that preset.
func TestMemoryCurveSVG(t *testing.T) {
	rep := MemoryCurveReport{ISA: "avx2", Points: []MemoryPointResult{
		{Preset: "small", Seq: 512, PeakRSS: 100 << 20, Batch: 1, StepCPUSeconds: 0.5, Remat: "layer"},
		{Preset: "small", Seq: 2048, PeakRSS: 120 << 20, Batch: 1, StepCPUSeconds: 2.5, Remat: "layer"},
		{Preset: "small", Seq: 16384, PeakRSS: 500 << 20, Batch: 1, StepCPUSeconds: 50, Remat: "layer"},
		{Preset: "base", Seq: 512, PeakRSS: 300 << 20, Batch: 1, StepCPUSeconds: 1.2, Remat: "layer"},
		{Preset: "base", Seq: 2048, PeakRSS: 400 << 20, Batch: 1, StepCPUSeconds: 6, Remat: "layer"},
	}}
	svg := rep.SVG()
	var doc struct {
		XMLName   xml.Name `xml:"svg"`
		Polylines []struct {
			Points string `xml:"points,attr"`
		} `xml:"polyline"`
		Texts []string `xml:"text"`
	}
	if err := xml.Unmarshal([]byte(svg), &doc); err != nil {
		t.Fatalf("not XML: %v\n%s", err, svg)
	}
	var counts []int
	for _, p := range doc.Polylines {
		counts = append(counts, len(strings.Fields(p.Points)))
	}
	if want := []int{3, 2, 3, 2}; !reflect.DeepEqual(counts, want) {
		t.Errorf("points per line %v, want %v (rss small, base; tok/s small, base)", counts, want)
	}
	texts := strings.Join(doc.Texts, "|")
	for _, w := range []string{"peak RSS", "training speed", "small", "base", "16384", "avx2"} {
		if !strings.Contains(texts, w) {
			t.Errorf("no %q in the labels %q", w, texts)
		}
	}
	if got := (MemoryCurveReport{}).SVG(); !strings.HasSuffix(got, "</svg>\n") {
		t.Errorf("empty curve: %q", got)
	}
}
