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
// workers. A query row with no visible key gets zeros and a log-sum-exp of -Inf. No VJP: decoding
// is not differentiated.

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
	inputs, err := f.VerifyAndCastValues(op, query, key, value, options.KeyMask)
	if err != nil {
		return nil, nil, err
	}
	q, k, v, m := inputs[0].Shape, inputs[1].Shape, inputs[2].Shape, inputs[3].Shape
	for _, s := range []shapes.Shape{q, k, v} {
		if s.DType != dtypes.Float32 {
			return nil, nil, errors.Wrapf(compute.ErrNotImplemented, "%s: decode attention of dtype %s (float32 only)", op, s.DType)
		}
	}
	if q.Rank() != 4 || !k.Equal(v) || (k.Rank() != 4 && k.Rank() != 3) {
		return nil, nil, errors.Errorf("%s: decode attention: query %s must be [batch, heads, q, head_dim], key %s and value %s alike, [batch, kv_heads, keys, head_dim] or [batch·kv_heads, keys, head_dim]", op, q, k, v)
	}
	batch, heads, dim := q.Dimensions[0], q.Dimensions[1], q.Dimensions[3]
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
	if kvHeads <= 0 || heads%kvHeads != 0 || k.Dimensions[k.Rank()-1] != dim {
		return nil, nil, errors.Errorf("%s: decode attention: key %s does not fit query %s (same batch and head_dim; kv heads dividing heads)", op, k, q)
	}
	if m.DType != dtypes.Bool || m.Rank() != 2 || m.Dimensions[0] != batch || m.Dimensions[1] != keys {
		return nil, nil, errors.Errorf("%s: KeyMask %s: want Bool [%d, %d]", op, m, batch, keys)
	}
	scale := options.Scale
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(dim))
	}
	data := &flashAttnData{heads: heads, kvHeads: kvHeads, scale: float32(scale), softcap: float32(options.Softcap), decode: true}
	lse := shapes.Make(dtypes.Float32, batch, heads, q.Dimensions[2])
	node := f.NewMultiOutputsNode(compute.OpTypeFusedScaledDotProductAttention, []shapes.Shape{q.Clone(), lse}, inputs...)
	node.Data = data
	return node.MultiOutputsNodes[0], []compute.Value{node.MultiOutputsNodes[1]}, nil
}

// execDecodeAttention runs a decode node: outputs and the log-sum-exp per query row.
func execDecodeAttention(backend *gobackend.Backend, node *gobackend.Node, inputs []*gobackend.Buffer) ([]*gobackend.Buffer, error) {
	data := node.Data.(*flashAttnData)
	qs, ks := inputs[0].RawShape, inputs[1].RawShape
	b, nq, d := qs.Dimensions[0], qs.Dimensions[2], qs.Dimensions[3]
	hk, s := data.kvHeads, ks.Dimensions[ks.Rank()-2]
	grp := data.heads / hk
	q, k, v := inputs[0].Flat.([]float32), inputs[1].Flat.([]float32), inputs[2].Flat.([]float32)
	mask := inputs[3].Flat.([]bool)
	out, err := backend.GetBuffer(node.MultiOutputsShapes[0])
	if err != nil {
		return nil, err
	}
	lseBuf, err := backend.GetBuffer(node.MultiOutputsShapes[1])
	if err != nil {
		backend.PutBuffer(out)
		return nil, err
	}
	o, lse := out.Flat.([]float32), lseBuf.Flat.([]float32)
	rows := grp * nq // query rows of one kv head: heads kh·grp … kh·grp+grp-1, nq rows each
	n := b * hk
	var next atomic.Int64
	backend.Workers.Saturate(func() {
		var sc []float32
		var idx []int32
		for {
			item := int(next.Add(1) - 1)
			if item >= n {
				return
			}
			if sc == nil {
				sc, idx = make([]float32, decodeGroup*s), make([]int32, s)
			}
			bi := item / hk
			vis := idx[:0]
			for j, ok := range mask[bi*s : (bi+1)*s] {
				if ok {
					vis = append(vis, int32(j))
				}
			}
			kHead, vHead := k[item*s*d:(item+1)*s*d], v[item*s*d:(item+1)*s*d]
			r0 := item * rows // = (bi·heads + kh·grp)·nq: the item's first query row
			for r := r0; r < r0+rows; r += decodeGroup {
				nr := min(decodeGroup, r0+rows-r)
				decodeRows(data, o[r*d:(r+nr)*d], lse[r:r+nr], q[r*d:(r+nr)*d], kHead, vHead, vis, sc[:nr*len(vis)])
			}
		}
	})
	return []*gobackend.Buffer{out, lseBuf}, nil
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
	sums := [decodeGroup]float32{}
	for r := range nr {
		row := sc[r*n : (r+1)*n]
		if data.scale != 1 {
			vecScale(row, data.scale)
		}
		if c := data.softcap; c > 0 {
			for y, x := range row { // the same float32 operations as cap·tanh(x/cap) in the graph
				row[y] = float32(math.Tanh(float64(x/c))) * c
			}
		}
		mx := vecMax(row)
		vecSubScalar(row, mx)
		fastmath.Exp32Slice(row, row)
		sums[r] = vecSum(row)
		lse[r] = mx + float32(math.Log(float64(sums[r])))
	}
	groupAccumulate(o, sc, nr, vHead, vis)
	d := len(o) / nr
	for r := range nr {
		vecDiv(o[r*d:(r+1)*d], sums[r])
	}
}

// decodeAttentionVJPError is the answer to a VJP of decode attention: decoding is not differentiated.
func decodeAttentionVJPError(op string) error {
	return errors.Wrapf(compute.ErrNotImplemented, "%s: decode attention (KeyMask without Causal) has no VJP", op)
}
