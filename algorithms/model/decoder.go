package model

import (
	"fmt"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"
)

// Decoder is one running batch for continuous batching: rows (requests) join it between decode
// steps with one batched prefill, every live row advances by one token per Step, and a row leaves
// whenever its request ends. Sampling is the caller's: Join and Step return next-token logits.
//
// Layout: the batch has a power-of-two number of lanes; a row keeps its lane while it lives and its
// tokens sit at cache columns 0..len-1 (prefill is right-padded), so a row's slot and position are
// its own length whatever its companions. The KV cache is rebuilt (one gather) when rows join, and
// when rows leaving would let the batch halve; otherwise free lanes are carried along idle. The
// cache grows by cacheStep columns when a row's next slot would not fit.
//
// Not safe for concurrent use.
type Decoder struct {
	backend compute.Backend
	scope   *gm.Scope
	cfg     Config

	prefill, step, merge, grow *gm.Exec

	lanes    []*decRow         // by lane; nil: free
	byID     map[int]int       // row id → lane
	cache    []*tensors.Tensor // k ×layers, v ×layers ([lanes·kv, cols, hd]); nil when empty
	cols     int               // cache columns
	nextID   int
	logitBuf []float32
}

type decRow struct {
	id  int
	len int // cache columns holding this row's tokens (its next slot and position)
}

