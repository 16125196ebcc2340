package model

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/gomlx/compute"
	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/sample"
)

// Completion is one generated continuation.
type Completion struct {
	Tokens []int // sampled tokens (a final stop token included)
	// LogProbs[i] = log p(Tokens[i] | prompt, Tokens[:i]) under the model at temperature 1 without
	// top-k/top-p truncation: what TokenLogProbs recomputes on prompt+completion.
	LogProbs   []float32
	StopReason sample.StopReason
}

// Generator runs batched generation for one model. It compiles one prefill and one decode graph
// per (batch, prompt, cache) bucket and reuses them across calls; keep it alive between calls.
// Weights are read from the store at each call, so training updates are seen. Safe for concurrent
// use (calls are serialized).
type Generator struct {
	backend compute.Backend
	scope   *gm.Scope
	cfg     Config

	mu                          sync.Mutex
	prefill, decode, grow, full *gm.Exec
}

// cacheStep is the granularity of the KV cache's length: decode attends over the cache columns
// written so far rounded up to it (as an inference engine attends over the filled part), and the
// cache grows by this many columns when the next slot would not fit.
const cacheStep = 32

// NewGenerator prepares generation for the model cfg whose variables live under scope.
func NewGenerator(backend compute.Backend, scope *gm.Scope, cfg Config) (*Generator, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	gen := &Generator{backend: backend, scope: scope, cfg: cfg}
	// prefill: tokens [b, p], positions [b, p], cacheMask [b, s] → last logits [b, vocab], k…, v…
	// decode: token [b, 1], position [b, 1], slot [], cacheMask [b, s], k…, v… → logits [b, vocab], k…, v…
	// grow: k…, v… (cache length s) → the same, cacheStep columns longer, zero-filled
	err := newExecs(backend, scope.Store(), "new generator", 64,
		execOf{&gen.prefill, func(_ *gm.Scope, in []*Node) []*Node { return gen.prefillGraph(in[0], in[1], in[2]) }},
		execOf{&gen.decode, func(_ *gm.Scope, in []*Node) []*Node {
			return gen.decodeGraph(in[0], in[1], in[2], in[3], in[4:4+cfg.Layers], in[4+cfg.Layers:])
		}},
		execOf{&gen.grow, func(_ *gm.Scope, in []*Node) []*Node { return growGraph(in) }})
	if err != nil {
		return nil, err
	}
	// full (uncached reference): tokens, positions, mask [b, s] → logits [b, s, vocab]
	gen.full, err = gm.NewExec(backend, scope.Store(), func(_ *gm.Scope, tok, pos, mask *Node) *Node {
		return Forward(gen.scope, cfg, tok, pos, mask)
	})
	if err != nil {
		return nil, fmt.Errorf("model: new generator: %w", err)
	}
	gen.full.SetMaxCache(64)
	return gen, nil
}

// execOf is one executable to make: where it goes and its graph function (inputs and outputs as
// slices, the form of the cached-decoding graphs).
type execOf struct {
	dst *(*gm.Exec)
	fn  func(*gm.Scope, []*Node) []*Node
}

// newExecs makes each executable of es, keeping up to maxCache shapes compiled each; op names the
// caller in errors.
func newExecs(backend compute.Backend, store *gm.Store, op string, maxCache int, es ...execOf) error {
	for _, e := range es {
		x, err := gm.NewExec(backend, store, e.fn)
		if err != nil {
			return fmt.Errorf("model: %s: %w", op, err)
		}
		x.SetMaxCache(maxCache)
		*e.dst = x
	}
	return nil
}

// Generate is a one-shot NewGenerator(...).Generate(...); prefer keeping a Generator.
func Generate(backend compute.Backend, scope *gm.Scope, cfg Config, prompts [][]int, opts sample.Options) ([]Completion, error) {
	gen, err := NewGenerator(backend, scope, cfg)
	if err != nil {
		return nil, err
	}
	return gen.Generate(prompts, opts)
}

// biasFromMask: mask [b, keys] Bool → additive bias [b, 1, 1, keys].
func biasFromMask(mask *Node) *Node {
	g := mask.Graph()
	b, k := mask.Shape().Dim(0), mask.Shape().Dim(1)
	return Reshape(Where(mask, ScalarZero(g, dtypes.Float32), Scalar(g, dtypes.Float32, maskedScore)), b, 1, 1, k)
}

// ErrTooLong marks a request longer than the model's context (max_seq): the same request fails
// the same way every time, so callers treat it as bad input rather than retry it.
var ErrTooLong = errors.New("longer than the model's context")

