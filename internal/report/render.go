package report

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/layoutrender"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/verify"
)

// Rendered outputs: a phase whose verifiers draw its completions (a critic with render: layout)
// gets, on its page, the same held-out prompts drawn at its first and at its last evaluation with
// eval.verifiers (their greedy completions, kept at trainapi.EvalSamplesKey), side by side.

// RenderSize is the side, in pixels, of the pictures a report draws.
const RenderSize = 128

// gridRows bounds the held-out prompts a report draws.
const gridRows = 8

// layoutGrid is the start/end grid of a phase.
type layoutGrid struct {
	StartStep, EndStep int
	StartFrom, EndFrom string // the evaluation objects' URIs
	Rows               []layoutRow
}

type layoutRow struct {
	Prompt     string
	Start, End layoutCell
}

// layoutCell is one drawn completion: its PNG (or why it could not be drawn) and its verdict.
type layoutCell struct {
	png     []byte
	File    string
	Data    template.URL
	Note    string
	Score   float64
	Partial []kv
}

// LayoutOptions reads, from a phase's config, how its completions are drawn: the canvas and tag
// of the first verifier (under reward.verifiers or eval.verifiers) with params.render "layout";
// ok is false when there is none.
func LayoutOptions(config json.RawMessage) (layoutrender.Options, bool) {
	var c struct {
		Reward struct {
			Verifiers []verify.Component `json:"verifiers"`
		} `json:"reward"`
		Eval struct {
			Verifiers []verify.Component `json:"verifiers"`
		} `json:"eval"`
	}
	if json.Unmarshal(config, &c) != nil {
		return layoutrender.Options{}, false
	}
	for _, v := range append(c.Eval.Verifiers, c.Reward.Verifiers...) {
		var p struct {
			Render string      `json:"render"`
			Canvas verify.Size `json:"canvas"`
			Tag    string      `json:"tag"`
		}
		if json.Unmarshal(v.Params, &p) == nil && p.Render == "layout" {
			return layoutrender.Options{Canvas: p.Canvas, Tag: p.Tag, Width: RenderSize, Height: RenderSize}, true
		}
	}
	return layoutrender.Options{}, false
}

// evalName matches the evaluation objects trainapi.EvalSamplesKey names.
var evalName = regexp.MustCompile(`^step-(\d+)\.jsonl$`)

// evalKey is one evaluation object of a phase directory.
type evalKey struct {
	key  string
	step int
}

// renders reads the first and last evaluations with kept completions among dirs (the phase's
// directories in order, branches after it) and draws their first gridRows held-out prompts; nil
// when there are fewer than one such evaluation or nothing to draw with.
func renders(ctx context.Context, st ckpt.Store, run string, dirs []string, opts layoutrender.Options) (*layoutGrid, error) {
	var evals []evalKey
	for _, dir := range dirs {
		prefix := path.Dir(trainapi.EvalSamplesKey(run, dir, 0)) + "/"
		objs, err := st.List(ctx, prefix)
		if err != nil && !errors.Is(err, ckpt.ErrNotExist) {
			return nil, fmt.Errorf("list %s: %w", st.URI(prefix), err)
		}
		var here []evalKey
		for _, o := range objs {
			if m := evalName.FindStringSubmatch(path.Base(o.Key)); m != nil && path.Dir(o.Key)+"/" == prefix {
				n, _ := strconv.Atoi(m[1])
				here = append(here, evalKey{o.Key, n})
			}
		}
		sort.Slice(here, func(i, j int) bool { return here[i].step < here[j].step })
		evals = append(evals, here...)
	}
	if len(evals) == 0 {
		return nil, nil
	}
	first, last := evals[0], evals[len(evals)-1]
	a, err := readEvalSamples(ctx, st, first.key)
	if err != nil {
		return nil, err
	}
	b, err := readEvalSamples(ctx, st, last.key)
	if err != nil {
		return nil, err
	}
	g := &layoutGrid{StartStep: first.step, EndStep: last.step, StartFrom: st.URI(first.key), EndFrom: st.URI(last.key)}
	byIndex := map[int]trainapi.EvalSample{}
	for _, s := range b {
		byIndex[s.Index] = s
	}
	for _, s := range a {
		if len(g.Rows) == gridRows {
			break
		}
		e, ok := byIndex[s.Index]
		if !ok {
			continue
		}
		g.Rows = append(g.Rows, layoutRow{Prompt: s.Prompt, Start: drawCell(s, opts), End: drawCell(e, opts)})
	}
	return g, nil
}

func readEvalSamples(ctx context.Context, st ckpt.Store, key string) ([]trainapi.EvalSample, error) {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", st.URI(key), err)
	}
	defer rc.Close()
	var out []trainapi.EvalSample
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 0, 1<<16), 1<<24)
	for n := 1; sc.Scan(); n++ {
		var s trainapi.EvalSample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", st.URI(key), n, err)
		}
		out = append(out, s)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read %s: %w", st.URI(key), err)
	}
	return out, nil
}

// drawCell draws one completion; a layout that cannot be drawn keeps the renderer's reason.
func drawCell(s trainapi.EvalSample, opts layoutrender.Options) layoutCell {
	c := layoutCell{Score: s.Score}
	for _, k := range sortedKeys(s.Partial) {
		c.Partial = append(c.Partial, kv{k, FormatMetric(s.Partial[k])})
	}
	png, _, err := layoutrender.RenderPNG(s.Completion, opts)
	if err != nil {
		c.Note = err.Error()
		return c
	}
	c.png = png
	return c
}

// writeRenders writes phase i's drawn cells beside the page and inlines them as data URIs.
func writeRenders(p *Phase, i int, dir string) ([]string, error) {
	if p.Renders == nil {
		return nil, nil
	}
	var files []string
	for r := range p.Renders.Rows {
		row := &p.Renders.Rows[r]
		for _, c := range []struct {
			cell *layoutCell
			step int
		}{{&row.Start, p.Renders.StartStep}, {&row.End, p.Renders.EndStep}} {
			if c.cell.png == nil {
				continue
			}
			name := fmt.Sprintf("%02d-%s-render-step-%06d-%02d.png", i+1, p.Name, c.step, r)
			data, err := writePNG(dir, name, c.cell.png)
			if err != nil {
				return nil, err
			}
			files = append(files, filepath.Join(dir, name))
			c.cell.File, c.cell.Data = name, data
		}
	}
	return files, nil
}

// RenderRollouts draws each rollout's completion as a layout into dir as ID.png (IDs made safe
// for file names), and returns the files written and, for each rollout that could not be drawn,
// its ID and the renderer's reason.
func RenderRollouts(dir string, rs []rollout.Rollout, opts layoutrender.Options) (files, skipped []string, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, nil, fmt.Errorf("render: %w", err)
	}
	for i, r := range rs {
		png, _, err := layoutrender.RenderPNG(r.Completion, opts)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s: %v", r.ID, err))
			continue
		}
		name := fileSafe.ReplaceAllString(r.ID, "_")
		if name == "" {
			name = fmt.Sprintf("rollout-%d", i)
		}
		f := filepath.Join(dir, name+".png")
		if err := os.WriteFile(f, png, 0o644); err != nil {
			return files, skipped, fmt.Errorf("render: %w", err)
		}
		files = append(files, f)
	}
	return files, skipped, nil
}

var fileSafe = regexp.MustCompile(`[^A-Za-z0-9._-]+`)
