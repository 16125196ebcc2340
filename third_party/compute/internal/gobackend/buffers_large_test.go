// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package gobackend

import (
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
)

// TestLargeFreeList: a freed large buffer is handed out again for the same bucket (whatever the
// garbage collector does), small ones are not kept, the list stops at its byte budget, and a
// finalized backend keeps nothing.
func TestLargeFreeList(t *testing.T) {
	b := newDefaultBackend()
	large := shapes.Make(dtypes.Float32, 64<<10) // 256 KiB
	buf, err := b.GetBuffer(large)
	if err != nil {
		t.Fatal(err)
	}
	raw := &buf.RawBytes[0]
	b.PutBuffer(buf)
	again, err := b.GetBuffer(large)
	if err != nil {
		t.Fatal(err)
	}
	if &again.RawBytes[0] != raw {
		t.Fatal("a freed large buffer was not reused")
	}
	if len(again.Flat.([]float32)) != 64<<10 || !again.InUse {
		t.Fatalf("reused buffer not set up: len %d, in use %v", len(again.Flat.([]float32)), again.InUse)
	}

	defer func(saved int) { largeFreeMax = saved }(largeFreeMax)
	largeFreeMax = 256 << 20 // the eviction below allocates twice the budget
	var l largeFreeList
	if l.put(&Buffer{RawBytes: make([]byte, largeBufferMin-1)}) {
		t.Fatal("kept a small buffer")
	}
	if l.put(&Buffer{RawBytes: make([]byte, largeFreeMax+1)}) {
		t.Fatal("kept a buffer over the whole budget")
	}
	first := &Buffer{RawBytes: make([]byte, 32<<20)}
	l.put(first)
	for range largeFreeMax / (32 << 20) * 2 { // twice the budget: the oldest are evicted
		if !l.put(&Buffer{RawBytes: make([]byte, 32<<20)}) {
			t.Fatal("refused a buffer instead of evicting an old one")
		}
	}
	if kept := len(l.bySize[32<<20]); l.bytes > largeFreeMax || l.bytes != kept*(32<<20) {
		t.Fatalf("kept %d bytes in %d buffers under a budget of %d", l.bytes, kept, largeFreeMax)
	}
	if l.holds(first) {
		t.Fatal("the longest-kept buffer was not evicted")
	}
	l.put(&Buffer{RawBytes: make([]byte, 16<<20)}) // evicts one more 32 MiB buffer
	if got := l.get(16 << 20); got == nil || l.holds(got) {
		t.Fatal("get did not pop the 16 MiB buffer")
	}
	if l.get(8<<20) != nil {
		t.Fatal("got a buffer of another size")
	}
	before := l.bytes
	if l.get(32<<20) == nil || l.bytes != before-(32<<20) {
		t.Fatal("get did not pop a kept buffer")
	}
	b.Finalize()
	if b.largeFree.bytes != 0 || b.largeFree.get(len(again.RawBytes)) != nil {
		t.Fatal("finalized backend kept buffers")
	}
}
