package hf

import (
	"fmt"

	"github.com/temperml/temper/algorithms/model"
)

// RandomWeights are model.RandomWeights (what model.InitWeights draws, on the host), for
// `temper model init`, which makes and writes a model of a real size without building a graph.
func RandomWeights(cfg model.Config, seed uint64, std float64) (map[string][]float32, error) {
	w, err := model.RandomWeights(cfg, seed, std)
	if err != nil {
		return nil, fmt.Errorf("hf: random weights: %w", err)
	}
	return w, nil
}
