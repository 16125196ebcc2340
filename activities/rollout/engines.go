package rollout

import (
	"context"
	"sync"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/model"
)

// engineCache keeps the engine of the policy checkpoint a rollout worker last sampled from, so that
// the shards of an iteration (and self-correction rounds) that land on one worker load and compile
// the policy once, not once per activity. A checkpoint URI names immutable weights. The engine of an
// older checkpoint is closed when its last user releases it.
type engineCache struct {
	mu  sync.Mutex
	cur *sharedEngine
}

type sharedEngine struct {
	uri     string
	eng     train.Engine
	maxSeq  int          // the model's context length
	cfg     model.Config // the model's configuration (an agent's gateway serves it)
	refs    int
	retired bool // replaced by a newer checkpoint's engine: close at the last release
}

// acquire returns the engine of checkpoint uri (and its model's configuration), loading it with
// load unless it is the current one;
// release it after use.
func (c *engineCache) acquire(ctx context.Context, uri string, load func(context.Context, string) (train.Engine, model.Config, error)) (*sharedEngine, error) {
	c.mu.Lock()
	if c.cur != nil && c.cur.uri == uri {
		c.cur.refs++
		e := c.cur
		c.mu.Unlock()
		return e, nil
	}
	c.mu.Unlock()
	eng, cfg, err := load(ctx, uri) // outside the lock: loading compiles
	if err != nil {
		return nil, err
	}
	e := &sharedEngine{uri: uri, eng: eng, maxSeq: cfg.MaxSeq, cfg: cfg, refs: 1}
	c.mu.Lock()
	old := c.cur
	c.cur = e
	var closing train.Engine
	if old != nil {
		old.retired = true
		if old.refs == 0 {
			closing = old.eng
		}
	}
	c.mu.Unlock()
	if closing != nil {
		_ = closing.Close() // nothing is left to save in a sampling engine
	}
	return e, nil
}

// release ends one use of e, closing it if it was retired and this was its last user.
func (c *engineCache) release(e *sharedEngine) {
	c.mu.Lock()
	e.refs--
	closing := e.retired && e.refs == 0
	c.mu.Unlock()
	if closing {
		_ = e.eng.Close()
	}
}
