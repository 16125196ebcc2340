package tpu

import (
	"fmt"
	"time"

	"github.com/temperml/temper/algorithms/model"
)

// Decoder is a continuous batch on the runtime's model (model.Decoder): rows join with a batched
// prefill, advance one token per Step and leave between steps. Each call runs under the runtime's
// lock and watchdog, so training or other generation interleaves between steps; the weights are
// read at every call. Generated tokens count in Stats().Generate.
type Decoder struct {
	r *Runtime
	d *model.Decoder
}

// NewDecoder starts an empty continuous batch.
func (r *Runtime) NewDecoder() (*Decoder, error) {
	const op = "new decoder"
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usable(op); err != nil {
		return nil, err
	}
	var d *model.Decoder
	err := r.guard(op, func() error {
		var err error
		d, err = model.NewDecoder(r.backend, r.scope, r.cfg)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Decoder{r: r, d: d}, nil
}

// Config is the model's configuration.
func (d *Decoder) Config() model.Config { return d.r.cfg }

// Join prefills prompts as new rows and returns their ids and next-token logits
// [len(prompts)·vocab].
func (d *Decoder) Join(prompts [][]int) (ids []int, logits []float32, err error) {
	r := d.r
	r.mu.Lock()
	defer r.mu.Unlock()
	var sec float64
	err = r.guard("decoder join", func() error {
		start := time.Now()
		ids, logits, err = d.d.Join(prompts)
		sec = time.Since(start).Seconds()
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	flops := 0.0
	for _, p := range prompts {
		flops += GenerateFLOPs(r.cfg, len(p), 1)
	}
	r.record(&r.stats.Generate, len(prompts), sec, flops)
	return ids, logits, nil
}

// Step feeds tokens[i] to row ids[i] (every live row once) and returns the next-token logits
// [len(ids)·vocab] in the order of ids.
func (d *Decoder) Step(ids, tokens []int) (logits []float32, err error) {
	r := d.r
	r.mu.Lock()
	defer r.mu.Unlock()
	flops := 0.0
	for _, id := range ids {
		if n, ok := d.d.Len(id); ok {
			flops += r.cfg.ForwardFLOPsPerToken(n + 1)
		}
	}
	var sec float64
	err = r.guard("decoder step", func() error {
		start := time.Now()
		logits, err = d.d.Step(ids, tokens)
		sec = time.Since(start).Seconds()
		return err
	})
	if err != nil {
		return nil, err
	}
	r.record(&r.stats.Generate, len(ids), sec, flops)
	return logits, nil
}

// Leave removes row id from the batch.
func (d *Decoder) Leave(id int) error {
	d.r.mu.Lock()
	defer d.r.mu.Unlock()
	if err := d.d.Leave(id); err != nil {
		return fmt.Errorf("tpu: %w", err)
	}
	return nil
}

// Shape is the batch's padded layout: lanes and cache columns.
func (d *Decoder) Shape() (lanes, cols int) {
	d.r.mu.Lock()
	defer d.r.mu.Unlock()
	return d.d.Shape()
}

// Close releases the batch's cache and executables.
func (d *Decoder) Close() {
	d.r.mu.Lock()
	defer d.r.mu.Unlock()
	if d.r.closed || d.r.broken != nil {
		return // the backend is gone or a stuck execution may still use the buffers
	}
	d.d.Close()
}
