package search

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/tasks"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// TestPUCT: selection scores against hand-computed values.
func TestPUCT(t *testing.T) {
	tr := &Tree{Nodes: []Node{
		{Parent: -1, Visits: 10, ValueSum: 3, Children: []int{1, 2, 3}},
		{Parent: 0, Prior: 0.6, Visits: 4, ValueSum: 2},
		{Parent: 0, Prior: 0.3, Visits: 1, ValueSum: 1},
		{Parent: 0, Prior: 0.1},
	}}
	cases := []struct {
		child int
		c     float64
		want  float64
	}{
		// Q + c·P·√N/(1+n): √10 = 3.16227766016838
		{1, 1.5, 0.5 + 1.5*0.6*3.16227766016838/5}, // 1.06920997883030
		{2, 1.5, 1 + 1.5*0.3*3.16227766016838/2},   // 1.71151247
		{3, 1.5, 0 + 1.5*0.1*3.16227766016838/1},   // 0.47434165
		{1, 0, 0.5},
		{3, 0, 0},
	}
	for _, c := range cases {
		if got := tr.PUCT(0, c.child, c.c); !near(got, c.want) {
			t.Errorf("PUCT(child %d, c=%g) = %.12f, want %.12f", c.child, c.c, got, c.want)
		}
	}
	if got := tr.Select(1.5); got != 2 {
		t.Errorf("Select(1.5) = %d, want 2", got)
	}
	if got := tr.Select(0); got != 2 { // greedy on Q: 1 > 0.5 > 0
		t.Errorf("Select(0) = %d, want 2", got)
	}
	// With a large c the unvisited child's exploration bonus wins: 10·0.1·3.162 = 3.16 vs 1+10·0.3·3.162/2 = 5.74
	// and 0.5+10·0.6·3.162/5 = 4.29: still child 2; at c=100 child 2 (94.9) still beats 3 (31.6).
	if got := tr.Select(100); got != 2 {
		t.Errorf("Select(100) = %d, want 2", got)
	}
	tr.Nodes[2].Visits, tr.Nodes[2].ValueSum = 9, 0 // child 2 now looks bad: 0 + 1.5·0.3·3.162/10 = 0.142
	if got := tr.Select(1.5); got != 1 {
		t.Errorf("Select after child 2 fails = %d, want 1 (1.069 > 0.474 > 0.142)", got)
	}
}

// TestBackup: running means along the path, by hand.
func TestBackup(t *testing.T) {
	tr := NewTree()
	a := tr.Expand(0, []Candidate{{Text: "a\n", LogProb: -1}, {Text: "b\n", LogProb: -2}, {Text: "a\n", LogProb: -1}})
	if len(a) != 2 {
		t.Fatalf("Expand merged duplicates into %v, want 2 children", a)
	}
	// priors: softmax(-1, -2) = (1/(1+e⁻¹), e⁻¹/(1+e⁻¹))
	if p := tr.Nodes[1].Prior; !near(p, 0.7310585786300049) || !near(tr.Nodes[2].Prior, 1-p) {
		t.Errorf("priors %v %v, want 0.731059 and 0.268941", p, tr.Nodes[2].Prior)
	}
	c := tr.Expand(1, []Candidate{{Text: "x", LogProb: -0.5}})
	tr.Backup(c[0], 1)   // root, a, x
	tr.Backup(1, 0)      // root, a
	tr.Backup(2, 0.5)    // root, b
	tr.Backup(c[0], 0.3) // root, a, x
	want := []struct {
		visits int
		sum, q float64
	}{{4, 1.8, 0.45}, {3, 1.3, 1.3 / 3}, {1, 0.5, 0.5}, {2, 1.3, 0.65}}
	for i, w := range want {
		n := tr.Nodes[i]
		if n.Visits != w.visits || !near(n.ValueSum, w.sum) || !near(tr.Q(i), w.q) {
			t.Errorf("node %d: visits %d sum %g Q %g; want %d %g %g", i, n.Visits, n.ValueSum, tr.Q(i), w.visits, w.sum, w.q)
		}
	}
	if got := tr.PathText(c[0]); got != "a\nx" {
		t.Errorf("PathText = %q", got)
	}
	// A later expansion renormalises over every child.
	tr.Expand(0, []Candidate{{Text: "c\n", LogProb: -1}})
	z := math.Exp(-1) + math.Exp(-2) + math.Exp(-1)
	if !near(tr.Nodes[1].Prior, math.Exp(-1)/z) || !near(tr.Nodes[4].Prior, math.Exp(-1)/z) {
		t.Errorf("priors after re-expansion %v %v, want %v", tr.Nodes[1].Prior, tr.Nodes[4].Prior, math.Exp(-1)/z)
	}
}

