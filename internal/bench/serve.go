package bench

import (
	"context"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/internal/serve"
	"github.com/temperml/temper/tpu"
)

// Serve is `temper bench serve`: the OpenAI-compatible server's aggregate tokens/s with 1, 8 and 32
// (or clients) concurrent streaming clients against the same model's in-process batched generation,
// for each preset; progress gets a line per measurement.
func Serve(ctx context.Context, presets []string, clients []int, tokens, repeats int, progress func(string)) (serve.BenchReport, error) {
	return serve.Bench(ctx, serve.BenchOptions{Presets: presets, Clients: clients, Tokens: tokens, Repeats: repeats, Progress: progress,
		Open: func(preset string) (serve.BenchRuntime, func(), error) {
			cfg, err := model.Preset(preset)
			if err != nil {
				return nil, nil, err
			}
			rt, err := tpu.New(tpu.Options{Model: cfg, Seed: 1})
			if err != nil {
				return nil, nil, err
			}
			return serveRuntime{rt}, func() { _ = rt.Close() }, nil
		}})
}

// serveRuntime is serve.BenchRuntime on a tpu.Runtime.
type serveRuntime struct{ rt *tpu.Runtime }

func (b serveRuntime) Config() model.Config { return b.rt.Config() }

func (b serveRuntime) NewEngine() (serve.Engine, func(), error) {
	d, err := b.rt.NewDecoder()
	if err != nil {
		return nil, nil, err
	}
	return d, d.Close, nil
}

func (b serveRuntime) Generate(prompts [][]int, opts sample.Options) ([]model.Completion, error) {
	return b.rt.Generate(prompts, opts)
}
