// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package fusedops

import (
	"math"
	"sync/atomic"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/fastmath"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/internal/gobackend/dot/matmul"
	"github.com/gomlx/compute/shapes"
	"github.com/pkg/errors"
)

// Blocked (flash-style) attention: FusedScaledDotProductAttention requests that carry a KeyMask
// (see compute.ScaledDotProductAttentionConfig) run here, forward and backward, without ever
// holding a [seq × seq] score matrix: each worker computes one block of query rows against one
// block of keys at a time, with an online softmax (running max and sum per row, Milakov &
// Gimelshein 2018; Dao et al. 2022). The forward keeps the log-sum-exp of every row as the state
// of its VJP; the backward recomputes the probabilities block by block from it.
//
// Bit-stable: every output element is computed by one work item in a fixed order of blocks (the
// key blocks of a query block in increasing order; the query heads of a key head and their query
// blocks in increasing order), whichever worker runs it, and the block products are
// matmul.StridedFloat32, whose elements do not depend on the tile around them. The capability
// table keeps FusedScaledDotProductAttention off, so GoMLX's own attention layers do not change.

// Block sizes of the kernels, read when a node is built (tests shrink them to get many blocks on
// small shapes). 96 = 16 tiles of 6 rows and 6 vectors of 16 columns of the AVX2 block product;
// measured against 48, 64 and 120 on the small and base head shapes (CPU time of forward and
// backward at 2,048 and 4,096 tokens): 96 × 96 was fastest, 20–25% ahead of 64 × 64.
var (
	flashBlockQ = 96
	flashBlockK = 96
)

func init() {
	gobackend.RegisterFusedScaledDotProductAttention.Register(flashAttention, gobackend.PriorityTyped)
	gobackend.RegisterFusedScaledDotProductAttentionVJP.Register(flashAttentionVJP, gobackend.PriorityTyped)
	gobackend.MultiOutputsNodeExecutors[compute.OpTypeFusedScaledDotProductAttention] = execFlashAttention
	gobackend.MultiOutputsNodeExecutors[compute.OpTypeFusedScaledDotProductAttentionVJP] = execFlashAttentionVJP
}

// flashAttnData is the node data of the forward and the backward node.
type flashAttnData struct {
	heads, kvHeads int
	scale          float32
	window         int
	softcap        float32
	bq, bk         int
	decode         bool    // Temper fork: KV-cached decoding (decodeattn.go), no VJP
	write          bool    // Temper fork: decode attention that writes the new K/V rows (NewKey…)
	rope           bool    // Temper fork: decode attention that rotates q and NewKey (RopeCos…)
	rotary         int     // Temper fork: rotated features with rope (the first rotary of d)
	qscale         float32 // Temper fork: with rope, the rotated query rows' factor (0: none)
	packed         bool    // Temper fork: decode attention whose query input holds q, k and v rows (PackedQKV)
	slotAt, ropeAt int     // Temper fork: decode attention's input indices of NewSlot and RopeCos (RopeSin follows)
}

func (d *flashAttnData) EqualNodeData(other gobackend.NodeDataComparable) bool {
	return *d == *(other.(*flashAttnData))
}

// decodeOnlyFields are the config fields only the decode attention implements (Temper fork): a
// request setting any of them elsewhere is refused, naming them, rather than computed without them.
const decodeOnlyFields = "NewKey, NewValue, NewSlot (cache writes), PackedQKV and RopeCos, RopeSin, RopeRotary, QueryScale (RoPE)"

// decodeOnly reports whether options set one of decodeOnlyFields.
func decodeOnly(o *compute.ScaledDotProductAttentionConfig) bool {
	return o.NewKey != nil || o.NewValue != nil || o.NewSlot != nil || o.RopeCos != nil || o.RopeSin != nil ||
		o.RopeRotary != 0 || o.QueryScale != 0 || o.PackedQKV
}