// TestPairsAndBest on a hand-built tree: root → {a (2 of 3 verified), b (failed)}; a → {a1 pass, a2 fail}.
func TestPairsAndBest(t *testing.T) {
	tr := NewTree()
	tr.Expand(0, []Candidate{{Text: "a\n"}, {Text: "b\n"}})
	tr.Expand(1, []Candidate{{Text: "a1", Terminal: true}, {Text: "a2", Terminal: true}})
	set := func(i int, comp string, pass bool) {
		tr.Nodes[i].Completion, tr.Nodes[i].Pass = comp, pass
		if pass {
			tr.Nodes[i].Score = 1
		}
		tr.Backup(i, tr.Nodes[i].Score)
	}
	set(1, "a\nroll", true)
	set(2, "b\nroll", false)
	set(3, "a\na1", true)
	set(4, "a\na2", false)
	// Q(a) = 2/3, Q(b) = 0, Q(a1) = 1, Q(a2) = 0.
	pairs := tr.Pairs(0.25, 10)
	if len(pairs) != 2 {
		t.Fatalf("pairs %+v, want 2", pairs)
	}
	if p := pairs[0]; p.Chosen != "a\na1" || p.Rejected != "a\na2" || !near(p.Gap, 1) || p.Depth != 2 {
		t.Errorf("first pair %+v, want a1 over a2 with gap 1", p)
	}
	if p := pairs[1]; p.Chosen != "a\na1" || p.Rejected != "b\nroll" || !near(p.Gap, 2.0/3) || p.Depth != 1 {
		t.Errorf("second pair %+v, want the best of a over b with gap 2/3", p)
	}
	if got := tr.Pairs(0.7, 10); len(got) != 1 {
		t.Errorf("margin 0.7 keeps %d pairs, want 1 (only the gap of 1)", len(got))
	}
	if got := tr.Pairs(0.25, 1); len(got) != 1 || got[0].Rejected != "a\na2" {
		t.Errorf("max 1 keeps %+v, want the largest gap", got)
	}
	if best, ok := tr.Best(); !ok || best != "a\na1" {
		t.Errorf("Best = %q %v, want a\\na1", best, ok)
	}
	if s := tr.Stats(); s != (Stats{Nodes: 4, Depth: 2, Verified: 2, Solved: true}) {
		t.Errorf("Stats = %+v", s)
	}
}

// exprEnv is a scripted policy on the expr task: each line it writes is right with probability
// right (drawn from the request's seed), else the right line with its last digit changed.
type exprEnv struct {
	exs   []tasks.Example
	right float64
	calls int
}

func (e *exprEnv) Sample(reqs []Request) ([]Sample, error) {
	e.calls++
	out := make([]Sample, len(reqs))
	for i, r := range reqs {
		rng := rand.New(rand.NewPCG(r.Seed, 7))
		steps, _ := tasks.ExprSteps(e.exs[r.Tree].Prompt)
		done := strings.Count(string(runes(r.Path)), "\n")
		var text string
		lp := 0.0
		for k := done; k < len(steps); k++ {
			l := steps[k]
			if rng.Float64() >= e.right {
				l = l[:len(l)-1] + string(rune('0'+(l[len(l)-1]-'0'+1)%10))
				lp -= 2
			} else {
				lp -= 0.1
			}
			if k < len(steps)-1 {
				l += "\n"
			}
			text += l
			if r.Line {
				break
			}
		}
		end := !strings.HasSuffix(text, "\n")
		if len(text) > r.MaxNew {
			text, end = text[:r.MaxNew], false
		}
		out[i] = Sample{Tokens: runesOf(text), Text: text, LogProb: lp, End: end, Cost: 10 + len(r.Path) + len(text)}
	}
	return out, nil
}

