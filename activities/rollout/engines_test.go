package rollout

import (
	"context"
	"testing"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/model"
)

// countingEngine counts closes; nothing else of train.Engine is used by the cache.
type countingEngine struct {
	train.Engine
	closed *int
}

func (e countingEngine) Close() error { *e.closed++; return nil }

// TestEngineCache: one load per checkpoint while it is current; a replaced engine is closed at its
// last release, not while in use.
func TestEngineCache(t *testing.T) {
	var c engineCache
	loads, closed := map[string]int{}, map[string]*int{}
	load := func(_ context.Context, uri string) (train.Engine, model.Config, error) {
		loads[uri]++
		n := 0
		closed[uri] = &n
		return countingEngine{closed: &n}, model.Config{MaxSeq: 128}, nil
	}
	ctx := context.Background()
	a1, _ := c.acquire(ctx, "v1", load)
	a2, _ := c.acquire(ctx, "v1", load)
	c.release(a1)
	b, _ := c.acquire(ctx, "v2", load) // v1 still used by a2
	if loads["v1"] != 1 || loads["v2"] != 1 || *closed["v1"] != 0 {
		t.Fatalf("loads %v, v1 closed %d times while in use", loads, *closed["v1"])
	}
	c.release(a2)
	if *closed["v1"] != 1 {
		t.Fatalf("v1 closed %d times after its last release, want 1", *closed["v1"])
	}
	c.release(b)
	if *closed["v2"] != 0 {
		t.Fatal("the current engine was closed")
	}
	b2, _ := c.acquire(ctx, "v2", load)
	c.release(b2)
	if loads["v2"] != 1 {
		t.Fatalf("v2 loaded %d times, want once", loads["v2"])
	}
}
