// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package fusedops

import (
	"math"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/internal/fastmath"
	"github.com/gomlx/compute/internal/gobackend"
	"github.com/gomlx/compute/shapes"
	"github.com/pkg/errors"
)

// Decode attention (Temper fork): a FusedScaledDotProductAttention request with a KeyMask and
// without Causal is KV-cached decoding: a few new query rows per batch row attend over the cache,
// and the KeyMask [batch, keys] says exactly which cache columns each batch row sees (every query
// row of a batch row sees the same ones; no causal rule, no window: the caller folds a sliding
// window into the mask).
//
//	query [batch, heads, q, d]; key, value [batch, kvHeads, keys, d], or [batch·kvHeads, keys, d]
//	(the same memory: a KV cache that is also a graph output can come in without a Reshape, which
//	the Go backend executes as a copy when its operand has another use)
//	outputs [batch, heads, q, d] and the log-sum-exp of every query row [batch, heads, q]
//
// One work item per (batch row, kv head) computes its grouped query rows one by one: the scores
// against the visible keys only (dot products of d floats), scale, soft-cap, max, e^(x − max), sum,
// then Σ e_j·v_j over the same keys in increasing order, divided by the sum. Each output element
// is computed by one work item in a fixed order, so the bits do not depend on the number of
// workers. Each worker claims its next item before computing the current one and prefetches that
// item's visible key and value rows meanwhile (prefetchRange): the caches of a generation graph
// come from far cache or memory. A query row with no visible key gets zeros and a log-sum-exp of -Inf. No VJP: decoding
// is not differentiated.
//
// With NewKey, NewValue and NewSlot the node also writes the step's rows into the caches (key and
// value): inputs query, key, value, KeyMask, new key [b·hk, d], new value, slot (Int32 [b] or
// scalar); outputs also the updated key and value caches. The work item of (b, kv head) adds its
// new key and value row into column slot[b] of its head (ScatterSum's combine: cache += row, so
// the same bits as the ScatterSum it replaces) and then attends over that head, so the written
// rows are read while still in cache. A cache whose buffer the executor owns (donated, or an
// intermediate at its last use) is updated in place and returned as the output; otherwise it is
// copied first.