// flashAttention builds the forward node: outputs [batch, heads, seq, head_dim] and the
// log-sum-exp of every query row [batch, heads, seq] (the state of the VJP). A request without a
// KeyMask goes to the upstream builder where its executor is set (its own tests; production
// leaves it off), and is otherwise not implemented, as before this fork.
func flashAttention(f *gobackend.Function, query, key, value compute.Value, layout compute.AttentionAxesLayout,
	options *compute.ScaledDotProductAttentionConfig) (compute.Value, []compute.Value, error) {
	const op = "FusedScaledDotProductAttention"
	if options != nil && decodeOnly(options) && (options.KeyMask == nil || options.Causal) { // Temper fork: decodeattn.go
		return nil, nil, errors.Errorf("%s: %s need the decode attention: KeyMask without Causal", op, decodeOnlyFields)
	}
	if options == nil || options.KeyMask == nil {
		if gobackend.HasNodeExecutor(compute.OpTypeFusedScaledDotProductAttention) {
			return FusedScaledDotProductAttention(f, query, key, value, layout, options)
		}
		return nil, nil, errors.Wrapf(compute.ErrNotImplemented, "%s without KeyMask in the go backend", op)
	}
	if !options.Causal { // Temper fork: KeyMask without Causal is KV-cached decoding
		return decodeAttention(f, query, key, value, layout, options)
	}
	inputs, data, err := flashParams(f, op, query, key, value, layout, options)
	if err != nil {
		return nil, nil, err
	}
	q := inputs[0].Shape
	lse := shapes.Make(dtypes.Float32, q.Dimensions[0], q.Dimensions[1], q.Dimensions[2])
	node := f.NewMultiOutputsNode(compute.OpTypeFusedScaledDotProductAttention, []shapes.Shape{q.Clone(), lse}, inputs...)
	node.Data = data
	return node.MultiOutputsNodes[0], []compute.Value{node.MultiOutputsNodes[1]}, nil
}

// flashAttentionVJP builds the backward node of a flashAttention node: dQuery, dKey, dValue.
func flashAttentionVJP(f *gobackend.Function, query, key, value compute.Value, layout compute.AttentionAxesLayout,
	options *compute.ScaledDotProductAttentionConfig, output compute.Value, statesForVJP []compute.Value,
	dOutput compute.Value) (compute.Value, compute.Value, compute.Value, error) {
	const op = "FusedScaledDotProductAttentionVJP"
	if options == nil || options.KeyMask == nil || len(statesForVJP) != 1 {
		return nil, nil, nil, errors.Wrapf(compute.ErrNotImplemented, "%s without KeyMask in the go backend", op)
	}
	if !options.Causal { // Temper fork: decode attention (decodeattn.go)
		return nil, nil, nil, decodeAttentionVJPError(op)
	}
	inputs, data, err := flashParams(f, op, query, key, value, layout, options)
	if err != nil {
		return nil, nil, nil, err
	}
	more, err := f.VerifyAndCastValues(op, output, statesForVJP[0], dOutput)
	if err != nil {
		return nil, nil, nil, err
	}
	q, k := inputs[0].Shape, inputs[1].Shape
	lse := shapes.Make(dtypes.Float32, q.Dimensions[0], q.Dimensions[1], q.Dimensions[2])
	for i, want := range []shapes.Shape{q, lse, q} {
		if !more[i].Shape.Equal(want) {
			return nil, nil, nil, errors.Errorf("%s: %s is %s, want %s", op, []string{"output", "log-sum-exp state", "dOutput"}[i], more[i].Shape, want)
		}
	}
	node := f.NewMultiOutputsNode(compute.OpTypeFusedScaledDotProductAttentionVJP,
		[]shapes.Shape{q.Clone(), k.Clone(), k.Clone()}, append(inputs, more...)...)
	node.Data = data
	return node.MultiOutputsNodes[0], node.MultiOutputsNodes[1], node.MultiOutputsNodes[2], nil
}

