// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package matmul

import (
	"simd/archsimd"
	"sync"

	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/internal/gobackend/dot"
	"github.com/gomlx/compute/support/envutil"
)

// The panel kernel is the float32 packing ("large") kernel restructured: the same sums, with less
// memory traffic around them.
//
// What stays as in avx2LargeFloat32/avx512LargeFloat32, so every output element has the same bits:
// the contracting axis is cut into panels of PanelContractingSize (128) columns; over each panel an
// element is one fused multiply-add chain in k order starting from zero; the first panel's sum is
// stored, each later one added to the output (panel sum + output).
//
// What changes:
//   - a register tile of 6 × 16 (AVX2, twelve accumulators) or 8 × 32 (AVX-512, sixteen) instead of
//     4 × 16 / 4 × 32 (eight): a fused multiply-add has a latency of four or more cycles and two issue
//     per cycle, so eight chains leave the units idle part of the time;
//   - the lhs is read in place (six or eight row pointers), not packed: it needs no copy per panel;
//   - the tile writes (or adds) its panel sum straight into the output instead of a packed output
//     panel that a second pass then copies or adds;
//   - loop order: column strips of the packed rhs outside, row tiles inside, so the strip (panel ×
//     16 or 32 columns, 8 or 16 KiB) stays in L1 while the lhs rows stream through it.
type panelKernel struct {
	rows, cols int // register tile
	kc         int // contracting panel: the packing kernel's PanelContractingSize (the same sums)
	mc, nc     int // lhs rows and rhs columns per block
	// tile computes rows × cols outputs over k contracting columns: lhs rows at l with stride ldl, rhs
	// packed k-major (cols per k) at r; o = sum (add 0) or sum + o (add 1), row stride ldo.
	tile func(l *float32, ldl int, r *float32, o *float32, ldo int, k int, add int)
	// storeOnly: tile only stores (add is always 0); sums to add go through the scratch tile.
	storeOnly bool
}

// panelKernelEnabled routes float32 products that the packing kernel would take to the panel kernel;
// GOMLX_MATMUL_PANEL=false turns it off (to measure one against the other: their results are the
// same bits).
var panelKernelEnabled = envutil.MustReadBool("GOMLX_MATMUL_PANEL", true)

// avx2PanelKernel is the AVX2 panel kernel.
var avx2PanelKernel = panelKernel{rows: 6, cols: 16, kc: 128, mc: 96, nc: 512, tile: avx2PanelTile6x16Asm}

// avx512PanelKernel is the AVX-512 panel kernel: the small kernel's 8 × 32 register tile (already in
// use for decode and small products, each accumulator one fused multiply-add chain from zero) run
// over one contracting panel at a time with the packed rhs strip as its right side (row stride 32).
// That tile only stores, so later panels' sums go through the scratch tile and are added in Go.
var avx512PanelKernel = panelKernel{rows: 8, cols: 32, kc: 128, mc: 96, nc: 512, tile: avx512PanelTile8x32, storeOnly: true}

func avx512PanelTile8x32(l *float32, ldl int, r *float32, o *float32, ldo int, k int, _ int) {
	smallRegTile8x32Asm(l, ldl, r, 32, o, ldo, k)
}

// panelScratch is one worker's buffers: the packed rhs block, a zero-padded copy of the last rows
// of lhs when they do not fill a tile, and one output tile for the edges.
type panelScratch struct {
	packedRef, lhsRef, tileRef *gobackend.Buffer
	packed, lhs, tile          []float32
}

func (k *panelKernel) newScratch(backend *gobackend.Backend) (*panelScratch, bool) {
	s := &panelScratch{}
	var ok bool
	if s.packedRef, s.packed, ok = GetBuffer[float32](backend, k.kc*k.nc); !ok {
		return nil, false
	}
	if s.lhsRef, s.lhs, ok = GetBuffer[float32](backend, k.rows*k.kc); !ok {
		ReleaseBuffer(s.packedRef)
		return nil, false
	}
	if s.tileRef, s.tile, ok = GetBuffer[float32](backend, k.rows*k.cols); !ok {
		ReleaseBuffer(s.packedRef)
		ReleaseBuffer(s.lhsRef)
		return nil, false
	}
	return s, true
}

func (s *panelScratch) release() {
	ReleaseBuffer(s.packedRef)
	ReleaseBuffer(s.lhsRef)
	ReleaseBuffer(s.tileRef)
}

// run computes output = lhs · rhs for every batch item (layouts as the packing kernel's), split
// across the backend's workers by batch items, or by rows or columns of one product. How the work is
// split does not change any element's sums.
func (k *panelKernel) run(backend *gobackend.Backend, layout dot.Layout, lhs, rhs []float32,
	batchSize, M, N, K int, output []float32) {
	defer archsimd.ClearAVXUpperBits()
	if K == 0 {
		clear(output[:batchSize*M*N])
		return
	}
	workers := 1
	if backend.Workers != nil {
		workers = backend.Workers.AdjustedMaxParallelism()
	}
	items := k.split(batchSize, M, N, workers)
	if len(items) == 1 {
		s, ok := k.newScratch(backend)
		if !ok {
			return
		}
		defer s.release()
		k.runItem(layout, lhs, rhs, output, M, N, K, items[0], s)
		return
	}
	work := make(chan workItem, len(items))
	for _, it := range items {
		work <- it
	}
	close(work)
	var mu sync.Mutex
	backend.Workers.Saturate(func() {
		s, ok := k.newScratch(backend)
		if !ok {
			return
		}
		defer s.release()
		for {
			mu.Lock()
			it, more := <-work
			mu.Unlock()
			if !more {
				return
			}
			k.runItem(layout, lhs, rhs, output, M, N, K, it, s)
		}
	})
}

