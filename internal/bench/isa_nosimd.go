//go:build !(amd64 && goexperiment.simd)

package bench

// engineISA: without GOEXPERIMENT=simd (or off amd64) the engine has no vector matmul kernels.
func engineISA() (string, error) { return "none", nil }
