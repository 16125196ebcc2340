# Generates third_party/compute/internal/gobackend/fusedops/decodescores512_amd64.s (the committed file is its
# output, byte for byte):
#   python3 scripts/asm/decodescores512.py > third_party/compute/internal/gobackend/fusedops/decodescores512_amd64.s
# then `make fork-diff`. The kernels' bits are checked by TestDecodeRowVectorMatchesScalar (fusedops).
# (Variants measured and not kept — masked loads instead of VINSERTF32X8, blends in the tree, the query
# doubled into a stack buffer, rows 0 and 1 in one register — are described in third_party/README.md.)
import sys
out = []
w = out.append
w("""// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

#include "textflag.h"

// The decode attention's scores with AVX-512 (flashvec512_amd64.go: groupScores512), eight keys
// at a time. A zmm accumulator holds two keys' eight lanes, [key t+p lanes 0..7 | key t+p+4 lanes
// 0..7], for one query row: each chunk c of eight floats adds the rounded products
// VMULPS(query chunk c in both halves, [key chunk c | key chunk c]) with VADDPS, chunks in order,
// from zero: lane l of each half is vecDot's lane l (no fused multiply-add). Then vecDot's tree:
// the 128-bit halves of each key's eight lanes (l and l+4) are added (VSHUFF32X4), then the pairs
// (0+4)+(1+5) and (2+6)+(3+7) (VSHUFPS), then those two: the same pairs in the same order as
// vecDotScalar, so the bits are the scalar loop's.
//
// Registers: BX keys, AX query rows, SI vis, DI scores (row r at DI + r·DX), CX blocks of eight
// keys left, R8..R15 the byte offsets of the block's eight key rows. Z0..Z11 accumulators (row r,
// pair p: Z(4r+p)), Z12..Z14 the query chunk of each row, Z16..Z19 the key pairs, Z20..Z31
// products.

// The third row's last step (VPERMPS): score k of the row is element idxA[k] + element idxB[k] of
// the pair sums (see scores3Row2).
DATA scores512IdxA<>+0(SB)/4, $0
DATA scores512IdxA<>+4(SB)/4, $8
DATA scores512IdxA<>+8(SB)/4, $2
DATA scores512IdxA<>+12(SB)/4, $10
DATA scores512IdxA<>+16(SB)/4, $4
DATA scores512IdxA<>+20(SB)/4, $12
DATA scores512IdxA<>+24(SB)/4, $6
DATA scores512IdxA<>+28(SB)/4, $14
DATA scores512IdxA<>+32(SB)/4, $0
DATA scores512IdxA<>+36(SB)/4, $0
DATA scores512IdxA<>+40(SB)/4, $0
DATA scores512IdxA<>+44(SB)/4, $0
DATA scores512IdxA<>+48(SB)/4, $0
DATA scores512IdxA<>+52(SB)/4, $0
DATA scores512IdxA<>+56(SB)/4, $0
DATA scores512IdxA<>+60(SB)/4, $0
GLOBL scores512IdxA<>(SB), RODATA|NOPTR, $64
DATA scores512IdxB<>+0(SB)/4, $1
DATA scores512IdxB<>+4(SB)/4, $9
DATA scores512IdxB<>+8(SB)/4, $3
DATA scores512IdxB<>+12(SB)/4, $11
DATA scores512IdxB<>+16(SB)/4, $5
DATA scores512IdxB<>+20(SB)/4, $13
DATA scores512IdxB<>+24(SB)/4, $7
DATA scores512IdxB<>+28(SB)/4, $15
DATA scores512IdxB<>+32(SB)/4, $0
DATA scores512IdxB<>+36(SB)/4, $0
DATA scores512IdxB<>+40(SB)/4, $0
DATA scores512IdxB<>+44(SB)/4, $0
DATA scores512IdxB<>+48(SB)/4, $0
DATA scores512IdxB<>+52(SB)/4, $0
DATA scores512IdxB<>+56(SB)/4, $0
DATA scores512IdxB<>+60(SB)/4, $0
GLOBL scores512IdxB<>(SB), RODATA|NOPTR, $64
""")

