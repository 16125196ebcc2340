# Generates third_party/compute/internal/gobackend/fusedops/decodeaccum512_amd64.s (the committed file is its
# output, byte for byte):
#   python3 scripts/asm/decodeaccum512.py > third_party/compute/internal/gobackend/fusedops/decodeaccum512_amd64.s
# then `make fork-diff`. The kernels' bits are checked by TestDecodeRowVectorMatchesScalar (fusedops).
import sys
out = []
w = out.append
w("""// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

#include "textflag.h"

// The decode attention's weighted sum of values with AVX-512 (flashvec512_amd64.go:
// groupAccumulate512): the two or three query rows of output stay in zmm registers (head_dim 32 or
// 64: two or four per row) over all the visible keys, and each value row is read once, whole, for
// all of them, in increasing key order. Each output element is vecAxpy's chain: o[i] += the
// rounded product p[t]·v[i] (VMULPS, then VADDPS: no fused multiply-add), key after key, so the
// bits are the scalar loop's. (The Go version of this loop spilled its accumulators: the compiler
// allocates sixteen vector registers.)
//
// Registers: DI output rows, BX values, SI vis, R9 the weights of row 0 (row r at R9 + r·R10), CX
// keys left, R8 the byte offset of the key's value row. Z0..Z11 accumulators (row r, 16 columns i:
// Z(r·d/16 + i)), Z12..Z14 the broadcast weights, Z16..Z19 the value row, Z20..Z31 products.""")

def func(nr, d):
    db = d * 4
    shift = {32: 7, 64: 8}[d]
    nv = d // 16
    name = "accum%dx%dAsm" % (nr, d)
    w("")
    w("// func %s(o *float32, p *float32, ldp int, values *float32, vis *int32, n int)" % name)
    w("//")
    w("// o[r·%d + i] += p[r·ldp + t]·values[vis[t]·%d + i] for the %d rows r, i < %d and t = 0, 1, …, n-1 in" % (d, d, nr, d))
    w("// order (every vis[t] checked by the caller).")
    w("TEXT ·%s(SB), NOSPLIT, $0-48" % name)
    w("\tMOVQ o+0(FP), DI")
    w("\tMOVQ p+8(FP), R9")
    w("\tMOVQ ldp+16(FP), R10")
    w("\tMOVQ values+24(FP), BX")
    w("\tMOVQ vis+32(FP), SI")
    w("\tMOVQ n+40(FP), CX")
    w("\tSHLQ $2, R10")
    for r in range(nr):
        for i in range(nv):
            w("\tVMOVUPS %d(DI), Z%d" % (r * db + 64 * i, r * nv + i))
    w("\tTESTQ CX, CX")
    w("\tJEQ store")
    w("")
    w("key:")
    w("\tMOVLQSX (SI), R8")
    w("\tSHLQ $%d, R8" % shift)
    for i in range(nv):
        w("\tVMOVUPS %d(BX)(R8*1), Z%d" % (64 * i, 16 + i))
    w("\tVBROADCASTSS (R9), Z12")
    if nr >= 2:
        w("\tVBROADCASTSS (R9)(R10*1), Z13")
    if nr >= 3:
        w("\tVBROADCASTSS (R9)(R10*2), Z14")
    for r in range(nr):
        for i in range(nv):
            w("\tVMULPS Z%d, Z%d, Z%d" % (16 + i, 12 + r, 20 + r * nv + i))
    for r in range(nr):
        for i in range(nv):
            w("\tVADDPS Z%d, Z%d, Z%d" % (20 + r * nv + i, r * nv + i, r * nv + i))
    w("\tADDQ $4, SI")
    w("\tADDQ $4, R9")
    w("\tDECQ CX")
    w("\tJNE key")
    w("")
    w("store:")
    for r in range(nr):
        for i in range(nv):
            w("\tVMOVUPS Z%d, %d(DI)" % (r * nv + i, r * db + 64 * i))
    w("\tVZEROUPPER")
    w("\tRET")

for nr, d in [(3, 64), (2, 64), (3, 32), (2, 32)]:
    func(nr, d)
sys.stdout.write("\n".join(out) + "\n")
