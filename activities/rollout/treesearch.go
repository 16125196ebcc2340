package rollout

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/search"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tokenize"
)

// SearchResult is one prompt's line in a search batch's results object.
type SearchResult struct {
	Index  int           `json:"index"` // of the prompt in the training examples
	ID     string        `json:"id"`
	Task   string        `json:"task,omitempty"`
	Prompt string        `json:"prompt"`
	Answer string        `json:"answer,omitempty"`
	Best   string        `json:"best,omitempty"` // the best verified solution ("" when none passed)
	Pairs  []search.Pair `json:"pairs,omitempty"`
	Stats  search.Stats  `json:"stats"`
	// Steps are the tree's distinct solutions (finished, dead ends, rollouts) labelled step by step
	// by the task's per-line checker (tasks.LabelSteps); none for other tasks.
	Steps []tasks.StepExample `json:"steps,omitempty"`
}

// SearchBatchKey is where a search batch's results live, relative to the store root.
func SearchBatchKey(run, phase string, batch int) string {
	return path.Join("runs", run, phase, "search", fmt.Sprintf("batch-%06d.jsonl", batch))
}

// searchSeed is prompt index's tree seed: a function of the phase seed and the prompt only.
func searchSeed(seed uint64, index int) uint64 {
	return sample.SplitMix64(seed*0x9e3779b97f4a7c15 ^ uint64(index))
}

