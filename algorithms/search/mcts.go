package search

import (
	"fmt"
	"math"
	"sort"

	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/internal/config"
)

// Strategies and step kinds.
const (
	StrategyMCTS   = "mcts"
	StrategySample = "sample"
	StepLine       = "line"
	StepTokens     = "tokens"
)

// Params configure a search; they sit in the search phase's config under "search".
type Params struct {
	Strategy     string  `json:"strategy" default:"mcts" help:"mcts: tree search over steps | sample: best-of-N rejection sampling of whole completions (the peer)"`
	Step         string  `json:"step" default:"line" help:"line: a step is one scratchpad line (at most step_tokens tokens) | tokens: a step is step_tokens tokens"`
	StepTokens   int     `json:"step_tokens" default:"16" help:"longest step in tokens; a line that does not end within it is a dead end"`
	MaxSteps     int     `json:"max_steps" default:"8" help:"deepest path: a step at this depth ends the solution"`
	MaxNewTokens int     `json:"max_new_tokens" default:"64" help:"longest whole completion (the path and its rollout)"`
	Expand       int     `json:"expand" default:"4" help:"K: candidate steps sampled per expansion (sample: completions per simulation)"`
	Simulations  int     `json:"simulations" default:"16" help:"simulations per prompt at most"`
	BudgetTokens int     `json:"budget_tokens" default:"0" help:"also stop a prompt's search once it has spent this many forward tokens (prompt, path and generated tokens of every request; 0: no limit)"`
	CPUCT        float64 `json:"c_puct" default:"1.5" help:"exploration weight of PUCT"`
	Temperature  float64 `json:"temperature" default:"1" help:"sampling temperature of expansions and rollouts"`
	StepCheck    bool    `json:"step_check" default:"true" help:"with a task that checks single lines (expr), a step its verifier rejects is a dead end at once: value 0, no rollout spent on it"`
	Margin       float64 `json:"margin" default:"0.25" help:"sibling steps whose mean values differ by more than this make a preference pair"`
	MaxPairs     int     `json:"max_pairs" default:"4" help:"preference pairs kept per prompt at most (largest value gaps first)"`
}

// DefaultParams are the documented defaults.
func DefaultParams() Params {
	return Params{Strategy: StrategyMCTS, Step: StepLine, StepTokens: 16, MaxSteps: 8, MaxNewTokens: 64, Expand: 4,
		Simulations: 16, CPUCT: 1.5, Temperature: 1, StepCheck: true, Margin: 0.25, MaxPairs: 4}
}

// Validate names the bad field (relative to the params) and its allowed values.
func (p Params) Validate() error {
	bad := func(field, msg string) error { return &config.FieldError{Path: field, Msg: msg} }
	switch {
	case p.Strategy != StrategyMCTS && p.Strategy != StrategySample:
		return bad("strategy", fmt.Sprintf("%q: allowed values: %s, %s", p.Strategy, StrategyMCTS, StrategySample))
	case p.Step != StepLine && p.Step != StepTokens:
		return bad("step", fmt.Sprintf("%q: allowed values: %s, %s", p.Step, StepLine, StepTokens))
	case p.StepTokens < 1 || p.StepTokens > 4096:
		return bad("step_tokens", fmt.Sprintf("%d: want 1..4096", p.StepTokens))
	case p.MaxSteps < 1 || p.MaxSteps > 256:
		return bad("max_steps", fmt.Sprintf("%d: want 1..256", p.MaxSteps))
	case p.MaxNewTokens < 1 || p.MaxNewTokens > 8192:
		return bad("max_new_tokens", fmt.Sprintf("%d: want 1..8192", p.MaxNewTokens))
	case p.Expand < 1 || p.Expand > 64:
		return bad("expand", fmt.Sprintf("%d: want 1..64", p.Expand))
	case p.Simulations < 1 || p.Simulations > 100000:
		return bad("simulations", fmt.Sprintf("%d: want 1..100000", p.Simulations))
	case p.BudgetTokens < 0:
		return bad("budget_tokens", fmt.Sprintf("%d: want >= 0 (0: no limit)", p.BudgetTokens))
	case !(p.CPUCT >= 0) || math.IsInf(p.CPUCT, 0):
		return bad("c_puct", fmt.Sprintf("%g: want a finite value >= 0", p.CPUCT))
	case !(p.Temperature > 0) || math.IsInf(p.Temperature, 0):
		return bad("temperature", fmt.Sprintf("%g: want > 0 (search needs distinct samples)", p.Temperature))
	case !(p.Margin >= 0 && p.Margin < 1):
		return bad("margin", fmt.Sprintf("%g: want 0 <= margin < 1 (values are verifier scores in [0, 1])", p.Margin))
	case p.MaxPairs < 0:
		return bad("max_pairs", fmt.Sprintf("%d: want >= 0", p.MaxPairs))
	}
	return nil
}

