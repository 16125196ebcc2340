package report

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"sort"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/temperml/temper/activities/ckpt"
)

// curve is one panel of a phase's figure: a metric of the metrics log, from training or evaluation
// records. keys are tried in order (throughput is named after what an objective counts).
type curve struct {
	title string
	kind  string
	keys  []string
	// zeroUnmeasured: a curve of exact zeros means "not measured" (the RL objective reports entropy 0
	// unless entropy_coef is set), so it is left out and said so rather than drawn.
	zeroUnmeasured bool
}

var curves = []curve{
	{"training loss", ckpt.RecordTrain, []string{"loss"}, false},
	{"held-out exact match", ckpt.RecordEval, []string{"heldout_exact_match"}, false},
	{"reward mean", ckpt.RecordTrain, []string{"reward_mean"}, false},
	{"KL to reference", ckpt.RecordTrain, []string{"kl", "kl_ref"}, false},
	{"entropy", ckpt.RecordTrain, []string{"entropy"}, true},
	{"learning rate", ckpt.RecordTrain, []string{"lr"}, false},
	{"tokens/s", ckpt.RecordTrain, []string{"tokens_per_s", "train_tokens_per_s", "pairs_per_s", "rows_per_s"}, false},
}

// series is one checkpoint directory's records (the phase, or a back-tracking branch of it).
type series struct {
	Dir     string
	Records []ckpt.MetricsRecord
	// At is the step (RL iteration) where the branch left its parent; 0 for the phase itself.
	At     int
	Reason string
}

// points returns (x, y) of the series' records of kind carrying one of keys; x is the step, or
// with byTime the seconds since t0.
func (b series) points(c curve, byTime bool, t0 float64) (plotter.XYs, string) {
	for _, k := range c.keys {
		var xy plotter.XYs
		for _, r := range b.Records {
			v, ok := r.Metrics[k]
			if r.Kind != c.kind || !ok {
				continue
			}
			x := float64(r.Step)
			if byTime {
				x = r.Time - t0
			}
			xy = append(xy, plotter.XY{X: x, Y: v})
		}
		if len(xy) > 0 {
			return xy, k
		}
	}
	return nil, ""
}

// phaseFigure draws the phase's curves against the step (or, byTime, against wall time since the
// phase's first record) as a grid of panels, one line per branch, with a dashed vertical line where
// each branch left its parent; it returns the PNG, the panels' titles and notes on curves left out.
// No data: nil.
func phaseFigure(phase string, ss []series, byTime bool) ([]byte, []string, []string, error) {
	t0 := math.Inf(1)
	for _, b := range ss {
		for _, r := range b.Records {
			t0 = math.Min(t0, r.Time)
		}
	}
	var panels []*plot.Plot
	var titles, notes []string
	for _, c := range curves {
		if c.zeroUnmeasured && allZero(ss, c) {
			notes = append(notes, c.title+" not drawn: every record says 0, i.e. not measured (the objective computes it only with entropy_coef set)")
			continue
		}
		p, err := panel(c, ss, byTime, t0)
		if err != nil {
			return nil, nil, nil, err
		}
		if p != nil {
			panels = append(panels, p)
			titles = append(titles, c.title)
		}
	}
	if len(panels) == 0 {
		return nil, nil, notes, nil
	}
	png, err := renderGrid(figureTitle(phase, byTime), panels)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("report: png %s: %w", phase, err)
	}
	return png, titles, notes, nil
}

// panel draws curve c of every series (nil when none has a point), marking where branches left
// their parent; t0 is the time axis' origin.
func panel(c curve, ss []series, byTime bool, t0 float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = c.title
	p.X.Label.Text = "step (RL: iteration)"
	if byTime {
		p.X.Label.Text = "wall time since the phase's first record (s)"
	}
	p.Add(plotter.NewGrid())
	lo, hi, n := math.Inf(1), math.Inf(-1), 0
	for i, b := range ss {
		xy, key := b.points(c, byTime, t0)
		if len(xy) == 0 {
			continue
		}
		for _, q := range xy {
			lo, hi = math.Min(lo, q.Y), math.Max(hi, q.Y)
		}
		n += len(xy)
		l, err := plotter.NewLine(xy)
		if err != nil {
			return nil, fmt.Errorf("report: %s %s: %w", b.Dir, key, err)
		}
		l.Color = plotutil.Color(i)
		l.Width = vg.Points(1.2)
		p.Add(l)
		if len(xy) <= 40 || c.kind == ckpt.RecordEval { // few points: show each
			s, err := plotter.NewScatter(xy)
			if err != nil {
				return nil, err
			}
			s.Color, s.Radius = plotutil.Color(i), vg.Points(2)
			p.Add(s)
		}
		label := b.Dir
		if c.keys[0] != key {
			label += " (" + key + ")"
		}
		p.Legend.Add(label, l)
	}
	if n == 0 {
		return nil, nil
	}
	if lo == hi { // a constant (a flat learning rate): give it a readable scale around its value
		pad := math.Abs(lo) * 0.5
		if pad == 0 {
			pad = 1
		}
		lo, hi = lo-pad, hi+pad
		p.Y.Min, p.Y.Max = lo, hi
	}
	if err := markBranches(p, ss, byTime, t0, lo, hi); err != nil {
		return nil, err
	}
	if err := markControls(p, ss, byTime, t0, lo, hi); err != nil {
		return nil, err
	}
	p.Legend.Top = true
	p.Legend.TextStyle.Font.Size = vg.Points(8)
	return p, nil
}

