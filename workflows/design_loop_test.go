package workflows_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/layoutrender"
	"github.com/temperml/temper/algorithms/verify"
	"github.com/temperml/temper/internal/config"
	"github.com/temperml/temper/scripts/design"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// designRise is issue 43's acceptance 3: the held-out rule score rises by at least this factor
// from the SFT start.
const designRise = 1.2

// tinyLoop shrinks scripts/design/loop.yaml to a plumbing check (see TestDesignLoop).
var tinyLoop = []string{
	"phases.sft.config.steps=30", "phases.sft.config.chunk_steps=30", "phases.sft.config.eval.examples=4",
	"phases.critic.config.steps=20", "phases.critic.config.chunk_steps=20", "phases.critic.config.eval.pairs=40",
	"phases.grpo.config.iterations=2", "phases.grpo.config.prompts=2", "phases.grpo.config.group=2",
	"phases.grpo.config.eval_every=1", "phases.grpo.config.eval.examples=4", "phases.grpo.config.max_new_tokens=64",
	"phases.grpo.config.eval.max_new_tokens=64",
}

// TestDesignLoop runs scripts/design/loop.yaml on the in-process server: SFT of a layout writer on
// plain layouts, a vision critic on the pair generator's preferences (second in the pipeline: it
// starts from its seeded tower, not from the SFT checkpoint), and GRPO with the layout verifier as
// a format gate and the critic (named by phase) on the rendered layouts as the reward. Every
// evaluation of the GRPO phase scores the greedy held-out layouts with the critic and, for the
// record only, the rule score ("aesthetic": the pair generator's principles).
//
// By default (without -short) a tiny version checks the plumbing: each evaluation logs both scores
// and keeps its completions, and the histories replay. TEMPER_DESIGN_LOOP=1 runs the file as it
// is and checks issue 43's acceptance 3: the held-out rule score at the end is at least 1.2× the
// SFT start's while the critic's rises too; it logs both curves and every evaluation at which the
// critic rose while the rules fell (reward hacking).
func TestDesignLoop(t *testing.T) {
	full := os.Getenv("TEMPER_DESIGN_LOOP") != ""
	if testing.Short() && !full {
		t.Skip("a minute or more on 2 cores: run without -short (tiny), or TEMPER_DESIGN_LOOP=1 (the full loop)")
	}
	dir := t.TempDir()
	sizes, sets := design.DefaultLoopSizes, tinyLoop
	if full {
		// Trials of other settings, reproducible from the command line (docs/vision.md).
		sets = nil
		if v := os.Getenv("TEMPER_DESIGN_SET"); v != "" {
			sets = strings.Split(v, ";")
		}
		if v := os.Getenv("TEMPER_DESIGN_PAIRS"); v != "" {
			sizes.Pairs = v
		}
	} else {
		sizes.SFT, sizes.Heldout, sizes.Prompts, sizes.CriticTrain, sizes.CriticHeldout = 40, 4, 16, 64, 40
	}
	if err := design.WriteLoop(dir, sizes); err != nil {
		t.Fatal(err)
	}
	in := loadLoop(t, dir, sets)
	env := testenv.Get(t)
	env.Roles(t, workflows.QueueTemper, workflows.QueueTrainer, workflows.QueueRollout, workflows.QueueReward)
	id := fmt.Sprintf("design-loop-%d", time.Now().UnixNano())
	run, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: id, TaskQueue: workflows.QueueTemper, WorkflowExecutionTimeout: 40 * time.Minute},
		workflows.PipelineName, in)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	var out workflows.PipelineOutput
	if err := run.Get(context.Background(), &out); err != nil {
		t.Fatalf("pipeline: %v", err)
	}
	for _, p := range out.Phases {
		t.Logf("phase %s (%s): %.0f s", p.Name, p.Kind, p.Seconds)
	}
	t.Logf("design loop: %.0f s in all", time.Since(start).Seconds())
	critic, grpo := out.Phases[1].Metrics, out.Phases[2].Metrics
	t.Logf("critic: held-out pairwise accuracy %.3f", critic["heldout_pair_accuracy"])
	curve := designCurve(t, in.Store, id)
	if len(curve) < 2 {
		t.Fatalf("%d evaluations of the grpo phase logged, want the start and at least one more", len(curve))
	}
	hacked := 0
	for i, e := range curve {
		note := ""
		if i > 0 && e.critic > curve[i-1].critic && e.rules < curve[i-1].rules {
			note, hacked = "  <- critic up, rules down", hacked+1
		}
		t.Logf("iteration %3d: held-out critic %.4f  rules %.4f (alignment %.3f, overlap %.3f)  format %.3f  reward_mean %.3f%s",
			e.step, e.critic, e.rules, e.align, e.overlap, e.format, e.reward, note)
		for _, k := range []string{"heldout_score_critic", "heldout_score_aesthetic", "heldout_score_format"} {
			if _, ok := e.m[k]; !ok {
				t.Fatalf("evaluation at iteration %d has no %s: %v", e.step, k, e.m)
			}
		}
	}
	first, last := curve[0], curve[len(curve)-1]
	if first.step != 0 || grpo["heldout_score_aesthetic_before"] != first.rules || grpo["heldout_score_aesthetic"] != last.rules {
		t.Fatalf("curve %v does not start at the SFT checkpoint or end at the phase's result %v", curve, grpo)
	}
	st, err := ckpt.New(ckpt.Options{}).Store(context.Background(), in.Store)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []designEval{first, last} {
		if _, err := st.Stat(context.Background(), trainapi.EvalSamplesKey(id, "grpo", e.step)); err != nil {
			t.Fatalf("held-out completions of iteration %d: %v", e.step, err)
		}
	}
	replayAll(t, env.Client, id)
	if !full {
		return
	}
	pics := os.Getenv("TEMPER_DESIGN_OUT")
	hacked = 0 // counted again on the rule score of drawn layouts
	var prev [2]float64
	evals := make([][]trainapi.EvalSample, len(curve))
	for i, e := range curve {
		s := designSamples(t, st, id, e.step)
		evals[i] = s
		r, c, d, b := labelStats(s, drawnRulesLabel), labelStats(s, "critic"), labelStats(s, drawnLabel), labelStats(s, briefLabel)
		note := ""
		if i > 0 && c.mean > prev[0] && r.mean < prev[1] {
			note, hacked = "  <- critic up, rules down", hacked+1
		}
		prev = [2]float64{c.mean, r.mean}
		t.Logf("iteration %3d: rules (drawn) %.4f ± %.4f, critic %.4f ± %.4f, drawn %.3f, brief's colours %.3f (%d held-out briefs; mean ± standard error)%s", e.step, r.mean, r.se, c.mean, c.se, d.mean, b.mean, len(s), note)
		if pics != "" {
			keepDesignEval(t, pics, e.step, s)
		}
	}
	atStart, atEnd := evals[0], evals[len(evals)-1]
	if len(atStart) != len(atEnd) || len(atStart) < 2 {
		t.Fatalf("%d held-out briefs at the start, %d at the end: want the same ones, at least 2", len(atStart), len(atEnd))
	}
	for i := range atStart {
		if atStart[i].Index != atEnd[i].Index || atStart[i].Prompt != atEnd[i].Prompt {
			t.Fatalf("held-out line %d: brief %d %q at the start, %d %q at the end", i, atStart[i].Index, atStart[i].Prompt, atEnd[i].Index, atEnd[i].Prompt)
		}
	}
	// The acceptance's rule score is that of drawn layouts (drawnRulesLabel); the raw one is logged beside it.
	rs, re, rd := pairedStats(atStart, atEnd, drawnRulesLabel)
	raw0, raw1, _ := pairedStats(atStart, atEnd, "aesthetic")
	cs, ce, cd := pairedStats(atStart, atEnd, "critic")
	t.Logf("%d held-out briefs: rule score of drawn layouts %.4f ± %.4f -> %.4f ± %.4f (x%.3f; paired rise %+.4f ± %.4f; of all layouts %.4f -> %.4f), critic %.4f ± %.4f -> %.4f ± %.4f (paired rise %+.4f ± %.4f) (mean ± standard error)",
		len(atStart), rs.mean, rs.se, re.mean, re.se, re.mean/rs.mean, rd.mean, rd.se, raw0.mean, raw1.mean, cs.mean, cs.se, ce.mean, ce.se, cd.mean, cd.se)
	t.Logf("critic against rules across the held-out briefs (Pearson r): start %.3f, end %.3f; %d of %d evaluations with critic up and rules down",
		pearson(atStart, "critic", drawnRulesLabel), pearson(atEnd, "critic", drawnRulesLabel), hacked, len(curve)-1)
	if pics != "" {
		writeDesignPictures(t, pics, atStart, atEnd)
	}
	if re.mean < designRise*rs.mean {
		t.Errorf("held-out rule score %.4f -> %.4f: want at least x%.1f", rs.mean, re.mean, designRise)
	}
	// A rise within noise is no rise: the paired rise must exceed two standard errors.
	if rd.mean < 2*rd.se {
		t.Errorf("held-out rule score paired rise %+.4f ± %.4f: want beyond two standard errors", rd.mean, rd.se)
	}
	if ce.mean <= cs.mean {
		t.Errorf("held-out critic score %.4f -> %.4f: want a rise", cs.mean, ce.mean)
	}
}