// prefillGraph runs the prompt and returns the logits of its last column plus the KV cache.
//
//	tokens, positions: [b, p] int32 (left-padded); cacheMask: [b, s] Bool whose first p columns are
//	the prompt mask (s only sets the cache length)
//	out: logits [b, vocab], k[l] ×layers ([b·kv, s, hd]), v[l] ×layers ([b·kv, s, hd]), zero beyond p
func (gen *Generator) prefillGraph(tokens, positions, cacheMask *Node) []*Node {
	cfg := gen.cfg
	b, p, s := tokens.Shape().Dim(0), tokens.Shape().Dim(1), cacheMask.Shape().Dim(1)
	mask := SliceAxis(cacheMask, 1, AxisRange(0, p))
	bias := selfAttnBias(cfg, tokens.Graph(), mask, b, p)
	kv := &kvState{mode: kvPrefill, cacheLen: s, k: make([]*Node, cfg.Layers), v: make([]*Node, cfg.Layers)}
	h := trunk(gen.scope, cfg, tokens, positions, bias, kv)
	last := SliceAxis(h, 1, AxisRange(p-1, p)) // [b, 1, d]
	logits := Reshape(lmHead(gen.scope, cfg, last), b, cfg.Vocab)
	return append(append([]*Node{logits}, kv.k...), kv.v...)
}

// decodeGraph runs one token per row against the cache.
//
//	token, position: [b, 1] int32; slot: [] int32 cache column to write; cacheMask: [b, s] Bool
//	(valid columns, the slot included); k, v: cache as in prefillGraph, slot column still zero
//	out: logits [b, vocab], updated k ×layers, updated v ×layers
func (gen *Generator) decodeGraph(token, position, slot, cacheMask *Node, k, v []*Node) []*Node {
	return decodeStep(gen.scope, gen.cfg, token, position, Reshape(ConvertDType(slot, dtypes.Int32), 1, 1), cacheMask, k, v)
}

// decodeStep runs one token per row against the cache, writing each row's slot column: the decode
// step of the Generator (one slot for every row) and of the Decoder (a slot per row).
//
//	token, position: [b, 1] int32; slot: [b, 1] int32, or [1, 1] for one column of every row;
//	cacheMask: [b, s] Bool (valid columns, the slot included); k, v: cache as in prefillGraph, slot
//	column still zero
//	out: logits [b, vocab], updated k ×layers, updated v ×layers
func decodeStep(scope *gm.Scope, cfg Config, token, position, slot, cacheMask *Node, k, v []*Node) []*Node {
	g := token.Graph()
	b, s := cacheMask.Shape().Dim(0), cacheMask.Shape().Dim(1)
	nkv := cfg.KVHeads
	kv := &kvState{mode: kvDecode, cacheLen: s, k: append([]*Node(nil), k...), v: append([]*Node(nil), v...)}
	fused := decodeFused(cfg, g)
	switch {
	case fused && slot.Shape().Dim(0) == b: // the fused kernel writes column slot[row] of each row
		kv.slot = Reshape(slot, b)
	case fused:
		kv.slot = Reshape(slot)
	default: // (row·kv + h, slot[row]): the cache row of k and v to write.
		rowSlot := Reshape(BroadcastToDims(slot, b, nkv), b*nkv, 1)
		kv.slotIdx = Concatenate([]*Node{Iota(g, shapes.Make(dtypes.Int32, b*nkv, 1), 0), rowSlot}, -1)
	}
	var bias attnBias
	if cfg.hasFull() {
		if fused {
			bias.fullKeys = cacheMask
		} else {
			bias.full = biasFromMask(cacheMask)
		}
	}
	if cfg.hasSliding() {
		// The cache keeps every column (local layers mask it rather than keep only their window):
		// a sliding layer sees the columns c with slot - c < window, the slot itself included.
		col := Iota(g, shapes.Make(dtypes.Int32, b, s), 1)
		at := BroadcastToDims(slot, b, s)
		window := LogicalAnd(cacheMask, GreaterThan(AddScalar(col, cfg.SlidingWindow), at))
		if fused {
			bias.slidingKeys = window
		} else {
			bias.sliding = biasFromMask(window)
		}
	}
	h := trunk(scope, cfg, token, position, bias, kv)
	logits := Reshape(lmHead(scope, cfg, h), b, cfg.Vocab)
	return append(append([]*Node{logits}, kv.k...), kv.v...)
}

