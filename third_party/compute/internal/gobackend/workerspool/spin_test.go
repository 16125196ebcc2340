// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package workerspool

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// withProcs runs the test with GOMAXPROCS n (helpers exist even on a 2-core machine).
func withProcs(t *testing.T, n int) {
	old := runtime.GOMAXPROCS(n)
	t.Cleanup(func() { runtime.GOMAXPROCS(old) })
}

// queue runs n work items through Saturate as a work queue, each item counted in done; nested,
// items whose index is a multiple of 7 run a nested Saturate of 5 items. It checks that no task
// runs after Saturate returned.
func queue(t *testing.T, pool *Pool, done []atomic.Int32, nested bool) {
	var next atomic.Int32
	var returned atomic.Bool
	var inFlight atomic.Int32
	pool.Saturate(func() {
		if returned.Load() {
			t.Error("a task started after Saturate returned")
		}
		inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			i := int(next.Add(1)) - 1
			if i >= len(done) {
				return
			}
			done[i].Add(1)
			if nested && i%7 == 0 {
				sub := make([]atomic.Int32, 5)
				queue(t, pool, sub, false)
				for k := range sub {
					if sub[k].Load() != 1 {
						t.Errorf("nested item %d done %d times", k, sub[k].Load())
					}
				}
			}
		}
	})
	returned.Store(true)
	if n := inFlight.Load(); n != 0 {
		t.Errorf("Saturate returned with %d tasks still running", n)
	}
}

func TestSaturateSpinEveryItemOnce(t *testing.T) {
	withProcs(t, 4)
	for _, tc := range []struct {
		name string
		par  int
		spin time.Duration
	}{{"unlimited", -1, 50 * time.Microsecond}, {"bounded", 8, 50 * time.Microsecond}, {"two", 2, 20 * time.Microsecond},
		{"parks", -1, time.Microsecond}} {
		t.Run(tc.name, func(t *testing.T) {
			pool := New()
			pool.SetMaxParallelism(tc.par)
			pool.SetSpin(tc.spin)
			defer pool.Stop()
			var wg sync.WaitGroup
			for c := range 4 { // concurrent callers, as under the parallel executor
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(c), 1))
					for range 300 {
						done := make([]atomic.Int32, rng.IntN(64))
						queue(t, pool, done, c%2 == 0)
						for i := range done {
							if done[i].Load() != 1 {
								t.Errorf("item %d of %d done %d times", i, len(done), done[i].Load())
								return
							}
						}
						if rng.IntN(8) == 0 { // let helpers park now and then
							time.Sleep(time.Duration(rng.IntN(100)) * time.Microsecond)
						}
					}
				}()
			}
			wg.Wait()
			pool.mu.Lock()
			defer pool.mu.Unlock()
			if pool.numRunning != 0 {
				t.Errorf("numRunning = %d after all calls returned", pool.numRunning)
			}
		})
	}
}

// TestSaturateSpinParticipants: at most min(maxParallelism, GOMAXPROCS) tasks at once, the caller
// included, and helpers do join (a task that waits for a moment sees a second one).
func TestSaturateSpinParticipants(t *testing.T) {
	withProcs(t, 3)
	for _, par := range []int{-1, 2, 8} {
		pool := New()
		pool.SetMaxParallelism(par)
		pool.SetSpin(100 * time.Microsecond)
		want := 3
		if par > 0 {
			want = min(par, 3)
		}
		var most atomic.Int32
		for range 200 {
			var running atomic.Int32
			var next atomic.Int32
			pool.Saturate(func() {
				n := running.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				for next.Add(1) <= 20 {
					time.Sleep(5 * time.Microsecond)
				}
				running.Add(-1)
			})
		}
		pool.Stop()
		if got := int(most.Load()); got > want || got < 2 {
			t.Errorf("parallelism %d: at most %d tasks at once, want 2..%d", par, got, want)
		}
	}
}

// TestSaturateSpinInline: maxParallelism 0 runs the task once on the caller; GOMAXPROCS 1 too.
func TestSaturateSpinInline(t *testing.T) {
	pool := New()
	pool.SetSpin(50 * time.Microsecond)
	pool.SetMaxParallelism(0)
	var count atomic.Int32
	pool.Saturate(func() { count.Add(1) })
	if count.Load() != 1 {
		t.Errorf("parallelism 0: task ran %d times, want 1", count.Load())
	}
	withProcs(t, 1)
	pool.SetMaxParallelism(-1)
	count.Store(0)
	pool.Saturate(func() { count.Add(1) })
	if count.Load() != 1 {
		t.Errorf("GOMAXPROCS 1: task ran %d times, want 1", count.Load())
	}
	if pool.spinnerPtr.Load() != nil {
		t.Errorf("GOMAXPROCS 1 started helpers")
	}
}