// designSamples reads the held-out completions and verdicts of the grpo phase's evaluation at
// step.
func designSamples(t *testing.T, st ckpt.Store, run string, step int) []trainapi.EvalSample {
	rc, err := st.Get(context.Background(), trainapi.EvalSamplesKey(run, "grpo", step))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out []trainapi.EvalSample
	dec := json.NewDecoder(rc)
	for {
		var s trainapi.EvalSample
		if err := dec.Decode(&s); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("evaluation at step %d: %v", step, err)
		}
		// The rule score counts what the renderer cannot draw (a bad colour) as a layout; a
		// design that cannot be drawn is none, so the loop's yardstick gives it 0.
		if s.Partial == nil {
			s.Partial = map[string]float64{}
		}
		s.Partial[drawnLabel] = 0
		if _, err := layoutrender.Render(s.Completion, layoutrender.Options{Canvas: verify.Size{W: design.Canvas, H: design.Canvas}, Width: 32, Height: 32}); err == nil {
			s.Partial[drawnLabel] = 1
		}
		s.Partial[drawnRulesLabel] = s.Partial["aesthetic"] * s.Partial[drawnLabel]
		s.Partial[briefLabel] = briefColours(s.Prompt, s.Completion)
		out = append(out, s)
	}
}

// Labels the test adds to each held-out sample's Partial: whether the renderer draws it, the
// rule score of drawn layouts (0 for the others), and the share of the brief's colours kept.
const (
	drawnLabel      = "drawn"
	drawnRulesLabel = "aesthetic_drawn"
	briefLabel      = "brief"
)

