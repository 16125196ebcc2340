// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64

package fusedops

import "unsafe"

// prefetchRange asks for the cache lines of [p, p+n) (PREFETCHT0, prefetch_amd64.s): the decode
// attention fetches the next work item's key and value rows while it computes the current one.
// A hint only: it reads nothing back and changes no bits; p+n must stay inside one allocation.
//
//go:noescape
func prefetchRange(p unsafe.Pointer, n uintptr)
