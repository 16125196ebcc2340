package model

import (
	"fmt"
	"testing"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	gm "github.com/gomlx/gomlx/ml/model"
	"github.com/gomlx/gomlx/ml/train/optimizer"

	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/testbackend"
)

var benchShapes = []struct {
	preset     string
	batch, seq int
}{
	{"tiny", 8, 128},
	{"small", 8, 128},
	{"base", 4, 128},
}

// BenchmarkTrainStep: one AdamW step (forward, backward, update) on a [batch, seq] batch.
//
//	GOEXPERIMENT=simd go test ./algorithms/model/ -run '^$' -bench TrainStep -benchtime 10x
func BenchmarkTrainStep(b *testing.B) {
	for _, s := range benchShapes {
		b.Run(s.preset, func(b *testing.B) {
			cfg, _ := Preset(s.preset)
			store := gm.NewStore()
			if err := InitWeights(store.RootScope(), cfg, 1, 0); err != nil {
				b.Fatal(err)
			}
			opt := optimizer.Adam().LearningRate(1e-3).WeightDecay(0.01).Done()
			step := gm.MustNewExec(testbackend.Sequential(), store, func(scope *gm.Scope, tok, pos, mask *Node) *Node {
				loss := NextTokenLoss(Forward(scope, cfg, tok, pos, mask), tok, mask)
				opt.UpdateGraph(scope, tok.Graph(), loss)
				return loss
			})
			rows := randomPrompts(s.batch, cfg.Vocab, s.seq, s.seq, 1)
			tok, pos, mask := leftPadded(rows, s.seq)
			if _, err := step.Call(tok, pos, mask); err != nil { // compile + first step
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				out, err := step.Call(tok, pos, mask)
				if err != nil {
					b.Fatal(err)
				}
				out[0].FinalizeAll()
			}
			sec := b.Elapsed().Seconds()
			toks := float64(b.N * s.batch * s.seq)
			b.ReportMetric(toks/sec, "tok/s")
			b.ReportMetric(toks*cfg.TrainFLOPsPerToken(s.seq)/sec/1e9, "GFLOP/s")
		})
	}
}

// BenchmarkGenerate: greedy generation of 64 tokens for 16 prompts of 32 tokens (KV cache).
//
//	GOEXPERIMENT=simd go test ./algorithms/model/ -run '^$' -bench Generate -benchtime 3x
func BenchmarkGenerate(b *testing.B) {
	const batch, promptLen, newTokens = 16, 32, 64
	for _, preset := range []string{"tiny", "small", "base"} {
		b.Run(preset, func(b *testing.B) {
			cfg, _ := Preset(preset)
			store := gm.NewStore()
			if err := InitWeights(store.RootScope(), cfg, 1, 0); err != nil {
				b.Fatal(err)
			}
			gen, err := NewGenerator(testbackend.Sequential(), store.RootScope(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			prompts := randomPrompts(batch, cfg.Vocab, promptLen, promptLen, 2)
			opts := sample.Options{MaxNewTokens: newTokens}
			if _, err := gen.Generate(prompts, opts); err != nil { // compile
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				out, err := gen.Generate(prompts, opts)
				if err != nil {
					b.Fatal(err)
				}
				if len(out[0].Tokens) != newTokens {
					b.Fatal(fmt.Sprint("short completion ", len(out[0].Tokens)))
				}
			}
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N*batch*newTokens)/sec, "tok/s")
		})
	}
}