// decodeAttention builds the decode node (flashAttention sends it requests with KeyMask and
// without Causal).
func decodeAttention(f *gobackend.Function, query, key, value compute.Value, layout compute.AttentionAxesLayout,
	options *compute.ScaledDotProductAttentionConfig) (compute.Value, []compute.Value, error) {
	const op = "FusedScaledDotProductAttention"
	switch {
	case layout != compute.AttentionAxesLayoutBHSD:
		return nil, nil, errors.Errorf("%s: KeyMask without Causal (decode attention) needs layout BHSD, got %s", op, layout)
	case options.Mask != nil || options.Bias != nil || options.QuerySeqLen != nil || options.KeyValueSeqLen != nil:
		return nil, nil, errors.Errorf("%s: KeyMask (decode attention) cannot be combined with Mask, Bias, QuerySeqLen or KeyValueSeqLen", op)
	case options.Window != 0:
		return nil, nil, errors.Errorf("%s: Window=%d: decode attention (KeyMask without Causal) takes none: the KeyMask says which keys each row sees", op, options.Window)
	case !(options.Softcap >= 0) || math.IsInf(options.Softcap, 0):
		return nil, nil, errors.Errorf("%s: Softcap=%g: must be finite and >= 0 (0: none)", op, options.Softcap)
	}
	packed := options.PackedQKV
	write := options.NewKey != nil || options.NewValue != nil || options.NewSlot != nil
	switch {
	case packed && (options.NewKey != nil || options.NewValue != nil || options.NewSlot == nil):
		return nil, nil, errors.Errorf("%s: PackedQKV takes NewSlot and no NewKey or NewValue (the query input holds the new key and value rows)", op)
	case !packed && write && (options.NewKey == nil || options.NewValue == nil || options.NewSlot == nil):
		return nil, nil, errors.Errorf("%s: NewKey, NewValue and NewSlot come together (cache writes of decode attention)", op)
	}
	rope := options.RopeCos != nil || options.RopeSin != nil
	switch {
	case rope && (options.RopeCos == nil || options.RopeSin == nil):
		return nil, nil, errors.Errorf("%s: RopeCos and RopeSin come together (rotary embeddings in decode attention)", op)
	case rope && !write:
		return nil, nil, errors.Errorf("%s: RopeCos and RopeSin need the cache writes (NewKey, NewValue, NewSlot): the new key row is what they rotate", op)
	case !rope && (options.RopeRotary != 0 || options.QueryScale != 0):
		return nil, nil, errors.Errorf("%s: RopeRotary=%d, QueryScale=%g without RopeCos and RopeSin", op, options.RopeRotary, options.QueryScale)
	case !(options.QueryScale >= 0) || math.IsInf(options.QueryScale, 0):
		return nil, nil, errors.Errorf("%s: QueryScale=%g: must be finite and >= 0 (0: none)", op, options.QueryScale)
	}
	values := []compute.Value{query, key, value, options.KeyMask}
	switch {
	case packed:
		values = append(values, options.NewSlot)
	case write:
		values = append(values, options.NewKey, options.NewValue, options.NewSlot)
	}
	slotAt, ropeAt := len(values)-1, len(values) // input indices of NewSlot and RopeCos
	if rope {
		values = append(values, options.RopeCos, options.RopeSin)
	}
	inputs, err := f.VerifyAndCastValues(op, values...)
	if err != nil {
		return nil, nil, err
	}
	q, k, v, m := inputs[0].Shape, inputs[1].Shape, inputs[2].Shape, inputs[3].Shape
	for _, s := range []shapes.Shape{q, k, v} {
		if s.DType != dtypes.Float32 {
			return nil, nil, errors.Wrapf(compute.ErrNotImplemented, "%s: decode attention of dtype %s (float32 only)", op, s.DType)
		}
	}
	if packed && (q.Rank() != 2 || !k.Equal(v) || (k.Rank() != 4 && k.Rank() != 3)) {
		return nil, nil, errors.Errorf("%s: decode attention with PackedQKV: query %s must be [batch, (heads + 2·kv_heads)·head_dim], key %s and value %s alike, [batch, kv_heads, keys, head_dim] or [batch·kv_heads, keys, head_dim]", op, q, k, v)
	}
	if !packed && (q.Rank() != 4 || !k.Equal(v) || (k.Rank() != 4 && k.Rank() != 3)) {
		return nil, nil, errors.Errorf("%s: decode attention: query %s must be [batch, heads, q, head_dim], key %s and value %s alike, [batch, kv_heads, keys, head_dim] or [batch·kv_heads, keys, head_dim]", op, q, k, v)
	}
	batch, dim := q.Dimensions[0], k.Dimensions[k.Rank()-1]
	heads, nq := 0, 1
	if !packed {
		heads, nq, dim = q.Dimensions[1], q.Dimensions[2], q.Dimensions[3]
	}
	var kvHeads int
	if k.Rank() == 4 {
		kvHeads = k.Dimensions[1]
		if k.Dimensions[0] != batch {
			kvHeads = 0
		}
	} else if batch > 0 && k.Dimensions[0]%batch == 0 {
		kvHeads = k.Dimensions[0] / batch
	}
	keys := k.Dimensions[k.Rank()-2]
	if packed && kvHeads > 0 && dim > 0 && q.Dimensions[1]%dim == 0 {
		heads = q.Dimensions[1]/dim - 2*kvHeads
	}
	if kvHeads <= 0 || heads <= 0 || heads%kvHeads != 0 || k.Dimensions[k.Rank()-1] != dim {
		return nil, nil, errors.Errorf("%s: decode attention: key %s does not fit query %s (same batch and head_dim; kv heads dividing heads)", op, k, q)
	}
	if m.DType != dtypes.Bool || m.Rank() != 2 || m.Dimensions[0] != batch || m.Dimensions[1] != keys {
		return nil, nil, errors.Errorf("%s: KeyMask %s: want Bool [%d, %d]", op, m, batch, keys)
	}
	if write && !packed {
		nk, nv := inputs[4].Shape, inputs[5].Shape
		rowsOK := func(s shapes.Shape) bool {
			return s.DType == dtypes.Float32 && (s.Equal(shapes.Make(dtypes.Float32, batch*kvHeads, dim)) ||
				s.Equal(shapes.Make(dtypes.Float32, batch, kvHeads, 1, dim)))
		}
		if !rowsOK(nk) || !rowsOK(nv) {
			return nil, nil, errors.Errorf("%s: NewKey %s and NewValue %s: want Float32 [%d, %d] or [%d, %d, 1, %d]", op, nk, nv, batch*kvHeads, dim, batch, kvHeads, dim)
		}
	}
	if write {
		if sl := inputs[slotAt].Shape; sl.DType != dtypes.Int32 || !(sl.Rank() == 0 || (sl.Rank() == 1 && sl.Dimensions[0] == batch)) {
			return nil, nil, errors.Errorf("%s: NewSlot %s: want Int32 [%d] or a scalar", op, sl, batch)
		}
	}
	rotary := dim
	if rope {
		tableOK := func(s shapes.Shape) bool {
			return s.Equal(shapes.Make(dtypes.Float32, batch, dim)) || s.Equal(shapes.Make(dtypes.Float32, batch, 1, 1, dim))
		}
		if c, s := inputs[ropeAt].Shape, inputs[ropeAt+1].Shape; !tableOK(c) || !tableOK(s) {
			return nil, nil, errors.Errorf("%s: RopeCos %s and RopeSin %s: want Float32 [%d, %d] or [%d, 1, 1, %d]", op, c, s, batch, dim, batch, dim)
		}
		if r := options.RopeRotary; r != 0 {
			if r < 0 || r > dim || r%2 != 0 {
				return nil, nil, errors.Errorf("%s: RopeRotary=%d: want an even number in [2, head_dim %d], or 0 for all", op, r, dim)
			}
			rotary = r
		}
	}
	scale := options.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(dim))
	}
	data := &flashAttnData{heads: heads, kvHeads: kvHeads, scale: float32(scale), softcap: float32(options.Softcap), decode: true, write: write, packed: packed,
		slotAt: slotAt, ropeAt: ropeAt}
	if rope {
		data.rope, data.rotary, data.qscale = true, rotary, float32(options.QueryScale)
	}
	lse := shapes.Make(dtypes.Float32, batch, heads, nq)
	outs := []shapes.Shape{shapes.Make(dtypes.Float32, batch, heads, nq, dim), lse}
	if write {
		outs = append(outs, k.Clone(), v.Clone())
	}
	node := f.NewMultiOutputsNode(compute.OpTypeFusedScaledDotProductAttention, outs, inputs...)
	node.Data = data
	states := make([]compute.Value, 0, len(outs)-1)
	for _, o := range node.MultiOutputsNodes[1:] {
		states = append(states, o)
	}
	return node.MultiOutputsNodes[0], states, nil
}