// flashParams checks a blocked-attention request and returns its input nodes (query, key, value,
// key mask) and node data.
func flashParams(f *gobackend.Function, op string, query, key, value compute.Value, layout compute.AttentionAxesLayout,
	options *compute.ScaledDotProductAttentionConfig) ([]*gobackend.Node, *flashAttnData, error) {
	switch {
	case layout != compute.AttentionAxesLayoutBHSD:
		return nil, nil, errors.Errorf("%s: KeyMask (blocked attention) needs layout BHSD, got %s", op, layout)
	case options.Mask != nil || options.Bias != nil || options.QuerySeqLen != nil || options.KeyValueSeqLen != nil:
		return nil, nil, errors.Errorf("%s: KeyMask (blocked attention) cannot be combined with Mask, Bias, QuerySeqLen or KeyValueSeqLen", op)
	case !options.Causal:
		return nil, nil, errors.Errorf("%s: KeyMask (blocked attention) needs Causal", op)
	case decodeOnly(options): // Temper fork
		return nil, nil, errors.Errorf("%s: %s need the decode attention: KeyMask without Causal", op, decodeOnlyFields)
	case options.Window < 0:
		return nil, nil, errors.Errorf("%s: Window=%d: must be >= 0 (0: none)", op, options.Window)
	case !(options.Softcap >= 0) || math.IsInf(options.Softcap, 0):
		return nil, nil, errors.Errorf("%s: Softcap=%g: must be finite and >= 0 (0: none)", op, options.Softcap)
	}
	inputs, err := f.VerifyAndCastValues(op, query, key, value, options.KeyMask)
	if err != nil {
		return nil, nil, err
	}
	q, k, v, m := inputs[0].Shape, inputs[1].Shape, inputs[2].Shape, inputs[3].Shape
	for _, s := range []shapes.Shape{q, k, v} {
		if s.DType != dtypes.Float32 {
			return nil, nil, errors.Wrapf(compute.ErrNotImplemented, "%s: blocked attention of dtype %s (float32 only)", op, s.DType)
		}
	}
	if q.Rank() != 4 || k.Rank() != 4 || !k.Equal(v) {
		return nil, nil, errors.Errorf("%s: query %s, key %s and value %s must be [batch, heads, seq, head_dim] (key and value alike)", op, q, k, v)
	}
	batch, heads, seq, dim := q.Dimensions[0], q.Dimensions[1], q.Dimensions[2], q.Dimensions[3]
	kvHeads := k.Dimensions[1]
	if k.Dimensions[0] != batch || k.Dimensions[2] != seq || k.Dimensions[3] != dim || kvHeads <= 0 || heads%kvHeads != 0 {
		return nil, nil, errors.Errorf("%s: key %s does not fit query %s (same batch, seq and head_dim; kv heads dividing heads)", op, k, q)
	}
	if m.DType != dtypes.Bool || m.Rank() != 2 || m.Dimensions[0] != batch || m.Dimensions[1] != seq {
		return nil, nil, errors.Errorf("%s: KeyMask %s: want Bool [%d, %d]", op, m, batch, seq)
	}
	scale := options.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(dim))
	}
	return inputs, &flashAttnData{heads: heads, kvHeads: kvHeads, scale: float32(scale), window: options.Window,
		softcap: float32(options.Softcap), bq: flashBlockQ, bk: flashBlockK}, nil
}

// flashDims is one execution's geometry: query [b, h, s, d], key and value [b, hk, s, d].
type flashDims struct {
	b, h, hk, s, d, grp, bq, bk int
	scale, softcap              float32
	window                      int
	keyMask                     []bool  // [b, s]
	masked                      []int32 // [b, s+1]: masked keys before each column, per batch row
}

func newFlashDims(data *flashAttnData, q shapes.Shape, keyMask []bool) *flashDims {
	fd := &flashDims{b: q.Dimensions[0], h: data.heads, hk: data.kvHeads, s: q.Dimensions[2], d: q.Dimensions[3],
		bq: data.bq, bk: data.bk, scale: data.scale, softcap: data.softcap, window: data.window, keyMask: keyMask}
	fd.grp = fd.h / fd.hk
	fd.masked = make([]int32, fd.b*(fd.s+1))
	for b := range fd.b {
		row := fd.masked[b*(fd.s+1) : (b+1)*(fd.s+1)]
		for j, ok := range keyMask[b*fd.s : (b+1)*fd.s] {
			row[j+1] = row[j]
			if !ok {
				row[j+1]++
			}
		}
	}
	return fd
}