// Node is one step of a tree (node 0, the root, is the prompt).
type Node struct {
	Parent   int     `json:"parent"`
	Depth    int     `json:"depth"`
	Text     string  `json:"text"`
	Tokens   []int   `json:"tokens"`
	LogProb  float64 `json:"logprob"` // of the step under the policy
	Prior    float64 `json:"prior"`
	Visits   int     `json:"visits"`
	ValueSum float64 `json:"value_sum"`
	Terminal bool    `json:"terminal"`
	// Done marks a node with nothing left to search below it: terminal, or every child done.
	// Selection skips done nodes, so simulations are not spent revisiting finished solutions.
	Done     bool  `json:"done"`
	Children []int `json:"children,omitempty"`
	// Completion is a whole solution through the node: its path when terminal, else the path and
	// the rollout drawn when the node was made. Score and Pass are the verifier's verdict on it.
	Completion string  `json:"completion"`
	Score      float64 `json:"score"`
	Pass       bool    `json:"pass"`
}

// Tree is one prompt's search.
type Tree struct {
	Nodes  []Node `json:"nodes"`
	Tokens int    `json:"tokens"` // forward tokens spent
	Sims   int    `json:"simulations"`
}

// NewTree returns a tree holding only its root.
func NewTree() *Tree { return &Tree{Nodes: []Node{{Parent: -1}}} }

// Q is a node's mean value (0 before its first visit).
func (t *Tree) Q(i int) float64 {
	n := t.Nodes[i]
	if n.Visits == 0 {
		return 0
	}
	return n.ValueSum / float64(n.Visits)
}

// PUCT is the selection score of child under its parent: Q(child) + c·P(child)·√N(parent)/(1+N(child)).
func (t *Tree) PUCT(parent, child int, c float64) float64 {
	return t.Q(child) + c*t.Nodes[child].Prior*math.Sqrt(float64(t.Nodes[parent].Visits))/float64(1+t.Nodes[child].Visits)
}

// Select walks from the root to a leaf (a node without children, or a terminal one) by the highest
// PUCT score among the children not done; ties go to the earlier child.
func (t *Tree) Select(c float64) int {
	i := 0
	for len(t.Nodes[i].Children) > 0 && !t.Nodes[i].Terminal {
		best, bestV := -1, math.Inf(-1)
		for _, ch := range t.Nodes[i].Children {
			if v := t.PUCT(i, ch, c); !t.Nodes[ch].Done && v > bestV {
				best, bestV = ch, v
			}
		}
		if best < 0 {
			return i // every child done (then so is i; Run never asks)
		}
		i = best
	}
	return i
}

// finish marks node i done and, up the path, every ancestor whose children are now all done.
func (t *Tree) finish(i int) {
	t.Nodes[i].Done = true
	for p := t.Nodes[i].Parent; p >= 0; p = t.Nodes[p].Parent {
		for _, ch := range t.Nodes[p].Children {
			if !t.Nodes[ch].Done {
				return
			}
		}
		t.Nodes[p].Done = true
	}
}

// Backup adds value v to node i and every ancestor.
func (t *Tree) Backup(i int, v float64) {
	for ; i >= 0; i = t.Nodes[i].Parent {
		t.Nodes[i].Visits++
		t.Nodes[i].ValueSum += v
	}
}

// Candidate is a sampled next step.
type Candidate struct {
	Tokens   []int
	Text     string
	LogProb  float64 // log-probability of the step under the policy
	Terminal bool
}

