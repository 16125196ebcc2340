//go:build amd64 && goexperiment.simd

package bench

import (
	"simd/archsimd"

	"github.com/gomlx/compute/support/envutil"
)

// engineISA is the vector ISA of the engine's float32 matmul kernels, by the test its registration
// makes (third_party/compute, dot/matmul/avx512.go and avx2.go): the CPU's features, narrowed by
// GOMLX_DOT_MATMUL, GOMLX_SIMD_AVX512 and GOMLX_SIMD_AVX2. "avx512f" stands for archsimd's AVX512
// (F, CD, BW, DQ and VL together), named as `bench model --peer` names the CPU's.
func engineISA() (string, error) {
	on, err := envutil.ReadBool("GOMLX_DOT_MATMUL", true)
	if err != nil {
		return "", err
	}
	if !on {
		return "none", nil
	}
	if archsimd.X86.AVX512() {
		ok, err := envutil.ReadBool(envutil.SIMD_AVX512_Env, true)
		if err != nil {
			return "", err
		}
		if ok {
			return "avx512f", nil
		}
	}
	if archsimd.X86.AVX2() {
		ok, err := envutil.ReadBool(envutil.SIMD_AVX2_Env, true)
		if err != nil {
			return "", err
		}
		if ok {
			return "avx2", nil
		}
	}
	return "none", nil
}
