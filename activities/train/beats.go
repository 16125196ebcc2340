package train

import (
	"context"
	"sync"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/tools/toolclient"
	"github.com/temperml/temper/activities/train/trainapi"
)

// Beats heartbeats a policy step's latest progress: at each of its steps, and from a goroutine
// every period between them, because one part of a step can outlast the heartbeat timeout: the
// full-batch step (minibatch 0) reads π_old of every rollout in one pass and takes one optimizer
// step over all of them, and on a loaded machine either ran past a 10 s timeout and the attempt
// was retried. The policy step and the online DPO step use it.
type Beats struct {
	ctx  context.Context
	on   bool // an activity's context (a direct call has no heartbeats to send)
	mu   sync.Mutex
	last trainapi.Progress
	stop func()
}

// StartBeats starts the periodic heartbeat; the caller calls Stop.
func StartBeats(ctx context.Context) *Beats {
	b := &Beats{ctx: ctx, on: activity.IsActivity(ctx), stop: func() {}}
	if b.on {
		b.stop = toolclient.KeepBeating(ctx, beatPeriod(activity.GetInfo(ctx).HeartbeatTimeout), b.again)
	}
	return b
}

// Stop ends the periodic heartbeat (its goroutine has returned when Stop does).
func (b *Beats) Stop() { b.stop() }

// Beat records progress p and sends it.
func (b *Beats) Beat(p trainapi.Progress) {
	b.mu.Lock()
	b.last = p
	b.mu.Unlock()
	if b.on {
		activity.RecordHeartbeat(b.ctx, p)
	}
}

// again sends the last progress again (the SDK throttles what reaches the server).
func (b *Beats) again() {
	b.mu.Lock()
	p := b.last
	b.mu.Unlock()
	activity.RecordHeartbeat(b.ctx, p)
}

// beatPeriod is a quarter of the heartbeat timeout, 50 ms to 5 s (5 s without a timeout).
func beatPeriod(timeout time.Duration) time.Duration {
	if timeout <= 0 {
		return 5 * time.Second
	}
	return min(max(timeout/4, 50*time.Millisecond), 5*time.Second)
}