// Expand adds the candidates as children of leaf, merging those whose text equals an earlier
// candidate's or an existing child's, and sets the children's priors to their probabilities
// normalised over all the node's children (the policy's step prior). It returns the new children.
func (t *Tree) Expand(leaf int, cands []Candidate) []int {
	seen := map[string]bool{}
	for _, ch := range t.Nodes[leaf].Children {
		seen[t.Nodes[ch].Text] = true
	}
	var added []int
	for _, c := range cands {
		if seen[c.Text] {
			continue
		}
		seen[c.Text] = true
		t.Nodes = append(t.Nodes, Node{Parent: leaf, Depth: t.Nodes[leaf].Depth + 1, Text: c.Text, Tokens: c.Tokens,
			LogProb: c.LogProb, Terminal: c.Terminal})
		i := len(t.Nodes) - 1
		t.Nodes[leaf].Children = append(t.Nodes[leaf].Children, i)
		added = append(added, i)
	}
	kids := t.Nodes[leaf].Children
	hi := math.Inf(-1)
	for _, ch := range kids {
		hi = math.Max(hi, t.Nodes[ch].LogProb)
	}
	var z float64
	for _, ch := range kids {
		z += math.Exp(t.Nodes[ch].LogProb - hi)
	}
	for _, ch := range kids {
		t.Nodes[ch].Prior = math.Exp(t.Nodes[ch].LogProb-hi) / z
	}
	return added
}

// Path lists the nodes from the root's first child down to i.
func (t *Tree) Path(i int) []int {
	var p []int
	for ; i > 0; i = t.Nodes[i].Parent {
		p = append(p, i)
	}
	for a, b := 0, len(p)-1; a < b; a, b = a+1, b-1 {
		p[a], p[b] = p[b], p[a]
	}
	return p
}

// PathTokens and PathText concatenate the steps from the root to i.
func (t *Tree) PathTokens(i int) []int {
	var out []int
	for _, j := range t.Path(i) {
		out = append(out, t.Nodes[j].Tokens...)
	}
	return out
}

// PathText concatenates the steps' text from the root to i.
func (t *Tree) PathText(i int) string {
	var s string
	for _, j := range t.Path(i) {
		s += t.Nodes[j].Text
	}
	return s
}

// descend walks from i to a leaf, taking at each node the child with the highest sign·Q (ties: more
// visits, then the earlier child).
func (t *Tree) descend(i int, sign float64) int {
	for len(t.Nodes[i].Children) > 0 {
		best := -1
		for _, ch := range t.Nodes[i].Children {
			if best < 0 {
				best = ch
				continue
			}
			q, bq := sign*t.Q(ch), sign*t.Q(best)
			if q > bq || (q == bq && t.Nodes[ch].Visits > t.Nodes[best].Visits) {
				best = ch
			}
		}
		i = best
	}
	return i
}

// within returns the first node (index order) of the subtree at i whose verdict is pass, or -1.
func (t *Tree) within(i int, pass bool) int {
	if i > 0 && t.Nodes[i].Pass == pass {
		return i
	}
	for _, ch := range t.Nodes[i].Children {
		if j := t.within(ch, pass); j >= 0 {
			return j
		}
	}
	return -1
}

// solution returns a completion of the subtree at i with the given verdict: the leaf the value
// descent reaches (highest values for a pass, lowest for a fail) if its verdict fits, else the
// first fitting node of the subtree; -1 if there is none.
func (t *Tree) solution(i int, pass bool) int {
	sign := 1.0
	if !pass {
		sign = -1
	}
	if j := t.descend(i, sign); j > 0 && t.Nodes[j].Pass == pass {
		return j
	}
	return t.within(i, pass)
}

// Best returns the best verified solution: the highest-value descent from the root when it ends
// verified, else the first verified completion the search found; ok is false when none passed.
func (t *Tree) Best() (completion string, ok bool) {
	if j := t.solution(0, true); j > 0 {
		return t.Nodes[j].Completion, true
	}
	return "", false
}

// Pair is a preference pair from sibling steps: two whole solutions that share the path up to the
// siblings, the chosen one verified, the rejected one not.
type Pair struct {
	Chosen   string  `json:"chosen"`
	Rejected string  `json:"rejected"`
	Gap      float64 `json:"gap"`   // Q(chosen sibling) - Q(rejected sibling)
	Depth    int     `json:"depth"` // of the siblings
}