// Search is the rollout.Search activity: it searches every prompt of the batch (search.Run, every
// round's samples of all the batch's trees in a few engine calls) and writes one result line per
// prompt. A batch whose results an earlier attempt wrote is read back, not searched again, so a
// worker killed mid-phase costs at most the batch it was on, and a retry writes the same bytes.
func (a *Activities) Search(ctx context.Context, in rolloutapi.SearchInput) (rolloutapi.SearchOutput, error) {
	bad := func(err error) (rolloutapi.SearchOutput, error) {
		return rolloutapi.SearchOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidInput", err)
	}
	if err := in.Params.Validate(); err != nil {
		return bad(fmt.Errorf("rollout: search %s/%s: params.%w", in.Run, in.Phase, err))
	}
	key := SearchBatchKey(in.Run, in.Phase, in.Batch)
	if uri, ok, err := a.Ckpt.StatObject(ctx, in.Store, key); err != nil {
		return rolloutapi.SearchOutput{}, fmt.Errorf("rollout: %w", err)
	} else if ok {
		rs, err := readSearchResults(ctx, a.Ckpt, uri)
		if err != nil {
			return rolloutapi.SearchOutput{}, err
		}
		out := summarise(rs)
		out.Results, out.Resumed = uri, true
		return out, nil
	}
	set, err := a.prompts.get(ctx, a.Ckpt, in.Data, in.Seed)
	if err != nil {
		return rolloutapi.SearchOutput{}, err
	}
	if in.PromptLo < 0 || in.PromptHi <= in.PromptLo || in.PromptHi > len(set.train) {
		return bad(fmt.Errorf("rollout: search %s/%s batch %d: prompts [%d, %d) of %d training examples", in.Run, in.Phase, in.Batch, in.PromptLo, in.PromptHi, len(set.train)))
	}
	exs := set.train[in.PromptLo:in.PromptHi]
	shared, err := a.engines.acquire(ctx, in.Checkpoint, a.loadPolicy)
	if err != nil {
		return rolloutapi.SearchOutput{}, err
	}
	defer a.engines.release(shared)
	enc := train.Encoder()
	env := &engineEnv{ctx: ctx, eng: shared.eng, exs: exs, temp: in.Params.Temperature, decode: enc.Tok.Decode, newline: enc.Tok.Encode("\n")}
	if in.Params.Value == search.ValuePRM {
		if in.PRM == "" {
			return bad(fmt.Errorf("rollout: search %s/%s: value prm without a process reward model (set the phase's prm)", in.Run, in.Phase))
		}
		m, err := (train.Loader{Ckpt: a.Ckpt, NewEngine: a.NewEngine}).Load(ctx, in.PRM, train.LoadOptions{Head: train.HeadRequired})
		if err != nil {
			return rolloutapi.SearchOutput{}, fmt.Errorf("rollout: search %s/%s: prm %s: %w", in.Run, in.Phase, in.PRM, err)
		}
		defer m.Close()
		env.prm, env.prmSeq = m.Engine, m.Config.MaxSeq
	}
	trees := make([]*search.Tree, len(exs))
	seeds := make([]uint64, len(exs))
	for i, ex := range exs {
		ids, err := enc.PromptIDs(ex)
		if err != nil {
			return bad(fmt.Errorf("rollout: search %s: %w", ex.ID, err))
		}
		env.prompts = append(env.prompts, ids)
		trees[i], seeds[i] = search.NewTree(), searchSeed(in.Seed, in.PromptLo+i)
	}
	start := time.Now()
	if err := search.Run(trees, seeds, in.Params, env); err != nil {
		return rolloutapi.SearchOutput{}, fmt.Errorf("rollout: search %s/%s batch %d: %w", in.Run, in.Phase, in.Batch, err)
	}
	rs := make([]SearchResult, len(exs))
	for i, t := range trees {
		ex := exs[i]
		rs[i] = SearchResult{Index: in.PromptLo + i, ID: ex.ID, Task: ex.Task, Prompt: ex.Prompt, Answer: ex.Answer,
			Pairs: t.Pairs(in.Params.Margin, in.Params.MaxPairs), Stats: t.Stats()}
		rs[i].Best, _ = t.Best()
		rs[i].Steps = treeSteps(ex, t)
	}
	// Each tree's statistics go to the phase's metrics log (kind "search", step = prompt index).
	recs := make([]ckpt.MetricsRecord, len(rs))
	for i, r := range rs {
		s := r.Stats
		recs[i] = ckpt.MetricsRecord{Kind: "search", Step: r.Index, Time: float64(time.Now().UnixNano()) / 1e9, Metrics: map[string]float64{
			"nodes": float64(s.Nodes), "depth": float64(s.Depth), "verified": float64(s.Verified), "solved": b2f(s.Solved),
			"tokens": float64(s.Tokens), "simulations": float64(s.Simulations), "pairs": float64(len(r.Pairs))}}
	}
	if err := a.Ckpt.AppendMetrics(ctx, in.Store, in.Run, in.Phase, recs); err != nil {
		return rolloutapi.SearchOutput{}, fmt.Errorf("rollout: search %s/%s batch %d: metrics log: %w", in.Run, in.Phase, in.Batch, err)
	}
	var buf bytes.Buffer
	lines := json.NewEncoder(&buf)
	lines.SetEscapeHTML(false)
	for _, r := range rs {
		if err := lines.Encode(r); err != nil {
			return rolloutapi.SearchOutput{}, err
		}
	}
	uri, err := put(ctx, a.Ckpt, in.Store, key, &buf)
	if err != nil {
		return rolloutapi.SearchOutput{}, err
	}
	out := summarise(rs)
	out.Results, out.Seconds = uri, time.Since(start).Seconds()
	return out, nil
}

// summarise sums a batch's results.
func summarise(rs []SearchResult) rolloutapi.SearchOutput {
	var out rolloutapi.SearchOutput
	for _, r := range rs {
		s := r.Stats
		out.Prompts++
		if r.Best != "" {
			out.Solved++
		}
		out.Pairs += len(r.Pairs)
		out.Nodes += s.Nodes
		out.Verified += s.Verified
		out.DepthSum += s.Depth
		out.DepthMax = max(out.DepthMax, s.Depth)
		out.Tokens += s.Tokens
	}
	return out
}

// readSearchResults reads a batch's results object.
func readSearchResults(ctx context.Context, cl *ckpt.Client, uri string) ([]SearchResult, error) {
	b, err := train.ReadObject(ctx, cl, uri)
	if err != nil {
		return nil, err
	}
	var rs []SearchResult
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), tasks.MaxLineBytes)
	for line := 1; sc.Scan(); line++ {
		var r SearchResult
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, train.BadInput(fmt.Errorf("rollout: %s:%d: %w", uri, line, err))
		}
		rs = append(rs, r)
	}
	return rs, sc.Err()
}

