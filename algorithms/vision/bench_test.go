package vision

import (
	"testing"

	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/testbackend"
	"github.com/temperml/temper/algorithms/vision/visioncfg"
)

// BenchmarkEncode: batched inference of the trial presets (batch 8), compiled once.
//
//	go test -run XXX -bench BenchmarkEncode -benchtime 5x ./algorithms/vision/
func BenchmarkEncode(b *testing.B) {
	for _, name := range []string{"tiny", "small"} {
		b.Run(name, func(b *testing.B) {
			cfg, err := visioncfg.Preset(name)
			if err != nil {
				b.Fatal(err)
			}
			store := gm.NewStore()
			if err := InitWeights(store.RootScope(), cfg, 1); err != nil {
				b.Fatal(err)
			}
			enc, err := NewEncoder(testbackend.Sequential(), store.RootScope(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			px := randomPixels(cfg, 8, 3)
			if _, err := enc.Encode(px); err != nil { // compile outside the timing
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := enc.Encode(px); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(8*b.N)/b.Elapsed().Seconds(), "images/s")
			b.ReportMetric(cfg.ForwardFLOPsPerImage()*float64(8*b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}