func (e *exprEnv) Verify(tree int, completion string) (float64, bool) {
	task, _ := tasks.Lookup("expr")
	ok, _ := task.Check(e.exs[tree], completion)
	if ok {
		return 1, true
	}
	return 0, false
}

func runes(toks []int) []rune {
	r := make([]rune, len(toks))
	for i, t := range toks {
		r[i] = rune(t)
	}
	return r
}

func runesOf(s string) []int {
	out := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = int(s[i])
	}
	return out
}

func searchAll(t *testing.T, exs []tasks.Example, first uint64, p Params, right float64) ([]*Tree, int) {
	t.Helper()
	trees := make([]*Tree, len(exs))
	seeds := make([]uint64, len(exs))
	for i := range trees {
		trees[i], seeds[i] = NewTree(), first+uint64(i)
	}
	env := &exprEnv{exs: exs, right: right}
	if err := Run(trees, seeds, p, env); err != nil {
		t.Fatal(err)
	}
	return trees, env.calls
}

// TestRunScripted: on a scripted policy that is right 60% of the time per line, search finds
// verified solutions, is deterministic, does not depend on which trees share its batches, honours
// the token budget, and writes pairs whose chosen side passes and rejected side fails.
func TestRunScripted(t *testing.T) {
	task, _ := tasks.Lookup("expr")
	exs := tasks.Generate(task, 6, 5, 0)
	p := DefaultParams()
	p.Simulations = 12
	trees, calls := searchAll(t, exs, 100, p, 0.6)
	if calls > 2*p.Simulations {
		t.Errorf("%d Sample calls for %d simulations: want at most two per round", calls, p.Simulations)
	}
	again, _ := searchAll(t, exs, 100, p, 0.6)
	if !reflect.DeepEqual(trees, again) {
		t.Fatal("two runs of the same search differ")
	}
	alone, _ := searchAll(t, exs[2:3], 102, p, 0.6)
	if !reflect.DeepEqual(alone[0].Nodes, trees[2].Nodes) {
		t.Error("a tree searched alone differs from the same tree searched in a batch")
	}
	solved := 0
	for i, tr := range trees {
		st := tr.Stats()
		if st.Simulations != p.Simulations || st.Nodes == 0 || st.Depth < 2 {
			t.Errorf("tree %d: stats %+v", i, st)
		}
		if best, ok := tr.Best(); ok {
			solved++
			if pass, fb := task.Check(exs[i], best); !pass {
				t.Errorf("tree %d: best %q fails: %s", i, best, fb)
			}
		}
		for _, pr := range tr.Pairs(p.Margin, p.MaxPairs) {
			okC, _ := task.Check(exs[i], pr.Chosen)
			okR, _ := task.Check(exs[i], pr.Rejected)
			if !okC || okR || !(pr.Gap > p.Margin) {
				t.Errorf("tree %d: pair %+v: chosen passes %v, rejected passes %v", i, pr, okC, okR)
			}
		}
	}
	if solved < 5 {
		t.Errorf("search solved %d of 6 prompts of a 60%%-per-line policy with 12 simulations", solved)
	}
	p.BudgetTokens = 150
	budget, _ := searchAll(t, exs, 100, p, 0.6)
	for i, tr := range budget {
		if tr.Tokens < p.BudgetTokens && tr.Sims < p.Simulations {
			t.Errorf("tree %d stopped at %d tokens, %d simulations: under both limits", i, tr.Tokens, tr.Sims)
		}
		if round := p.Expand * 2 * (10 + 2*p.MaxNewTokens); tr.Tokens >= p.BudgetTokens+round {
			t.Errorf("tree %d spent %d tokens: more than a round (%d) past its budget", i, tr.Tokens, round)
		}
	}
	// A policy that is always right has one solution: once it is found, the last line's node is
	// expanded again (fresh samples, merged into the one child), so the tree stays one path and the
	// simulations go on spending tokens instead of revisiting the solution for free.
	p.BudgetTokens = 0
	sure, _ := searchAll(t, exs, 100, p, 1)
	for i, tr := range sure {
		steps, _ := tasks.ExprSteps(exs[i].Prompt)
		if tr.Sims != p.Simulations || tr.Stats().Verified != 1 || len(tr.Nodes) != 1+len(steps) {
			t.Errorf("always-right tree %d: %d simulations, %d verified, %d nodes for %d lines", i, tr.Sims, tr.Stats().Verified, len(tr.Nodes), len(steps))
		}
	}
	// Steps of a fixed token budget instead of lines: every step but a path's last has exactly
	// step_tokens tokens, and the solutions are still whole and verified.
	tok := p
	tok.Step, tok.StepTokens = StepTokens, 5
	byTokens, _ := searchAll(t, exs, 100, tok, 0.6)
	for i, tr := range byTokens {
		for _, n := range tr.Nodes[1:] {
			if len(n.Tokens) > 5 || (!n.Terminal && len(n.Tokens) != 5) {
				t.Fatalf("token-step tree %d: step %q of %d tokens", i, n.Text, len(n.Tokens))
			}
		}
		if best, ok := tr.Best(); ok {
			if pass, _ := task.Check(exs[i], best); !pass {
				t.Errorf("token-step tree %d: best %q fails", i, best)
			}
		}
	}
	p.Strategy = StrategySample
	flat, _ := searchAll(t, exs, 100, p, 0.6)
	for i, tr := range flat {
		for _, n := range tr.Nodes[1:] {
			if n.Depth != 1 || !n.Terminal || n.Completion != n.Text {
				t.Fatalf("sample tree %d: node %+v: want whole completions under the root", i, n)
			}
		}
	}
}

