package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/tasks"
)

// promptSet is what an iteration's prompts are drawn from: the train examples and, for a built-in
// task, the held-out prompts that must never be drawn.
type promptSet struct {
	train []tasks.Example
	held  map[string]bool
}

// promptCache keeps the prompt sets of the last few data specs a worker used, so that an RL
// iteration does not re-read and re-parse the train and held-out files: a set is keyed by the spec,
// the seed and, for files, each file's URI, size and update time in the store (a rewritten file is
// read again). Safe for concurrent activities.
type promptCache struct {
	mu      sync.Mutex
	entries []promptEntry // most recently used last
}

type promptEntry struct {
	key string
	set *promptSet
}

// promptCacheSize bounds the sets kept (a worker serves a few runs at a time).
const promptCacheSize = 4

// promptLoads counts prompt sets built (cache misses), for tests.
var promptLoads atomic.Int64

// get returns the prompt set of spec, from the cache when its key is unchanged.
func (c *promptCache) get(ctx context.Context, cl *ckpt.Client, spec trainapi.DataSpec, seed uint64) (*promptSet, error) {
	key, err := promptKey(ctx, cl, spec, seed)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	for i, e := range c.entries {
		if e.key == key {
			c.entries = append(append(c.entries[:i:i], c.entries[i+1:]...), e)
			c.mu.Unlock()
			return e.set, nil
		}
	}
	c.mu.Unlock()
	set, err := loadPromptSet(ctx, cl, spec, seed)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = append(c.entries, promptEntry{key, set})
	if len(c.entries) > promptCacheSize {
		c.entries = c.entries[len(c.entries)-promptCacheSize:]
	}
	return set, nil
}

// promptKey identifies a prompt set: the spec, the seed, and each file's identity in the store.
func promptKey(ctx context.Context, cl *ckpt.Client, spec trainapi.DataSpec, seed uint64) (string, error) {
	b, _ := json.Marshal(spec) // a struct of strings, numbers and booleans
	key := fmt.Sprintf("%s|%d", b, seed)
	for _, uri := range []string{spec.Train, spec.Heldout} {
		if uri == "" || spec.Task != "" {
			continue
		}
		dir, name := path.Split(uri)
		st, err := cl.Store(ctx, strings.TrimSuffix(dir, "/"))
		if err != nil {
			return "", fmt.Errorf("rollout: prompts %s: %w", uri, err)
		}
		info, err := st.Stat(ctx, name)
		if err != nil {
			return "", fmt.Errorf("rollout: prompts: stat %s: %w", uri, err)
		}
		key += fmt.Sprintf("|%s:%d:%d", uri, info.Size, info.Updated.UnixNano())
	}
	return key, nil
}

func loadPromptSet(ctx context.Context, cl *ckpt.Client, spec trainapi.DataSpec, seed uint64) (*promptSet, error) {
	promptLoads.Add(1)
	trainEx, heldout, err := train.Examples(ctx, cl, spec, seed)
	if err != nil {
		return nil, err
	}
	set := &promptSet{train: trainEx}
	if spec.Task != "" {
		set.held = make(map[string]bool, len(heldout))
		for _, ex := range heldout {
			set.held[ex.Prompt] = true
		}
	}
	return set, nil
}

// draw returns the n prompts of an iteration: fresh draws from a built-in task (never a held-out
// prompt), or a window of the train file.
func (s *promptSet) draw(spec trainapi.DataSpec, seed uint64, iteration, n int) []tasks.Example {
	if spec.Task == "" {
		out := make([]tasks.Example, n)
		for i := range out {
			out[i] = s.train[(iteration*n+i)%len(s.train)]
		}
		return out
	}
	task, _ := tasks.Lookup(spec.Task) // the spec was validated by loadPromptSet
	rng := tasks.NewRNG(seed, uint64(1000+iteration))
	var out []tasks.Example
	for len(out) < n {
		ex := task.Example(rng)
		if s.held[ex.Prompt] {
			continue
		}
		ex.Task = task.Name()
		ex.ID = fmt.Sprintf("it%d-%d", iteration, len(out))
		out = append(out, ex)
	}
	return out
}