// treeSteps labels the distinct solutions of a tree step by step with ex's task's per-line checker
// (nil for a task without one), in node order.
func treeSteps(ex tasks.Example, t *search.Tree) []tasks.StepExample {
	task, err := tasks.Lookup(ex.Task)
	sw, ok := task.(tasks.Stepwise)
	if err != nil || !ok {
		return nil
	}
	var out []tasks.StepExample
	seen := map[string]bool{}
	for _, n := range t.Nodes[1:] {
		if seen[n.Completion] || len(tasks.SolutionSteps(n.Completion)) == 0 {
			continue
		}
		seen[n.Completion] = true
		s := tasks.LabelSteps(sw, ex, n.Completion)
		s.ID = fmt.Sprintf("%s-s%d", ex.ID, len(out))
		out = append(out, s)
	}
	return out
}

// engineEnv is search's policy (the engine, sampling with each request's seed) and verifier (the
// example's task checker, train.Passes: 1 for a pass, else 0).
type engineEnv struct {
	ctx     context.Context
	eng     train.Engine
	exs     []tasks.Example
	prompts [][]int
	temp    float64
	newline []int
	decode  func([]int) string
	samples int          // answered so far, for heartbeats
	prm     train.Engine // the process reward model valuing new steps (search.ValuePRM), else nil
	prmSeq  int          // its context length
}

// prmRows is how many paths the process reward model scores at once.
const prmRows = 32

// ValueSteps implements search.StepValuer: the PRM's score of each request's last step, read at
// the path's last token (train.StepSequence's layout: a line step ends with its newline); a
// scoring costs the prompt and the path, one forward pass.
func (e *engineEnv) ValueSteps(reqs []search.Request) ([]float64, []int, error) {
	if e.prm == nil {
		return nil, nil, fmt.Errorf("value steps: no process reward model loaded")
	}
	rows := make([]train.StepRow, len(reqs))
	costs := make([]int, len(reqs))
	for i, r := range reqs {
		rows[i] = train.PathStepRow(e.prompts[r.Tree], r.Path, e.newline, e.prmSeq)
		costs[i] = len(rows[i].IDs)
	}
	scores, err := train.ScoreSteps(e.prm, rows, prmRows, 1, e.prmSeq, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("value steps: %w", err)
	}
	out := make([]float64, len(reqs))
	for i := range out {
		out[i] = scores[i][0]
	}
	if activity.IsActivity(e.ctx) {
		activity.RecordHeartbeat(e.ctx, trainapi.Progress{Step: e.samples})
	}
	return out, costs, e.ctx.Err()
}

