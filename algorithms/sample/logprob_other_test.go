//go:build !goexperiment.simd || !amd64

package sample

import "testing"

// forEachExpWidth runs f once: this build has no vector path.
func forEachExpWidth(t *testing.T, f func(t *testing.T)) { f(t) }