// visible reports whether query i sees key j in batch row b: causal, inside the window, and a
// real key or the query's own.
func (fd *flashDims) visible(b, i, j int) bool {
	return j <= i && (fd.window == 0 || i-j < fd.window) && (j == i || fd.keyMask[b*fd.s+j])
}

// allVisible reports whether every query of rows [r0, r1) sees every key of [c0, c1).
func (fd *flashDims) allVisible(b, r0, r1, c0, c1 int) bool {
	m := fd.masked[b*(fd.s+1):]
	return c1-1 <= r0 && (fd.window == 0 || r1-1-c0 < fd.window) && m[c1] == m[c0]
}

// keyBlocks is the range of key blocks with a key visible from some query of rows [r0, r1).
func (fd *flashDims) keyBlocks(r0, r1 int) (lo, hi int) {
	first := 0
	if fd.window > 0 {
		first = max(0, r0-fd.window+1)
	}
	return first / fd.bk, (r1-1)/fd.bk + 1
}

// queryBlocks is the range of query blocks with a query that sees some key of [c0, c1).
func (fd *flashDims) queryBlocks(c0, c1 int) (lo, hi int) {
	end := fd.s
	if fd.window > 0 {
		end = min(fd.s, c1-1+fd.window)
	}
	return c0 / fd.bq, (end-1)/fd.bq + 1
}

// flashScratch is one worker's memory.
type flashScratch struct {
	sc, tc, dp []float32 // a block of scores, of their tanh (softcap), of dP
	tmp        []float32 // a block product [max(bq, bk), d]
	acc, acc2  []float32 // accumulators [max(bq, bk), d]
	m, l       []float32 // running max and sum per query row
	alpha      []float32
}

func (fd *flashDims) newScratch() *flashScratch {
	n := max(fd.bq, fd.bk)
	return &flashScratch{sc: make([]float32, fd.bq*fd.bk), tc: make([]float32, fd.bq*fd.bk), dp: make([]float32, fd.bq*fd.bk),
		tmp: make([]float32, n*fd.d), acc: make([]float32, n*fd.d), acc2: make([]float32, n*fd.d),
		m: make([]float32, fd.bq), l: make([]float32, fd.bq), alpha: make([]float32, fd.bq)}
}

// parallel runs work(ws, i) for i in [0, n) across the backend's workers, each with its own scratch.
func (fd *flashDims) parallel(backend *gobackend.Backend, n int, work func(ws *flashScratch, i int)) {
	var next atomic.Int64
	backend.Workers.Saturate(func() {
		var ws *flashScratch
		for {
			i := int(next.Add(1) - 1)
			if i >= n {
				return
			}
			if ws == nil {
				ws = fd.newScratch()
			}
			work(ws, i)
		}
	})
}

var negInf = float32(math.Inf(-1))

// capAndMask finishes a block of raw scores sc (row stride ld): scale, soft-capping (the tanh
// values go to tc for the backward) and -Inf where a key is hidden (unless all are visible). Rows
// are queries r0… and columns keys c0…, or the other way round when transposed.
func (fd *flashDims) capAndMask(sc, tc []float32, ld, b, r0, nr, c0, nc int, all, transposed bool) {
	rows, cols := nr, nc
	if transposed {
		rows, cols = nc, nr
	}
	for x := range rows {
		row := sc[x*ld : x*ld+cols]
		if fd.scale != 1 {
			vecScale(row, fd.scale)
		}
		if c := fd.softcap; c > 0 {
			// The same float32 operations as cap·tanh(x/cap) in the graph.
			t := tc[x*ld : x*ld+cols]
			for y, s := range row {
				t[y] = float32(math.Tanh(float64(s / c)))
				row[y] = t[y] * c
			}
		}
		switch {
		case all:
		case transposed:
			fd.maskKeyRow(row, b, c0+x, r0)
		default:
			fd.maskQueryRow(row, b, r0+x, c0)
		}
	}
}