def func(nr, d):
    db = d * 4
    shift = {32: 7, 64: 8}[d]
    name = "scores%dx%dAsm" % (nr, d)
    w("")
    w("// func %s(sc *float32, ldsc int, q *float32, keys *float32, vis *int32, n int)" % name)
    w("//")
    w("// sc[r·ldsc + t] = vecDot(q row r, key row vis[t]) for the %d query rows q [%d, %d] and t < n, n a" % (nr, nr, d))
    w("// multiple of 8; key row j at keys + j·%d floats (every vis[t] checked by the caller)." % d)
    w("TEXT ·%s(SB), NOSPLIT, $0-48" % name)
    w("\tMOVQ sc+0(FP), DI")
    w("\tMOVQ ldsc+8(FP), DX")
    w("\tMOVQ q+16(FP), AX")
    w("\tMOVQ keys+24(FP), BX")
    w("\tMOVQ vis+32(FP), SI")
    w("\tMOVQ n+40(FP), CX")
    w("\tSHLQ $2, DX")
    w("\tSHRQ $3, CX")
    w("\tJEQ done")
    w("")
    w("block:")
    regs = ["R8", "R9", "R10", "R11", "R12", "R13", "R14", "R15"]
    for i, r in enumerate(regs):
        w("\tMOVLQSX %d(SI), %s" % (4 * i, r))
    for r in regs:
        w("\tSHLQ $%d, %s" % (shift, r))
    for a in range(4 * nr):
        w("\tVPXORD Z%d, Z%d, Z%d" % (a, a, a))
    for c in range(d // 8):
        off = 32 * c
        w("\t// chunk %d" % c)
        for p in range(4):
            w("\tVMOVUPS %d(BX)(%s*1), Y%d" % (off, regs[p], 16 + p))
            w("\tVINSERTF32X8 $1, %d(BX)(%s*1), Z%d, Z%d" % (off, regs[p + 4], 16 + p, 16 + p))
        for r in range(nr):
            w("\tVBROADCASTF32X8 %d(AX), Z%d" % (off + r * db, 12 + r))
        for r in range(nr):
            for p in range(4):
                w("\tVMULPS Z%d, Z%d, Z%d" % (16 + p, 12 + r, 20 + 4 * r + p))
        for r in range(nr):
            for p in range(4):
                w("\tVADDPS Z%d, Z%d, Z%d" % (20 + 4 * r + p, 4 * r + p, 4 * r + p))
    w("")
    w("\t// Rows 0 and 1: [row 0 key p | row 0 key p+4 | row 1 key p | row 1 key p+4] of lanes l + l+4")
    w("\t// (Z16+p), then the pairs of two such (Z24: p = 0, 1; Z26: p = 2, 3), then the pairs of")
    w("\t// those: [row 0 keys 0..7 | row 1 keys 0..7].")
    for p in range(4):
        w("\tVSHUFF32X4 $0x88, Z%d, Z%d, Z%d" % (4 + p, p, 16 + p))
        w("\tVSHUFF32X4 $0xDD, Z%d, Z%d, Z%d" % (4 + p, p, 20 + p))
        w("\tVADDPS Z%d, Z%d, Z%d" % (20 + p, 16 + p, 16 + p))
    w("\tVSHUFPS $0x88, Z17, Z16, Z24")
    w("\tVSHUFPS $0xDD, Z17, Z16, Z25")
    w("\tVADDPS Z25, Z24, Z24")
    w("\tVSHUFPS $0x88, Z19, Z18, Z26")
    w("\tVSHUFPS $0xDD, Z19, Z18, Z27")
    w("\tVADDPS Z27, Z26, Z26")
    w("\tVSHUFPS $0x88, Z26, Z24, Z28")
    w("\tVSHUFPS $0xDD, Z26, Z24, Z29")
    w("\tVADDPS Z29, Z28, Z28")
    w("\tVMOVUPS Y28, (DI)")
    w("\tVEXTRACTF32X8 $1, Z28, (DI)(DX*1)")
    if nr == 3:
        w("\t// Row 2: [keys 0, 4, 1, 5] (Z12) and [keys 2, 6, 3, 7] (Z14) of lanes l + l+4, their pairs")
        w("\t// (Z15), then each score's two pair sums gathered by VPERMPS and added.")
        w("\tVSHUFF32X4 $0x88, Z9, Z8, Z12")
        w("\tVSHUFF32X4 $0xDD, Z9, Z8, Z13")
        w("\tVADDPS Z13, Z12, Z12")
        w("\tVSHUFF32X4 $0x88, Z11, Z10, Z14")
        w("\tVSHUFF32X4 $0xDD, Z11, Z10, Z15")
        w("\tVADDPS Z15, Z14, Z14")
        w("\tVSHUFPS $0x88, Z14, Z12, Z15")
        w("\tVSHUFPS $0xDD, Z14, Z12, Z30")
        w("\tVADDPS Z30, Z15, Z15")
        w("\tVMOVDQU32 scores512IdxA<>(SB), Z30")
        w("\tVMOVDQU32 scores512IdxB<>(SB), Z31")
        w("\tVPERMPS Z15, Z30, Z30")
        w("\tVPERMPS Z15, Z31, Z31")
        w("\tVADDPS Z31, Z30, Z30")
        w("\tVMOVUPS Y30, (DI)(DX*2)")
    w("\tADDQ $32, SI")
    w("\tADDQ $32, DI")
    w("\tDECQ CX")
    w("\tJNE block")
    w("")
    w("done:")
    w("\tVZEROUPPER")
    w("\tRET")


for nr, d in [(3, 64), (2, 64), (3, 32), (2, 32)]:
    func(nr, d)
sys.stdout.write("\n".join(out) + "\n")