// Pairs returns up to max pairs of siblings a, b with Q(a) - Q(b) > margin, the largest gaps first
// (ties: tree order), chosen from a's subtree (verified) and rejected from b's (not verified),
// without repeating a (chosen, rejected) text pair.
func (t *Tree) Pairs(margin float64, max int) []Pair {
	var out []Pair
	seen := map[[2]string]bool{}
	for i := range t.Nodes {
		kids := t.Nodes[i].Children
		for _, a := range kids {
			for _, b := range kids {
				gap := t.Q(a) - t.Q(b)
				if a == b || t.Nodes[a].Visits == 0 || t.Nodes[b].Visits == 0 || !(gap > margin) {
					continue
				}
				ca, cb := t.solution(a, true), t.solution(b, false)
				if ca < 0 || cb < 0 {
					continue
				}
				key := [2]string{t.Nodes[ca].Completion, t.Nodes[cb].Completion}
				if seen[key] {
					continue
				}
				seen[key] = true
				out = append(out, Pair{Chosen: key[0], Rejected: key[1], Gap: gap, Depth: t.Nodes[a].Depth})
			}
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Gap > out[j].Gap })
	if len(out) > max {
		out = out[:max]
	}
	return out
}

// Stats describe a finished tree.
type Stats struct {
	Nodes       int  `json:"nodes"`    // steps (the root not counted)
	Depth       int  `json:"depth"`    // of the deepest step
	Verified    int  `json:"verified"` // distinct verified completions found
	Solved      bool `json:"solved"`
	Tokens      int  `json:"tokens"`
	Simulations int  `json:"simulations"`
}

// Stats summarises t.
func (t *Tree) Stats() Stats {
	s := Stats{Nodes: len(t.Nodes) - 1, Tokens: t.Tokens, Simulations: t.Sims}
	verified := map[string]bool{}
	for _, n := range t.Nodes[1:] {
		s.Depth = max(s.Depth, n.Depth)
		if n.Pass {
			verified[n.Completion] = true
		}
	}
	s.Verified, s.Solved = len(verified), len(verified) > 0
	return s
}

// Request asks the policy to continue a tree's prompt after Path.
type Request struct {
	Tree   int    // index of the tree (its prompt) in Run's trees
	Path   []int  // the steps' tokens so far
	Seed   uint64 // the sample's own seed
	MaxNew int    // tokens to generate at most
	Line   bool   // also stop at the end of a line
}

// Sample is what the policy generated for a Request.
type Sample struct {
	Tokens  []int   // generated tokens, without the end-of-sequence token
	Text    string  // their text
	LogProb float64 // their summed log-probability
	End     bool    // the policy ended the completion (end-of-sequence)
	Cost    int     // forward tokens spent: prompt, path and generated
}

// Env is the policy and the verifier.
type Env interface {
	// Sample answers every request, in order, in as few model calls as it likes.
	Sample(reqs []Request) ([]Sample, error)
	// Verify scores a whole completion of tree's prompt: a score in [0, 1] and whether it passes.
	Verify(tree int, completion string) (score float64, pass bool)
}

// StepVerifier is an Env whose verifier also judges a partial solution: whether the complete
// steps of path (a node's path text) are right so far. Run uses it when Params.StepCheck is set.
type StepVerifier interface {
	ValidPrefix(tree int, path string) bool
}

// seed purposes: an expansion's candidates and a new node's rollout draw from disjoint streams.
const (
	purposeExpand  = 1
	purposeRollout = 2
)

// SeedFor derives a sample's seed from a tree's seed, the node, the simulation, the purpose and k.
func SeedFor(tree uint64, node, sim, purpose, k int) uint64 {
	s := sample.SplitMix64(tree)
	for _, v := range []int{node, sim, purpose, k} {
		s = sample.SplitMix64(s ^ uint64(v))
	}
	return s
}

type owner struct{ tree, node int }

