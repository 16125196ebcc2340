// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package workerspool

import (
	"github.com/gomlx/compute/internal/simdstate"
	"runtime"
	"sync"
	"sync/atomic"
)

type Pool struct {
	// maxParallelism is a soft target on the limit of parallel work to do.
	// The actual number of goroutines is higher than that -- because of waits and such.
	maxParallelism int
	mu             sync.Mutex
	cond           sync.Cond // Should be signaled whenever numRunning is decreased.
	numRunning     int

	// extraParallelism is temporarily increased when a worked goes to sleep.
	extraParallelism atomic.Int32

	spinFields // Temper fork: Saturate's persistent helpers (spin.go)
}

// New return a new Pool of workers with the default parallelism (2 * runtime.GOMAXPROCS()).
func New() *Pool {
	w := &Pool{}
	w.maxParallelism = 2 * runtime.GOMAXPROCS(0)
	w.cond = sync.Cond{L: &w.mu}
	w.spin = DefaultSpin // Temper fork
	return w
}

// IsEnabled returns whether parallelism is enabled (maxParallelism is != 0)
func (w *Pool) IsEnabled() bool {
	return w.maxParallelism != 0
}

// IsUnlimited returns whether parallelism is unlimited (maxParallelism < 0)
func (w *Pool) IsUnlimited() bool {
	return w.maxParallelism < 0
}

// MaxParallelism returns the soft-target for parallelism.
// If set to 0 parallelism is disabled.
// If set to -1 parallelism is unlimited.
func (w *Pool) MaxParallelism() int {
	return w.maxParallelism
}

// AdjustedMaxParallelism returns the adjusted soft-target for parallelism (>= 1).
//
// If the target is set to -1 (unlimited parallelism) it returns runtime.GOMAXPROCS.
// If the target is 0 (no parallelism) it returns 1.
//
// Also, it limits the number of workers to runtime.GOMAXPROCS.
func (w *Pool) AdjustedMaxParallelism() int {
	if w.maxParallelism < 0 {
		return runtime.GOMAXPROCS(0)
	}
	return min(max(w.maxParallelism, 1), runtime.GOMAXPROCS(0))
}

// SetMaxParallelism sets the maxParallelism.
//
// You should only change the parallelism before any workers start running. If changed during the execution
// the behavior is undefined.
func (w *Pool) SetMaxParallelism(maxParallelism int) {
	w.maxParallelism = maxParallelism
}

const goroutineToParallelismRatio = 2

// lockedIsFull returns whether all available workers are in use.
//
// It must be called with workerPool.mu acquired.
func (w *Pool) lockedIsFull() bool {
	if w.maxParallelism == 0 {
		return true
	} else if w.maxParallelism < 0 {
		return false
	}
	return w.numRunning >= w.maxParallelism+int(w.extraParallelism.Load())
}

// WaitToStart waits until there is a worker available to run the task.
//
// If parallelism is disabled (maxParallelism is 0), it runs the task inline and returns when it is finished.
// This is risky if one is relying on concurrency, and it can lead to deadlocks.
// Avoid using this function if the parallelism is disabled.
func (w *Pool) WaitToStart(task func()) {
	if w.IsUnlimited() {
		go func() { task(); simdstate.ClearUpper() }() // Temper fork
		return

	} else if w.maxParallelism == 0 {
		// No parallelism, run inline -- better avoided.
		task()
		return
	}

	w.mu.Lock()
	defer w.mu.Unlock()
	for w.lockedIsFull() {
		w.cond.Wait()
	}
	w.lockedRunTaskInGoroutine(task)
}

// lockedRunTaskInGoroutine and keep tabs on w.numRunning.
//
// It must be called with workerPool.mu acquired.
func (w *Pool) lockedRunTaskInGoroutine(task func()) {
	w.numRunning++
	go func() {
		task()
		simdstate.ClearUpper() // Temper fork: the thread runs other goroutines next
		w.mu.Lock()
		w.numRunning--
		w.cond.Signal()
		w.mu.Unlock()
	}()
}

