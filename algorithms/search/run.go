package search

import (
	"fmt"

	"github.com/temperml/temper/algorithms/sample"
)

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

// StepValuer is an Env that values a node by a process reward model's score of its last step
// instead of a rollout (Params.Value = prm): reqs are the nodes' paths (MaxNew unused); it returns
// each path's score in [0, 1] and the forward tokens it spent.
type StepValuer interface {
	ValueSteps(reqs []Request) (scores []float64, costs []int, err error)
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
		return t.Sims < p.Simulations && (p.BudgetTokens == 0 || t.Tokens < p.BudgetTokens)
	}
	line := p.Step == StepLine && p.Strategy == StrategyMCTS
	steps, _ := env.(StepVerifier)
	if !p.StepCheck || p.Strategy != StrategyMCTS {
		steps = nil
	}
	var valuer StepValuer
	if p.Value == ValuePRM {
		v, ok := env.(StepValuer)
		if !ok {
			return fmt.Errorf("search: value %s needs an Env that values steps (a process reward model)", ValuePRM)
		}
		valuer = v
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
					continue
				}
				if steps != nil && !steps.ValidPrefix(o.tree, t.PathText(ch)) {
					n.Terminal, n.Completion = true, t.PathText(ch) // a wrong step: a dead end
					t.Backup(ch, 0)
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
		if valuer != nil {
			if err := valueByPRM(trees, valuer, rreqs, rfrom); err != nil {
				return err
			}
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

// valueByPRM backs up the process reward model's score of each new node's path in place of a
// rollout's verdict: the node gets no completion (Valued), so it is never a solution or a pair's
// side, and the tree pays the scoring's forward tokens.
func valueByPRM(trees []*Tree, valuer StepValuer, reqs []Request, from []owner) error {
	scores, costs, err := valuer.ValueSteps(reqs)
	if err != nil {
		return err
	}
	if len(scores) != len(reqs) || len(costs) != len(reqs) {
		return fmt.Errorf("search: %d step values for %d requests", len(scores), len(reqs))
	}
	for j, v := range scores {
		o := from[j]
		t := trees[o.tree]
		t.Tokens += costs[j]
		n := &t.Nodes[o.node]
		n.Score, n.Valued = v, true
		t.Backup(o.node, v)
	}
	return nil
}
