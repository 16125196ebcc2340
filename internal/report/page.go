package report

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
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
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workflows"
)

// A report page is one self-contained HTML page (its figures inlined as data URIs) and the same
// figures as PNG files beside it: per phase, the curves of its metrics log (ckpt.MetricsLogKey) against
// step and against wall time with back-tracking branches marked, its result, its retained checkpoints
// with their metrics, and for RL phases sample rollouts of the last iteration. The run's input and
// results come from the server; curves, checkpoints and samples from the store.

// Data is what a report page shows: Gather reads it, Write renders it.
type Data struct {
	RunID, Name, Status, Store, Generated string
	Seed                                  int64
	Config                                string
	Phases                                []Phase
	Notes                                 []string
	// Parent is the run this one was forked from (temper fork); Forks the runs forked from this one.
	Parent *workflows.Lineage
	Forks  []string
	// Stopped says why a gate ended the run early.
	Stopped string
}

// Phase is one phase of the page.
type Phase struct {
	Name, Kind  string
	Result      *workflows.PhaseResult
	Metrics     []kv
	Series      []series
	Figures     []figure
	Checkpoints []checkpoint
	Samples     []rollout.Rollout
	SamplesFrom string
	// Renders are held-out completions drawn at the first and last evaluation (render.go).
	Renders *layoutGrid
	Notes   []string
	// Controls are the phase's control records (temper set, pause, resume, gates, a fork), every branch's.
	Controls []control
}

// control is one control record as the page lists it.
type control struct {
	Dir, Event, Label, Time string
	Step                    int
}

type kv struct {
	K string
	V string
}

type figure struct {
	File, Caption string
	Data          template.URL
}

type checkpoint struct {
	Dir, URI string
	Step     int64
	Best     bool
	Metrics  []kv
}

// StoreError is a store that cannot be opened: the user named a bad one (--store) or the run's input did.
type StoreError struct {
	URI string
	Err error
}

func (e *StoreError) Error() string { return fmt.Sprintf("store %s: %v", e.URI, e.Err) }
func (e *StoreError) Unwrap() error { return e.Err }

// branchDir matches a phase's back-tracking branch directories: NAME.bN.
var branchDir = regexp.MustCompile(`^(.+)\.b(\d+)$`)

