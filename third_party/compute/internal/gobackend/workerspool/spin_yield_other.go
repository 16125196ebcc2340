// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build !linux

package workerspool

import "runtime"

// yieldThread lets other goroutines run (sched_yield on Linux).
func yieldThread() {
	runtime.Gosched()
}