// maskQueryRow sets -Inf where query i does not see key c0+y (row[y]), as visible says.
func (fd *flashDims) maskQueryRow(row []float32, b, i, c0 int) {
	lo, hi := 0, min(len(row), i-c0+1) // causal: keys <= i
	if fd.window > 0 {
		lo = max(0, i-fd.window+1-c0)
	}
	lo = min(lo, len(row))
	hi = max(hi, lo) // a query before the block's first key sees none of it
	for y := range row[:lo] {
		row[y] = negInf
	}
	for y := hi; y < len(row); y++ {
		row[y] = negInf
	}
	m := fd.masked[b*(fd.s+1):]
	if m[c0+hi] == m[c0+lo] {
		return // no padded key in [lo, hi)
	}
	km := fd.keyMask[b*fd.s:]
	for y := lo; y < hi; y++ {
		if j := c0 + y; !km[j] && j != i {
			row[y] = negInf
		}
	}
}

// maskKeyRow sets -Inf where key j is not seen by query r0+y (row[y]), as visible says.
func (fd *flashDims) maskKeyRow(row []float32, b, j, r0 int) {
	if !fd.keyMask[b*fd.s+j] { // a padded key: seen by its own query only
		for y := range row {
			if r0+y != j {
				row[y] = negInf
			}
		}
		return
	}
	lo := min(len(row), max(0, j-r0)) // causal: queries >= j
	hi := len(row)
	if fd.window > 0 {
		hi = max(lo, min(hi, j+fd.window-r0)) // queries < j + window
	}
	for y := range row[:lo] {
		row[y] = negInf
	}
	for y := hi; y < len(row); y++ {
		row[y] = negInf
	}
}

// expShifted sets row[y] = e^(row[y] - shift[y or 0]) (one shift for the row when len(shift) is 1).
func expShifted(row, shift []float32) {
	if len(shift) == 1 {
		vecSubScalar(row, shift[0])
	} else {
		vecSub(row, shift)
	}
	fastmath.Exp32Slice(row, row)
}

// transposeHeads writes each [s, d] matrix of src as [d, s] into dst.
func (fd *flashDims) transposeHead(dst, src []float32) {
	s, d := fd.s, fd.d
	const tile = 32
	for i0 := 0; i0 < s; i0 += tile {
		i1 := min(s, i0+tile)
		for j := range d {
			out := dst[j*s+i0 : j*s+i1]
			for i := range out {
				out[i] = src[(i0+i)*d+j]
			}
		}
	}
}

// execFlashAttention runs the forward: outputs and the log-sum-exp per query row.
func execFlashAttention(backend *gobackend.Backend, node *gobackend.Node, inputs []*gobackend.Buffer, inputsOwned []bool) ([]*gobackend.Buffer, error) {
	data := node.Data.(*flashAttnData)
	if data.decode { // Temper fork: decodeattn.go
		return execDecodeAttention(backend, node, inputs, inputsOwned)
	}
	q, k, v := inputs[0].Flat.([]float32), inputs[1].Flat.([]float32), inputs[2].Flat.([]float32)
	fd := newFlashDims(data, inputs[0].RawShape, inputs[3].Flat.([]bool))
	out, err := backend.GetBuffer(node.MultiOutputsShapes[0])
	if err != nil {
		return nil, err
	}
	lse, err := backend.GetBuffer(node.MultiOutputsShapes[1])
	if err != nil {
		return nil, err
	}
	ktBuf, err := backend.GetBuffer(shapes.Make(dtypes.Float32, len(k)))
	if err != nil {
		return nil, err
	}
	kt := ktBuf.Flat.([]float32)
	head := fd.s * fd.d
	fd.parallel(backend, fd.b*fd.hk, func(_ *flashScratch, i int) {
		fd.transposeHead(kt[i*head:(i+1)*head], k[i*head:(i+1)*head])
	})
	nqb := (fd.s + fd.bq - 1) / fd.bq
	o, l := out.Flat.([]float32), lse.Flat.([]float32)
	fd.parallel(backend, fd.b*fd.h*nqb, func(ws *flashScratch, i int) {
		fd.forwardBlock(ws, q, kt, v, o, l, i/nqb, i%nqb)
	})
	backend.PutBuffer(ktBuf)
	return []*gobackend.Buffer{out, lse}, nil
}

