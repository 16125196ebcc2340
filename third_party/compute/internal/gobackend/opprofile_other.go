// Temper fork: see third_party/README.md.

//go:build !linux

package gobackend

import "time"

// CPU times are not measured off Linux: the op profile then has wall times only.
func processCPU() time.Duration { return 0 }

func threadCPU() time.Duration { return 0 }
