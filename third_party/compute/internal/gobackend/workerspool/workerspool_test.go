package workerspool

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomlx/compute/support/testutil"
	"github.com/gomlx/compute/support/xsync"
)

func TestPool_Saturate(t *testing.T) {
	// Test saturation. Temper fork: at most GOMAXPROCS participants run one job (more CPU-bound
	// tasks than processors only queue), and helpers join while the caller's share runs.
	pool := New()
	pool.SetMaxParallelism(5)
	wantTasks := min(5, runtime.GOMAXPROCS(0))

	var count atomic.Int32
	doneNewTasks := xsync.NewLatch()
	doneTest := xsync.NewLatch()

	go func() {
		pool.Saturate(func() {
			got := count.Add(1)
			runtime.Gosched()
			if int(got) == wantTasks {
				doneNewTasks.Trigger()
				return
			}
			doneNewTasks.Wait()
		})
		doneTest.Trigger()
	}()

	select {
	case <-doneTest.WaitChan():
		// Success
	case <-time.After(2 * time.Second):
		t.Fatal("Timeout before all tasks were executed.")
	}
	if int(count.Load()) != wantTasks {
		t.Fatalf("Expected %d tasks, got %d", wantTasks, count.Load())
	}

	// Test No Parallelism
	pool.SetMaxParallelism(0)
	count.Store(0)
	pool.Saturate(func() { count.Add(1) })
	if ok, diff := testutil.IsEqual(int32(1), count.Load()); !ok {
		t.Errorf("Pool with parallelism 0 result mismatch:\n%s", diff)
	}

	// Test Unlimited: a helper joins a task that waits for it.
	if runtime.GOMAXPROCS(0) < 2 {
		return
	}
	pool.SetMaxParallelism(-1)
	count.Store(0)
	var started atomic.Int32
	pool.Saturate(func() {
		started.Add(1)
		for deadline := time.Now().Add(time.Second); started.Load() < 2 && time.Now().Before(deadline); {
			runtime.Gosched()
		}
		count.Add(1)
	})
	if started.Load() <= 1 {
		t.Errorf("Expected more than 1 started task for unlimited parallelism, got %d", started.Load())
	}
	if count.Load() != started.Load() {
		t.Errorf("Expected count %d to match started %d", count.Load(), started.Load())
	}
}

// TestSaturateEveryItemOnce (Temper fork): jobs sharing a work queue, from concurrent callers and
// nested in each other's tasks, do every item exactly once, and no task runs after its Saturate
// returned; with the spinning helpers and with GOMLX_SPIN_US=0's goroutine per job.
func TestSaturateEveryItemOnce(t *testing.T) {
	for _, spin := range []time.Duration{100 * time.Microsecond, 0} {
		pool := New()
		pool.spin.spin = spin
		pool.SetMaxParallelism(-1)
		var late atomic.Int32
		job := func(items int, nested bool) {
			done := make([]atomic.Int32, items)
			var next atomic.Int32
			var returned atomic.Bool
			pool.Saturate(func() {
				if returned.Load() {
					late.Add(1)
				}
				for {
					i := int(next.Add(1)) - 1
					if i >= items {
						return
					}
					done[i].Add(1)
					if nested && i%16 == 0 {
						inner := make([]atomic.Int32, 8)
						var in atomic.Int32
						pool.Saturate(func() {
							for k := int(in.Add(1)) - 1; k < 8; k = int(in.Add(1)) - 1 {
								inner[k].Add(1)
							}
						})
						for k := range inner {
							if inner[k].Load() != 1 {
								t.Errorf("nested item %d done %d times", k, inner[k].Load())
							}
						}
					}
				}
			})
			returned.Store(true)
			for i := range done {
				if done[i].Load() != 1 {
					t.Errorf("spin %v: item %d of %d done %d times", spin, i, items, done[i].Load())
					return
				}
			}
		}
		var wg sync.WaitGroup
		for c := range 3 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for r := range 300 {
					job(1+(r*7+c)%97, r%5 == 0)
				}
			}()
		}
		wg.Wait()
		time.Sleep(5 * time.Millisecond) // a late helper would show now
		if late.Load() != 0 {
			t.Errorf("spin %v: %d tasks ran after their Saturate returned", spin, late.Load())
		}
	}
}

// TestSpinHelpersExitWhenIdle (Temper fork): parked helpers leave after helperIdleExit, and the
// next Saturate starts them again.
func TestSpinHelpersExitWhenIdle(t *testing.T) {
	if runtime.GOMAXPROCS(0) < 2 || spinDuration == 0 {
		t.Skip("needs 2 processors and spinning helpers")
	}
	pool := New()
	pool.spin.idleExit = 20 * time.Millisecond
	pool.SetMaxParallelism(-1)
	run := func() {
		var n atomic.Int32
		pool.Saturate(func() { n.Add(1) })
	}
	run()
	if pool.spin.live.Load() == 0 {
		t.Fatal("no helper started")
	}
	deadline := time.Now().Add(2 * time.Second)
	for pool.spin.live.Load() != 0 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := pool.spin.live.Load(); n != 0 {
		t.Fatalf("%d helpers still live after idling", n)
	}
	run()
	if pool.spin.live.Load() == 0 {
		t.Fatal("no helper restarted")
	}
}