// forwardBlock computes the outputs and log-sum-exps of query block qb of head bh (= b·h + head).
func (fd *flashDims) forwardBlock(ws *flashScratch, q, kt, v, out, lse []float32, bh, qb int) {
	s, d := fd.s, fd.d
	b, kh := bh/fd.h, (bh%fd.h)/fd.grp
	r0 := qb * fd.bq
	r1 := min(s, r0+fd.bq)
	nr := r1 - r0
	qBlk := q[(bh*s+r0)*d:]
	ktHead := kt[(b*fd.hk+kh)*s*d:]
	vHead := v[(b*fd.hk+kh)*s*d:]
	acc, m, l := ws.acc[:nr*d], ws.m[:nr], ws.l[:nr]
	clear(acc)
	clear(l)
	for r := range m {
		m[r] = negInf
	}
	kb0, kb1 := fd.keyBlocks(r0, r1)
	for kb := kb0; kb < kb1; kb++ {
		c0 := kb * fd.bk
		c1 := min(s, c0+fd.bk, r1)
		nc := c1 - c0
		matmul.StridedFloat32(nr, nc, d, qBlk, d, ktHead[c0:], s, ws.sc, fd.bk)
		fd.capAndMask(ws.sc, ws.tc, fd.bk, b, r0, nr, c0, nc, fd.allVisible(b, r0, r1, c0, c1), false)
		for r := range nr {
			row := ws.sc[r*fd.bk : r*fd.bk+nc]
			mx := vecMax(row)
			if mx == negInf { // no key of this block is visible from this row
				clear(row)
				ws.alpha[r] = 1
				continue
			}
			mNew := max(m[r], mx)
			alpha := fastmath.Exp32Exact(m[r] - mNew) // 0 on the row's first visible block
			expShifted(row, []float32{mNew})
			l[r] = float32(l[r]*alpha) + vecSum(row)
			m[r] = mNew
			ws.alpha[r] = alpha
		}
		tmp := ws.tmp[:nr*d]
		matmul.StridedFloat32(nr, d, nc, ws.sc, fd.bk, vHead[c0*d:], d, tmp, d)
		for r := range nr {
			if a, t, alpha := acc[r*d:(r+1)*d], tmp[r*d:(r+1)*d], ws.alpha[r]; alpha == 1 {
				vecAdd(a, t)
			} else {
				vecScaleAdd(a, alpha, t)
			}
		}
	}
	o := out[(bh*s+r0)*d:]
	for r := range nr {
		copy(o[r*d:(r+1)*d], acc[r*d:(r+1)*d])
		vecDiv(o[r*d:(r+1)*d], l[r])
		lse[bh*s+r0+r] = m[r] + float32(math.Log(float64(l[r])))
	}
}

