package vision

import (
	"fmt"

	"github.com/gomlx/compute"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX graph code reads best unqualified.
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/imageproc"
	"github.com/temperml/temper/algorithms/vision/visioncfg"
)

// Encoder runs batched inference of a tower whose weights are under scope: one compiled program
// per batch size (GoMLX caches them).
type Encoder struct {
	cfg   visioncfg.Config
	scope *gm.Scope
	exec  *gm.Exec
}

// NewEncoder compiles nothing yet: the first Encode of each batch size does.
func NewEncoder(backend compute.Backend, scope *gm.Scope, cfg visioncfg.Config) (*Encoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := &Encoder{cfg: cfg, scope: scope}
	var err error
	e.exec, err = gm.NewExec(backend, scope.Store(), func(_ *gm.Scope, pixels *Node) (*Node, *Node) {
		return Encode(scope, cfg, pixels)
	})
	if err != nil {
		return nil, fmt.Errorf("vision: new encoder: %w", err)
	}
	e.exec.SetMaxCache(16)
	return e, nil
}

// Output holds one batch's results, row-major: Pooled [batch·d], Patches [batch·patches·d].
type Output struct {
	Batch, Patches, D int
	Pooled            []float32
	PatchOut          []float32
}

// PooledOf returns image i's pooled vector [d].
func (o Output) PooledOf(i int) []float32 { return o.Pooled[i*o.D : (i+1)*o.D] }

// PatchesOf returns image i's per-patch outputs [patches·d].
func (o Output) PatchesOf(i int) []float32 {
	n := o.Patches * o.D
	return o.PatchOut[i*n : (i+1)*n]
}

// Encode runs the tower on a batch of preprocessed images, each [channels, image_size,
// image_size] (imageproc.Preprocess with the checkpoint's processor config).
func (e *Encoder) Encode(images []imageproc.Pixels) (out Output, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("vision: encode: %v", r)
		}
	}()
	c := e.cfg
	if len(images) == 0 {
		return Output{}, fmt.Errorf("vision: encode: no images")
	}
	plane := c.Channels * c.ImageSize * c.ImageSize
	flat := make([]float32, 0, len(images)*plane)
	for i, im := range images {
		if im.C != c.Channels || im.H != c.ImageSize || im.W != c.ImageSize || len(im.Values) != plane {
			return Output{}, fmt.Errorf("vision: encode: image %d is %dx%dx%d (%d values), want %dx%dx%d: preprocess with size %d",
				i, im.C, im.H, im.W, len(im.Values), c.Channels, c.ImageSize, c.ImageSize, c.ImageSize)
		}
		flat = append(flat, im.Values...)
	}
	in := tensors.FromFlatDataAndDimensions(flat, len(images), c.Channels, c.ImageSize, c.ImageSize)
	res, err := e.exec.Call(in)
	if err != nil {
		return Output{}, fmt.Errorf("vision: encode: %w", err)
	}
	out = Output{Batch: len(images), Patches: c.Patches(), D: c.DModel}
	if out.Pooled, err = tensors.CopyFlatData[float32](res[0]); err != nil {
		return Output{}, fmt.Errorf("vision: encode: %w", err)
	}
	if out.PatchOut, err = tensors.CopyFlatData[float32](res[1]); err != nil {
		return Output{}, fmt.Errorf("vision: encode: %w", err)
	}
	return out, nil
}
