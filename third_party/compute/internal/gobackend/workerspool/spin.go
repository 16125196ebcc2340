// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package workerspool

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomlx/compute/internal/simdstate"
)

// spinDuration is how long a helper keeps checking for the next job after one (GOMLX_SPIN_US,
// microseconds; 0: Saturate starts goroutines per job, as before the fork).
var spinDuration = func() time.Duration {
	us := 100
	if v := os.Getenv("GOMLX_SPIN_US"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			panic(fmt.Sprintf("GOMLX_SPIN_US=%q: want microseconds >= 0", v))
		}
		us = n
	}
	return time.Duration(us) * time.Microsecond
}()

// helperIdleExit is how long a parked helper waits for a job before it exits (the next Saturate
// starts helpers again), so that pools no longer used (a finalized backend) keep no goroutines.
const helperIdleExit = 2 * time.Second

// spinJob is one Saturate call offered to the helpers. state counts the helpers running its task;
// its closed bit, set by the caller once its own share is done, stops further helpers joining.
type spinJob struct {
	task  func()
	slots int32 // how many helpers may join
	state atomic.Int32
	done  chan struct{} // closed by the last helper to leave a closed job
}

const jobClosed = 1 << 30

// join adds a helper to j unless j is closed or full.
func (j *spinJob) join() bool {
	for {
		s := j.state.Load()
		if s&jobClosed != 0 || s >= j.slots {
			return false
		}
		if j.state.CompareAndSwap(s, s+1) {
			return true
		}
	}
}

// leave removes a helper from j; the last one out of a closed job wakes the caller.
func (j *spinJob) leave() {
	if j.state.Add(-1) == jobClosed {
		close(j.done)
	}
}

// spinHelpers are a Pool's persistent helper goroutines.
type spinHelpers struct {
	job    atomic.Pointer[spinJob] // the job on offer (nil: none)
	seq    atomic.Uint64           // incremented with every job offered
	live   atomic.Int32            // helpers running (spinning, working or parked)
	parked atomic.Int32            // helpers parked on wake
	mu     sync.Mutex              // serialises starting helpers
	wake   chan struct{}

	spin, idleExit time.Duration // spinDuration and helperIdleExit when the pool was made
}

// saturate runs task on the caller and up to helpers helpers.
func (sp *spinHelpers) saturate(task func(), helpers int) {
	j := &spinJob{task: task, slots: int32(helpers), done: make(chan struct{})}
	sp.job.Store(j)
	sp.seq.Add(1)
	sp.ensure(helpers)
	for range min(int(sp.parked.Load()), helpers) {
		select { // wake parked helpers (spinning ones see seq change by themselves)
		case sp.wake <- struct{}{}:
		default:
		}
	}
	task()
	// Close the job: helpers that have not joined yet no longer will; wait for those that did
	// (they are finishing their last work item: check a while before blocking).
	if j.state.Add(jobClosed) != jobClosed {
		for i := 0; j.state.Load() != jobClosed; i++ {
			if i == 1<<12 {
				<-j.done
				break
			}
		}
	}
	sp.job.CompareAndSwap(j, nil)
}

// ensure starts helpers until n are live.
func (sp *spinHelpers) ensure(n int) {
	if int(sp.live.Load()) >= n {
		return
	}
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if sp.wake == nil {
		sp.wake = make(chan struct{}, 64)
	}
	for int(sp.live.Load()) < n {
		sp.live.Add(1)
		go sp.helper()
	}
}

// helper runs offered jobs; between them it spins for spinDuration, then parks until woken (or
// exits after helperIdleExit without a job).
func (sp *spinHelpers) helper() {
	defer sp.live.Add(-1)
	seen := uint64(0)
	timer := time.NewTimer(sp.idleExit)
	defer timer.Stop()
	for {
		sp.spinFor(&seen)
		sp.parked.Add(1)
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(sp.idleExit)
		select {
		case <-sp.wake:
			sp.parked.Add(-1)
			sp.run(&seen)
		case <-timer.C:
			sp.parked.Add(-1)
			return
		}
	}
}

// spinFor runs the jobs offered while it checks, until sp.spin passes without a new one.
func (sp *spinHelpers) spinFor(seen *uint64) {
	start := time.Now()
	for i := 0; ; i++ {
		if sp.seq.Load() != *seen {
			sp.run(seen)
			start = time.Now()
			continue
		}
		if i&63 == 63 {
			if time.Since(start) > sp.spin {
				return
			}
			runtime.Gosched() // let other goroutines have this processor
		}
	}
}

// run joins the job on offer if it is new to this helper and still open; it reports whether it ran it.
func (sp *spinHelpers) run(seen *uint64) bool {
	*seen = sp.seq.Load()
	j := sp.job.Load()
	if j == nil || !j.join() {
		return false
	}
	j.task()
	simdstate.ClearUpper()
	j.leave()
	return true
}
