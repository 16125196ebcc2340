package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
)

// StopReason says why a completion ended.
type StopReason string

const (
	// StopToken: a stop token was sampled (it is the last entry of the completion's tokens), or
	// the tokens ended with a stop sequence (its last entries).
	StopToken StopReason = "stop"
	// StopLength: MaxNewTokens tokens were generated.
	StopLength StopReason = "length"
)

// Options configures sampling. The zero value of each field means "off" where that makes sense.
type Options struct {
	MaxNewTokens int     `json:"max_new_tokens"` // > 0
	Temperature  float64 `json:"temperature"`    // 0 → greedy (argmax, lowest id on ties); else > 0
	TopK         int     `json:"top_k"`          // keep the k most likely tokens; 0 → off
	TopP         float64 `json:"top_p"`          // keep the smallest set with mass ≥ p; 0 or 1 → off
	// MinP keeps the tokens whose probability (after temperature) is at least MinP times the most
	// likely one's (Nguyen et al. 2024, "Turning Up the Heat: Min-p Sampling"; transformers'
	// MinPLogitsWarper, applied after top-k and top-p as transformers orders them); 0 → off.
	MinP float64 `json:"min_p,omitempty"`
	// RepetitionPenalty θ divides the positive logits, and multiplies the negative ones, of every
	// token already in the request (prompt and completion so far; Sampler.Observe) before
	// temperature: CTRL's penalty (Keskar et al. 2019) as transformers' RepetitionPenaltyLogitsProcessor
	// applies it. 0 or 1 → off.
	RepetitionPenalty float64 `json:"repetition_penalty,omitempty"`
	StopTokens        []int   `json:"stop_tokens"` // sampling one ends the request (it is kept)
	// StopSequences end the request when its tokens end with one of them (kept, like a stop
	// token): the close of a tool call in an agentic turn, for tokenizers that spell it in
	// several tokens.
	StopSequences [][]int `json:"stop_sequences,omitempty"`
	// StopStrings end the request when the text of its completion contains one of them (the tokens
	// that completed it are kept, like a stop token): a stop string spelled by any tokens, however
	// the tokenizer splits it. Decode, the tokenizer's, is required with them.
	StopStrings []string               `json:"stop_strings,omitempty"`
	Decode      func(ids []int) string `json:"-"`
	Seed        uint64                 `json:"seed"` // base seed; request i uses SeedFor(i)
	// Seeds, when set, gives each request its own seed (len must equal the number of requests);
	// use it to get the same text for a request regardless of where it sits in a batch.
	Seeds []uint64 `json:"seeds,omitempty"`
}

// Validate checks the options for n requests.
func (o Options) Validate(n int) error {
	switch {
	case o.MaxNewTokens <= 0:
		return fmt.Errorf("sample: max_new_tokens=%d: must be > 0", o.MaxNewTokens)
	case o.Temperature < 0 || math.IsNaN(o.Temperature) || math.IsInf(o.Temperature, 0):
		return fmt.Errorf("sample: temperature=%g: must be 0 (greedy) or > 0", o.Temperature)
	case o.TopK < 0:
		return fmt.Errorf("sample: top_k=%d: must be >= 0 (0 = off)", o.TopK)
	case o.TopP < 0 || o.TopP > 1 || math.IsNaN(o.TopP):
		return fmt.Errorf("sample: top_p=%g: must be in [0, 1] (0 or 1 = off)", o.TopP)
	case o.MinP < 0 || o.MinP > 1 || math.IsNaN(o.MinP):
		return fmt.Errorf("sample: min_p=%g: must be in [0, 1] (0 = off)", o.MinP)
	case o.RepetitionPenalty < 0 || math.IsNaN(o.RepetitionPenalty) || math.IsInf(o.RepetitionPenalty, 0):
		return fmt.Errorf("sample: repetition_penalty=%g: must be > 0 (0 or 1 = off; > 1 discourages repeats)", o.RepetitionPenalty)
	case slices.ContainsFunc(o.StopSequences, func(q []int) bool { return len(q) == 0 }):
		return fmt.Errorf("sample: stop_sequences: an empty sequence")
	case slices.Contains(o.StopStrings, ""):
		return fmt.Errorf("sample: stop_strings: an empty string")
	case len(o.StopStrings) > 0 && o.Decode == nil:
		return fmt.Errorf("sample: stop_strings %q: no tokenizer to decode the completion with", o.StopStrings)
	case o.Seeds != nil && len(o.Seeds) != n:
		return fmt.Errorf("sample: seeds has %d entries for %d requests", len(o.Seeds), n)
	}
	return nil
}