// decodeCache returns the buffer a decode node writes cache input i (1: key, 2: value) into: the
// input itself when the executor owns it (marked consumed), else a copy.
func decodeCache(backend *gobackend.Backend, node *gobackend.Node, inputs []*gobackend.Buffer, inputsOwned []bool, i int) (*gobackend.Buffer, error) {
	if inputsOwned[i] {
		buf := inputs[i]
		inputs[i] = nil
		buf.RawShape = node.MultiOutputsShapes[i+1]
		return buf, nil
	}
	buf, err := backend.CloneBuffer(inputs[i])
	if err != nil {
		return nil, err
	}
	buf.RawShape = node.MultiOutputsShapes[i+1]
	return buf, nil
}

// execDecodeAttention runs a decode node: outputs and the log-sum-exp per query row (and, when it
// writes, the updated key and value caches).
func execDecodeAttention(backend *gobackend.Backend, node *gobackend.Node, inputs []*gobackend.Buffer, inputsOwned []bool) ([]*gobackend.Buffer, error) {
	data := node.Data.(*flashAttnData)
	outShape, ks := node.MultiOutputsShapes[0], inputs[1].RawShape
	b, nq, d := outShape.Dimensions[0], outShape.Dimensions[2], outShape.Dimensions[3]
	hk, s := data.kvHeads, ks.Dimensions[ks.Rank()-2]
	grp := data.heads / hk
	q := inputs[0].Flat.([]float32)
	mask := inputs[3].Flat.([]bool)
	// The offsets of a work item's query rows and new key and value rows (PackedQKV: all three in
	// the query input, one row of (heads + 2·kv)·d floats per batch row).
	qAt := func(item int) int { return item * grp * nq * d }
	kAt := func(item int) int { return item * d }
	vAt := kAt
	slotAt, ropeAt := data.slotAt, data.ropeAt // where the builder put NewSlot and RopeCos
	var newK, newV []float32
	var slots []int32
	switch {
	case data.packed:
		w := (data.heads + 2*hk) * d
		qAt = func(item int) int { return item/hk*w + item%hk*grp*d }
		kAt = func(item int) int { return item/hk*w + (data.heads+item%hk)*d }
		vAt = func(item int) int { return item/hk*w + (data.heads+hk+item%hk)*d }
		newK, newV = q, q
	case data.write:
		newK, newV = inputs[4].Flat.([]float32), inputs[5].Flat.([]float32)
	}
	if data.write {
		slots = inputs[slotAt].Flat.([]int32)
		for _, sl := range slots {
			if sl < 0 || int(sl) >= s {
				return nil, errors.Errorf("decode attention: cache slot %d out of range [0, %d)", sl, s)
			}
		}
	}
	var cos, sin []float32
	if data.rope {
		cos, sin = inputs[ropeAt].Flat.([]float32), inputs[ropeAt+1].Flat.([]float32)
	}
	var kBuf, vBuf *gobackend.Buffer
	if data.write {
		var err error
		if kBuf, err = decodeCache(backend, node, inputs, inputsOwned, 1); err != nil {
			return nil, err
		}
		if vBuf, err = decodeCache(backend, node, inputs, inputsOwned, 2); err != nil {
			backend.PutBuffer(kBuf)
			return nil, err
		}
	} else {
		kBuf, vBuf = inputs[1], inputs[2]
	}
	k, v := kBuf.Flat.([]float32), vBuf.Flat.([]float32)
	putCaches := func() {
		if data.write {
			backend.PutBuffer(kBuf)
			backend.PutBuffer(vBuf)
		}
	}
	out, err := backend.GetBuffer(node.MultiOutputsShapes[0])
	if err != nil {
		putCaches()
		return nil, err
	}
	lseBuf, err := backend.GetBuffer(node.MultiOutputsShapes[1])
	if err != nil {
		backend.PutBuffer(out)
		putCaches()
		return nil, err
	}
	o, lse := out.Flat.([]float32), lseBuf.Flat.([]float32)
	rows := grp * nq // query rows of one kv head: heads kh·grp … kh·grp+grp-1, nq rows each
	n := b * hk
	var next atomic.Int64
	backend.Workers.Saturate(func() {
		// Each worker claims its next item before it computes the current one and prefetches
		// that item's visible key and value rows meanwhile: in a generation graph the caches of a
		// layer come from far cache or memory, and the loop would otherwise wait on every row.
		// Which worker computes an item changes no bits.
		cur := int(next.Add(1) - 1)
		if cur >= n {
			return
		}
		w := getDecodeScratch(s, rows*d, data.rope)
		defer decodeScratchPool.Put(w)
		buf := 0
		vis := visibleColumns(w.idx[buf][:0], mask[cur/hk*s:(cur/hk+1)*s])
		for cur < n {
			nxt := int(next.Add(1) - 1)
			var nvis []int32
			if nxt < n {
				nvis = visibleColumns(w.idx[1-buf][:0], mask[nxt/hk*s:(nxt/hk+1)*s])
				prefetchVisible(k[nxt*s*d:(nxt+1)*s*d], d, nvis)
				prefetchVisible(v[nxt*s*d:(nxt+1)*s*d], d, nvis)
			}
			item, bi := cur, cur/hk
			kHead, vHead := k[item*s*d:(item+1)*s*d], v[item*s*d:(item+1)*s*d]
			if slots != nil { // the cache writes: ScatterSum's combine, cache += row
				sl := int(slots[0])
				if len(slots) > 1 {
					sl = int(slots[bi])
				}
				nk := newK[kAt(item) : kAt(item)+d]
				if data.rope {
					ropeRow(w.kr[:d], nk, cos[bi*d:(bi+1)*d], sin[bi*d:(bi+1)*d], data.rotary)
					nk = w.kr[:d]
				}
				addRow(kHead[sl*d:(sl+1)*d], nk)
				addRow(vHead[sl*d:(sl+1)*d], newV[vAt(item):vAt(item)+d])
			}
			r0 := item * rows // = (bi·heads + kh·grp)·nq: the item's first query row
			qi := q[qAt(item) : qAt(item)+rows*d]
			if data.rope { // every query row of batch row bi has bi's position
				for r := range rows {
					ropeRow(w.qr[r*d:(r+1)*d], qi[r*d:(r+1)*d], cos[bi*d:(bi+1)*d], sin[bi*d:(bi+1)*d], data.rotary)
				}
				if data.qscale != 0 {
					vecScale(w.qr[:rows*d], data.qscale)
				}
				qi = w.qr[:rows*d]
			}
			for r := 0; r < rows; r += decodeGroup {
				nr := min(decodeGroup, rows-r)
				decodeRows(data, o[(r0+r)*d:(r0+r+nr)*d], lse[r0+r:r0+r+nr], qi[r*d:(r+nr)*d], kHead, vHead, vis, w.sc[:nr*len(vis)])
			}
			cur, vis, buf = nxt, nvis, 1-buf
		}
	})
	if data.write {
		return []*gobackend.Buffer{out, lseBuf, kBuf, vBuf}, nil
	}
	return []*gobackend.Buffer{out, lseBuf}, nil
}

