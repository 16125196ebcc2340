// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package fastmath

import "testing"

// TestExp32SliceAVX2 reruns the slice test on the AVX2 path of an AVX-512 machine.
func TestExp32SliceAVX2(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2")
	}
	saved := hasAVX512
	hasAVX512 = false
	defer func() { hasAVX512 = saved }()
	TestExp32Slice(t)
}