// SeedFor returns request i's seed: Seeds[i] when given, else a SplitMix64 mix of (Seed, i), so
// requests of one batch differ even with one base seed.
func (o Options) SeedFor(i int) uint64 {
	if o.Seeds != nil {
		return o.Seeds[i]
	}
	return SplitMix64(o.Seed ^ SplitMix64(uint64(i)+0x9e3779b97f4a7c15))
}

// IsStop reports whether tok is a stop token.
func (o Options) IsStop(tok int) bool { return slices.Contains(o.StopTokens, tok) }

// EndsWithStop reports whether tokens (a completion, checked after each token) end with one of the
// stop sequences, or whether their text has just come to contain one of the stop strings.
func (o Options) EndsWithStop(tokens []int) bool {
	for _, seq := range o.StopSequences {
		if len(seq) > 0 && len(tokens) >= len(seq) && slices.Equal(tokens[len(tokens)-len(seq):], seq) {
			return true
		}
	}
	if len(o.StopStrings) == 0 || o.Decode == nil || len(tokens) == 0 {
		return false
	}
	// A stop string that the last token completed lies in the text of the last len(stop) tokens
	// (each spells at least a byte), plus one for a character split across tokens; checked
	// after every token, an earlier one would already have stopped the request.
	longest := 0
	for _, stop := range o.StopStrings {
		longest = max(longest, len(stop))
	}
	text := o.Decode(tokens[max(0, len(tokens)-longest-1):])
	for _, stop := range o.StopStrings {
		if strings.Contains(text, stop) {
			return true
		}
	}
	return false
}

// SplitMix64 is the SplitMix64 mixing step: what derives every per-request seed here, and what other
// packages use to derive seeds of their own (an agentic episode's per-turn seeds).
func SplitMix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Sampler draws tokens for one request. Not safe for concurrent use.
type Sampler struct {
	opts  Options
	rng   *rand.Rand
	probs []float64
	idx   []int
	// With a repetition penalty: the tokens seen so far and the penalised logits.
	seen      map[int]bool
	penalised []float32
}

// penalty reports whether the options penalise repeats.
func (o Options) penalty() bool { return o.RepetitionPenalty > 0 && o.RepetitionPenalty != 1 }

// Observe records tokens of the request (its prompt) for the repetition penalty; Next observes the
// tokens it draws itself. Without a penalty it does nothing.
func (s *Sampler) Observe(tokens ...int) {
	if !s.opts.penalty() {
		return
	}
	if s.seen == nil {
		s.seen = map[int]bool{}
	}
	for _, t := range tokens {
		s.seen[t] = true
	}
}

// penalise returns logits with the repetition penalty applied to the tokens seen, in float32 as
// transformers computes it on float32 scores (logits itself when there is no penalty).
func (s *Sampler) penalise(logits []float32) []float32 {
	if !s.opts.penalty() || len(s.seen) == 0 {
		return logits
	}
	s.penalised = append(s.penalised[:0], logits...)
	p := float32(s.opts.RepetitionPenalty)
	for t := range s.seen {
		if t < 0 || t >= len(logits) {
			continue
		}
		if l := s.penalised[t]; l < 0 {
			s.penalised[t] = l * p
		} else {
			s.penalised[t] = l / p
		}
	}
	return s.penalised
}

// NewSampler returns a sampler for one request with its own RNG.
func NewSampler(opts Options, seed uint64) *Sampler {
	return &Sampler{opts: opts, rng: rand.New(rand.NewPCG(seed, 0x5a4d9e))}
}

// Next picks the next token from logits [vocab] (the model's: the repetition penalty is applied
// here).
func (s *Sampler) Next(logits []float32) int {
	tok := s.next(s.penalise(logits))
	s.Observe(tok)
	return tok
}

