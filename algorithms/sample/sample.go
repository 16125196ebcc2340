package sample

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"sort"
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
	StopTokens   []int   `json:"stop_tokens"`    // sampling one ends the request (it is kept)
	// StopSequences end the request when its tokens end with one of them (kept, like a stop
	// token): the close of a tool call in an agentic turn, for tokenizers that spell it in
	// several tokens.
	StopSequences [][]int `json:"stop_sequences,omitempty"`
	Seed          uint64  `json:"seed"` // base seed; request i uses SeedFor(i)
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
	case slices.ContainsFunc(o.StopSequences, func(q []int) bool { return len(q) == 0 }):
		return fmt.Errorf("sample: stop_sequences: an empty sequence")
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

// EndsWithStop reports whether tokens end with one of the stop sequences.
func (o Options) EndsWithStop(tokens []int) bool {
	for _, seq := range o.StopSequences {
		if len(seq) > 0 && len(tokens) >= len(seq) && slices.Equal(tokens[len(tokens)-len(seq):], seq) {
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
}

// NewSampler returns a sampler for one request with its own RNG.
func NewSampler(opts Options, seed uint64) *Sampler {
	return &Sampler{opts: opts, rng: rand.New(rand.NewPCG(seed, 0x5a4d9e))}
}

// Next picks the next token from logits [vocab].
func (s *Sampler) Next(logits []float32) int {
	if s.opts.Temperature == 0 || s.opts.TopK == 1 {
		if s.opts.Temperature != 0 {
			s.rng.Float64() // keep one draw per token whatever the options
		}
		return Greedy(logits)
	}
	n := len(logits)
	if cap(s.probs) < n {
		s.probs, s.idx = make([]float64, n), make([]int, n)
	}
	probs, idx := s.probs[:n], s.idx[:n]
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
	truncate := (s.opts.TopK > 0 && s.opts.TopK < n) || (s.opts.TopP > 0 && s.opts.TopP < 1)
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
	}
	var total float64
	for _, i := range idx[:keep] {
		total += probs[i]
	}
	u := s.rng.Float64() * total
	var cum float64
	for _, i := range idx[:keep] {
		cum += probs[i]
		if u < cum {
			return i
		}
	}
	return idx[keep-1]
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
func LogProb(logits []float32, tok int) float64 {
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
