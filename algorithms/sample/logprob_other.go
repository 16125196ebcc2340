//go:build !goexperiment.simd || !amd64

package sample

// logProbVector has no vector path in this build (no GOEXPERIMENT=simd, or not amd64): LogProb
// uses logProbScalar.
func logProbVector(logits []float32, tok int) (float64, bool) { return 0, false }
