package vision

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX graph code reads best unqualified.
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
	"github.com/temperml/temper/algorithms/vision/visioncfg"
)

// A reward model on the tower: a value head [d, 1] on the pooled output gives one scalar per
// image. Its checkpoint is a SiglipVisionModel's tensors plus the head under the names the
// decoder's reward models use (score.weight [1, d], score.bias [1]), so one file holds both.
const (
	VarScore     = "score/w"    // [d, 1]
	VarScoreBias = "score/bias" // [1]

	HFScore     = "score.weight" // [1, d]
	HFScoreBias = "score.bias"   // [1]
)

// RewardVariables lists the tower's variables and the value head's, in a fixed order.
func RewardVariables(cfg visioncfg.Config) []model.VarSpec {
	return append(Variables(cfg), model.VarSpec{Path: VarScore, Shape: []int{cfg.DModel, 1}}, model.VarSpec{Path: VarScoreBias, Shape: []int{1}})
}

// Reward is the reward model's score of each image: the value head on Encode's pooled output.
//
//	pixels:  [batch, channels, image_size, image_size] float32
//	rewards: [batch] float32
func Reward(scope *gm.Scope, cfg visioncfg.Config, pixels *Node) *Node {
	pooled, _ := Encode(scope, cfg, pixels)
	g, d := pixels.Graph(), cfg.DModel
	r := Add(Dot(pooled, param(scope, g, VarScore, d, 1)).Product(), Reshape(param(scope, g, VarScoreBias, 1), 1, 1))
	return Reshape(r, pooled.Shape().Dim(0))
}

// InitReward random-initialises the tower (InitWeights) and the value head, weights ~ N(0, 0.02²)
// as the decoder's value head (a reward near 0 at the start) and bias 0, deterministically from seed.
func InitReward(scope *gm.Scope, cfg visioncfg.Config, seed uint64) error {
	if err := InitWeights(scope, cfg, seed); err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 0x5c07e))
	w := make([]float32, cfg.DModel)
	for i := range w {
		w[i] = float32(rng.NormFloat64() * 0.02)
	}
	return model.SetVariables(scope, "vision: init reward head", RewardVariables(cfg)[len(Variables(cfg)):],
		map[string][]float32{VarScore: w, VarScoreBias: {0}})
}

// ImportReward sets the tower's and the head's variables from w (internal paths).
func ImportReward(scope *gm.Scope, cfg visioncfg.Config, w map[string][]float32) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	return model.SetVariables(scope, "vision: import reward model", RewardVariables(cfg), w)
}

// ExportReward copies the tower's and the head's variables to host memory.
func ExportReward(scope *gm.Scope, cfg visioncfg.Config) (map[string][]float32, error) {
	return model.GetVariables(scope, "vision: export reward model", RewardVariables(cfg))
}

// WriteRewardHF writes a reward model's model.safetensors (F32): the tower as WriteHF names it
// plus score.weight [1, d] and score.bias [1].
func WriteRewardHF(out io.Writer, cfg visioncfg.Config, w map[string][]float32) error {
	hf, err := ToHF(cfg, w, PrefixVisionModel)
	if err != nil {
		return err
	}
	sw, sb := w[VarScore], w[VarScoreBias]
	if len(sw) != cfg.DModel || len(sb) != 1 {
		return fmt.Errorf("vision: write reward model: value head missing or of the wrong size (%d, %d values; want %d, 1)", len(sw), len(sb), cfg.DModel)
	}
	shapes := HFShapes(cfg, PrefixVisionModel)
	hf[HFScore], shapes[HFScore] = slices.Clone(sw), []int{1, cfg.DModel} // [d, 1] and [1, d] share a layout
	hf[HFScoreBias], shapes[HFScoreBias] = slices.Clone(sb), []int{1}
	ts := make([]safetensors.Tensor, 0, len(hf))
	for _, name := range keys(hf) {
		t, err := safetensors.FromFloat32(name, shapes[name], hf[name], safetensors.F32)
		if err != nil {
			return fmt.Errorf("vision: write reward model: %w", err)
		}
		ts = append(ts, t)
	}
	if err := safetensors.Write(out, ts, map[string]string{"format": "pt"}); err != nil {
		return fmt.Errorf("vision: write reward model: %w", err)
	}
	return nil
}

// ReadRewardHF reads a reward model's tensors (the tower under any of Prefixes, the value head
// as score.weight and score.bias); a checkpoint without the head is an error naming the tensor.
func ReadRewardHF(cfg visioncfg.Config, r io.ReaderAt, size int64) (map[string][]float32, error) {
	w, _, err := ReadHF(cfg, r, size)
	if err != nil {
		return nil, err
	}
	h, err := safetensors.ReadHeader(io.NewSectionReader(r, 0, size))
	if err != nil {
		return nil, fmt.Errorf("vision: read reward model: %w", err)
	}
	for _, s := range []struct {
		name, path string
		n          int
	}{{HFScore, VarScore, cfg.DModel}, {HFScoreBias, VarScoreBias, 1}} {
		if _, ok := h.Entry(s.name); !ok {
			return nil, fmt.Errorf("vision: read reward model: tensor %q missing (a vision tower without a value head is not a reward model)", s.name)
		}
		t, err := h.ReadTensor(r, s.name)
		if err != nil {
			return nil, fmt.Errorf("vision: read reward model: %w", err)
		}
		data, err := t.ToFloat32()
		if err != nil {
			return nil, fmt.Errorf("vision: read reward model: %s: %w", s.name, err)
		}
		if len(data) != s.n {
			return nil, fmt.Errorf("vision: read reward model: tensor %q has %d values, want %d", s.name, len(data), s.n)
		}
		for _, v := range data {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("vision: read reward model: tensor %q holds a non-finite value", s.name)
			}
		}
		w[s.path] = data
	}
	return w, nil
}