// Sample runs the requests in engine batches of up to train.EvalRows requests that share their
// options (a line stop or not, the token limit), in request order.
func (e *engineEnv) Sample(reqs []search.Request) ([]search.Sample, error) {
	out := make([]search.Sample, len(reqs))
	type opts struct {
		line bool
		n    int
	}
	var order []opts
	groups := map[opts][]int{}
	for i, r := range reqs {
		k := opts{r.Line, r.MaxNew}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	for _, k := range order {
		idx := groups[k]
		for lo := 0; lo < len(idx); lo += train.EvalRows {
			part := idx[lo:min(lo+train.EvalRows, len(idx))]
			ids := make([][]int, len(part))
			seeds := make([]uint64, len(part))
			for j, i := range part {
				r := reqs[i]
				ids[j] = append(append([]int(nil), e.prompts[r.Tree]...), r.Path...)
				seeds[j] = r.Seed
			}
			o := sample.Options{MaxNewTokens: k.n, Temperature: e.temp, StopTokens: []int{tokenize.ByteEOS}, Seeds: seeds}
			if k.line {
				o.StopSequences = [][]int{e.newline}
			}
			outs, err := e.eng.Generate(ids, o)
			if err != nil {
				return nil, fmt.Errorf("generate: %w", err)
			}
			for j, c := range outs {
				toks := c.Tokens
				end := len(toks) > 0 && toks[len(toks)-1] == tokenize.ByteEOS
				if end {
					toks = toks[:len(toks)-1]
				}
				var lp float64
				for _, l := range c.LogProbs {
					lp += float64(l)
				}
				out[part[j]] = search.Sample{Tokens: toks, Text: e.decode(toks), LogProb: lp, End: end, Cost: len(ids[j]) + len(c.Tokens)}
			}
			e.samples += len(part)
			if activity.IsActivity(e.ctx) {
				activity.RecordHeartbeat(e.ctx, trainapi.Progress{Step: e.samples})
			}
		}
		if err := e.ctx.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Verify implements search.Env.
func (e *engineEnv) Verify(tree int, completion string) (float64, bool) {
	if train.Passes(e.exs[tree], completion) {
		return 1, true
	}
	return 0, false
}

// ValidPrefix implements search.StepVerifier for tasks whose lines are checked one by one
// (tasks.Stepwise): every complete line of path must be right. Other tasks accept every prefix.
func (e *engineEnv) ValidPrefix(tree int, path string) bool {
	ex := e.exs[tree]
	t, err := tasks.Lookup(ex.Task)
	sw, ok := t.(tasks.Stepwise)
	if err != nil || !ok {
		return true
	}
	lines := strings.Split(path, "\n")
	lines = lines[:len(lines)-1] // the last is not a complete line (empty after a final newline)
	for i, l := range lines {
		if ok, _ := sw.CheckStep(ex, lines[:i], l); !ok {
			return false
		}
	}
	return true
}

// SearchDataKey is where a search phase's data objects live (name: sft, pairs, heldout).
func SearchDataKey(run, phase, name string) string {
	return path.Join("runs", run, phase, "data", name+".jsonl")
}

// SearchData is the rollout.SearchData activity: it writes the phase's data from its batches'
// results, in order: the best verified solution of every solved prompt as SFT examples, every
// pair as a preference example, the trees' step-labelled solutions, and the data's held-out examples (for a following phase's exact
// match). The objects are functions of the results, so a retry rewrites the same bytes.
func (a *Activities) SearchData(ctx context.Context, in rolloutapi.SearchDataInput) (rolloutapi.SearchDataOutput, error) {
	var sft []tasks.Example
	var pairs []tasks.PrefExample
	var steps []tasks.StepExample
	for _, uri := range in.Results {
		rs, err := readSearchResults(ctx, a.Ckpt, uri)
		if err != nil {
			return rolloutapi.SearchDataOutput{}, err
		}
		for _, r := range rs {
			if r.Best != "" {
				sft = append(sft, tasks.Example{ID: r.ID, Task: r.Task, Prompt: r.Prompt, Completion: r.Best, Answer: r.Answer})
			}
			for k, p := range r.Pairs {
				pairs = append(pairs, tasks.PrefExample{ID: fmt.Sprintf("%s-p%d", r.ID, k), Task: r.Task, Prompt: r.Prompt,
					Chosen: p.Chosen, Rejected: p.Rejected, Answer: r.Answer})
			}
			steps = append(steps, r.Steps...)
		}
	}
	out := rolloutapi.SearchDataOutput{Examples: len(sft), PairsN: len(pairs)}
	var err error
	var buf bytes.Buffer
	if err := tasks.WriteJSONL(&buf, sft); err != nil {
		return out, err
	}
	if out.SFT, err = put(ctx, a.Ckpt, in.Store, SearchDataKey(in.Run, in.Phase, "sft"), &buf); err != nil {
		return out, err
	}
	buf.Reset()
	if err := tasks.WritePrefJSONL(&buf, pairs); err != nil {
		return out, err
	}
	if out.Pairs, err = put(ctx, a.Ckpt, in.Store, SearchDataKey(in.Run, in.Phase, "pairs"), &buf); err != nil {
		return out, err
	}
	if len(steps) > 0 {
		buf.Reset()
		if err := tasks.WriteStepJSONL(&buf, steps); err != nil {
			return out, err
		}
		if out.Steps, err = put(ctx, a.Ckpt, in.Store, SearchDataKey(in.Run, in.Phase, "steps"), &buf); err != nil {
			return out, err
		}
		out.StepsN = len(steps)
	}
	_, heldout, err := train.Examples(ctx, a.Ckpt, in.Data, in.Seed)
	if err != nil {
		return out, err
	}
	if len(heldout) > 0 {
		buf.Reset()
		if err := tasks.WriteJSONL(&buf, heldout); err != nil {
			return out, err
		}
		if out.Heldout, err = put(ctx, a.Ckpt, in.Store, SearchDataKey(in.Run, in.Phase, "heldout"), &buf); err != nil {
			return out, err
		}
	}
	return out, nil
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
