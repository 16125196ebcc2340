// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build !amd64

package fusedops

import "unsafe"

// prefetchRange is a no-op where the fork has no prefetch instruction (prefetch_amd64.s).
func prefetchRange(p unsafe.Pointer, n uintptr) {}
