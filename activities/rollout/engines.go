package rollout

import (
	"github.com/temperml/temper/algorithms/data"

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
	uri string
	loadedEngine
	refs    int
	retired bool // replaced by a newer checkpoint's engine: close at the last release
}

// loadedEngine is a sampling engine and what sampling from its model needs.
type loadedEngine struct {
	eng    train.Engine
	maxSeq int          // the model's context length
	enc    data.Encoder // the model's tokenizer and chat template (train.EncoderOf)
	stops  []int        // the ids that end a completion (train.Stops)
	cfg    model.Config // the model's configuration (an agent's gateway serves it)
}

// acquire returns the engine of checkpoint uri (and its model's context length), loading it with
// load unless it is the current one;
// release it after use.
func (c *engineCache) acquire(ctx context.Context, uri string, load func(context.Context, string) (loadedEngine, error)) (*sharedEngine, error) {
	c.mu.Lock()
	if c.cur != nil && c.cur.uri == uri {
		c.cur.refs++
		e := c.cur
		c.mu.Unlock()
		return e, nil
	}
	c.mu.Unlock()
	le, err := load(ctx, uri) // outside the lock: loading compiles
	if err != nil {
		return nil, err
	}
	e := &sharedEngine{uri: uri, loadedEngine: le, refs: 1}
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

// loadSampler loads a policy checkpoint for sampling, with its encoder: the model's own tokenizer
// and chat template when it carries them, else the byte-level one.
func loadSampler(ctx context.Context, ld train.Loader, uri string) (loadedEngine, error) {
	m, err := ld.Load(ctx, uri, train.LoadOptions{})
	if err != nil {
		return loadedEngine{}, err
	}
	enc, err := train.EncoderOf(m, train.ChatSpec{})
	if err != nil {
		m.Close()
		return loadedEngine{}, err
	}
	return loadedEngine{eng: m.Engine, maxSeq: m.Config.MaxSeq, enc: enc, stops: train.Stops(enc, m.Generation), cfg: m.Config}, nil
}