// StartIfAvailable runs the task in a separate goroutine, if there are enough workers left.
// It returns true if it found workers to run the function, false otherwise.
//
// It's up to the client to synchronize the end of the function execution.
func (w *Pool) StartIfAvailable(task func()) bool {
	if w.IsUnlimited() {
		go func() { task(); simdstate.ClearUpper() }() // Temper fork
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.lockedIsFull() {
		return false
	}
	w.lockedRunTaskInGoroutine(task)
	return true
}

// Saturate runs the given task on as many workers as available, the calling goroutine being one of
// them (Temper fork): it starts the others, runs task itself, and returns when all have finished.
//
// Each task is expected to keep doing work until there nothing else to be done (they share a work
// queue). The caller working instead of waiting saves a goroutine hand-off per call, and its share
// starts at once where a sleeping thread takes tens of microseconds to wake: the difference matters
// for the many small products of a decode step.
//
// Temper fork: with a spin duration (DefaultSpin, SetSpin; GOMLX_SPIN_US) the other workers are the
// pool's persistent helpers, at most GOMAXPROCS-1 per call (min(maxParallelism, GOMAXPROCS)
// participants with the caller), and a helper that comes late finds the job closed: the caller
// alone must be able to finish the work (a work queue), and tasks must not wait for each other. A
// task may call Saturate (nested calls take free helpers or run alone). Without a spin duration
// (or after Stop) it starts a goroutine per helper as upstream did.
func (w *Pool) Saturate(task func()) {
	if w.maxParallelism == 0 {
		task()
		return
	}
	if w.spin > 0 {
		w.saturateSpin(task)
		return
	}
	w.saturateGo(task)
}

// saturateSpin is Saturate with the persistent helpers (Temper fork).
func (w *Pool) saturateSpin(task func()) {
	procs := runtime.GOMAXPROCS(0)
	helpers := procs - 1
	bounded := w.maxParallelism > 0
	if bounded {
		helpers = min(w.maxParallelism, procs) - 1
		w.mu.Lock()
		w.numRunning++ // the caller's own slot
		helpers = max(0, min(helpers, w.maxParallelism+int(w.extraParallelism.Load())-w.numRunning))
		w.numRunning += helpers // released when the job is done, joined or not
		w.mu.Unlock()
		defer func() {
			w.mu.Lock()
			w.numRunning -= 1 + helpers
			w.cond.Broadcast()
			w.mu.Unlock()
		}()
	}
	var s *spinner
	if helpers > 0 {
		s = w.getSpinner(helpers)
	}
	if s == nil {
		if helpers > 0 { // stopped
			w.saturateGoN(task, helpers)
			return
		}
		task()
		simdstate.ClearUpper()
		return
	}
	s.saturateSpin(task, helpers)
}

// saturateGoN runs task on the caller and n new goroutines, whose slots the caller already took.
func (w *Pool) saturateGoN(task func(), n int) {
	var wg sync.WaitGroup
	wg.Add(n)
	for range n {
		go func() {
			defer wg.Done()
			task()
			simdstate.ClearUpper()
		}()
	}
	task()
	simdstate.ClearUpper()
	wg.Wait()
}

// saturateGo is upstream's Saturate (with the caller as one of the workers): a new goroutine per
// helper, up to maxParallelism participants.
func (w *Pool) saturateGo(task func()) {
	limit := w.maxParallelism
	if limit < 0 {
		limit = runtime.GOMAXPROCS(0)
	}

	var wg sync.WaitGroup
	w.mu.Lock()
	w.numRunning++ // the caller's own slot
	for started := 1; started < limit && !w.lockedIsFull(); started++ {
		wg.Add(1)
		w.lockedRunTaskInGoroutine(func() {
			defer wg.Done()
			task()
		})
	}
	w.mu.Unlock()
	task()
	simdstate.ClearUpper()
	w.mu.Lock()
	w.numRunning--
	w.cond.Signal()
	w.mu.Unlock()
	wg.Wait()
}

// WorkerIsAsleep indicates the worker (the one that called the method) is going to sleep waiting
// for other workers, and temporarily increases the available number of workers.
//
// Call WorkerRestarted when the worker is ready to run again.
func (w *Pool) WorkerIsAsleep() {
	w.extraParallelism.Add(1)
}

// WorkerRestarted indicates the worker (the one that called the method) is ready to run again.
// It should only be called after WorkerIsAsleep.
//
// It returns the temporary number of extra available workers.
func (w *Pool) WorkerRestarted() {
	w.extraParallelism.Add(-1)
}