// execFlashAttentionVJP runs the backward: dQuery, dKey, dValue.
//
//	inputs: query, key, value, key mask, output, log-sum-exp, dOutput
func execFlashAttentionVJP(backend *gobackend.Backend, node *gobackend.Node, inputs []*gobackend.Buffer, _ []bool) ([]*gobackend.Buffer, error) {
	data := node.Data.(*flashAttnData)
	q, k, v := inputs[0].Flat.([]float32), inputs[1].Flat.([]float32), inputs[2].Flat.([]float32)
	fd := newFlashDims(data, inputs[0].RawShape, inputs[3].Flat.([]bool))
	o, lse, dOut := inputs[4].Flat.([]float32), inputs[5].Flat.([]float32), inputs[6].Flat.([]float32)
	// Outputs dQuery, dKey, dValue; scratch: transposed query, dOutput, key and value, and delta.
	sizes := []shapes.Shape{node.MultiOutputsShapes[0], node.MultiOutputsShapes[1], node.MultiOutputsShapes[2],
		shapes.Make(dtypes.Float32, len(q)), shapes.Make(dtypes.Float32, len(q)),
		shapes.Make(dtypes.Float32, len(k)), shapes.Make(dtypes.Float32, len(k)), shapes.Make(dtypes.Float32, len(lse))}
	bufs := make([]*gobackend.Buffer, len(sizes))
	flat := make([][]float32, len(sizes))
	for i, shape := range sizes {
		buf, err := backend.GetBuffer(shape)
		if err != nil {
			for _, b := range bufs[:i] {
				backend.PutBuffer(b)
			}
			return nil, err
		}
		bufs[i], flat[i] = buf, buf.Flat.([]float32)
	}
	dq, dk, dv, qt, dot, kt, vt, delta := flat[0], flat[1], flat[2], flat[3], flat[4], flat[5], flat[6], flat[7]
	s, d := fd.s, fd.d
	head := s * d
	// Transposed copies of every head, and delta[i] = Σ dO[i]·O[i] of every query row.
	fd.parallel(backend, fd.b*fd.h+fd.b*fd.hk, func(_ *flashScratch, i int) {
		if i >= fd.b*fd.h {
			i -= fd.b * fd.h
			fd.transposeHead(kt[i*head:(i+1)*head], k[i*head:(i+1)*head])
			fd.transposeHead(vt[i*head:(i+1)*head], v[i*head:(i+1)*head])
			return
		}
		fd.transposeHead(qt[i*head:(i+1)*head], q[i*head:(i+1)*head])
		fd.transposeHead(dot[i*head:(i+1)*head], dOut[i*head:(i+1)*head])
		for r := range s {
			off := (i*s + r) * d
			var sum float32
			for j := range d {
				sum += dOut[off+j] * o[off+j]
			}
			delta[i*s+r] = sum
		}
	})
	nkb := (s + fd.bk - 1) / fd.bk
	fd.parallel(backend, fd.b*fd.hk*nkb, func(ws *flashScratch, i int) {
		fd.backwardKeys(ws, q, k, v, qt, dOut, dot, lse, delta, dk, dv, i/nkb, i%nkb)
	})
	nqb := (s + fd.bq - 1) / fd.bq
	fd.parallel(backend, fd.b*fd.h*nqb, func(ws *flashScratch, i int) {
		fd.backwardQueries(ws, q, k, kt, vt, dOut, lse, delta, dq, i/nqb, i%nqb)
	})
	for _, buf := range bufs[3:] {
		backend.PutBuffer(buf)
	}
	return bufs[:3], nil
}

// dScores turns a block of probabilities p into the gradient of the raw scores in place, given dP
// in dp (same layout): p·(dP − delta), through the soft-cap (1 − tanh²) and the scale. delta is one
// value per row, or per column when perColumn.
func (fd *flashDims) dScores(p, dp, tc []float32, ld, rows, cols int, delta []float32, perColumn bool) {
	for x := range rows {
		pr := p[x*ld : x*ld+cols]
		if perColumn {
			vecDScores(pr, dp[x*ld:], delta)
		} else {
			vecDScores(pr, dp[x*ld:], delta[x:x+1])
		}
		if fd.softcap > 0 {
			vecOneMinusSquare(pr, tc[x*ld:])
		}
		if fd.scale != 1 {
			vecScale(pr, fd.scale)
		}
	}
}