// ropeRow sets dst = x·cos + rotate_half(x)·sin for one row of d features, rotate_half(x) =
// [-x2, x1] over the first rotary features (zero past them), each product rounded before the add:
// the bits of the graph's Add(Mul(x, cos), Mul(rotate_half(x), sin)) (Temper fork: RopeCos).
func ropeRow(dst, x, cos, sin []float32, rotary int) {
	half := rotary / 2
	d := len(x)
	dst, cos, sin = dst[:d], cos[:d], sin[:d]
	// x·cos + (−x2)·sin is x·cos − x2·sin exactly (negation commutes with the rounded product, and
	// a + (−c) is a − c), which the vector loop computes.
	for i := ropeVector(dst, x, cos, sin, half); i < half; i++ {
		dst[i] = float32(x[i]*cos[i]) + float32(-x[i+half]*sin[i])
		dst[i+half] = float32(x[i+half]*cos[i+half]) + float32(x[i]*sin[i+half])
	}
	for i := rotary; i < d; i++ {
		dst[i] = float32(x[i]*cos[i]) + float32(0*sin[i])
	}
}

// decodeScratch is a worker's scratch of execDecodeAttention: scores of a group of query rows and
// the visible columns of the current and the next item.
type decodeScratch struct {
	sc     []float32
	idx    [2][]int32
	qr, kr []float32 // the rotated query rows and new key row (RopeCos)
}

