package search

import (
	"math"
	"sort"
)

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
	// Terminal marks a finished solution or a dead end (a step the verifier rejected): selection
	// never enters it again.
	Terminal bool  `json:"terminal"`
	Children []int `json:"children,omitempty"`
	// Completion is a whole solution through the node: its path when terminal, else the path and
	// the rollout drawn when the node was made. Score and Pass are the verifier's verdict on it.
	Completion string  `json:"completion"`
	Score      float64 `json:"score"`
	Pass       bool    `json:"pass"`
	// Valued marks a node whose value is a process reward model's score of its step (Params.Value
	// prm): it has no completion and no verdict, so it is never a solution or a side of a pair.
	Valued bool `json:"valued,omitempty"`
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

// Select walks from the root by the highest PUCT score among the children that are not terminal
// (ties go to the earlier child) and returns the node to expand: one without children, or one whose
// children are all terminal, which is expanded again with fresh samples (progressive widening: the
// search spends its budget on new candidates instead of revisiting finished ones).
func (t *Tree) Select(c float64) int {
	i := 0
	for !t.Nodes[i].Terminal {
		best, bestV := -1, math.Inf(-1)
		for _, ch := range t.Nodes[i].Children {
			if v := t.PUCT(i, ch, c); !t.Nodes[ch].Terminal && v > bestV {
				best, bestV = ch, v
			}
		}
		if best < 0 {
			return i
		}
		i = best
	}
	return i
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
	if i > 0 && t.Nodes[i].Pass == pass && !t.Nodes[i].Valued {
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
	if j := t.descend(i, sign); j > 0 && t.Nodes[j].Pass == pass && !t.Nodes[j].Valued {
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
