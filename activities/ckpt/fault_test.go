package ckpt

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestFaultInjection runs saves through a handler that fails ~20% of requests
// (503, dropped connections before and after the emulator acts, cut download
// bodies) while a reader keeps listing and verifying. Every save must commit
// whole or stay invisible, no reader may ever see a partial checkpoint, and
// with retries (the storage client's, then Save's own idempotent retry, as
// Temporal would do) every step must end up committed.
func TestFaultInjection(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	emu := newEmulator(t, true)
	opts := Options{GCS: emu.client, PartSize: testPartSize, Parallelism: 3, Retry: fastRetry}
	c := New(opts)
	check := New(Options{GCS: emu.direct(t), PartSize: testPartSize})
	root := "gs://" + testBucket + "/faults"
	emu.faults.enabled.Store(true)

	steps := int64(8)
	if testing.Short() {
		steps = 4
	}

	var (
		stop           atomic.Bool
		readerWG       sync.WaitGroup
		verified       atomic.Int64
		readerIOErrors atomic.Int64
		corruptSeen    = make(chan error, 1)
	)
	readerWG.Add(1)
	go func() {
		defer readerWG.Done()
		for !stop.Load() {
			refs, err := c.List(ctx, root, "r", "sft")
			if err != nil {
				readerIOErrors.Add(1)
				continue
			}
			for _, r := range refs {
				err := c.Verify(ctx, r.URI)
				switch {
				case err == nil:
					verified.Add(1)
				case errors.Is(err, ErrCorrupt):
					select {
					case corruptSeen <- err:
					default:
					}
				default:
					readerIOErrors.Add(1)
				}
			}
		}
	}()

	type result struct {
		ref      Ref
		attempts int
		failed   []error
	}
	results := make([]result, steps+1)
	candidates := make([][][]byte, steps+1)
	var wg sync.WaitGroup
	for step := int64(1); step <= steps; step++ {
		writers := 1
		if step%2 == 0 {
			writers = 2 // duplicate writers racing under faults
		}
		candidates[step] = make([][]byte, writers)
		for i := range writers {
			files := testFiles(step, uint64(i))
			candidates[step][i] = files[ModelName]
			st := testState(step)
			wg.Add(1)
			go func() {
				defer wg.Done()
				res := &results[step]
				for attempt := 1; attempt <= 20; attempt++ {
					ref, err := save(ctx, c, root, "r", "sft", step, files, &st)
					if err == nil {
						if i == 0 {
							res.ref, res.attempts = ref, attempt
						}
						return
					}
					if i == 0 {
						res.failed = append(res.failed, err)
					}
					// A failed save is invisible or whole, never partial.
					if ref, lerr := check.Lookup(ctx, root, "r", "sft", step); lerr == nil {
						if verr := check.Verify(ctx, ref.URI); verr != nil {
							t.Errorf("step %d: failed save left a visible bad checkpoint: %v (save error: %v)", step, verr, err)
						}
					} else if !errors.Is(lerr, ErrNotExist) {
						t.Errorf("lookup: %v", lerr)
					}
				}
				t.Errorf("step %d writer %d: no success in 20 attempts; last errors %v", step, i, res.failed)
			}()
		}
	}
	wg.Wait()
	// Keep the reader going a little over the finished set, then stop it.
	time.Sleep(50 * time.Millisecond)
	stop.Store(true)
	readerWG.Wait()
	emu.faults.enabled.Store(false)

	select {
	case err := <-corruptSeen:
		t.Fatalf("a reader saw a partial or corrupt checkpoint: %v", err)
	default:
	}
	refs, err := check.List(ctx, root, "r", "sft")
	if err != nil || int64(len(refs)) != steps {
		t.Fatalf("List = %d refs, %v; want %d", len(refs), err, steps)
	}
	totalFailed := 0
	for step := int64(1); step <= steps; step++ {
		ck, err := check.Read(ctx, refs[step-1].URI)
		if err != nil {
			t.Fatal(err)
		}
		if err := ck.Verify(ctx); err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		model, _ := readAll(t, ck, ModelName)
		match := 0
		for _, cand := range candidates[step] {
			if bytes.Equal(cand, model) {
				match++
			}
		}
		if match != 1 {
			t.Fatalf("step %d: committed model matches %d writers", step, match)
		}
		totalFailed += len(results[step].failed)
		for _, e := range results[step].failed {
			t.Logf("step %d: failed attempt (retried): %v", step, e)
		}
	}
	// Whatever failed attempts and losing writers left behind is garbage that
	// nothing references; GC (with the clock moved on) must clear all of it and
	// touch nothing committed.
	gc := New(Options{GCS: emu.direct(t), Now: func() time.Time { return time.Now().Add(time.Hour) }})
	removed, err := gc.GC(ctx, root, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	objs, _ := func() ([]ObjectInfo, error) {
		s, _ := Open(ctx, root, Options{GCS: emu.direct(t)})
		return s.List(ctx, "runs/")
	}()
	want := 0
	for _, r := range refs {
		ck, _ := check.Read(ctx, r.URI)
		want += len(ck.Manifest.Files) + 1
		if err := ck.Verify(ctx); err != nil {
			t.Fatalf("after GC: %v", err)
		}
	}
	if len(objs) != want {
		t.Fatalf("after GC %d objects remain, want %d", len(objs), want)
	}
	t.Logf("faults: %s", emu.faults)
	t.Logf("%d steps committed; %d failed save attempts retried; reader verified %d checkpoints (%d transient reader errors); GC removed %d leftover groups",
		steps, totalFailed, verified.Load(), readerIOErrors.Load(), len(removed))
	if emu.faults.lostCreates.Load() == 0 {
		t.Error("no manifest create lost its response: the idempotent-commit path went untested")
	}
	if verified.Load() == 0 {
		t.Error("the concurrent reader never verified anything")
	}
}