// decodeScratchPool keeps the scratch between calls (a decode step calls the node once per layer).
var decodeScratchPool sync.Pool

// getDecodeScratch returns scratch for a cache of s columns (with rope, also for a work item's
// qLen rotated query floats and its rotated key row).
func getDecodeScratch(s, qLen int, rope bool) *decodeScratch {
	w, _ := decodeScratchPool.Get().(*decodeScratch)
	if w == nil {
		w = &decodeScratch{}
	}
	if cap(w.sc) < decodeGroup*s {
		w.sc = make([]float32, decodeGroup*s)
	}
	w.sc = w.sc[:cap(w.sc)]
	for i := range w.idx {
		if cap(w.idx[i]) < s {
			w.idx[i] = make([]int32, 0, s)
		}
	}
	if rope && len(w.qr) < qLen {
		w.qr, w.kr = make([]float32, qLen), make([]float32, qLen)
	}
	return w
}

// visibleColumns returns the indices of the true entries of maskRow, in vis's memory (capacity at
// least len(maskRow)). Without a branch per column: every index is stored and the count moves on
// by the bool's byte (0 or 1), since the prompt's and the padding's columns alternate unpredictably.
func visibleColumns(vis []int32, maskRow []bool) []int32 {
	vis = vis[:len(maskRow)]
	c := 0
	for j, ok := range maskRow {
		vis[c] = int32(j)
		c += int(*(*uint8)(unsafe.Pointer(&ok)))
	}
	return vis[:c]
}

