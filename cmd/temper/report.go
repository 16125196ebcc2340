package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html/template"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workflows"
)

// A report is one self-contained HTML page (its figures inlined as data URIs) and the same figures as
// PNG files beside it: per phase, the curves of its metrics log (ckpt.MetricsLogKey) against step and
// against wall time with back-tracking branches marked, its result, its retained checkpoints with
// their metrics, and for RL phases sample rollouts of the last iteration. The run's input and
// results come from the server; curves, checkpoints and samples from the store.

type reportData struct {
	RunID, Name, Status, Store, Generated string
	Seed                                  int64
	Config                                string
	Phases                                []reportPhase
	Notes                                 []string
}

type reportPhase struct {
	Name, Kind  string
	Result      *workflows.PhaseResult
	Metrics     []kv
	Series      []branchSeries
	Figures     []reportFigure
	Checkpoints []reportCkpt
	Samples     []rollout.Rollout
	SamplesFrom string
	Notes       []string
}

type kv struct {
	K string
	V string
}

type reportFigure struct {
	File, Caption string
	Data          template.URL
}

type reportCkpt struct {
	Dir, URI string
	Step     int64
	Best     bool
	Metrics  []kv
}

// branchDir matches a phase's back-tracking branch directories: NAME.bN.
var branchDir = regexp.MustCompile(`^(.+)\.b(\d+)$`)

// gatherReport reads what the report shows; what is missing (a phase not started, a store without
// logs) becomes a note, not an error.
func gatherReport(ctx context.Context, c client.Client, id, storeURI string) (*reportData, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", id, err)
	}
	in, ok := runInput(ctx, c, id)
	if !ok {
		return nil, fmt.Errorf("run %s: cannot read its pipeline input (is it a Temper pipeline?)", id)
	}
	if storeURI == "" {
		storeURI = in.Store
	}
	if storeURI == "" {
		storeURI = workers.DefaultStoreURI()
	}
	d := &reportData{RunID: id, Name: in.Name, Seed: in.Seed, Store: storeURI, Generated: time.Now().UTC().Format(time.RFC3339),
		Status: statusName(desc.GetWorkflowExecutionInfo().GetStatus())}
	results := map[string]workflows.PhaseResult{}
	if in.State != nil {
		for _, r := range in.State.Results {
			results[r.Name] = r
		}
	}
	cfg := in
	cfg.State = nil
	b, _ := json.MarshalIndent(cfg, "", "  ")
	d.Config = string(b)
	switch desc.GetWorkflowExecutionInfo().GetStatus() {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		var out workflows.PipelineOutput
		if err := c.GetWorkflow(ctx, id, "").Get(ctx, &out); err == nil {
			for _, r := range out.Phases {
				results[r.Name] = r
			}
		}
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		if s, err := observe(ctx, c, id); err == nil {
			for _, r := range s.Progress.Done {
				results[r.Name] = r
			}
		}
	}
	cl := ckpt.New(ckpt.Options{})
	defer cl.Close()
	st, err := cl.Store(ctx, storeURI)
	if err != nil {
		return nil, usageErr("store %s: %v", storeURI, err)
	}
	objs, err := st.List(ctx, "runs/"+id+"/")
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", st.URI("runs/"+id+"/"), err)
	}
	dirs := map[string]bool{}
	for _, o := range objs {
		if el := strings.Split(o.Key, "/"); len(el) > 3 {
			dirs[el[2]] = true
		}
	}
	for _, spec := range in.Phases {
		p := reportPhase{Name: spec.Name, Kind: spec.Kind}
		if r, ok := results[spec.Name]; ok {
			p.Result = &r
			for _, k := range sortedKeys(r.Metrics) {
				p.Metrics = append(p.Metrics, kv{k, fmtMetric(r.Metrics[k])})
			}
		}
		var phaseDirs []string
		for dir := range dirs {
			if m := branchDir.FindStringSubmatch(dir); dir == spec.Name || (m != nil && m[1] == spec.Name) {
				phaseDirs = append(phaseDirs, dir)
			}
		}
		sort.Strings(phaseDirs)
		for _, dir := range phaseDirs {
			s := branchSeries{Dir: dir}
			if s.Records, err = cl.ReadMetrics(ctx, storeURI, id, dir); err != nil && !errors.Is(err, ckpt.ErrNotExist) {
				return nil, err
			}
			if dir != spec.Name {
				s.At, s.Reason = branchOrigin(ctx, c, id+"."+dir, s.Records)
			}
			p.Series = append(p.Series, s)
			cks, err := reportCheckpoints(ctx, cl, storeURI, id, dir, s.Records)
			if err != nil {
				return nil, err
			}
			p.Checkpoints = append(p.Checkpoints, cks...)
		}
		sortedSeries(p.Series)
		if len(p.Series) == 0 {
			d.Notes = append(d.Notes, fmt.Sprintf("phase %s: nothing in the store yet", spec.Name))
		}
		for i := len(p.Series) - 1; i >= 0 && p.Samples == nil; i-- {
			p.Samples, p.SamplesFrom = lastSamples(ctx, st, id, p.Series[i].Dir, 12)
		}
		d.Phases = append(d.Phases, p)
	}
	return d, nil
}

