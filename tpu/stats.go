package tpu

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Throughput accumulates one kind of work. Tokens are real (unpadded) tokens: input positions for
// training and evaluation, generated tokens for generation. FLOPs are model FLOPs of that useful
// work (algorithms/model's counts), so padding and recomputation lower GFLOPS and MFU.
type Throughput struct {
	Calls   int64   `json:"calls"`
	Tokens  int64   `json:"tokens"`
	Seconds float64 `json:"seconds"` // execution time, compile excluded
	FLOPs   float64 `json:"flops"`

	TokensPerSec float64 `json:"tokens_per_sec"`
	GFLOPS       float64 `json:"gflops"`
	MFU          float64 `json:"mfu"` // GFLOPS / PeakGFLOPS; 0 without a peak
}

func (t *Throughput) derive(peak float64) {
	if t.Seconds > 0 {
		t.TokensPerSec = float64(t.Tokens) / t.Seconds
		t.GFLOPS = t.FLOPs / t.Seconds / 1e9
		if peak > 0 {
			t.MFU = t.GFLOPS / peak
		}
	}
}

// Stats is a snapshot of a Runtime's work since creation (or ResetStats).
type Stats struct {
	Train      Throughput `json:"train"`
	Eval       Throughput `json:"eval"` // Logits, LogProbs, EvalLoss
	Generate   Throughput `json:"generate"`
	Cache      CacheStats `json:"cache"`
	PeakGFLOPS float64    `json:"peak_gflops"`
}

// Stats returns the accumulated throughput, cache counters and derived rates.
func (r *Runtime) Stats() Stats {
	r.statsMu.Lock()
	s := r.stats
	s.Cache.Keys = append([]CacheKey(nil), s.Cache.Keys...)
	r.statsMu.Unlock()
	s.Train.derive(s.PeakGFLOPS)
	s.Eval.derive(s.PeakGFLOPS)
	s.Generate.derive(s.PeakGFLOPS)
	return s
}

// ResetStats zeroes the throughput counters (not the cache counters).
func (r *Runtime) ResetStats() {
	r.statsMu.Lock()
	r.stats = Stats{PeakGFLOPS: r.opts.PeakGFLOPS, Cache: r.stats.Cache}
	r.statsMu.Unlock()
}

// syncCacheStats publishes the cache counters to Stats (r.mu held), so Stats never waits for a
// running execution.
func (r *Runtime) syncCacheStats() {
	c := r.cache.snapshot()
	r.statsMu.Lock()
	r.stats.Cache = c
	r.statsMu.Unlock()
}

func (r *Runtime) record(t *Throughput, tokens int, seconds, flops float64) {
	r.statsMu.Lock()
	t.Calls++
	t.Tokens += int64(tokens)
	t.Seconds += seconds
	t.FLOPs += flops
	r.statsMu.Unlock()
}

// Memory is the process's resident memory from /proc/self/status, in bytes.
type Memory struct {
	RSS     int64 `json:"rss"`      // VmRSS: resident now
	PeakRSS int64 `json:"peak_rss"` // VmHWM: the high-water mark since the process started
}

// ReadMemory reads VmRSS and VmHWM (Linux only). Both are process-wide: they include the Go heap
// of everything else running in the process.
func ReadMemory() (Memory, error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return Memory{}, fmt.Errorf("tpu: read memory: %w", err)
	}
	defer f.Close()
	var m Memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		fields := strings.Fields(v) // "123456 kB"
		if len(fields) != 2 || fields[1] != "kB" {
			return Memory{}, fmt.Errorf("tpu: read memory: unexpected %s line %q", k, sc.Text())
		}
		n, err := strconv.ParseInt(fields[0], 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("tpu: read memory: %s: %w", k, err)
		}
		if k == "VmRSS" {
			m.RSS = n << 10
		} else {
			m.PeakRSS = n << 10
		}
	}
	if err := sc.Err(); err != nil {
		return Memory{}, fmt.Errorf("tpu: read memory: %w", err)
	}
	if m.PeakRSS == 0 {
		return Memory{}, fmt.Errorf("tpu: read memory: no VmHWM in /proc/self/status")
	}
	return m, nil
}