// TestSaturateSpinStop: Stop ends the helpers; Saturate keeps working (a goroutine per helper).
func TestSaturateSpinStop(t *testing.T) {
	withProcs(t, 4)
	before := runtime.NumGoroutine()
	pool := New()
	pool.SetMaxParallelism(-1)
	pool.SetSpin(20 * time.Microsecond)
	done := make([]atomic.Int32, 50)
	queue(t, pool, done, false)
	if runtime.NumGoroutine() < before+3 {
		t.Errorf("%d goroutines, want at least %d (3 helpers)", runtime.NumGoroutine(), before+3)
	}
	pool.Stop()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after Stop, want %d", n, before)
	}
	done = make([]atomic.Int32, 50)
	queue(t, pool, done, true)
	for i := range done {
		if done[i].Load() != 1 {
			t.Errorf("after Stop: item %d done %d times", i, done[i].Load())
		}
	}
}

// TestSaturateSpinWithWaitToStart: bounded accounting stays consistent when WaitToStart tasks and
// Saturate calls share the pool.
func TestSaturateSpinWithWaitToStart(t *testing.T) {
	withProcs(t, 4)
	pool := New()
	pool.SetMaxParallelism(3)
	pool.SetSpin(30 * time.Microsecond)
	defer pool.Stop()
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		pool.WaitToStart(func() {
			defer wg.Done()
			done := make([]atomic.Int32, 30)
			queue(t, pool, done, false)
			for i := range done {
				if done[i].Load() != 1 {
					t.Errorf("item %d done %d times", i, done[i].Load())
				}
			}
		})
	}
	wg.Wait()
	pool.mu.Lock()
	defer pool.mu.Unlock()
	if pool.numRunning != 0 {
		t.Errorf("numRunning = %d after all calls returned", pool.numRunning)
	}
}

// busy works (spins) for d.
func busy(d time.Duration) {
	for t0 := time.Now(); time.Since(t0) < d; {
	}
}

// BenchmarkSaturateDecodeLike: a parallel op of 8 × 15 µs work items, then 20 µs on the caller
// alone (a decode step's shape: products between small single-threaded ops), with the persistent
// helpers spinning 50 µs or without them (spin 0: a new goroutine per helper). On 2 idle cores the
// ideal is 60 + 20 µs per op.
//
//	GOEXPERIMENT=simd go test -run '^$' -bench SaturateDecodeLike ./internal/gobackend/workerspool/
func BenchmarkSaturateDecodeLike(b *testing.B) {
	for _, spin := range []time.Duration{0, 20 * time.Microsecond, 50 * time.Microsecond} {
		b.Run(spin.String(), func(b *testing.B) {
			pool := New()
			pool.SetMaxParallelism(2 * runtime.GOMAXPROCS(0))
			pool.SetSpin(spin)
			defer pool.Stop()
			for range b.N {
				var next atomic.Int32
				pool.Saturate(func() {
					for next.Add(1) <= 8 {
						busy(15 * time.Microsecond)
					}
				})
				busy(20 * time.Microsecond)
			}
		})
	}
}

// TestPrewake: Prewake sets parked helpers spinning again (they then join the next Saturate), and
// is a no-op without persistent helpers or after Stop.
func TestPrewake(t *testing.T) {
	withProcs(t, 3)
	pool := New()
	pool.SetMaxParallelism(-1)
	// A long spin, so that a loaded machine descheduling this goroutine for a while cannot make it
	// miss the woken helpers' spinning window.
	pool.SetSpin(300 * time.Millisecond)
	pool.Prewake() // no helpers started yet: nothing to wake
	done := make([]atomic.Int32, 20)
	queue(t, pool, done, false)
	s := pool.spinnerPtr.Load()
	if s == nil {
		t.Fatal("no persistent helpers after a Saturate")
	}
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s (%d of %d helpers spinning)", what, s.spinning.Load(), s.started.Load())
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	waitFor("the helpers to spin after the job", func() bool { return s.spinning.Load() > 0 })
	waitFor("the helpers to park", func() bool { return s.spinning.Load() == 0 })
	pool.Prewake()
	waitFor("a woken helper to spin", func() bool { return s.spinning.Load() > 0 })
	done = make([]atomic.Int32, 20)
	queue(t, pool, done, false)
	for i := range done {
		if done[i].Load() != 1 {
			t.Errorf("item %d done %d times", i, done[i].Load())
		}
	}
	pool.Stop()
	pool.Prewake() // stopped: nothing to wake, no panic
	noSpin := New()
	noSpin.SetSpin(0)
	noSpin.Prewake()
}
