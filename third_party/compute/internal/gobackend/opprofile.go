// Temper fork: per-op timing of the sequential executor, for profiling a graph's run op by op.
// Off by default: one atomic load per op when off.

package gobackend

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// OpStat is the time spent in one kind of op: an op type with its input and output shapes (and,
// for ops whose node data can describe itself, e.g. DotGeneral's normalised sizes, that label).
type OpStat struct {
	// Key names the op and its shapes, e.g. "DotGeneral f32[16,128,64] f32[16,64,128] → f32[16,128,128] NonTransposed".
	Key   string
	Op    string
	Count int
	// Wall is the wall-clock time of the op's executor; CPU is the process's CPU time (all
	// threads, so a matmul's workers count) over the same interval. On a machine shared with
	// other jobs CPU time is the steadier of the two.
	Wall, CPU time.Duration
	// Thread is the CPU time of the thread that ran the op (its share of an op split across
	// workers): summed over a graph, the time the op sequence would take on an idle machine with
	// as many cores as workers. Only meaningful when the executing goroutine is locked to its
	// thread (runtime.LockOSThread), else it may count another thread's time.
	Thread time.Duration
}

// opProfileLabeler is implemented by node data that can name its op better than its shapes do.
type opProfileLabeler interface{ ProfileLabel() string }

type opProfiler struct {
	mu    sync.Mutex
	stats map[string]*OpStat
}

var activeOpProfile atomic.Pointer[opProfiler]

// StartOpProfile starts timing every op the sequential executor runs (the parallel executor's ops
// overlap, so it is not timed), replacing any profile in progress.
func StartOpProfile() { activeOpProfile.Store(&opProfiler{stats: map[string]*OpStat{}}) }

// StopOpProfile stops the profile and returns its stats, the most CPU time first (nil if none was
// started).
func StopOpProfile() []OpStat {
	p := activeOpProfile.Swap(nil)
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]OpStat, 0, len(p.stats))
	for _, s := range p.stats {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].CPU != out[j].CPU {
			return out[i].CPU > out[j].CPU
		}
		return out[i].Key < out[j].Key
	})
	return out
}

func opProfileKey(node *Node) string {
	var sb strings.Builder
	sb.WriteString(node.OpType.String())
	for _, in := range node.Inputs {
		sb.WriteByte(' ')
		sb.WriteString(in.Shape.String())
	}
	sb.WriteString(" → ")
	sb.WriteString(node.Shape.String())
	switch d := node.Data.(type) {
	case opProfileLabeler:
		sb.WriteByte(' ')
		sb.WriteString(d.ProfileLabel())
	case []int:
		fmt.Fprintf(&sb, " %v", d)
	}
	return sb.String()
}

func (p *opProfiler) add(node *Node, wall, cpu, thread time.Duration) {
	key := opProfileKey(node)
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stats[key]
	if s == nil {
		s = &OpStat{Key: key, Op: node.OpType.String()}
		p.stats[key] = s
	}
	s.Count++
	s.Wall += wall
	s.CPU += cpu
	s.Thread += thread
}