// growGraph pads every cache tensor by cacheStep zero columns on its cache axis.
//
//	in: k[l] ×layers, v[l] ×layers ([b·kv, s, hd]) → the same with s + cacheStep
func growGraph(in []*Node) []*Node {
	out := make([]*Node, len(in))
	zero := ScalarZero(in[0].Graph(), dtypes.Float32)
	more := compute.PadAxis{End: cacheStep}
	for i, t := range in {
		out[i] = Pad(t, zero, compute.PadAxis{}, more, compute.PadAxis{})
	}
	return out
}

// roundUp rounds n up to a multiple of step.
func roundUp(n, step int) int { return (n + step - 1) / step * step }

// bucket rounds n up to a power of two, at least lo.
func bucket(n, lo int) int {
	b := lo
	for b < n {
		b *= 2
	}
	return b
}

// SeqStep is the step of the sequence buckets past their powers of two.
const SeqStep = 32

// SeqBucket rounds a sequence length n up to its padded size: a power of two (at least lo) up to
// SeqStep, then a multiple of SeqStep. Sequence padding is paid in every layer (attention
// quadratically), and lengths such as 90 or 160 are common, so powers of two all the way would
// waste up to half the work; the Go backend compiles each new shape in milliseconds. Generation
// (prompt and cache) and the runtime's training and scoring graphs share this rule.
func SeqBucket(n, lo int) int {
	if n > SeqStep && lo <= SeqStep {
		return roundUp(n, SeqStep)
	}
	return bucket(n, lo)
}

// GenerateShape is the padded (batch, prompt, cache) layout one generation call compiles for:
// the batch a power of two, the longest prompt and prompt + maxNew as SeqBucket rounds them.
func GenerateShape(prompts, longest, maxNew int) (batch, prompt, cache int) {
	prompt = SeqBucket(longest, 8)
	return bucket(prompts, 1), prompt, SeqBucket(prompt+maxNew, 32)
}

// plan is the padded layout of one generation call.
type plan struct {
	n, batch, promptLen, cacheLen int
	lens                          []int
}

func (gen *Generator) plan(prompts [][]int, opts sample.Options) (plan, error) {
	if len(prompts) == 0 {
		return plan{}, fmt.Errorf("model: generate: no prompts")
	}
	if err := opts.Validate(len(prompts)); err != nil {
		return plan{}, fmt.Errorf("model: generate: %w", err)
	}
	pl := plan{n: len(prompts), lens: make([]int, len(prompts))}
	longest := 0
	for i, p := range prompts {
		if len(p) == 0 {
			return plan{}, fmt.Errorf("model: generate: prompt %d is empty", i)
		}
		for _, t := range p {
			if t < 0 || t >= gen.cfg.Vocab {
				return plan{}, fmt.Errorf("model: generate: prompt %d: token %d outside vocab %d", i, t, gen.cfg.Vocab)
			}
		}
		pl.lens[i] = len(p)
		longest = max(longest, len(p))
	}
	if longest+opts.MaxNewTokens > gen.cfg.MaxSeq {
		return plan{}, fmt.Errorf("model: generate: prompt %d + max_new_tokens %d exceeds max_seq %d: %w",
			longest, opts.MaxNewTokens, gen.cfg.MaxSeq, ErrTooLong)
	}
	pl.batch, pl.promptLen, pl.cacheLen = GenerateShape(pl.n, longest, opts.MaxNewTokens)
	return pl, nil
}

// lockedPlan plans the call and, when the plan is good, takes the generator's lock (the compiled
// graphs are not safe for concurrent calls); the caller defers gen.mu.Unlock().
func (gen *Generator) lockedPlan(prompts [][]int, opts sample.Options) (plan, error) {
	pl, err := gen.plan(prompts, opts)
	if err == nil {
		gen.mu.Lock()
	}
	return pl, err
}

// row returns row i's prompt and its left padding to promptLen; rows past the real prompts are
// dummies ([0]) that fill the batch bucket.
func (pl plan) row(prompts [][]int, i int) (prompt []int, pad int) {
	prompt = []int{0}
	if i < pl.n {
		prompt = prompts[i]
	}
	return prompt, pl.promptLen - len(prompt)
}

// rowState tracks one request while generating.
type rowState struct {
	sampler *sample.Sampler
	out     Completion
	done    bool
}

// newRows starts each request's sampler, its prompt observed (the repetition penalty counts it).
func newRows(pl plan, opts sample.Options, prompts [][]int) []*rowState {
	rows := make([]*rowState, pl.n)
	for i := range rows {
		rows[i] = &rowState{sampler: sample.NewSampler(opts, opts.SeedFor(i))}
		rows[i].sampler.Observe(prompts[i]...)
	}
	return rows
}