// split cuts the work into about one item per worker: whole batch items when there are enough of
// them, else row ranges (multiples of the tile's rows) or column ranges (multiples of its columns)
// of each batch item, whichever axis is longer.
func (k *panelKernel) split(batchSize, M, N, workers int) []workItem {
	if workers <= 1 {
		return []workItem{{0, batchSize, 0, M, 0, N}}
	}
	if batchSize >= workers {
		var items []workItem
		step := (batchSize + workers - 1) / workers
		for b := 0; b < batchSize; b += step {
			items = append(items, workItem{b, min(b+step, batchSize), 0, M, 0, N})
		}
		return items
	}
	parts := (workers + batchSize - 1) / batchSize
	var items []workItem
	for b := range batchSize {
		if M >= N {
			step := max(k.rows, (M+parts-1)/parts/k.rows*k.rows)
			for i := 0; i < M; i += step {
				items = append(items, workItem{b, b + 1, i, min(i+step, M), 0, N})
			}
		} else {
			step := max(k.cols, (N+parts-1)/parts/k.cols*k.cols)
			for j := 0; j < N; j += step {
				items = append(items, workItem{b, b + 1, 0, M, j, min(j+step, N)})
			}
		}
	}
	return items
}

func (k *panelKernel) runItem(layout dot.Layout, lhs, rhs, output []float32, M, N, K int, it workItem, s *panelScratch) {
	for b := it.batchStart; b < it.batchEnd; b++ {
		k.product(layout, lhs[b*M*K:(b+1)*M*K], rhs[b*K*N:(b+1)*K*N], output[b*M*N:(b+1)*M*N],
			N, K, it.lhsRowStart, it.lhsRowEnd, it.rhsColStart, it.rhsColEnd, s)
	}
}

// product computes rows [r0, r1) × columns [c0, c1) of one batch item's output.
func (k *panelKernel) product(layout dot.Layout, lhs, rhs, out []float32, N, K, r0, r1, c0, c1 int, s *panelScratch) {
	R, C := k.rows, k.cols
	for jc := c0; jc < c1; jc += k.nc {
		nc := min(k.nc, c1-jc)
		for pc := 0; pc < K; pc += k.kc {
			kc := min(k.kc, K-pc)
			if layout == dot.LayoutNonTransposed {
				avx2PackRHSNonTransposed(rhs, s.packed, pc, jc, N, kc, nc, C)
			} else {
				unsafePackLHS(rhs, s.packed, jc, pc, K, nc, kc, C)
			}
			add := 0
			if pc > 0 {
				add = 1
			}
			for ic := r0; ic < r1; ic += k.mc {
				mc := min(k.mc, r1-ic)
				full := mc - mc%R
				if full < mc { // the last rows, zero-padded to a whole tile
					clear(s.lhs[:R*kc])
					for i := range mc - full {
						copy(s.lhs[i*kc:(i+1)*kc], lhs[(ic+full+i)*K+pc:(ic+full+i)*K+pc+kc])
					}
				}
				for jr := 0; jr < nc; jr += C {
					strip := &s.packed[jr*kc]
					cols := min(C, nc-jr)
					for ir := 0; ir < full; ir += R {
						row := ic + ir
						if cols == C && (add == 0 || !k.storeOnly) {
							k.tile(&lhs[row*K+pc], K, strip, &out[row*N+jc+jr], N, kc, add)
							continue
						}
						k.tile(&lhs[row*K+pc], K, strip, &s.tile[0], C, kc, 0)
						k.edge(s.tile, out[row*N+jc+jr:], R, cols, N, add)
					}
					if full < mc {
						k.tile(&s.lhs[0], kc, strip, &s.tile[0], C, kc, 0)
						k.edge(s.tile, out[(ic+full)*N+jc+jr:], mc-full, cols, N, add)
					}
				}
			}
		}
	}
}

// edge stores (add 0) or adds (add 1: sum + output, as the tiles do) the first rows × cols of a tile
// computed into scratch.
func (k *panelKernel) edge(tile, out []float32, rows, cols, ldo, add int) {
	for i := range rows {
		t := tile[i*k.cols : i*k.cols+cols]
		o := out[i*ldo : i*ldo+cols]
		if add == 0 {
			copy(o, t)
			continue
		}
		j := 0
		for ; j+8 <= cols; j += 8 {
			v := archsimd.LoadFloat32x8((*[8]float32)(t[j : j+8]))
			v.Add(archsimd.LoadFloat32x8((*[8]float32)(o[j : j+8]))).Store((*[8]float32)(o[j : j+8]))
		}
		for ; j < cols; j++ {
			o[j] = t[j] + o[j]
		}
	}
}
