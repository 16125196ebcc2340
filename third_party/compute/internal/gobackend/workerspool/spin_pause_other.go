// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build !amd64

package workerspool

// pause does nothing outside amd64 (PAUSE there).
func pause(uint32) {}
