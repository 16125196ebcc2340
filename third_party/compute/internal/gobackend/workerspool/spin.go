// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0
// Temper fork: see third_party/README.md.

package workerspool

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gomlx/compute/internal/simdstate"
	"github.com/gomlx/compute/support/envutil"
)

// DefaultSpin is how long Saturate's persistent helpers keep polling for the next job after
// finishing one (or after being woken) before they park: GOMLX_SPIN_US microseconds, 50 if unset.
// 0 restores upstream's Saturate, which starts a new goroutine for every helper of every call.
//
// Why: under the sequential executor an op's helpers started as new goroutines, whose threads
// had to be woken (futex) each time, tens of microseconds on a VM, for ops of 50–450 µs; a
// helper that is still spinning when the next parallel op comes joins it at once. Spinning
// happens only right after a job, so an idle process parks its helpers within DefaultSpin.
// Between polls a helper runs spinPause PAUSE instructions (amd64): without them spinning made
// base-preset generation slower than no spinning on the 2-core VM (third_party/README.md).
var DefaultSpin = readSpin()

// SpinYield: the spinning helpers (and a caller waiting for them) give their core to any other
// runnable thread every 64 polls (sched_yield on Linux): GOMLX_SPIN_YIELD, default true.
var SpinYield = envutil.MustReadBool("GOMLX_SPIN_YIELD", true)

func readSpin() time.Duration {
	us, err := envutil.ReadInt("GOMLX_SPIN_US", 50)
	if err != nil || us < 0 {
		panic(fmt.Sprintf("GOMLX_SPIN_US=%q: want a number of microseconds >= 0", os.Getenv("GOMLX_SPIN_US")))
	}
	return time.Duration(us) * time.Microsecond
}

// SetSpin sets how long this pool's helpers spin for the next job (see DefaultSpin); 0 turns the
// persistent helpers off. Like SetMaxParallelism, call it before the pool runs anything.
func (w *Pool) SetSpin(spin time.Duration) {
	w.spin = spin
}

// Stop ends the pool's persistent helpers (they park on a channel otherwise, forever, when the
// pool is no longer used). Saturate then runs as upstream's, with a goroutine per helper.
func (w *Pool) Stop() {
	w.spinMu.Lock()
	defer w.spinMu.Unlock()
	if w.spinner != nil && !w.spinStopped {
		close(w.spinner.stop)
	}
	w.spinStopped = true
	w.spinnerPtr.Store(nil)
}

// spinner is the state shared by a pool's persistent helpers.
type spinner struct {
	spin     time.Duration
	yield    bool                // sched_yield every 64 polls (GOMLX_SPIN_YIELD, default true)
	current  atomic.Pointer[job] // the latest published job (a concurrent caller may replace it)
	spinning atomic.Int32        // helpers polling current right now
	started  atomic.Int32        // helpers started so far
	wake     chan struct{}       // a token wakes one parked helper (buffered: a token is never lost)
	stop     chan struct{}
}

// spinPause is the PAUSE instructions between two polls of a spinning helper or a waiting caller.
const spinPause = 20

const (
	jobClosed    = int64(1) << 62
	jobCountMask = jobClosed - 1
)

// job is one Saturate call as its helpers see it. It is never reused: a helper that looks at it
// after its caller closed it only finds it closed.
type job struct {
	task  func()
	slots int64         // most helpers that may join
	state atomic.Int64  // helpers joined, | jobClosed once the caller stopped taking helpers
	done  chan struct{} // one token per joined helper that finished (capacity slots)
}