func (s *Sampler) next(logits []float32) int {
	if s.greedy() {
		if s.opts.Temperature != 0 {
			s.rng.Float64() // keep one draw per token whatever the options
		}
		return Greedy(logits)
	}
	idx, probs, total := s.kept(logits)
	u := s.rng.Float64() * total
	var cum float64
	for _, i := range idx {
		cum += probs[i]
		if u < cum {
			return i
		}
	}
	return idx[len(idx)-1]
}

func (s *Sampler) greedy() bool { return s.opts.Temperature == 0 || s.opts.TopK == 1 }

// Distribution is the distribution Next draws the next token from, given logits [vocab] (the
// penalty applied to the tokens observed so far): zero outside what top-k, top-p and min-p keep. It
// draws nothing and observes nothing.
func (s *Sampler) Distribution(logits []float32) []float64 {
	logits = s.penalise(logits)
	out := make([]float64, len(logits))
	if s.greedy() {
		out[Greedy(logits)] = 1
		return out
	}
	idx, probs, total := s.kept(logits)
	for _, i := range idx {
		out[i] = probs[i] / total
	}
	return out
}

// kept returns the tokens a draw chooses among, in the order it walks them, their unnormalised
// probabilities (indexed by token) and the kept tokens' total.
func (s *Sampler) kept(logits []float32) (idx []int, probs []float64, total float64) {
	n := len(logits)
	if cap(s.probs) < n {
		s.probs, s.idx = make([]float64, n), make([]int, n)
	}
	probs, idx = s.probs[:n], s.idx[:n]
	mx := math.Inf(-1)
	for _, l := range logits {
		mx = math.Max(mx, float64(l))
	}
	invT := 1 / s.opts.Temperature
	for i, l := range logits {
		probs[i] = math.Exp((float64(l) - mx) * invT)
		idx[i] = i
	}
	keep := n
	truncate := (s.opts.TopK > 0 && s.opts.TopK < n) || (s.opts.TopP > 0 && s.opts.TopP < 1) || s.opts.MinP > 0
	if truncate {
		// Most likely first, lower id first on ties (deterministic).
		sort.Slice(idx, func(a, b int) bool {
			pa, pb := probs[idx[a]], probs[idx[b]]
			if pa != pb {
				return pa > pb
			}
			return idx[a] < idx[b]
		})
		if s.opts.TopK > 0 && s.opts.TopK < keep {
			keep = s.opts.TopK
		}
		if p := s.opts.TopP; p > 0 && p < 1 {
			var total float64
			for _, i := range idx[:keep] {
				total += probs[i]
			}
			var cum float64
			for j, i := range idx[:keep] {
				cum += probs[i]
				if cum >= p*total {
					keep = j + 1
					break
				}
			}
		}
		if s.opts.MinP > 0 {
			// The most likely token's probability times min_p, unnormalised as probs are: the
			// ratio to the most likely token is what min-p tests, whatever top-k and top-p kept.
			floor := s.opts.MinP * probs[idx[0]]
			for j, i := range idx[:keep] {
				if probs[i] < floor {
					keep = max(1, j)
					break
				}
			}
		}
	}
	for _, i := range idx[:keep] {
		total += probs[i]
	}
	return idx[:keep], probs, total
}

// Greedy returns the argmax of logits (lowest id on ties).
func Greedy(logits []float32) int {
	best := 0
	for i, l := range logits {
		if l > logits[best] {
			best = i
		}
	}
	return best
}

// LogProb returns log softmax(logits)[tok] at temperature 1 (computed in float64).
//
// The result is recorded with every generated token and compared bit for bit across runs, so every
// implementation returns exactly logProbScalar's bits: the vector path (logprob_amd64.go, where the
// build and the CPU allow it) repeats math.Exp's own float64 operations lane by lane and sums in
// index order; anything it does not cover exactly falls back to logProbScalar.
func LogProb(logits []float32, tok int) float64 {
	if lp, ok := logProbVector(logits, tok); ok {
		return lp
	}
	return logProbScalar(logits, tok)
}

// logProbScalar is LogProb's defining formula: the max folded with math.Max, then z summed in index
// order with math.Exp.
func logProbScalar(logits []float32, tok int) float64 {
	mx := math.Inf(-1)
	for _, l := range logits {
		mx = math.Max(mx, float64(l))
	}
	var z float64
	for _, l := range logits {
		z += math.Exp(float64(l) - mx)
	}
	return float64(logits[tok]) - mx - math.Log(z)
}