// prefetchVisible prefetches the rows of head [keys, d] from the first to the last visible column
// (in a decode step the visible columns are the prompt and the steps so far: one span).
func prefetchVisible(head []float32, d int, vis []int32) {
	if len(vis) == 0 {
		return
	}
	lo, hi := int(vis[0])*d, (int(vis[len(vis)-1])+1)*d
	if lo < 0 || hi > len(head) {
		return
	}
	prefetchRange(unsafe.Pointer(&head[lo]), uintptr(hi-lo)*4)
}

// addRow adds row into dst element by element (ScatterSum's float32 combine).
func addRow(dst, row []float32) {
	for i, x := range row {
		dst[i] += x
	}
}

// decodeGroup is how many query rows of a kv head go through the keys and values together
// (groupScores, groupAccumulate): each key and value row is then read once per group instead of
// once per query row (the base preset's decode has three query heads per kv head, the small
// preset's two).
const decodeGroup = 3

// decodeRows computes the outputs o [nr, d] and log-sum-exps lse [nr] of nr query rows q [nr, d]
// from the keys and values of their kv head [keys, d], the visible key columns vis and scratch sc
// [nr·len(vis)].
func decodeRows(data *flashAttnData, o, lse, q, kHead, vHead []float32, vis []int32, sc []float32) {
	clear(o)
	nr, n := len(lse), len(vis)
	if n == 0 {
		for r := range lse {
			lse[r] = negInf
		}
		return
	}
	groupScores(sc, q, nr, kHead, vis)
	sc = sc[:nr*n]
	var mx, sums [decodeGroup]float32
	c := data.softcap
	if c > 0 {
		for r := range nr {
			row := sc[r*n : (r+1)*n]
			if data.scale != 1 {
				vecScale(row, data.scale)
			}
			for y, x := range row { // the same float32 operations as cap·tanh(x/cap) in the graph
				row[y] = float32(math.Tanh(float64(x/c))) * c
			}
			mx[r] = vecMax(row)
		}
	}
	// Scale and maximum in one pass (a scale of 1 leaves every x as it is), then e^(x − max) and
	// the sum: all the rows in one call where the machine allows (decodeSoftmaxVector), else row by row.
	if !decodeSoftmaxVector(sc, nr, n, data.scale, c <= 0, &mx, &sums) {
		for r := range nr {
			row := sc[r*n : (r+1)*n]
			if c <= 0 {
				mx[r] = vecScaleMax(row, data.scale)
			}
			vecSubScalar(row, mx[r])
			fastmath.Exp32Slice(row, row)
			sums[r] = vecSum(row)
		}
	}
	for r := range nr { // Log32: float32(math.Log(float64(x))) bit for bit, cheaper on [1, 2^25)
		lse[r] = mx[r] + fastmath.Log32(sums[r])
	}
	groupAccumulate(o, sc, nr, vHead, vis)
	if !decodeDivVector(o, nr, &sums) {
		d := len(o) / nr
		for r := range nr {
			vecDiv(o[r*d:(r+1)*d], sums[r])
		}
	}
}

// decodeAttentionVJPError is the answer to a VJP of decode attention: decoding is not differentiated.
func decodeAttentionVJPError(op string) error {
	return errors.Wrapf(compute.ErrNotImplemented, "%s: decode attention (KeyMask without Causal) has no VJP", op)
}
