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

	var l largeFreeList
	if l.put(&Buffer{RawBytes: make([]byte, largeBufferMin-1)}) {
		t.Fatal("kept a small buffer")
	}
	n := 0
	for l.put(&Buffer{RawBytes: make([]byte, 32<<20)}) {
		n++
	}
	if n*(32<<20) > largeFreeMax || n == 0 || l.bytes != n*(32<<20) {
		t.Fatalf("kept %d buffers of 32 MiB (%d bytes) under a budget of %d", n, l.bytes, largeFreeMax)
	}
	if l.get(16<<20) != nil {
		t.Fatal("got a buffer of another size")
	}
	if l.get(32<<20) == nil || l.bytes != (n-1)*(32<<20) {
		t.Fatal("get did not pop a kept buffer")
	}
	b.Finalize()
	if b.largeFree.bytes != 0 || b.largeFree.get(len(again.RawBytes)) != nil {
		t.Fatal("finalized backend kept buffers")
	}
}
