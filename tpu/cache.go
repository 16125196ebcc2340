package tpu

import (
	"fmt"
	"slices"
	"time"

	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/model"
)

// Buckets lists the padded sizes inputs are rounded up to. An empty batch list means powers of two
// from 1; an empty sequence list means powers of two from 8 up to 32, then multiples of 32
// (model.SeqBucket, the generator's rule too). A size beyond the largest listed bucket is an error.
//
// Sequences get the finer default because their padding costs most (attention is quadratic in it)
// and because a configured batch.seq is rarely a power of two: a 16×160 SFT batch padded to 256
// trained at 1.9× the cost of 160 (`temper bench model --presets small --batch 16 --seq 160`: 0.62 s
// a step before, 0.33 s after, on a 2-core AVX-512 machine). The Go backend compiles a new shape in
// milliseconds, so the extra executables cost little; with XLA, whose compiles take seconds, list
// coarser buckets.
type Buckets struct {
	Batch []int `json:"batch,omitempty"`
	Seq   []int `json:"seq,omitempty"`
}

// Validate checks that each list is strictly ascending and positive.
func (b Buckets) Validate() error {
	for _, l := range []struct {
		name string
		v    []int
	}{{"batch", b.Batch}, {"seq", b.Seq}} {
		for i, n := range l.v {
			if n <= 0 || (i > 0 && n <= l.v[i-1]) {
				return fmt.Errorf("tpu: options: buckets.%s=%v: want strictly ascending positive sizes", l.name, l.v)
			}
		}
	}
	return nil
}

// batchBucket and seqBucket round n up to its bucket.
func (b Buckets) batchBucket(n int) (int, error) { return bucketOf("batch", n, b.Batch, 1) }
func (b Buckets) seqBucket(n int) (int, error) {
	if len(b.Seq) == 0 {
		return model.SeqBucket(n, 8), nil
	}
	return bucketOf("seq", n, b.Seq, 8)
}

func bucketOf(name string, n int, list []int, lo int) (int, error) {
	if len(list) == 0 {
		b := lo
		for b < n {
			b *= 2
		}
		return b, nil
	}
	i, _ := slices.BinarySearch(list, n)
	if i == len(list) {
		return 0, fmt.Errorf("%s %d exceeds the largest bucket %d (buckets %v)", name, n, list[len(list)-1], list)
	}
	return list[i], nil
}

// CacheKey names one compiled executable: a graph and its padded input shape.
type CacheKey struct {
	Graph string `json:"graph"` // "train", "logits", "logprobs", "loss", "generate", "generate_uncached"
	Shape string `json:"shape"` // padded sizes, e.g. "16x128" (generate: batch x prompt x cache)
}

func (k CacheKey) String() string { return k.Graph + "[" + k.Shape + "]" }

// CacheStats counts executable lookups. A miss compiles (the Generator compiles inside its first
// call of a bucket, so generation misses carry no compile time here).
type CacheStats struct {
	Hits           int64      `json:"hits"`
	Misses         int64      `json:"misses"`
	Evictions      int64      `json:"evictions"`
	CompileSeconds float64    `json:"compile_seconds"`
	Keys           []CacheKey `json:"keys"` // least recently used first
}

// execCache holds one compiled model executable per key, least recently used evicted first.
type execCache struct {
	max     int
	entries map[CacheKey]*gm.Exec
	order   []CacheKey // least recently used first
	stats   CacheStats
}

func newExecCache(max int) *execCache {
	return &execCache{max: max, entries: map[CacheKey]*gm.Exec{}}
}

func (c *execCache) touch(k CacheKey) {
	if i := slices.Index(c.order, k); i >= 0 {
		c.order = slices.Delete(c.order, i, i+1)
	}
	c.order = append(c.order, k)
	for len(c.order) > c.max {
		old := c.order[0]
		c.order = c.order[1:]
		if e := c.entries[old]; e != nil {
			e.Finalize()
		}
		delete(c.entries, old)
		c.stats.Evictions++
	}
}

// get returns the executable of k, building and compiling it on a miss (timed as compile time).
func (c *execCache) get(k CacheKey, build func() (*gm.Exec, error)) (*gm.Exec, error) {
	if e, ok := c.entries[k]; ok {
		c.stats.Hits++
		c.touch(k)
		return e, nil
	}
	c.stats.Misses++
	start := time.Now()
	e, err := build()
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", k, err)
	}
	c.stats.CompileSeconds += time.Since(start).Seconds()
	c.entries[k] = e
	c.touch(k)
	return e, nil
}

// count records a lookup of a key whose executable lives elsewhere (the Generator's own cache).
func (c *execCache) count(k CacheKey) (hit bool) {
	_, hit = c.entries[k]
	if hit {
		c.stats.Hits++
	} else {
		c.stats.Misses++
		c.entries[k] = nil
	}
	c.touch(k)
	return hit
}

func (c *execCache) snapshot() CacheStats {
	s := c.stats
	s.Keys = slices.Clone(c.order)
	return s
}

func (c *execCache) clear() {
	for _, e := range c.entries {
		if e != nil {
			e.Finalize()
		}
	}
	c.entries = map[CacheKey]*gm.Exec{}
	c.order = nil
}