// markBranches draws a dashed red vertical line from lo to hi where each branch left its parent.
func markBranches(p *plot.Plot, ss []series, byTime bool, t0, lo, hi float64) error {
	for i, b := range ss {
		if b.At == 0 || i == 0 {
			continue
		}
		x := float64(b.At)
		if byTime {
			if len(b.Records) == 0 {
				continue
			}
			x = b.Records[0].Time - t0
		}
		v, err := plotter.NewLine(plotter.XYs{{X: x, Y: lo}, {X: x, Y: hi}})
		if err != nil {
			return err
		}
		v.Color = color.RGBA{R: 200, A: 255}
		v.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		p.Add(v)
	}
	return nil
}

// markControls draws a dotted blue vertical line, labelled, at each control record (temper set,
// pause, resume, a gate's decision, a fork): after its step, or at its time.
func markControls(p *plot.Plot, ss []series, byTime bool, t0, lo, hi float64) error {
	var at plotter.XYs
	var labels []string
	for _, b := range ss {
		for _, r := range b.Records {
			if r.Kind != ckpt.RecordControl {
				continue
			}
			x := float64(r.Step)
			if byTime {
				x = r.Time - t0
			}
			v, err := plotter.NewLine(plotter.XYs{{X: x, Y: lo}, {X: x, Y: hi}})
			if err != nil {
				return err
			}
			v.Color = color.RGBA{B: 200, G: 80, A: 255}
			v.Dashes = []vg.Length{vg.Points(1), vg.Points(2)}
			p.Add(v)
			label := r.Label
			if len(label) > 40 {
				label = label[:39] + "…"
			}
			at = append(at, plotter.XY{X: x, Y: hi - float64(len(at)%3)*(hi-lo)*0.08})
			labels = append(labels, label)
		}
	}
	if len(at) == 0 {
		return nil
	}
	l, err := plotter.NewLabels(plotter.XYLabels{XYs: at, Labels: labels})
	if err != nil {
		return err
	}
	for i := range l.TextStyle {
		l.TextStyle[i].Color = color.RGBA{B: 200, G: 80, A: 255}
		l.TextStyle[i].Font.Size = vg.Points(7)
	}
	p.Add(l)
	return nil
}

// renderGrid lays the panels out two a row under title and encodes the figure as PNG.
func renderGrid(title string, panels []*plot.Plot) ([]byte, error) {
	const cols = 2
	rows := (len(panels) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	for i, p := range panels {
		grid[i/cols][i%cols] = p
	}
	w, h := 11*vg.Inch, vg.Length(rows)*3*vg.Inch
	img := vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(96))
	dc := draw.New(img)
	body := draw.Crop(dc, 0, 0, 0, -0.35*vg.Inch) // the top strip holds the figure's title
	canvases := plot.Align(grid, draw.Tiles{Rows: rows, Cols: cols, PadX: vg.Points(12), PadY: vg.Points(12),
		PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(8)}, body)
	for i, p := range panels {
		p.Draw(canvases[i/cols][i%cols])
	}
	dc.FillText(draw.TextStyle{Color: color.Black, Font: font.From(plot.DefaultFont, vg.Points(13)), Handler: plot.DefaultTextHandler,
		XAlign: draw.XCenter, YAlign: draw.YCenter}, vg.Point{X: w / 2, Y: h - 0.18*vg.Inch}, title)
	var buf bytes.Buffer
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(&buf); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func figureTitle(phase string, byTime bool) string {
	if byTime {
		return fmt.Sprintf("phase %s against wall time", phase)
	}
	return fmt.Sprintf("phase %s against step", phase)
}

// sortSeries puts the phase first and its branches in order (b1, b2, … b10).
func sortSeries(s []series) {
	sort.SliceStable(s, func(i, j int) bool {
		if len(s[i].Dir) != len(s[j].Dir) {
			return len(s[i].Dir) < len(s[j].Dir)
		}
		return s[i].Dir < s[j].Dir
	})
}

// allZero says whether every value of c in the series is exactly 0 (and there is at least one).
func allZero(ss []series, c curve) bool {
	n := 0
	for _, b := range ss {
		xy, _ := b.points(c, false, 0)
		for _, q := range xy {
			if q.Y != 0 {
				return false
			}
			n++
		}
	}
	return n > 0
}