// branchOrigin is where branch workflow wid left its parent (the back-track's iteration) and why, from
// the branch's input; without it, the step before the branch's first record.
func branchOrigin(ctx context.Context, c client.Client, wid string, recs []ckpt.MetricsRecord) (int, string) {
	it := c.GetWorkflowHistory(ctx, wid, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	if it.HasNext() {
		if ev, err := it.Next(); err == nil {
			var in workflows.PhaseInput
			if ps := ev.GetWorkflowExecutionStartedEventAttributes().GetInput().GetPayloads(); len(ps) > 0 &&
				json.Unmarshal(ps[0].GetData(), &in) == nil && in.RL != nil && len(in.RL.Branches) > 0 {
				b := in.RL.Branches[len(in.RL.Branches)-1]
				return b.Iteration, b.Reason
			}
		}
	}
	if len(recs) > 0 {
		return max(recs[0].Step-1, 1), ""
	}
	return 1, ""
}

// reportCheckpoints lists dir's retained checkpoints with the scalars of their state.json and the
// evaluation the metrics log holds for their step.
func reportCheckpoints(ctx context.Context, cl *ckpt.Client, root, run, dir string, recs []ckpt.MetricsRecord) ([]reportCkpt, error) {
	refs, err := cl.List(ctx, root, run, dir)
	if err != nil {
		return nil, err
	}
	evals := map[int64]map[string]float64{}
	for _, r := range recs {
		if r.Kind == ckpt.RecordEval {
			evals[int64(r.Step)] = r.Metrics
		}
	}
	var out []reportCkpt
	for _, ref := range refs {
		rc := reportCkpt{Dir: dir, URI: ref.URI, Step: ref.Step, Best: ref.Best}
		m := map[string]float64{}
		if ck, err := cl.Read(ctx, ref.URI); err == nil {
			if s, err := ck.ReadState(ctx); err == nil {
				for _, k := range []string{"loss", "lr", "reward_mean", "kl", "entropy"} {
					if v, ok := s.Scalars[k]; ok && !(k == "entropy" && v == 0) { // 0: not measured (see reportCurves)
						m[k] = v
					}
				}
			}
		}
		for _, k := range []string{"heldout_exact_match", "heldout_loss"} {
			if v, ok := evals[ref.Step][k]; ok {
				m[k] = v
			}
		}
		for _, k := range sortedKeys(m) {
			rc.Metrics = append(rc.Metrics, kv{k, fmtMetric(m[k])})
		}
		out = append(out, rc)
	}
	return out, nil
}

// lastSamples reads up to n rollouts of the newest iteration that dir has rollouts for: the first two
// of each prompt's group, so that the page shows several prompts and how a group's samples differ.
func lastSamples(ctx context.Context, st ckpt.Store, run, dir string, n int) ([]rollout.Rollout, string) {
	byIter, iters, err := iterationObjects(ctx, st, run, dir)
	if err != nil || len(iters) == 0 {
		return nil, ""
	}
	key := byIter[iters[len(iters)-1]][0]
	rc, err := st.Get(ctx, key)
	if err != nil {
		return nil, ""
	}
	defer rc.Close()
	rs, err := rollout.Read(rc, st.URI(key))
	if err != nil {
		return nil, ""
	}
	var out []rollout.Rollout
	perGroup := map[int]int{}
	for _, r := range rs {
		if perGroup[r.Group] < 2 && len(out) < n {
			perGroup[r.Group]++
			out = append(out, r)
		}
	}
	return out, st.URI(key)
}

// writeReport renders the figures and the page into dir and returns the files written.
func writeReport(d *reportData, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var files []string
	for i := range d.Phases {
		p := &d.Phases[i]
		for _, byTime := range []bool{false, true} {
			png, titles, notes, err := phaseFigure(p.Name, p.Series, byTime)
			if err != nil {
				return nil, err
			}
			if !byTime {
				p.Notes = append(p.Notes, notes...)
			}
			if png == nil {
				continue
			}
			name := fmt.Sprintf("%02d-%s-by-step.png", i+1, p.Name)
			if byTime {
				name = fmt.Sprintf("%02d-%s-by-time.png", i+1, p.Name)
			}
			if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
				return nil, fmt.Errorf("report: %w", err)
			}
			files = append(files, filepath.Join(dir, name))
			p.Figures = append(p.Figures, reportFigure{File: name, Caption: figureTitle(p.Name, byTime) + ": " + strings.Join(titles, ", "),
				Data: template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(png))})
		}
	}
	f, err := os.Create(filepath.Join(dir, "index.html"))
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	if err := reportPage.Execute(f, d); err != nil {
		f.Close()
		return nil, fmt.Errorf("report: render: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return append([]string{filepath.Join(dir, "index.html")}, files...), nil
}

var reportPage = template.Must(template.New("report").Funcs(template.FuncMap{
	"base": path.Base,
	"clip": func(s string, n int) string {
		if len(s) > n {
			return s[:n] + "…"
		}
		return s
	},
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Temper run {{.RunID}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:2px 8px;text-align:left;font-size:90%}
th{background:#f3f3f3}pre{background:#f7f7f7;padding:1em;overflow:auto;font-size:85%}img{max-width:100%}
.best{font-weight:bold}.note{color:#a60}code{font-size:90%}
</style></head><body>
<h1>Run {{.RunID}}</h1>
<p>pipeline <b>{{.Name}}</b>, status <b>{{.Status}}</b>, seed {{.Seed}}, store <code>{{.Store}}</code>; report made {{.Generated}} by <code>temper report</code>.</p>
{{range .Notes}}<p class="note">{{.}}</p>{{end}}
<h2>Phases</h2><ul>{{range .Phases}}<li><a href="#{{.Name}}">{{.Name}}</a> ({{.Kind}}){{if .Result}}: {{printf "%.1f" .Result.Seconds}} s{{end}}</li>{{end}}</ul>
{{range .Phases}}
<h2 id="{{.Name}}">{{.Name}} ({{.Kind}})</h2>
{{if .Result}}<p>checkpoint <code>{{.Result.Checkpoint}}</code>, {{printf "%.1f" .Result.Seconds}} s</p>
<table><tr><th>metric</th><th>value</th></tr>{{range .Metrics}}<tr><td>{{.K}}</td><td>{{.V}}</td></tr>{{end}}</table>{{else}}<p class="note">no result yet</p>{{end}}
{{if gt (len .Series) 1}}<h3>Back-tracking branches</h3><table><tr><th>directory</th><th>from step</th><th>why</th></tr>
{{range .Series}}{{if .At}}<tr><td>{{.Dir}}</td><td>{{.At}}</td><td>{{.Reason}}</td></tr>{{end}}{{end}}</table>
<p>Branches are drawn as their own lines; a dashed red line marks where each left its parent.</p>{{end}}
{{range .Notes}}<p class="note">{{.}}</p>{{end}}
{{range .Figures}}<figure><img src="{{.Data}}" alt="{{.Caption}}"><figcaption>{{.Caption}} (<code>{{.File}}</code>)</figcaption></figure>{{end}}
{{if .Checkpoints}}<h3>Checkpoints</h3><table><tr><th>directory</th><th>step</th><th>best</th><th>metrics</th><th>URI</th></tr>
{{range .Checkpoints}}<tr{{if .Best}} class="best"{{end}}><td>{{.Dir}}</td><td>{{.Step}}</td><td>{{if .Best}}best{{end}}</td><td>{{range .Metrics}}{{.K}} {{.V}}<br>{{end}}</td><td><code>{{.URI}}</code></td></tr>{{end}}</table>{{end}}
{{if .Samples}}<h3>Sample rollouts</h3><p>from <code>{{.SamplesFrom}}</code></p>
<table><tr><th>id</th><th>policy</th><th>prompt</th><th>completion</th><th>answer</th><th>stop</th></tr>
{{range .Samples}}<tr><td>{{.ID}}</td><td>v{{.PolicyVersion}}</td><td><code>{{clip .Prompt 120}}</code></td><td><code>{{clip .Completion 200}}</code></td><td><code>{{.Answer}}</code></td><td>{{.StopReason}}</td></tr>{{end}}</table>{{end}}
{{end}}
<h2>Pipeline config</h2><pre>{{.Config}}</pre>
</body></html>
`))

func init() {
	register(&command{
		name:    "report",
		summary: "write a run's report: one self-contained HTML page plus PNG plots of every phase's curves",
		usage:   "RUN",
		flags: func(fs *flag.FlagSet) func(context.Context, []string) error {
			var c clientFlags
			c.bind(fs)
			out := fs.String("out", "", "directory to write index.html and the PNGs into (default: report-RUN)")
			storeURI := fs.String("store", "", "the run's store (default: the one in the run's input, else $TEMPER_HOME/store)")
			return func(ctx context.Context, args []string) error {
				if len(args) != 1 {
					return usageErr("usage: temper report RUN [--out DIR]")
				}
				id := args[0]
				if *out == "" {
					*out = "report-" + id
				}
				cl, err := c.dial()
				if err != nil {
					return err
				}
				defer cl.Close()
				d, err := gatherReport(ctx, cl, id, *storeURI)
				if err != nil {
					return err
				}
				files, err := writeReport(d, *out)
				if err != nil {
					return err
				}
				for _, f := range files {
					fmt.Fprintln(stdout, f)
				}
				return nil
			}
		},
	})
}
