// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

//go:build amd64 && goexperiment.simd

package matmul

import (
	"sync"
	"sync/atomic"

	"simd/archsimd"

	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/support/envutil"
)

// smallRegTile8x32PrAsm is smallRegTile8x32Asm that also prefetches, during its first pk values of
// k, the two cache lines at pf + i·ldr for i < pk (avx512_tile_amd64.s). Same bits.
//
//go:noescape
func smallRegTile8x32PrAsm(l *float32, ldl int, r *float32, ldr int, o *float32, ldo int, k int, pf *float32, pk int)

// smallRegStrip computes output columns j…j+31 of one batch item (the decode products' 32-column
// strip; l [M, K], r [K, N], o [M, N]) with the bits of smallRegColumns, and prefetches the K rows of
// the strip at column next (if next ≥ 0 and that strip lies inside r) while it does: row tile t of
// the T eight-row tiles prefetches rows [t·K/T, (t+1)·K/T), so the prefetches are spread over the
// whole strip instead of crowding one tile. A decode step's weights come from memory and their
// rows lie N floats apart, which the hardware prefetchers do not follow.
func smallRegStrip(l, r, o []float32, M, N, K, j, next int) {
	M8 := M - M%8
	T := M8 / 8
	if K == 0 || T == 0 || next < 0 || next+32 > N {
		for i := 0; i < M8; i += 8 {
			smallRegTile8x32(l[i*K:(i+8)*K], r, o[i*N:(i+8)*N], j, N, K)
		}
	} else {
		_ = r[(K-1)*N+j+31]
		_ = r[(K-1)*N+next+31]
		for t := range T {
			i := 8 * t
			li, oi := l[i*K:(i+8)*K], o[i*N:(i+8)*N]
			_ = li[8*K-1]
			_ = oi[7*N+j+31]
			k0, k1 := t*K/T, (t+1)*K/T
			var pf *float32
			if k1 > k0 {
				pf = &r[k0*N+next]
			}
			smallRegTile8x32PrAsm(&li[0], K, &r[j], N, &oi[j], N, K, pf, k1-k0)
		}
	}
	if M8 < M { // the last rows: smallRegColumns' 4-row tiles and rows on this strip
		smallRegColumns(l[M8*K:], r, o[M8*N:], M-M8, N, K, j, j+32)
	}
}

// stripRange is a range [lo, hi) of 32-column strips taken from both ends: its owner from the front
// (ascending, prefetching the strip after), other workers from the back once theirs are done
// (descending, prefetching the strip before). Packed lo | hi<<32 so that one compare-and-swap takes a strip.
type stripRange struct {
	v atomic.Uint64
	_ [56]byte // one cache line per range
}

func (s *stripRange) set(lo, hi int) { s.v.Store(uint64(lo) | uint64(hi)<<32) }

// front takes the first strip (and reports the one after it, if still there, to prefetch), or -1.
func (s *stripRange) front() (int, int) {
	for {
		v := s.v.Load()
		lo, hi := int(uint32(v)), int(v>>32)
		if lo >= hi {
			return -1, -1
		}
		if s.v.CompareAndSwap(v, uint64(lo+1)|uint64(hi)<<32) {
			if lo+1 < hi {
				return lo, lo + 1
			}
			return lo, -1
		}
	}
}

// back takes the last strip (and reports the one before it, if still there), or -1.
func (s *stripRange) back() (int, int) {
	for {
		v := s.v.Load()
		lo, hi := int(uint32(v)), int(v>>32)
		if lo >= hi {
			return -1, -1
		}
		if s.v.CompareAndSwap(v, uint64(lo)|uint64(hi-1)<<32) {
			if hi-2 >= lo {
				return hi - 1, hi - 2
			}
			return hi - 1, -1
		}
	}
}

// avx512DecodeByStrips is avx512SmallRegByColumns for one batch item (a decode step's products):
// the 32-column strips are cut into one contiguous range per worker; each worker computes its own
// range front to back, prefetching each next strip while it computes the current one
// (smallRegStrip), then takes strips from the back of the others' ranges until none is left. So
// every worker streams through contiguous weights and the load evens out to one strip whatever time
// a worker joins; the strips computed cold are each range's first and the first one a worker takes
// from the back of another range (later ones there are prefetched backwards). (Items of eight strips taken
// in turn by the workers, as regByColumns does, left each item's first strip cold and the last
// item's worker alone.) The columns past the last whole strip are one more item. Every element is
// computed by the same tile as in avx512SmallRegFloat32: same bits.
func avx512DecodeByStrips(backend *gobackend.Backend, lhs, rhs []float32, M, N, K int, output []float32, workers int) {
	S := N / 32
	st := getStripState(workers)
	defer stripStates.Put(st)
	ranges, arrivals, tail := st.ranges, &st.arrivals, &st.tail // tail: the columns past the whole strips, taken once
	for w := range workers {
		ranges[w].set(w*S/workers, (w+1)*S/workers)
	}
	l, r, o := lhs[:M*K], rhs[:K*N], output[:M*N]
	backend.Workers.Saturate(func() {
		defer archsimd.ClearAVXUpperBits()
		me := int(arrivals.Add(1) - 1)
		// drain computes the strips take hands out until none is left, each prefetching the one
		// take reports next.
		drain := func(take func() (s, next int)) {
			for s, next := take(); s >= 0; s, next = take() {
				nj := -1
				if next >= 0 {
					nj = 32 * next
				}
				smallRegStrip(l, r, o, M, N, K, 32*s, nj)
			}
		}
		if me < workers {
			drain(ranges[me].front)
		}
		if 32*S < N && tail.CompareAndSwap(false, true) {
			smallRegColumns(l, r, o, M, N, K, 32*S, N)
		}
		for k := 1; k <= workers; k++ {
			drain(ranges[(me+k)%workers].back)
		}
	})
}

// decodeByStrips is false when GOMLX_DECODE_STRIPS=false (the previous split, for measurements).
var decodeByStrips = envutil.MustReadBool("GOMLX_DECODE_STRIPS", true)

// stripState is avx512DecodeByStrips' shared state for one product, pooled (a decode step runs a
// few hundred products).
type stripState struct {
	ranges   []stripRange
	arrivals atomic.Int64
	tail     atomic.Bool
}

var stripStates sync.Pool

// getStripState returns a reset state with one range per worker.
func getStripState(workers int) *stripState {
	st, _ := stripStates.Get().(*stripState)
	if st == nil {
		st = &stripState{}
	}
	if cap(st.ranges) < workers {
		st.ranges = make([]stripRange, workers)
	}
	st.ranges = st.ranges[:workers]
	st.arrivals.Store(0)
	st.tail.Store(false)
	return st
}