// NewDecoder prepares a continuous batch for the model cfg whose variables live under scope. It
// reads the weights at every call, so it follows training.
func NewDecoder(backend compute.Backend, scope *gm.Scope, cfg Config) (*Decoder, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d := &Decoder{backend: backend, scope: scope, cfg: cfg, byID: map[int]int{}}
	// prefill: tokens [n, p] (right-padded), cacheMask [n, s] (column < len), last [n] (len-1)
	//   → logits [n, vocab], k…, v… (cache length s, zero past each row's len)
	// step: token [b, 1], slot [b], cacheMask [b, s], k…, v… → logits [b, vocab], k…, v…
	// merge: idx [b'·kv, 1], probe [s'], old k…, v… [, new k…, v…] → k…, v… with b' lanes, s' columns
	// Lanes and cache columns change as requests come and go: keep many shapes compiled.
	err := newExecs(backend, scope.Store(), "new decoder", 256,
		execOf{&d.prefill, func(_ *gm.Scope, in []*Node) []*Node { return d.prefillGraph(in[0], in[1], in[2]) }},
		execOf{&d.step, func(_ *gm.Scope, in []*Node) []*Node {
			return d.stepGraph(in[0], in[1], in[2], in[3:3+cfg.Layers], in[3+cfg.Layers:])
		}},
		execOf{&d.merge, func(_ *gm.Scope, in []*Node) []*Node { return mergeGraph(in[0], in[1], in[2:], cfg.Layers) }},
		execOf{&d.grow, func(_ *gm.Scope, in []*Node) []*Node { return growGraph(in) }})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// CacheBytes is the KV cache's size for lanes rows of cols columns (float32).
func CacheBytes(cfg Config, lanes, cols int) int64 {
	return 2 * int64(cfg.Layers) * int64(lanes) * int64(cfg.KVHeads) * int64(cfg.HeadDim) * int64(cols) * 4
}

// CacheCols is the cache length a row of n tokens (its next slot included) needs.
func CacheCols(n int) int { return roundUp(n+1, cacheStep) }

// Lanes is the number of lanes a batch of n rows occupies.
func Lanes(n int) int { return bucket(n, 1) }

// Rows returns the ids of the live rows, in lane order.
func (d *Decoder) Rows() []int {
	var out []int
	for _, r := range d.lanes {
		if r != nil {
			out = append(out, r.id)
		}
	}
	return out
}

// Len is the number of tokens row id holds (prompt and the tokens fed so far).
func (d *Decoder) Len(id int) (int, bool) {
	l, ok := d.byID[id]
	if !ok {
		return 0, false
	}
	return d.lanes[l].len, true
}

// Shape is the current padded layout: lanes and cache columns (0, 0 when empty).
func (d *Decoder) Shape() (lanes, cols int) { return len(d.lanes), d.cols }

// Join prefills prompts as new rows (one batched prefill) and returns their ids and their
// next-token logits [len(prompts)·vocab], in order. The rows then advance with Step.
func (d *Decoder) Join(prompts [][]int) (ids []int, logits []float32, err error) {
	defer recoverTo("decoder join", &err)
	if len(prompts) == 0 {
		return nil, nil, fmt.Errorf("model: decoder join: no prompts")
	}
	longest := 0
	for i, p := range prompts {
		if len(p) == 0 {
			return nil, nil, fmt.Errorf("model: decoder join: prompt %d is empty", i)
		}
		if len(p) >= d.cfg.MaxSeq {
			return nil, nil, fmt.Errorf("model: decoder join: prompt %d has %d tokens, max_seq %d: %w", i, len(p), d.cfg.MaxSeq, ErrTooLong)
		}
		for _, t := range p {
			if t < 0 || t >= d.cfg.Vocab {
				return nil, nil, fmt.Errorf("model: decoder join: prompt %d: token %d outside vocab %d", i, t, d.cfg.Vocab)
			}
		}
		longest = max(longest, len(p))
	}
	live := 0
	need := longest
	for _, r := range d.lanes {
		if r != nil {
			live++
			need = max(need, r.len)
		}
	}
	n := len(prompts)
	nb := bucket(n, 1)
	p := SeqBucket(longest, 8)
	cols := max(CacheCols(need), d.cols)
	if live == 0 {
		cols = CacheCols(need)
	}
	tok := make([]int32, nb*p)
	mask := make([]bool, nb*cols)
	last := make([]int32, nb)
	for i := range nb {
		prompt := []int{0} // dummy rows fill the bucket
		if i < n {
			prompt = prompts[i]
		}
		for j, t := range prompt {
			tok[i*p+j] = int32(t)
			mask[i*cols+j] = true
		}
		last[i] = int32(len(prompt) - 1)
	}
	outs, err := d.prefill.Call(tensors.FromFlatDataAndDimensions(tok, nb, p),
		tensors.FromFlatDataAndDimensions(mask, nb, cols), tensors.FromFlatDataAndDimensions(last, nb))
	if err != nil {
		return nil, nil, fmt.Errorf("model: decoder join: prefill %d×%d: %w", nb, p, err)
	}
	all := tensors.MustCopyFlatData[float32](outs[0])
	outs[0].FinalizeAll()
	logits = all[:n*d.cfg.Vocab]
	ids = make([]int, n)
	for i := range ids {
		ids[i] = d.nextID
		d.nextID++
	}
	if live == 0 {
		// The prefill's rows are the new cache: lane i holds prompt i, the dummies are free lanes.
		d.dropCache()
		d.cache, d.cols = outs[1:], cols
		d.lanes = make([]*decRow, nb)
		clear(d.byID)
		for i := range n {
			d.lanes[i] = &decRow{id: ids[i], len: len(prompts[i])}
			d.byID[ids[i]] = i
		}
		return ids, logits, nil
	}
	// Live rows keep their order (lanes first), newcomers follow.
	var order []*decRow
	var src []int // source row in concat(old lanes, new rows) of each new lane
	for l, r := range d.lanes {
		if r != nil {
			order = append(order, r)
			src = append(src, l)
		}
	}
	for i := range n {
		order = append(order, &decRow{id: ids[i], len: len(prompts[i])})
		src = append(src, len(d.lanes)+i)
	}
	if err := d.rebuild(order, src, cols, outs[1:]); err != nil {
		return nil, nil, fmt.Errorf("model: decoder join: %w", err)
	}
	return ids, logits, nil
}

// Leave removes row id; its lane is freed (and the batch compacted at the next call when it can
// halve).
func (d *Decoder) Leave(id int) error {
	l, ok := d.byID[id]
	if !ok {
		return fmt.Errorf("model: decoder leave: no row %d", id)
	}
	d.lanes[l] = nil
	delete(d.byID, id)
	if len(d.byID) == 0 {
		d.dropCache()
		d.lanes, d.cols = nil, 0
	}
	return nil
}

// Step feeds tokens[i] to row ids[i] (every live row exactly once, in any order) and returns the
// next-token logits [len(ids)·vocab] in the order of ids.
func (d *Decoder) Step(ids, tokens []int) (logits []float32, err error) {
	defer recoverTo("decoder step", &err)
	if len(ids) != len(tokens) {
		return nil, fmt.Errorf("model: decoder step: %d ids for %d tokens", len(ids), len(tokens))
	}
	if len(ids) != len(d.byID) {
		return nil, fmt.Errorf("model: decoder step: %d rows fed, %d live (every live row advances)", len(ids), len(d.byID))
	}
	feed := make(map[int]int, len(ids))
	for i, id := range ids {
		if _, ok := d.byID[id]; !ok {
			return nil, fmt.Errorf("model: decoder step: no row %d", id)
		}
		if _, dup := feed[id]; dup {
			return nil, fmt.Errorf("model: decoder step: row %d fed twice", id)
		}
		if tokens[i] < 0 || tokens[i] >= d.cfg.Vocab {
			return nil, fmt.Errorf("model: decoder step: row %d: token %d outside vocab %d", id, tokens[i], d.cfg.Vocab)
		}
		if d.lanes[d.byID[id]].len >= d.cfg.MaxSeq {
			return nil, fmt.Errorf("model: decoder step: row %d holds %d tokens, max_seq %d: %w", id, d.lanes[d.byID[id]].len, d.cfg.MaxSeq, ErrTooLong)
		}
		feed[id] = tokens[i]
	}
	if err := d.compact(); err != nil {
		return nil, fmt.Errorf("model: decoder step: %w", err)
	}
	b := len(d.lanes)
	need := 0
	for _, r := range d.lanes {
		if r != nil {
			need = max(need, r.len)
		}
	}
	for need >= d.cols {
		cache, err := donateAll(d.cache, d.backend)
		if err != nil {
			return nil, fmt.Errorf("model: decoder step: %w", err)
		}
		d.cache = nil
		grown, err := d.grow.Call(cache...)
		if err != nil {
			return nil, fmt.Errorf("model: decoder step: grow cache to %d: %w", d.cols+cacheStep, err)
		}
		d.cache = grown
		d.cols += cacheStep
	}
	s := d.cols
	tok := make([]int32, b)
	slot := make([]int32, b)
	mask := make([]bool, b*s)
	for l, r := range d.lanes {
		if r == nil {
			continue // a free lane attends over nothing and writes its column 0, never read
		}
		tok[l] = int32(feed[r.id])
		slot[l] = int32(r.len)
		for c := 0; c <= r.len; c++ {
			mask[l*s+c] = true
		}
	}
	args := []any{tensors.FromFlatDataAndDimensions(tok, b, 1), tensors.FromFlatDataAndDimensions(slot, b),
		tensors.FromFlatDataAndDimensions(mask, b, s)}
	cache, err := donateAll(d.cache, d.backend)
	if err != nil {
		return nil, fmt.Errorf("model: decoder step: %w", err)
	}
	d.cache = nil
	outs, err := d.step.Call(append(args, cache...)...)
	if err != nil {
		// The donated cache is gone: the rows cannot go on.
		d.lanes, d.cols = nil, 0
		clear(d.byID)
		return nil, fmt.Errorf("model: decoder step %d×%d: %w", b, s, err)
	}
	d.cache = outs[1:]
	vocab := d.cfg.Vocab
	if cap(d.logitBuf) < b*vocab {
		d.logitBuf = make([]float32, b*vocab)
	}
	all := d.logitBuf[:b*vocab]
	outs[0].MustConstFlatData(func(flat any) { copy(all, flat.([]float32)) })
	outs[0].FinalizeAll()
	logits = make([]float32, len(ids)*vocab)
	for i, id := range ids {
		l := d.byID[id]
		copy(logits[i*vocab:(i+1)*vocab], all[l*vocab:(l+1)*vocab])
		d.lanes[l].len++
	}
	return logits, nil
}

// compact rebuilds the cache with fewer lanes when the live rows fit in half of them.
func (d *Decoder) compact() error {
	live := len(d.byID)
	if live == 0 || bucket(live, 1) >= len(d.lanes) {
		return nil
	}
	var order []*decRow
	var src []int
	need := 0
	for l, r := range d.lanes {
		if r != nil {
			order = append(order, r)
			src = append(src, l)
			need = max(need, r.len)
		}
	}
	return d.rebuild(order, src, CacheCols(need), nil)
}

// rebuild lays out a new cache of bucket(len(order)) lanes and cols columns: lane i takes row
// src[i] of concat(current lanes, fresh rows); the remaining lanes are free.
func (d *Decoder) rebuild(order []*decRow, src []int, cols int, fresh []*tensors.Tensor) error {
	kv := d.cfg.KVHeads
	nb := bucket(len(order), 1)
	idx := make([]int32, nb*kv)
	for i := range nb {
		s := src[min(i, len(src)-1)] // free lanes copy some row: never read
		for h := range kv {
			idx[i*kv+h] = int32(s*kv + h)
		}
	}
	args := []any{tensors.FromFlatDataAndDimensions(idx, nb*kv, 1), tensors.FromFlatDataAndDimensions(make([]bool, cols), cols)}
	for _, t := range d.cache {
		args = append(args, t)
	}
	for _, t := range fresh {
		args = append(args, t)
	}
	outs, err := d.merge.Call(args...)
	if err != nil {
		return fmt.Errorf("rebuild cache to %d×%d: %w", nb, cols, err)
	}
	d.dropCache()
	for _, t := range fresh {
		t.FinalizeAll()
	}
	d.cache, d.cols = outs, cols
	d.lanes = make([]*decRow, nb)
	clear(d.byID)
	for i, r := range order {
		d.lanes[i] = r
		d.byID[r.id] = i
	}
	return nil
}

func (d *Decoder) dropCache() {
	for _, t := range d.cache {
		t.FinalizeAll()
	}
	d.cache = nil
}

// Close releases the cache (the compiled graphs go with the Decoder).
func (d *Decoder) Close() {
	d.dropCache()
	d.lanes, d.cols = nil, 0
	clear(d.byID)
	for _, e := range []*gm.Exec{d.prefill, d.step, d.merge, d.grow} {
		e.Finalize()
	}
}

// prefillGraph runs right-padded prompts and returns each row's last logits and its KV cache.
//
//	tokens: [n, p] int32, row i's prompt at columns 0..len_i-1; cacheMask: [n, s] Bool, true at the
//	prompt's columns (s sets the cache length); last: [n] int32, len_i - 1
//	out: logits [n, vocab], k[l] ×layers, v[l] ×layers ([n·kv, s, hd]), zero at
//	every column ≥ len_i (decode adds a row's next key into its zero slot)
func (d *Decoder) prefillGraph(tokens, cacheMask, last *Node) []*Node {
	cfg := d.cfg
	g := tokens.Graph()
	n, p, s := tokens.Shape().Dim(0), tokens.Shape().Dim(1), cacheMask.Shape().Dim(1)
	positions := Iota(g, shapes.Make(dtypes.Int32, n, p), 1)
	mask := SliceAxis(cacheMask, 1, AxisRange(0, p))
	bias := squareBias(cfg, g, mask, n, p)
	kv := &kvState{mode: kvPrefill, cacheLen: s, k: make([]*Node, cfg.Layers), v: make([]*Node, cfg.Layers)}
	h := trunk(d.scope, cfg, tokens, positions, bias, kv) // [n, p, d]
	at := Concatenate([]*Node{Iota(g, shapes.Make(dtypes.Int32, n, 1), 0), Reshape(ConvertDType(last, dtypes.Int32), n, 1)}, -1)
	lastH := Reshape(Gather(h, at), n, 1, cfg.DModel)
	logits := Reshape(lmHead(d.scope, cfg, lastH), n, cfg.Vocab)
	// Padding columns hold the padding tokens' keys and values: zero them.
	nkv, hd := cfg.KVHeads, cfg.HeadDim
	rows := Reshape(BroadcastToDims(Reshape(cacheMask, n, 1, s), n, nkv, s), n*nkv, s)
	keep := BroadcastToDims(Reshape(rows, n*nkv, s, 1), n*nkv, s, hd)
	zero := ScalarZero(g, dtypes.Float32)
	out := []*Node{logits}
	for l := range cfg.Layers {
		out = append(out, Where(keep, kv.k[l], zero))
	}
	for l := range cfg.Layers {
		out = append(out, Where(keep, kv.v[l], zero))
	}
	return out
}

// stepGraph runs one token per row, each at its own slot.
//
//	token: [b, 1] int32; slot: [b] int32 (the row's cache column and RoPE position); cacheMask:
//	[b, s] Bool (the row's columns, its slot included; all false for a free lane); k, v: cache as
//	in prefillGraph with each slot column still zero
//	out: logits [b, vocab], updated k ×layers, updated v ×layers
func (d *Decoder) stepGraph(token, slot, cacheMask *Node, k, v []*Node) []*Node {
	rowSlot := Reshape(ConvertDType(slot, dtypes.Int32), cacheMask.Shape().Dim(0), 1)
	return decodeStep(d.scope, d.cfg, token, rowSlot, rowSlot, cacheMask, k, v)
}

// mergeGraph gathers cache rows into a new layout.
//
//	idx: [b'·kv, 1] int32 rows of concat(old, fresh) on the batch·kv axis; probe: [s'] (its length
//	is the new column count); caches: old k ×layers, old v ×layers, then optionally fresh k, v
//	(already s' columns)
//	out: k ×layers, v ×layers ([b'·kv, s', hd])
func mergeGraph(idx, probe *Node, caches []*Node, layers int) []*Node {
	s2 := probe.Shape().Dim(0)
	zero := ScalarZero(idx.Graph(), dtypes.Float32)
	fit := func(t *Node) *Node { // k and v: [b·kv, s, hd]
		s := t.Shape().Dim(1)
		switch {
		case s < s2:
			return Pad(t, zero, compute.PadAxis{}, compute.PadAxis{End: s2 - s}, compute.PadAxis{})
		case s > s2:
			return SliceAxis(t, 1, AxisRange(0, s2))
		}
		return t
	}
	fresh := len(caches) > 2*layers
	out := make([]*Node, 2*layers)
	for i := range out {
		t := fit(caches[i])
		if fresh {
			t = Concatenate([]*Node{t, caches[2*layers+i]}, 0)
		}
		out[i] = Gather(t, idx)
	}
	return out
}
