package objective

import (
	"fmt"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/objective/objectivecfg"
	"github.com/temperml/temper/algorithms/vision"
	"github.com/temperml/temper/algorithms/vision/visioncfg"
)

// VisionObjective is an objective of a vision reward model (algorithms/vision: the SigLIP tower
// with a value head): as Objective, but built on the tower's configuration.
type VisionObjective struct {
	// Name keys compiled executables together with the input shapes (see Objective.Name).
	Name    string
	Metrics []string
	// Build receives the batch's tensors (its Tensors order) and returns the loss and metrics.
	Build func(scope *gm.Scope, cfg visioncfg.Config, in []*Node) (loss *Node, metrics map[string]*Node)
}

var (
	_ Batch = ImagePairBatch{}
	_ Batch = Images{}
)

// Images are preprocessed images, one per row: Pixels is [Rows, Channels, Size, Size] flat,
// channels first (imageproc.Pixels' layout, concatenated).
type Images struct {
	Rows, Channels, Size int
	Pixels               []float32
}

// Tensors: the pixels [rows, channels, size, size].
func (im Images) Tensors() []*tensors.Tensor {
	if len(im.Pixels) != im.Rows*im.Channels*im.Size*im.Size || im.Rows == 0 {
		panic(fmt.Sprintf("objective: images: %d values for %d rows of %dx%dx%d", len(im.Pixels), im.Rows, im.Channels, im.Size, im.Size))
	}
	return []*tensors.Tensor{tensors.FromFlatDataAndDimensions(im.Pixels, im.Rows, im.Channels, im.Size, im.Size)}
}

// ImagePairBatch is the input of VisionBradleyTerry: the chosen and rejected images of the same
// rows (one shape), and Weight [rows]: 1 for a real pair, 0 for a padding row.
type ImagePairBatch struct {
	Chosen, Rejected Images
	Weight           []float32
}

// Tensors: chosen pixels, rejected pixels, weights.
func (b ImagePairBatch) Tensors() []*tensors.Tensor {
	if b.Chosen.Rows != b.Rejected.Rows || b.Chosen.Size != b.Rejected.Size || len(b.Weight) != b.Chosen.Rows {
		panic(fmt.Sprintf("objective: image pairs: chosen %d rows of %d, rejected %d of %d, %d weights", b.Chosen.Rows, b.Chosen.Size, b.Rejected.Rows, b.Rejected.Size, len(b.Weight)))
	}
	return []*tensors.Tensor{b.Chosen.Tensors()[0], b.Rejected.Tensors()[0], vec1D(b.Weight)}
}

// VisionBradleyTerry is the Bradley–Terry objective of a vision reward model: BTLoss on the
// rewards (vision.Reward) of the chosen and rejected images, run through the tower as one
// [2·rows, …] batch. Its input is an ImagePairBatch; its metrics are BTMetrics (lm_loss stays 0:
// the tower has no language model, and cfg.LMCoef must be 0).
func VisionBradleyTerry(cfg objectivecfg.BTConfig) VisionObjective {
	return VisionObjective{
		Name:    fmt.Sprintf("vision-bradley-terry[m=%g c=%g]", cfg.Margin, cfg.CenterCoef),
		Metrics: BTMetrics,
		Build: func(scope *gm.Scope, vc visioncfg.Config, in []*Node) (*Node, map[string]*Node) {
			if len(in) != 3 {
				panic(fmt.Sprintf("objective vision-bradley-terry: %d inputs, want 3 (an ImagePairBatch)", len(in)))
			}
			if cfg.LMCoef != 0 {
				panic("objective vision-bradley-terry: lm_coef must be 0 (a vision reward model has no language model)")
			}
			rows := in[0].Shape().Dim(0)
			r := vision.Reward(scope, vc, Concatenate([]*Node{in[0], in[1]}, 0))
			return BTLoss(cfg, Slice(r, AxisRange(0, rows)), Slice(r, AxisRange(rows, 2*rows)), in[2])
		},
	}
}
