package hf

import (
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/temperml/temper/algorithms/model"
)

// RandomWeights are cfg's internal float32 weights drawn on the host exactly as model.InitWeights
// draws them (the same PCG stream, variable order and values): linear and embedding weights
// ~ N(0, std²) (std <= 0: 0.02), biases 0, norm scales 1 (0 when NormPlusOne: an effective 1). The
// host version exists so that a model of a real size can be made and written without building a
// graph around it (`temper model init`).
func RandomWeights(cfg model.Config, seed uint64, std float64) (map[string][]float32, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("hf: random weights: %w", err)
	}
	if std <= 0 {
		std = 0.02
	}
	rng := rand.New(rand.NewPCG(seed, 0x7e3e3))
	w := make(map[string][]float32)
	for _, v := range cfg.Variables() {
		data := make([]float32, v.Size())
		switch {
		case strings.HasSuffix(v.Path, "/scale"):
			if !cfg.NormPlusOne {
				for i := range data {
					data[i] = 1
				}
			}
		case strings.HasSuffix(v.Path, "_bias") || v.Path == model.VarValueB:
		case v.Path == model.VarValueLP:
			data[0] = 1
		default:
			for i := range data {
				data[i] = float32(rng.NormFloat64() * std)
			}
		}
		w[v.Path] = data
	}
	return w, nil
}
