package train

import (
	"math/rand/v2"

	"github.com/temperml/temper/algorithms/safetensors"
)

// Hugging Face names of the value head (LlamaForSequenceClassification's score layer with one
// label, plus our bias); a checkpoint holding them is a reward model.
const (
	ScoreWeight  = "score.weight"         // [1, d]
	ScoreBias    = "score.bias"           // [1]
	ScoreLogProb = "score.logprob_weight" // [1] (model.Config.RewardLogProb)
)

// HeadInitStd is the standard deviation of a new value head's weights (the bias starts at 0): the
// Hugging Face initializer_range that model.InitWeights uses for every linear layer.
const HeadInitStd = 0.02

// headStream is the PCG stream of value-head initialisation (distinct from model.InitWeights').
const headStream = 0x5c07e

// ValueHeadTensors initialises a value head for width d: score.weight ~ N(0, HeadInitStd²) from
// PCG(seed, headStream), score.bias 0, and with logProb the generative term's weight α = 1.
func ValueHeadTensors(d int, seed uint64, logProb bool) ([]safetensors.Tensor, error) {
	rng := rand.New(rand.NewPCG(seed, headStream))
	hw := make([]float32, d)
	for i := range hw {
		hw[i] = float32(rng.NormFloat64() * HeadInitStd)
	}
	tw, err := safetensors.FromFloat32(ScoreWeight, []int{1, d}, hw, safetensors.F32)
	if err != nil {
		return nil, err
	}
	tb, err := safetensors.FromFloat32(ScoreBias, []int{1}, []float32{0}, safetensors.F32)
	if err != nil {
		return nil, err
	}
	if !logProb {
		return []safetensors.Tensor{tw, tb}, nil
	}
	tl, err := safetensors.FromFloat32(ScoreLogProb, []int{1}, []float32{1}, safetensors.F32)
	return []safetensors.Tensor{tw, tb, tl}, err
}