// Run searches every tree until its simulations or token budget are spent, batching every round's
// samples of all trees into one Env.Sample call per stage (expansions, then rollouts). seeds[i] is
// tree i's seed.
func Run(trees []*Tree, seeds []uint64, p Params, env Env) error {
	if len(seeds) != len(trees) {
		return fmt.Errorf("search: %d seeds for %d trees", len(seeds), len(trees))
	}
	active := func(t *Tree) bool {
		return !t.Nodes[0].Done && t.Sims < p.Simulations && (p.BudgetTokens == 0 || t.Tokens < p.BudgetTokens)
	}
	line := p.Step == StepLine && p.Strategy == StrategyMCTS
	steps, _ := env.(StepVerifier)
	if !p.StepCheck || p.Strategy != StrategyMCTS {
		steps = nil
	}
	for {
		var reqs []Request
		var from []owner
		for i, t := range trees {
			if !active(t) {
				continue
			}
			t.Sims++
			leaf := 0
			if p.Strategy == StrategyMCTS {
				leaf = t.Select(p.CPUCT)
			}
			if t.Nodes[leaf].Terminal {
				t.Backup(leaf, t.Nodes[leaf].Score) // nothing left to sample below it
				continue
			}
			path := t.PathTokens(leaf)
			maxNew := p.MaxNewTokens - len(path)
			if p.Strategy == StrategyMCTS {
				maxNew = min(maxNew, p.StepTokens)
			}
			for k := 0; k < p.Expand; k++ {
				reqs = append(reqs, Request{Tree: i, Path: path, Seed: SeedFor(seeds[i], leaf, t.Sims, purposeExpand, k), MaxNew: maxNew, Line: line})
				from = append(from, owner{i, leaf})
			}
		}
		if len(reqs) == 0 {
			if anyActive(trees, active) {
				continue // every active tree only revisited terminal nodes this round
			}
			return nil
		}
		samples, err := env.Sample(reqs)
		if err != nil {
			return err
		}
		if len(samples) != len(reqs) {
			return fmt.Errorf("search: %d samples for %d requests", len(samples), len(reqs))
		}
		// Group each leaf's candidates (requests of one leaf are contiguous).
		var rreqs []Request
		var rfrom []owner
		for lo := 0; lo < len(reqs); {
			hi := lo
			var cands []Candidate
			o := from[lo]
			t := trees[o.tree]
			for ; hi < len(reqs) && from[hi] == o; hi++ {
				s := samples[hi]
				t.Tokens += s.Cost
				pathLen := len(reqs[hi].Path) + len(s.Tokens)
				endsLine := len(s.Text) > 0 && s.Text[len(s.Text)-1] == '\n'
				terminal := s.End || p.Strategy == StrategySample || t.Nodes[o.node].Depth+1 >= p.MaxSteps ||
					pathLen >= p.MaxNewTokens || (line && !endsLine)
				cands = append(cands, Candidate{Tokens: s.Tokens, Text: s.Text, LogProb: s.LogProb, Terminal: terminal})
			}
			for _, ch := range t.Expand(o.node, cands) {
				n := &t.Nodes[ch]
				if n.Terminal {
					n.Completion = t.PathText(ch)
					n.Score, n.Pass = env.Verify(o.tree, n.Completion)
					t.Backup(ch, n.Score)
					if p.Strategy == StrategyMCTS { // sample: the root is drawn from again and again
						t.finish(ch)
					}
					continue
				}
				if steps != nil && !steps.ValidPrefix(o.tree, t.PathText(ch)) {
					n.Completion = t.PathText(ch) // a wrong step: nothing below it can pass
					t.Backup(ch, 0)
					t.finish(ch)
					continue
				}
				path := t.PathTokens(ch)
				rreqs = append(rreqs, Request{Tree: o.tree, Path: path, Seed: SeedFor(seeds[o.tree], ch, 0, purposeRollout, 0), MaxNew: p.MaxNewTokens - len(path)})
				rfrom = append(rfrom, owner{o.tree, ch})
			}
			lo = hi
		}
		if len(rreqs) == 0 {
			continue
		}
		rolls, err := env.Sample(rreqs)
		if err != nil {
			return err
		}
		if len(rolls) != len(rreqs) {
			return fmt.Errorf("search: %d rollouts for %d requests", len(rolls), len(rreqs))
		}
		for j, r := range rolls {
			o := rfrom[j]
			t := trees[o.tree]
			t.Tokens += r.Cost
			n := &t.Nodes[o.node]
			n.Completion = t.PathText(o.node) + r.Text
			n.Score, n.Pass = env.Verify(o.tree, n.Completion)
			t.Backup(o.node, n.Score)
		}
	}
}

func anyActive(trees []*Tree, active func(*Tree) bool) bool {
	for _, t := range trees {
		if active(t) {
			return true
		}
	}
	return false
}
