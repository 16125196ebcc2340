package tpu

import (
	"fmt"
	"time"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/sample"
)

// Generate samples a completion per prompt with algorithms/model's Generator (KV cache; one
// prefill and one decode executable per (batch, prompt, cache) bucket, kept across calls). It sees
// the current weights, so it follows training.
func (r *Runtime) Generate(prompts [][]int, opts sample.Options) ([]model.Completion, error) {
	return r.generate("generate", prompts, opts, false)
}

// GenerateUncached is the reference path for benchmarks and checks: the same sampling, but every
// new token recomputes the full forward over the whole [batch, cache] buffer.
func (r *Runtime) GenerateUncached(prompts [][]int, opts sample.Options) ([]model.Completion, error) {
	return r.generate("generate_uncached", prompts, opts, true)
}

// genBucket names the Generator's executables by its padding (model.GenerateShape).
func genBucket(prompts [][]int, maxNew int, uncached bool) string {
	longest := 0
	for _, p := range prompts {
		longest = max(longest, len(p))
	}
	b, p, s := model.GenerateShape(len(prompts), longest, maxNew)
	if uncached {
		return fmt.Sprintf("%dx%d", b, s)
	}
	return fmt.Sprintf("%dx%dx%d", b, p, s)
}

func (r *Runtime) generate(op string, prompts [][]int, opts sample.Options, uncached bool) ([]model.Completion, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.usable(op); err != nil {
		return nil, err
	}
	if len(prompts) == 0 {
		return nil, fmt.Errorf("tpu: %s: no prompts", op)
	}
	if err := opts.Validate(len(prompts)); err != nil {
		return nil, fmt.Errorf("tpu: %s: %w", op, err)
	}
	for i, p := range prompts {
		if len(p) == 0 {
			return nil, fmt.Errorf("tpu: %s: prompt %d is empty", op, i)
		}
	}
	var out []model.Completion
	var sec float64
	err := r.guard(op, func() error {
		if r.gen == nil {
			gen, err := model.NewGenerator(r.backend, r.scope, r.cfg)
			if err != nil {
				return err
			}
			r.gen = gen
		}
		var err error
		start := time.Now()
		if uncached {
			out, err = r.gen.GenerateUncached(prompts, opts)
		} else {
			out, err = r.gen.Generate(prompts, opts)
		}
		if err != nil {
			return err
		}
		// Counted only once the Generator has accepted the inputs (and so compiled the bucket).
		r.cache.count(CacheKey{op, genBucket(prompts, opts.MaxNewTokens, uncached)})
		sec = time.Since(start).Seconds()
		return nil
	})
	if err != nil {
		return nil, err
	}
	tokens, flops := 0, 0.0
	for i, c := range out {
		tokens += len(c.Tokens)
		flops += GenerateFLOPs(r.cfg, len(prompts[i]), len(c.Tokens))
	}
	r.record(&r.stats.Generate, tokens, sec, flops)
	return out, nil
}

// GenerateFLOPs is the model FLOPs of generating newTokens after a prompt of promptLen tokens with
// a KV cache: the prefill (which yields the first token; mean context promptLen/2) plus one decode
// step per further token at its context length (mean promptLen + newTokens/2). The uncached path
// does more work for the same result; its rates are reported against these useful FLOPs.
func GenerateFLOPs(cfg model.Config, promptLen, newTokens int) float64 {
	prefill := float64(promptLen) * cfg.ForwardFLOPsPerToken((promptLen+1)/2)
	decode := float64(max(newTokens-1, 0)) * cfg.ForwardFLOPsPerToken(promptLen+newTokens/2)
	return prefill + decode
}