// consume samples one token for each live row from logits [batch, vocab]; it reports whether any
// row is still live.
//
// Rows are independent (each has its own seeded sampler), so with many rows they are sampled on
// several goroutines: the same tokens as one loop, and the host's float64 log-softmax over the
// vocabulary (a twentieth of a small model's decode step) no longer waits for one core.
func consume(rows []*rowState, logits []float32, vocab int, opts sample.Options) bool {
	const perWorker = 16
	workers := max(1, min(runtime.GOMAXPROCS(0), len(rows)/perWorker))
	lives := make([]bool, workers)
	SplitRows(len(rows), workers, func(w, lo, hi int) { lives[w] = consumeRows(rows, lo, hi, logits, vocab, opts) })
	return slices.Contains(lives, true)
}

// SplitRows calls f(w, lo, hi) for w < workers on consecutive ranges [lo, hi) that cover rows 0..n,
// each on its own goroutine, and waits for them; with workers <= 1 it calls f(0, 0, n) here.
func SplitRows(n, workers int, f func(w, lo, hi int)) {
	if workers <= 1 {
		f(0, 0, n)
		return
	}
	var wg sync.WaitGroup
	per := (n + workers - 1) / workers
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(w, w*per, min(n, (w+1)*per))
		}()
	}
	wg.Wait()
}

// consumeRows is consume for rows [lo, hi).
func consumeRows(rows []*rowState, lo, hi int, logits []float32, vocab int, opts sample.Options) bool {
	live := false
	for i := lo; i < hi; i++ {
		r := rows[i]
		if r.done {
			continue
		}
		lg := logits[i*vocab : (i+1)*vocab]
		tok := r.sampler.Next(lg)
		r.out.Tokens = append(r.out.Tokens, tok)
		r.out.LogProbs = append(r.out.LogProbs, float32(sample.LogProb(lg, tok)))
		switch {
		case opts.IsStop(tok) || opts.EndsWithStop(r.out.Tokens):
			r.done, r.out.StopReason = true, sample.StopToken
		case len(r.out.Tokens) >= opts.MaxNewTokens:
			r.done, r.out.StopReason = true, sample.StopLength
		default:
			live = true
		}
	}
	return live
}

func results(rows []*rowState) []Completion {
	out := make([]Completion, len(rows))
	for i, r := range rows {
		out[i] = r.out
	}
	return out
}

// recoverTo turns a panic (GoMLX reports errors by panicking) into *err.
func recoverTo(op string, err *error) {
	if r := recover(); r != nil {
		if e, ok := r.(error); ok {
			*err = fmt.Errorf("model: %s: %w", op, e)
		} else {
			*err = fmt.Errorf("model: %s: %v", op, r)
		}
	}
}