// checkedEnv is exprEnv with the task's per-line verifier.
type checkedEnv struct{ *exprEnv }

func (e checkedEnv) ValidPrefix(tree int, path string) bool {
	task, _ := tasks.Lookup("expr")
	lines := strings.Split(path, "\n")
	lines = lines[:len(lines)-1]
	for i, l := range lines {
		if ok, _ := task.(tasks.Stepwise).CheckStep(e.exs[tree], lines[:i], l); !ok {
			return false
		}
	}
	return true
}

// TestStepCheck: with the per-line verifier a wrong line is a dead end at once (no rollout, no
// children, value 0), so the same simulations cost fewer tokens; without step_check the same env
// is searched as before.
func TestStepCheck(t *testing.T) {
	task, _ := tasks.Lookup("expr")
	exs := tasks.Generate(task, 6, 5, 0)
	p := DefaultParams()
	p.Simulations = 12
	run := func(p Params) []*Tree {
		trees := make([]*Tree, len(exs))
		seeds := make([]uint64, len(exs))
		for i := range trees {
			trees[i], seeds[i] = NewTree(), uint64(100+i)
		}
		if err := Run(trees, seeds, p, checkedEnv{&exprEnv{exs: exs, right: 0.6}}); err != nil {
			t.Fatal(err)
		}
		return trees
	}
	checked := run(p)
	p.StepCheck = false
	unchecked := run(p)
	plain, _ := searchAll(t, exs, 100, p, 0.6)
	if !reflect.DeepEqual(unchecked, plain) {
		t.Error("step_check false: the search differs from one whose env cannot check steps")
	}
	var tc, tu int
	for i, tr := range checked {
		tc += tr.Tokens
		tu += unchecked[i].Tokens
		for j, n := range tr.Nodes[1:] {
			wrong := !checkedEnv{&exprEnv{exs: exs}}.ValidPrefix(i, tr.PathText(j+1))
			if wrong && (len(n.Children) > 0 || n.ValueSum != 0 || !n.Terminal || n.Completion != tr.PathText(j+1)) {
				t.Fatalf("tree %d node %d: a wrong line %q was searched below or rolled out: %+v", i, j+1, n.Text, n)
			}
		}
	}
	if tc >= tu {
		t.Errorf("step_check spent %d tokens, without it %d: want fewer", tc, tu)
	}
}

// prmEnv is exprEnv with an oracle process reward model: a path scores 0.9 when every complete
// line is right, else 0.1; scoring costs the prompt (10) and the path, as a rollout's prefill does
// in exprEnv.Sample. paid sums per tree the costs it returned, samples and scorings alike.
type prmEnv struct {
	*exprEnv
	scored int
	paid   map[int]int
}