// briefColours is the share of a brief's colours ("layout 3 boxes: navy teal orange") that the
// layout's box of the same place (b0, b1, … in order) has: neither the reward nor the rules
// check them, so a policy may drift away from the brief unseen.
func briefColours(prompt, completion string) float64 {
	_, list, ok := strings.Cut(strings.TrimSpace(prompt), ":")
	want := strings.Fields(list)
	var l design.Layout
	if !ok || len(want) == 0 || json.Unmarshal([]byte(strings.TrimSpace(completion)), &l) != nil {
		return 0
	}
	n := 0
	for i, c := range want {
		if i < len(l.Boxes) && l.Boxes[i].Color == c {
			n++
		}
	}
	return float64(n) / float64(len(want))
}

// keepDesignEval writes an evaluation's held-out samples (with the test's labels) into
// dir/evals/, for the note's numbers.
func keepDesignEval(t *testing.T, dir string, step int, samples []trainapi.EvalSample) {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	for _, s := range samples {
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "evals"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "evals", fmt.Sprintf("step-%06d.jsonl", step)), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// meanSE is a sample mean and its standard error.
type meanSE struct{ mean, se float64 }

func newMeanSE(xs []float64) meanSE {
	n := float64(len(xs))
	var sum, sq float64
	for _, x := range xs {
		sum += x
	}
	m := sum / n
	for _, x := range xs {
		sq += (x - m) * (x - m)
	}
	return meanSE{m, math.Sqrt(sq / (n - 1) / n)}
}

// labelStats is the mean score (a Partial label) of samples.
func labelStats(samples []trainapi.EvalSample, label string) meanSE {
	xs := make([]float64, len(samples))
	for i, s := range samples {
		xs[i] = s.Partial[label]
	}
	return newMeanSE(xs)
}

// pairedStats: the mean score (a Partial label) at the start and the end, and of the per-brief
// difference (the same held-out briefs, so the paired standard error is the rise's).
func pairedStats(start, end []trainapi.EvalSample, label string) (a, b, diff meanSE) {
	ds := make([]float64, len(start))
	for i := range start {
		ds[i] = end[i].Partial[label] - start[i].Partial[label]
	}
	return labelStats(start, label), labelStats(end, label), newMeanSE(ds)
}

// pearson is the correlation of two Partial labels across samples (0 when either is constant).
func pearson(s []trainapi.EvalSample, a, b string) float64 {
	xs, ys := make([]float64, len(s)), make([]float64, len(s))
	for i := range s {
		xs[i], ys[i] = s[i].Partial[a], s[i].Partial[b]
	}
	mx, my := newMeanSE(xs).mean, newMeanSE(ys).mean
	var sxy, sxx, syy float64
	for i := range xs {
		sxy += (xs[i] - mx) * (ys[i] - my)
		sxx += (xs[i] - mx) * (xs[i] - mx)
		syy += (ys[i] - my) * (ys[i] - my)
	}
	if sxx == 0 || syy == 0 {
		return 0
	}
	return sxy / math.Sqrt(sxx*syy)
}

// writeDesignPictures writes into dir the first designSheetCols held-out briefs drawn at the start
// (top row) and the end (bottom row) as design-loop.png, for the note in docs/.
func writeDesignPictures(t *testing.T, dir string, start, end []trainapi.EvalSample) {
	rows := make([][]string, 2)
	for i := 0; i < designSheetCols && i < len(start) && i < len(end); i++ {
		rows[0], rows[1] = append(rows[0], start[i].Completion), append(rows[1], end[i].Completion)
	}
	png, err := design.Sheet(rows, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "design-loop.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", filepath.Join(dir, "design-loop.png"))
}

// designSheetCols is the held-out briefs a picture of the loop shows.
const designSheetCols = 10

// loadLoop reads scripts/design/loop.yaml with its data in dir and the store under it, with sets
// applied as `temper run --set` would.
func loadLoop(t *testing.T, dir string, sets []string) workflows.PipelineInput {
	raw, err := os.ReadFile(filepath.Join("..", "scripts", "design", "loop.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := config.ParseTree([]byte(strings.ReplaceAll(string(raw), "/tmp/temper-design", dir)))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sets {
		if tree, err = config.Set(tree, s); err != nil {
			t.Fatal(err)
		}
	}
	var in workflows.PipelineInput
	if err := config.Decode(tree, &in, ""); err != nil {
		t.Fatal(err)
	}
	if err := in.Validate(); err != nil {
		t.Fatal(err)
	}
	return in
}

// designEval is one evaluation of the loop's grpo phase, from its metrics log.
type designEval struct {
	step                                          int
	critic, rules, align, overlap, format, reward float64
	m                                             map[string]float64
}

// designCurve reads the grpo phase's evaluations (the start at step 0, then every eval_every
// iterations) and the mean reward of the iterations since the previous one.
func designCurve(t *testing.T, store, run string) []designEval {
	recs, err := ckpt.New(ckpt.Options{}).ReadMetrics(context.Background(), store, run, "grpo")
	if err != nil {
		t.Fatal(err)
	}
	var out []designEval
	var rsum float64
	var rn int
	for _, r := range recs {
		switch r.Kind {
		case ckpt.RecordEval:
			m := r.Metrics
			e := designEval{step: r.Step, critic: m["heldout_score_critic"], rules: m["heldout_score_aesthetic"],
				align: m["heldout_score_aesthetic_alignment"], overlap: m["heldout_score_aesthetic_overlap"], format: m["heldout_score_format"], m: m}
			if rn > 0 {
				e.reward = rsum / float64(rn)
			}
			rsum, rn = 0, 0
			out = append(out, e)
		case ckpt.RecordTrain:
			if v, ok := r.Metrics["reward_mean"]; ok {
				rsum += v
				rn++
			}
		}
	}
	return out
}

// TestDesignLoopValidate: the loop's phase references are checked before anything starts.
func TestDesignLoopValidate(t *testing.T) {
	for _, c := range []struct {
		set, want string
	}{
		{"", ""},
		{"phases.grpo.config.eval.verifiers.0.params.checkpoint=nosuch", `eval.verifiers[0].params.checkpoint: "nosuch" is neither a checkpoint URI nor an earlier phase`},
		{"phases.grpo.config.reward.verifiers.1.params.checkpoint=grpo", `reward.verifiers[1].params.checkpoint: "grpo" is neither`},
		{"phases.grpo.config.reward.verifiers.1.params.checkpoint=file:///x/", ""},
		{"phases.critic.from=sft", "a vision reward phase starts from a seeded tower"},
		{"phases.grpo.config.eval.verifiers.1.name=nosuch", "eval.verifiers"},
	} {
		raw, err := os.ReadFile(filepath.Join("..", "scripts", "design", "loop.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		tree, err := config.ParseTree(raw)
		if err != nil {
			t.Fatal(err)
		}
		if c.set != "" {
			if tree, err = config.Set(tree, c.set); err != nil {
				t.Fatal(err)
			}
		}
		var in workflows.PipelineInput
		if err = config.Decode(tree, &in, ""); err == nil {
			err = in.Validate()
		}
		if (err == nil) != (c.want == "") || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.set, err, c.want)
		}
	}
}

// TestDesignStats: the loop's statistics on hand-computed cases.
func TestDesignStats(t *testing.T) {
	sample := func(c, r float64) trainapi.EvalSample {
		return trainapi.EvalSample{Partial: map[string]float64{"critic": c, "aesthetic": r}}
	}
	// 1, 2, 3, 4: mean 2.5, sample variance 5/3, standard error sqrt(5/3/4) = 0.6455.
	if m := newMeanSE([]float64{1, 2, 3, 4}); m.mean != 2.5 || math.Abs(m.se-0.645497) > 1e-6 {
		t.Errorf("meanSE(1..4) = %+v, want 2.5 ± 0.6455", m)
	}
	start := []trainapi.EvalSample{sample(0.1, 0.5), sample(0.2, 0.5), sample(0.3, 0.6)}
	end := []trainapi.EvalSample{sample(0.4, 0.9), sample(0.2, 0.7), sample(0.5, 0.8)}
	// Rule differences 0.4, 0.2, 0.2: mean 0.2667, variance 0.01333, standard error 0.06667.
	a, b, d := pairedStats(start, end, "aesthetic")
	if math.Abs(a.mean-1.6/3) > 1e-12 || math.Abs(b.mean-0.8) > 1e-12 || math.Abs(d.mean-0.8/3) > 1e-12 || math.Abs(d.se-0.0666667) > 1e-6 {
		t.Errorf("paired rules %+v %+v %+v, want 0.5333, 0.8, 0.2667 ± 0.0667", a, b, d)
	}
	for _, c := range []struct {
		s    []trainapi.EvalSample
		want float64
	}{
		{start, 0.866025}, // critic 0.1 0.2 0.3 against rules 0.5 0.5 0.6: r = 0.01/sqrt(0.02·0.00667)
		{[]trainapi.EvalSample{sample(1, 3), sample(2, 2), sample(3, 1)}, -1},
		{[]trainapi.EvalSample{sample(1, 3), sample(2, 3)}, 0}, // constant rules
	} {
		if got := pearson(c.s, "critic", "aesthetic"); math.Abs(got-c.want) > 1e-6 {
			t.Errorf("pearson %v = %.6f, want %.6f", c.s, got, c.want)
		}
	}
}

// TestBriefColours: the share of a brief's colours each layout keeps, by place.
func TestBriefColours(t *testing.T) {
	l := `{"boxes":[{"id":"b0","x":1,"y":1,"w":1,"h":1,"color":"navy"},{"id":"b1","x":1,"y":3,"w":1,"h":1,"color":"navy"}]}`
	for _, c := range []struct {
		prompt, completion string
		want               float64
	}{
		{"layout 2 boxes: navy teal\n", l, 0.5},
		{"layout 2 boxes: navy navy\n", l, 1},
		{"layout 3 boxes: teal navy red\n", l, 1.0 / 3},
		{"layout 2 boxes: navy teal\n", "not json", 0},
		{"no colours", l, 0},
	} {
		if got := briefColours(c.prompt, c.completion); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("%q %q: %.3f, want %.3f", c.prompt, c.completion, got, c.want)
		}
	}
}