// Gather reads what the page of run id shows, from the server and from storeURI ("": the store of
// the run's input, else $TEMPER_HOME/store); what is missing becomes a note, not an error.
func Gather(ctx context.Context, c client.Client, id, storeURI string) (*Data, error) {
	desc, err := c.DescribeWorkflowExecution(ctx, id, "")
	if err != nil {
		return nil, fmt.Errorf("describe %s: %w", id, err)
	}
	in, ok := RunInput(ctx, c, id)
	if !ok {
		return nil, fmt.Errorf("run %s: cannot read its pipeline input (is it a Temper pipeline?)", id)
	}
	if storeURI == "" {
		storeURI = in.Store
	}
	if storeURI == "" {
		storeURI = workers.DefaultStoreURI()
	}
	status := desc.GetWorkflowExecutionInfo().GetStatus()
	d := &Data{RunID: id, Name: in.Name, Seed: in.Seed, Store: storeURI, Generated: time.Now().UTC().Format(time.RFC3339),
		Status: StatusName(status), Parent: in.Parent}
	d.Forks, d.Stopped = forksOf(ctx, c, id), stoppedOf(ctx, c, id, status)
	cfg := in
	cfg.State = nil
	b, _ := json.MarshalIndent(cfg, "", "  ")
	d.Config = string(b)
	results := PhaseResultsOf(ctx, c, id, in, status)
	cl := ckpt.New(ckpt.Options{})
	defer cl.Close()
	st, err := cl.Store(ctx, storeURI)
	if err != nil {
		return nil, &StoreError{URI: storeURI, Err: err}
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
	g := gatherer{c: c, cl: cl, st: st, root: storeURI, run: id, dirs: dirs}
	for _, spec := range in.Phases {
		p, err := g.phase(ctx, spec, results)
		if err != nil {
			return nil, err
		}
		if len(p.Series) == 0 {
			d.Notes = append(d.Notes, fmt.Sprintf("phase %s: nothing in the store yet", spec.Name))
		}
		d.Phases = append(d.Phases, p)
	}
	return d, nil
}

// PhaseResultsOf are the results the server holds for the run's finished phases: from its continued
// state, its output when it completed, or its progress query while it runs.
func PhaseResultsOf(ctx context.Context, c client.Client, id string, in workflows.PipelineInput, status enumspb.WorkflowExecutionStatus) map[string]workflows.PhaseResult {
	results := map[string]workflows.PhaseResult{}
	if in.State != nil {
		for _, r := range in.State.Results {
			results[r.Name] = r
		}
	}
	switch status {
	case enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED:
		var out workflows.PipelineOutput
		if err := c.GetWorkflow(ctx, id, "").Get(ctx, &out); err == nil {
			for _, r := range out.Phases {
				results[r.Name] = r
			}
		}
	case enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING:
		if s, err := Observe(ctx, c, id); err == nil {
			for _, r := range s.Progress.Done {
				results[r.Name] = r
			}
		}
	}
	return results
}

// gatherer reads one run's phases from its store.
type gatherer struct {
	c         client.Client
	cl        *ckpt.Client
	st        ckpt.Store
	root, run string
	dirs      map[string]bool // the run's directories in the store: phases and their branches
}

// phase reads spec's result, metrics logs, checkpoints and samples, its branches' too.
func (g gatherer) phase(ctx context.Context, spec workflows.PhaseSpec, results map[string]workflows.PhaseResult) (Phase, error) {
	p := Phase{Name: spec.Name, Kind: spec.Kind}
	if r, ok := results[spec.Name]; ok {
		p.Result = &r
		for _, k := range sortedKeys(r.Metrics) {
			p.Metrics = append(p.Metrics, kv{k, FormatMetric(r.Metrics[k])})
		}
	}
	var phaseDirs []string
	for dir := range g.dirs {
		if m := branchDir.FindStringSubmatch(dir); dir == spec.Name || (m != nil && m[1] == spec.Name) {
			phaseDirs = append(phaseDirs, dir)
		}
	}
	sort.Strings(phaseDirs)
	for _, dir := range phaseDirs {
		s := series{Dir: dir}
		var err error
		if s.Records, err = g.cl.ReadMetrics(ctx, g.root, g.run, dir); err != nil && !errors.Is(err, ckpt.ErrNotExist) {
			return p, err
		}
		if dir != spec.Name {
			s.At, s.Reason = branchOrigin(ctx, g.c, g.run+"."+dir, s.Records)
		}
		p.Series = append(p.Series, s)
		for _, r := range s.Records {
			if r.Kind == ckpt.RecordControl {
				p.Controls = append(p.Controls, control{Dir: dir, Step: r.Step, Event: r.Event, Label: r.Label,
					Time: time.Unix(int64(r.Time), 0).UTC().Format(time.RFC3339)})
			}
		}
		cks, err := checkpoints(ctx, g.cl, g.root, g.run, dir, s.Records)
		if err != nil {
			return p, err
		}
		p.Checkpoints = append(p.Checkpoints, cks...)
	}
	sortSeries(p.Series)
	for i := len(p.Series) - 1; i >= 0 && p.Samples == nil; i-- {
		p.Samples, p.SamplesFrom = lastSamples(ctx, g.st, g.run, p.Series[i].Dir, 12)
	}
	if opts, ok := LayoutOptions(spec.Config); ok {
		dirs := make([]string, len(p.Series))
		for i, s := range p.Series {
			dirs[i] = s.Dir
		}
		var err error
		if p.Renders, err = renders(ctx, g.st, g.run, dirs, opts); err != nil {
			return p, err
		}
	}
	return p, nil
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

// checkpoints lists dir's retained checkpoints with the scalars of their state.json and the
// evaluation the metrics log holds for their step.
func checkpoints(ctx context.Context, cl *ckpt.Client, root, run, dir string, recs []ckpt.MetricsRecord) ([]checkpoint, error) {
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
	var out []checkpoint
	for _, ref := range refs {
		rc := checkpoint{Dir: dir, URI: ref.URI, Step: ref.Step, Best: ref.Best}
		m := map[string]float64{}
		if ck, err := cl.Read(ctx, ref.URI); err == nil {
			if s, err := ck.ReadState(ctx); err == nil {
				for _, k := range []string{"loss", "lr", "reward_mean", "kl", "entropy"} {
					if v, ok := s.Scalars[k]; ok && !(k == "entropy" && v == 0) { // 0: not measured (see curves)
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
			rc.Metrics = append(rc.Metrics, kv{k, FormatMetric(m[k])})
		}
		out = append(out, rc)
	}
	return out, nil
}

// Write renders the figures and the page into dir and returns the files written, the page first.
func Write(d *Data, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var files []string
	for i := range d.Phases {
		fs, err := writeFigures(&d.Phases[i], i, dir)
		if err != nil {
			return nil, err
		}
		files = append(files, fs...)
		if fs, err = writeRenders(&d.Phases[i], i, dir); err != nil {
			return nil, err
		}
		files = append(files, fs...)
	}
	f, err := os.Create(filepath.Join(dir, "index.html"))
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	if err := page.Execute(f, d); err != nil {
		f.Close()
		return nil, fmt.Errorf("report: render: %w", err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return append([]string{filepath.Join(dir, "index.html")}, files...), nil
}

// writeFigures draws phase i's figures against step and against time into dir, adds them (and the
// notes on curves left out) to p, and returns the files written.
func writeFigures(p *Phase, i int, dir string) ([]string, error) {
	var files []string
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
		data, err := writePNG(dir, name, png)
		if err != nil {
			return nil, err
		}
		files = append(files, filepath.Join(dir, name))
		p.Figures = append(p.Figures, figure{File: name, Caption: figureTitle(p.Name, byTime) + ": " + strings.Join(titles, ", "), Data: data})
	}
	return files, nil
}

// writePNG writes an image beside the page and returns it as a data URI too, so the page also reads
// where its folder's files are not served.
func writePNG(dir, name string, png []byte) (template.URL, error) {
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		return "", fmt.Errorf("report: %w", err)
	}
	return template.URL("data:image/png;base64," + base64.StdEncoding.EncodeToString(png)), nil
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"base":      path.Base,
	"join":      strings.Join,
	"lineageAt": LineageAt,
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
{{with .Parent}}<p class="lineage">forked from run <a href="../report-{{.Run}}/index.html">{{.Run}}</a> at <code>{{lineageAt .}}</code> (checkpoint <code>{{.Checkpoint}}</code>){{if .Set}}, with <code>{{join .Set " "}}</code>{{end}}.</p>{{end}}
{{if .Forks}}<p class="lineage">forks of this run: {{range $i, $f := .Forks}}{{if $i}}, {{end}}<a href="../report-{{$f}}/index.html">{{$f}}</a>{{end}}.</p>{{end}}
{{if .Stopped}}<p class="note">stopped: {{.Stopped}}</p>{{end}}
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
{{if .Controls}}<h3>Control</h3><p>What people changed while the phase ran; each is a dotted blue line on the curves.</p>
<table><tr><th>directory</th><th>after step</th><th>event</th><th>what</th><th>time (UTC)</th></tr>
{{range .Controls}}<tr><td>{{.Dir}}</td><td>{{.Step}}</td><td>{{.Event}}</td><td>{{.Label}}</td><td>{{.Time}}</td></tr>{{end}}</table>{{end}}
{{range .Figures}}<figure><img src="{{.Data}}" alt="{{.Caption}}"><figcaption>{{.Caption}} (<code>{{.File}}</code>)</figcaption></figure>{{end}}
{{if .Checkpoints}}<h3>Checkpoints</h3><table><tr><th>directory</th><th>step</th><th>best</th><th>metrics</th><th>URI</th></tr>
{{range .Checkpoints}}<tr{{if .Best}} class="best"{{end}}><td>{{.Dir}}</td><td>{{.Step}}</td><td>{{if .Best}}best{{end}}</td><td>{{range .Metrics}}{{.K}} {{.V}}<br>{{end}}</td><td><code>{{.URI}}</code></td></tr>{{end}}</table>{{end}}
{{with .Renders}}<h3>Held-out layouts drawn</h3><p>The same held-out prompts, greedy, at the first evaluation (step {{.StartStep}}, <code>{{.StartFrom}}</code>) and the last (step {{.EndStep}}, <code>{{.EndFrom}}</code>), with each evaluation verifier's score.</p>
<table><tr><th>prompt</th><th>step {{.StartStep}}</th><th>step {{.EndStep}}</th></tr>
{{range .Rows}}<tr><td><code>{{clip .Prompt 120}}</code></td>{{template "cell" .Start}}{{template "cell" .End}}</tr>{{end}}</table>{{end}}
{{if .Samples}}<h3>Sample rollouts</h3><p>from <code>{{.SamplesFrom}}</code></p>
<table><tr><th>id</th><th>policy</th><th>prompt</th><th>completion</th><th>answer</th><th>stop</th></tr>
{{range .Samples}}<tr><td>{{.ID}}</td><td>v{{.PolicyVersion}}</td><td><code>{{clip .Prompt 120}}</code></td><td><code>{{clip .Completion 200}}</code></td><td><code>{{.Answer}}</code></td><td>{{.StopReason}}</td></tr>{{end}}</table>{{end}}
{{end}}
<h2>Pipeline config</h2><pre>{{.Config}}</pre>
</body></html>
{{define "cell"}}<td>{{if .Data}}<img src="{{.Data}}" alt="{{.File}}" width="128" height="128"><br>{{else}}<span class="note">not drawn: {{clip .Note 160}}</span><br>{{end}}score {{printf "%.3f" .Score}}{{range .Partial}}<br>{{.K}} {{.V}}{{end}}</td>{{end}}`))

// forksOf lists the runs forked from run id (TemperParent); none when the namespace lacks the
// search attribute.
func forksOf(ctx context.Context, c client.Client, id string) []string {
	resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("TemperParent = '%s' AND WorkflowType = '%s'", id, workflows.PipelineName), PageSize: 100})
	if err != nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	for _, e := range resp.Executions {
		if w := e.Execution.WorkflowId; !seen[w] {
			seen[w] = true
			out = append(out, w)
		}
	}
	sort.Strings(out)
	return out
}

// stoppedOf is why a gate ended the completed run early ("" otherwise).
func stoppedOf(ctx context.Context, c client.Client, id string, status enumspb.WorkflowExecutionStatus) string {
	if status != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
		return ""
	}
	var out workflows.PipelineOutput
	if err := c.GetWorkflow(ctx, id, "").Get(ctx, &out); err != nil {
		return ""
	}
	return out.Stopped
}