// backwardKeys accumulates dKey and dValue of key block kb of KV head bkh (= b·hk + kv head) over
// the query heads of its group and their query blocks, in order.
func (fd *flashDims) backwardKeys(ws *flashScratch, q, k, v, qt, dOut, dot, lse, delta, dk, dv []float32, bkh, kb int) {
	s, d := fd.s, fd.d
	b := bkh / fd.hk
	c0 := kb * fd.bk
	c1 := min(s, c0+fd.bk)
	nc := c1 - c0
	kBlk, vBlk := k[(bkh*s+c0)*d:], v[(bkh*s+c0)*d:]
	accK, accV := ws.acc[:nc*d], ws.acc2[:nc*d]
	clear(accK)
	clear(accV)
	tmp := ws.tmp[:nc*d]
	ld := fd.bq // transposed blocks: rows are keys, columns queries
	for g := range fd.grp {
		bh := bkh*fd.grp + g // b·h + head: heads are grouped by their KV head
		qb0, qb1 := fd.queryBlocks(c0, c1)
		for qb := qb0; qb < qb1; qb++ {
			r0 := qb * fd.bq
			r1 := min(s, r0+fd.bq)
			nr := r1 - r0
			// Pᵀ [nc, nr] from Sᵀ = K·Qᵀ (the same bits as the forward's Q·Kᵀ).
			matmul.StridedFloat32(nc, nr, d, kBlk, d, qt[bh*s*d+r0:], s, ws.sc, ld)
			fd.capAndMask(ws.sc, ws.tc, ld, b, r0, nr, c0, nc, fd.allVisible(b, r0, r1, c0, c1), true)
			rowLSE := lse[bh*s+r0 : bh*s+r1]
			for x := range nc {
				expShifted(ws.sc[x*ld:x*ld+nr], rowLSE)
			}
			matmul.StridedFloat32(nc, d, nr, ws.sc, ld, dOut[(bh*s+r0)*d:], d, tmp, d)
			vecAdd(accV, tmp)
			matmul.StridedFloat32(nc, nr, d, vBlk, d, dot[bh*s*d+r0:], s, ws.dp, ld)
			fd.dScores(ws.sc, ws.dp, ws.tc, ld, nc, nr, delta[bh*s+r0:bh*s+r1], true)
			matmul.StridedFloat32(nc, d, nr, ws.sc, ld, q[(bh*s+r0)*d:], d, tmp, d)
			vecAdd(accK, tmp)
		}
	}
	copy(dk[(bkh*s+c0)*d:(bkh*s+c1)*d], accK)
	copy(dv[(bkh*s+c0)*d:(bkh*s+c1)*d], accV)
}

// backwardQueries computes dQuery of query block qb of head bh over its key blocks, in order.
func (fd *flashDims) backwardQueries(ws *flashScratch, q, k, kt, vt, dOut, lse, delta, dq []float32, bh, qb int) {
	s, d := fd.s, fd.d
	b, kh := bh/fd.h, (bh%fd.h)/fd.grp
	bkh := b*fd.hk + kh
	r0 := qb * fd.bq
	r1 := min(s, r0+fd.bq)
	nr := r1 - r0
	acc := ws.acc[:nr*d]
	clear(acc)
	tmp := ws.tmp[:nr*d]
	kb0, kb1 := fd.keyBlocks(r0, r1)
	for kb := kb0; kb < kb1; kb++ {
		c0 := kb * fd.bk
		c1 := min(s, c0+fd.bk, r1)
		nc := c1 - c0
		matmul.StridedFloat32(nr, nc, d, q[(bh*s+r0)*d:], d, kt[bkh*s*d+c0:], s, ws.sc, fd.bk)
		fd.capAndMask(ws.sc, ws.tc, fd.bk, b, r0, nr, c0, nc, fd.allVisible(b, r0, r1, c0, c1), false)
		for r := range nr {
			expShifted(ws.sc[r*fd.bk:r*fd.bk+nc], lse[bh*s+r0+r:bh*s+r0+r+1])
		}
		matmul.StridedFloat32(nr, nc, d, dOut[(bh*s+r0)*d:], d, vt[bkh*s*d+c0:], s, ws.dp, fd.bk)
		fd.dScores(ws.sc, ws.dp, ws.tc, fd.bk, nr, nc, delta[bh*s+r0:bh*s+r1], false)
		matmul.StridedFloat32(nr, d, nc, ws.sc, fd.bk, k[(bkh*s+c0)*d:], d, tmp, d)
		vecAdd(acc, tmp)
	}
	copy(dq[(bh*s+r0)*d:(bh*s+r1)*d], acc)
}