// Generate samples a completion for every prompt with the KV cache: one left-padded prefill, then
// one compiled decode step per new token. Rows that stopped keep computing (static shapes) but
// their output is frozen.
func (gen *Generator) Generate(prompts [][]int, opts sample.Options) (out []Completion, err error) {
	defer recoverTo("generate", &err)
	pl, err := gen.lockedPlan(prompts, opts)
	if err != nil {
		return nil, err
	}
	defer gen.mu.Unlock()
	b, p := pl.batch, pl.promptLen
	// The cache starts just long enough for the prompt and the first new token, and grows by
	// cacheStep columns as tokens fill it, so that decode attends over the filled part only.
	s := roundUp(p+1, cacheStep)
	tok := make([]int32, b*p)
	pos := make([]int32, b*p)
	starts := make([]int, b) // first real prompt column of each row (left padding before it)
	for i := range b {
		prompt, pad := pl.row(prompts, i)
		starts[i] = pad
		for j, t := range prompt {
			tok[i*p+pad+j] = int32(t)
			pos[i*p+pad+j] = int32(j)
		}
	}
	// cacheMask [b, s]: the prompt's real columns, then every decode slot up to last.
	cacheMask := func(s, last int) *tensors.Tensor {
		m := make([]bool, b*s)
		for i := range b {
			for c := starts[i]; c <= last; c++ {
				m[i*s+c] = true
			}
		}
		return tensors.FromFlatDataAndDimensions(m, b, s)
	}
	outs, err := gen.prefill.Call(tensors.FromFlatDataAndDimensions(tok, b, p),
		tensors.FromFlatDataAndDimensions(pos, b, p), cacheMask(s, p-1))
	if err != nil {
		return nil, fmt.Errorf("model: generate: prefill: %w", err)
	}
	rows := newRows(pl, opts, prompts)
	step1 := make([]int32, b)
	pos1 := make([]int32, b)
	for step := 0; ; step++ {
		// The logits are read in place (no copy per step: a fresh 67 KB slice per step of the
		// base preset cost ~14 ms per 64×64 call, 2.6%); nothing keeps them past consume.
		live := false
		tensors.MustConstFlatData(outs[0], func(logits []float32) { live = consume(rows, logits, gen.cfg.Vocab, opts) })
		if !live {
			break
		}
		slot := p + step
		if slot >= s {
			cache, err := donateAll(outs[1:], gen.backend)
			if err != nil {
				return nil, fmt.Errorf("model: generate: %w", err)
			}
			grown, err := gen.grow.Call(cache...)
			if err != nil {
				return nil, fmt.Errorf("model: generate: grow cache to %d: %w", s+cacheStep, err)
			}
			outs = append(outs[:1], grown...)
			s += cacheStep
		}
		for i := range b {
			step1[i], pos1[i] = 0, 0
			if i < pl.n {
				step1[i] = int32(rows[i].out.Tokens[len(rows[i].out.Tokens)-1])
				pos1[i] = int32(pl.lens[i] + step)
			}
		}
		args := []any{tensors.FromFlatDataAndDimensions(step1, b, 1), tensors.FromFlatDataAndDimensions(pos1, b, 1),
			tensors.FromScalar(int32(slot)), cacheMask(s, slot)}
		// Donate the cache: the decode graph scatters into it in place.
		cache, err := donateAll(outs[1:], gen.backend)
		if err != nil {
			return nil, fmt.Errorf("model: generate: %w", err)
		}
		args = append(args, cache...)
		outs[0].FinalizeAll()
		outs, err = gen.decode.Call(args...)
		if err != nil {
			return nil, fmt.Errorf("model: generate: decode step %d: %w", step, err)
		}
	}
	for _, t := range outs {
		t.FinalizeAll()
	}
	return results(rows), nil
}

// donateAll hands the tensors' buffers to the next call, which may then write them in place; the
// tensors must not be used afterwards.
func donateAll(ts []*tensors.Tensor, backend compute.Backend) ([]any, error) {
	out := make([]any, len(ts))
	for i, t := range ts {
		d, err := DonateTensorBuffer(t, backend, 0)
		if err != nil {
			return nil, fmt.Errorf("donate cache: %w", err)
		}
		out[i] = d
	}
	return out, nil
}

// GenerateUncached is the reference path: the same sampling, but every step recomputes the full
// forward over a fixed [batch, cache] buffer (one compiled graph). Slow; for tests and checks.
func (gen *Generator) GenerateUncached(prompts [][]int, opts sample.Options) (out []Completion, err error) {
	defer recoverTo("generate uncached", &err)
	pl, err := gen.lockedPlan(prompts, opts)
	if err != nil {
		return nil, err
	}
	defer gen.mu.Unlock()
	vocab, b, p, s := gen.cfg.Vocab, pl.batch, pl.promptLen, pl.cacheLen
	tok := make([]int32, b*s)
	pos := make([]int32, b*s)
	mask := make([]bool, b*s)
	for i := range b {
		prompt, pad := pl.row(prompts, i)
		for j, t := range prompt {
			tok[i*s+pad+j], pos[i*s+pad+j], mask[i*s+pad+j] = int32(t), int32(j), true
		}
	}
	rows := newRows(pl, opts, prompts)
	last := make([]float32, b*vocab)
	for step := 0; ; step++ {
		res, err := gen.full.Call(tensors.FromFlatDataAndDimensions(tok, b, s),
			tensors.FromFlatDataAndDimensions(pos, b, s), tensors.FromFlatDataAndDimensions(mask, b, s))
		if err != nil {
			return nil, fmt.Errorf("model: generate uncached: step %d: %w", step, err)
		}
		all := tensors.MustCopyFlatData[float32](res[0])
		res[0].FinalizeAll()
		col := p - 1 + step
		for i := range b {
			copy(last[i*vocab:(i+1)*vocab], all[(i*s+col)*vocab:(i*s+col+1)*vocab])
		}
		if !consume(rows, last, vocab, opts) {
			break
		}
		for i := range pl.n {
			k := i*s + col + 1
			tok[k] = int32(rows[i].out.Tokens[len(rows[i].out.Tokens)-1])
			pos[k] = int32(pl.lens[i] + step)
			mask[k] = true
		}
	}
	return results(rows), nil
}