func (e *prmEnv) Sample(reqs []Request) ([]Sample, error) {
	out, err := e.exprEnv.Sample(reqs)
	for i, s := range out {
		e.paid[reqs[i].Tree] += s.Cost
	}
	return out, err
}

func (e *prmEnv) ValueSteps(reqs []Request) ([]float64, []int, error) {
	scores, costs := make([]float64, len(reqs)), make([]int, len(reqs))
	for i, r := range reqs {
		scores[i], costs[i] = 0.1, 10+len(r.Path)
		if (checkedEnv{e.exprEnv}).ValidPrefix(r.Tree, string(runes(r.Path))) {
			scores[i] = 0.9
		}
		e.paid[r.Tree] += costs[i]
	}
	e.scored += len(reqs)
	return scores, costs, nil
}

// TestValuePRM: with value prm a new step is valued by the PRM's score (no rollout: every Sample
// request is an expansion of at most step_tokens tokens), the scoring's tokens are paid (each
// tree's budget count is exactly the costs the env returned for it, expansions and scorings: the
// same accounting as rollouts'), a valued node is never a solution or a pair's side, and the search
// still finds verified solutions; an env that cannot value steps is an error.
func TestValuePRM(t *testing.T) {
	task, _ := tasks.Lookup("expr")
	exs := tasks.Generate(task, 6, 5, 0)
	p := DefaultParams()
	p.Simulations, p.StepCheck, p.Value = 12, false, ValuePRM
	trees := make([]*Tree, len(exs))
	seeds := make([]uint64, len(exs))
	for i := range trees {
		trees[i], seeds[i] = NewTree(), uint64(100+i)
	}
	env := &prmEnv{exprEnv: &exprEnv{exs: exs, right: 0.6}, paid: map[int]int{}}
	if err := Run(trees, seeds, p, env); err != nil {
		t.Fatal(err)
	}
	if env.scored == 0 {
		t.Fatal("the PRM scored nothing")
	}
	for i, tr := range trees {
		if tr.Tokens != env.paid[i] || tr.Tokens == 0 {
			t.Errorf("tree %d counts %d forward tokens, the env was paid %d", i, tr.Tokens, env.paid[i])
		}
	}
	solved := 0
	for i, tr := range trees {
		for j, n := range tr.Nodes[1:] {
			switch {
			case n.Terminal && n.Valued, !n.Terminal && !n.Valued && n.Visits > 0:
				t.Fatalf("tree %d node %d: terminal %v valued %v: want the verifier on terminal nodes, the PRM on the others", i, j+1, n.Terminal, n.Valued)
			case n.Valued && (n.Completion != "" || n.Pass || (n.Score != 0.9 && n.Score != 0.1)):
				t.Fatalf("tree %d node %d: valued node %+v", i, j+1, n)
			}
		}
		if best, ok := tr.Best(); ok {
			solved++
			if pass, _ := task.Check(exs[i], best); !pass {
				t.Errorf("tree %d: best %q fails", i, best)
			}
		}
		for _, pr := range tr.Pairs(0, 100) {
			okC, _ := task.Check(exs[i], pr.Chosen)
			okR, _ := task.Check(exs[i], pr.Rejected)
			if !okC || okR || pr.Rejected == "" {
				t.Errorf("tree %d: pair %+v", i, pr)
			}
		}
	}
	if solved < 5 {
		t.Errorf("PRM-valued search solved %d of 6 prompts", solved)
	}
	p.Value = ValueRollout
	rolled, _ := searchAll(t, exs, 100, p, 0.6)
	var tp, tr int
	for i := range trees {
		tp, tr = tp+trees[i].Tokens, tr+rolled[i].Tokens
	}
	if tp >= tr {
		t.Errorf("value prm spent %d tokens, rollouts %d: want fewer for the same simulations", tp, tr)
	}
	p.Value = ValuePRM
	if err := Run([]*Tree{NewTree()}, []uint64{1}, p, &exprEnv{exs: exs}); err == nil || !strings.Contains(err.Error(), "values steps") {
		t.Errorf("an env without a PRM: %v", err)
	}
}