// tryJoin takes one of the job's helper slots, unless the job is closed or full.
func (j *job) tryJoin() bool {
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

// getSpinner returns the pool's spinner with at least n helpers started, or nil when the pool
// was stopped.
func (w *Pool) getSpinner(n int) *spinner {
	if s := w.spinnerPtr.Load(); s != nil && int(s.started.Load()) >= n {
		return s
	}
	w.spinMu.Lock()
	defer w.spinMu.Unlock()
	if w.spinStopped {
		return nil
	}
	s := w.spinner
	if s == nil {
		s = &spinner{spin: w.spin, yield: SpinYield, wake: make(chan struct{}, max(runtime.NumCPU(), 8)), stop: make(chan struct{})}
		w.spinner = s
		w.spinnerPtr.Store(s)
	}
	for int(s.started.Load()) < n {
		s.started.Add(1)
		go s.helper()
	}
	return s
}

// saturateSpin is Saturate with persistent helpers: it publishes the job, wakes parked helpers
// when too few are spinning, runs task, closes the job and waits for the helpers that joined it.
func (s *spinner) saturateSpin(task func(), helpers int) {
	j := &job{task: task, slots: int64(helpers), done: make(chan struct{}, helpers)}
	s.current.Store(j)
wake:
	for n := helpers - int(s.spinning.Load()); n > 0; n-- {
		select {
		case s.wake <- struct{}{}:
		default:
			break wake // enough tokens wait already
		}
	}
	defer s.finish(j)
	task()
	simdstate.ClearUpper()
}

// finish closes j to helpers and waits for those that joined it (spinning a while first: they are
// finishing their last work item).
func (s *spinner) finish(j *job) {
	joined := int(j.state.Or(jobClosed) & jobCountMask)
	s.current.CompareAndSwap(j, nil)
	if joined == 0 {
		return
	}
	start := time.Now()
	for i := 1; len(j.done) < joined; i++ {
		pause(spinPause)
		if i%64 == 0 {
			if time.Since(start) >= s.spin {
				break
			}
			if s.yield {
				yieldThread()
			}
			if i%1024 == 0 {
				runtime.Gosched()
			}
		}
	}
	for range joined {
		<-j.done
	}
}

// helper runs jobs until the pool is stopped.
func (s *spinner) helper() {
	var last *job
	for {
		j := s.await(last)
		if j == nil {
			return
		}
		j.task()
		simdstate.ClearUpper() // the thread runs other goroutines next
		j.done <- struct{}{}
		last = j
	}
}

// take joins the current job if it is not last (the one this helper just ran).
func (s *spinner) take(last *job) *job {
	if j := s.current.Load(); j != nil && j != last && j.tryJoin() {
		return j
	}
	return nil
}

// await spins for s.spin looking for a job, then parks until woken; nil when stopped.
func (s *spinner) await(last *job) *job {
	for {
		s.spinning.Add(1)
		start := time.Now()
		var j *job
		for i := 1; ; i++ {
			if j = s.take(last); j != nil {
				break
			}
			pause(spinPause)
			if i%64 == 0 {
				if time.Since(start) >= s.spin {
					break
				}
				if s.yield {
					yieldThread()
				}
				if i%1024 == 0 {
					runtime.Gosched()
				}
			}
		}
		s.spinning.Add(-1)
		if j != nil {
			return j
		}
		// A caller that saw this helper spinning sent no token: look once more after leaving the
		// spinners (the caller publishes, then counts spinners).
		if j = s.take(last); j != nil {
			return j
		}
		select {
		case <-s.wake:
		case <-s.stop:
			return nil
		}
	}
}

// The pool's fields for the persistent helpers.
type spinFields struct {
	spin        time.Duration
	spinMu      sync.Mutex
	spinner     *spinner // guarded by spinMu
	spinnerPtr  atomic.Pointer[spinner]
	spinStopped bool // guarded by spinMu
}

// Prewake wakes the pool's parked persistent helpers without work, so that they spin (for
// DefaultSpin) and join the next Saturate at once instead of after a wake-up (Temper fork: the
// executor calls it a few nodes before an op that splits its work). Only a hint: without
// persistent helpers, or with all of them spinning, it does nothing.
func (w *Pool) Prewake() {
	s := w.spinnerPtr.Load()
	if s == nil {
		return
	}
	for n := int(s.started.Load()) - int(s.spinning.Load()); n > 0; n-- {
		select {
		case s.wake <- struct{}{}:
		default:
			return // enough tokens wait already
		}
	}
}
