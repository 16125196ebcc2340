package ckpt

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"
)

// List returns the committed checkpoints under root sorted by run, phase and
// step. Empty run (or phase) matches every run (or phase). Best is set for
// checkpoints marked with MarkBest.
func (c *Client) List(ctx context.Context, root, run, phase string) ([]Ref, error) {
	loc, err := parseLocation(root)
	if err != nil {
		return nil, err
	}
	prefix := "runs/"
	if run != "" {
		if err := validName("run", run); err != nil {
			return nil, fmt.Errorf("ckpt: list %s: %w", root, err)
		}
		prefix += run + "/"
		if phase != "" {
			if err := validName("phase", phase); err != nil {
				return nil, fmt.Errorf("ckpt: list %s: %w", root, err)
			}
			prefix += phase + "/"
		}
	} else if phase != "" {
		return nil, fmt.Errorf("ckpt: list %s: a phase needs a run", root)
	}
	s, err := c.store(ctx, loc)
	if err != nil {
		return nil, err
	}
	objs, err := s.List(ctx, prefix)
	if err != nil {
		return nil, err
	}
	type id struct {
		run, phase string
		step       int64
	}
	committed := map[id]bool{}
	best := map[id]bool{}
	for _, o := range objs {
		el := strings.Split(o.Key, "/")
		if len(el) != 5 {
			continue
		}
		step, ok := parseStepDir(el[3])
		if !ok || (phase != "" && el[2] != phase) {
			continue
		}
		k := id{el[1], el[2], step}
		switch el[4] {
		case ManifestName:
			committed[k] = true
		case bestName:
			best[k] = true
		}
	}
	refs := make([]Ref, 0, len(committed))
	for k := range committed {
		refs = append(refs, Ref{URI: refURI(loc, k.run, k.phase, k.step), Run: k.run, Phase: k.phase, Step: k.step, Best: best[k]})
	}
	sort.Slice(refs, func(i, j int) bool {
		a, b := refs[i], refs[j]
		if a.Run != b.Run {
			return a.Run < b.Run
		}
		if a.Phase != b.Phase {
			return a.Phase < b.Phase
		}
		return a.Step < b.Step
	})
	return refs, nil
}

// Skipped is a checkpoint Latest passed over, and why.
type Skipped struct {
	Ref    Ref    `json:"ref"`
	Reason string `json:"reason"`
}

// Latest returns the newest checkpoint of run/phase that verifies byte for
// byte, falling back past corrupt ones, which it reports. Other errors (I/O,
// network) are returned, not skipped, so a flaky read never silently rolls a
// run back. With no good checkpoint the error wraps ErrNoCheckpoint.
func (c *Client) Latest(ctx context.Context, root, run, phase string) (Ref, []Skipped, error) {
	if run == "" || phase == "" {
		return Ref{}, nil, fmt.Errorf("ckpt: latest %s: run and phase are required", root)
	}
	refs, err := c.List(ctx, root, run, phase)
	if err != nil {
		return Ref{}, nil, err
	}
	var skipped []Skipped
	for i := len(refs) - 1; i >= 0; i-- {
		err := c.Verify(ctx, refs[i].URI)
		if err == nil {
			return refs[i], skipped, nil
		}
		if !errors.Is(err, ErrCorrupt) {
			return Ref{}, skipped, err
		}
		skipped = append(skipped, Skipped{Ref: refs[i], Reason: err.Error()})
	}
	return Ref{}, skipped, fmt.Errorf("ckpt: latest %s/%s: %w (%d corrupt skipped)",
		strings.TrimRight(root, "/"), strings.TrimSuffix(phaseKey(run, phase), "/"), ErrNoCheckpoint, len(skipped))
}

// MarkBest marks a committed checkpoint as the best of its run/phase: Retain never deletes it. The
// mark moves: the phase's previously marked checkpoints are unmarked after the new mark is written
// (an interruption in between leaves two marked, never none), so retention stays bounded however
// often the best changes.
func (c *Client) MarkBest(ctx context.Context, uri string) error {
	l, err := parseCkptURI(uri)
	if err != nil {
		return err
	}
	s, err := c.store(ctx, l.root)
	if err != nil {
		return err
	}
	if _, err := s.Stat(ctx, l.key()+"/"+ManifestName); err != nil {
		if isNotExist(err) {
			return fmt.Errorf("ckpt: mark best %s: not committed: %w", l.uri(), ErrNotExist)
		}
		return err
	}
	data, _ := json.Marshal(struct {
		Marked time.Time `json:"marked"`
	}{c.opts.Now().UTC()})
	if _, err := s.Put(ctx, l.key()+"/"+bestName, bytes.NewReader(data)); err != nil {
		return fmt.Errorf("ckpt: mark best %s: %w", l.uri(), err)
	}
	refs, err := c.List(ctx, l.root.String(), l.run, l.phase)
	if err != nil {
		return fmt.Errorf("ckpt: mark best %s: %w", l.uri(), err)
	}
	for _, r := range refs {
		if r.Best && r.Step != l.step {
			if err := s.Delete(ctx, stepKey(l.run, l.phase, r.Step)+"/"+bestName); err != nil {
				return fmt.Errorf("ckpt: mark best %s: unmark %s: %w", l.uri(), r.URI, err)
			}
		}
	}
	return nil
}

// Retain deletes the committed checkpoints of run/phase except the newest
// keepLast and those marked best, and returns what it deleted. A checkpoint
// disappears for readers first (manifest deleted first; locally the directory
// is renamed away), so an interrupted Retain never leaves a half checkpoint
// visible.
func (c *Client) Retain(ctx context.Context, root, run, phase string, keepLast int) ([]Ref, error) {
	if keepLast < 0 {
		return nil, fmt.Errorf("ckpt: retain %s: negative keepLast %d", root, keepLast)
	}
	if run == "" || phase == "" {
		return nil, fmt.Errorf("ckpt: retain %s: run and phase are required", root)
	}
	refs, err := c.List(ctx, root, run, phase)
	if err != nil {
		return nil, err
	}
	loc, _ := parseLocation(root)
	s, err := c.store(ctx, loc)
	if err != nil {
		return nil, err
	}
	var deleted []Ref
	for i, r := range refs {
		if i >= len(refs)-keepLast || r.Best {
			continue
		}
		if err := deleteCheckpoint(ctx, s, stepKey(run, phase, r.Step)); err != nil {
			return deleted, fmt.Errorf("ckpt: retain %s: %w", r.URI, err)
		}
		deleted = append(deleted, r)
	}
	return deleted, nil
}

func deleteCheckpoint(ctx context.Context, s Store, key string) error {
	if _, ok := s.(*fileStore); !ok {
		if err := s.Delete(ctx, key+"/"+ManifestName); err != nil {
			return err
		}
	}
	return removePrefix(ctx, s, key+"/")
}

// GC removes uncommitted leftovers under root whose newest object is older
// than olderThan: local temp and trash directories, step prefixes without a
// manifest, and objects in committed steps that the manifest does not name
// (a losing writer's uploads, parts of an interrupted upload). olderThan must
// exceed the longest save, or GC races a live writer. It returns the URIs removed.
func (c *Client) GC(ctx context.Context, root string, olderThan time.Duration) ([]string, error) {
	loc, err := parseLocation(root)
	if err != nil {
		return nil, err
	}
	s, err := c.store(ctx, loc)
	if err != nil {
		return nil, err
	}
	objs, err := s.List(ctx, "runs/")
	if err != nil {
		return nil, err
	}
	if fsStore, ok := s.(*fileStore); ok {
		objs = append(objs, fsStore.leftoverDirs()...) // empty ones are invisible to List
	}
	cutoff := c.opts.Now().Add(-olderThan)

	// A group is what is removed as a unit: a temp/trash dir, an uncommitted
	// step, or one first-level entry (e.g. "w-<id>/") of a committed step.
	type group struct {
		prefix string
		keys   []string
		newest time.Time
		dir    bool // remove as a directory prefix
	}
	groups := map[string]*group{}
	add := func(prefix string, dir bool, o ObjectInfo) {
		g := groups[prefix]
		if g == nil {
			g = &group{prefix: prefix, dir: dir}
			groups[prefix] = g
		}
		g.keys = append(g.keys, o.Key)
		if o.Updated.After(g.newest) {
			g.newest = o.Updated
		}
	}
	manifests := map[string]bool{} // step keys with a manifest
	for _, o := range objs {
		el := strings.Split(o.Key, "/")
		if len(el) >= 5 {
			if _, ok := parseStepDir(el[3]); ok && len(el) == 5 && el[4] == ManifestName {
				manifests[strings.Join(el[:4], "/")] = true
			}
		}
	}
	for _, o := range objs {
		el := strings.Split(o.Key, "/")
		if len(el) < 5 {
			continue
		}
		dirKey := strings.Join(el[:4], "/")
		switch {
		case strings.HasPrefix(el[3], ".tmp-") || strings.HasPrefix(el[3], ".trash-"):
			add(dirKey+"/", true, o)
		case stepRE.MatchString(el[3]):
			if !manifests[dirKey] {
				add(dirKey+"/", true, o)
				continue
			}
			if len(el) == 5 && (el[4] == ManifestName || el[4] == bestName) {
				continue
			}
			if len(el) == 5 {
				add(o.Key, false, o)
			} else {
				add(dirKey+"/"+el[4]+"/", false, o)
			}
		}
	}
	// Entries of committed steps are garbage only if the manifest does not name them.
	referenced := map[string]bool{}
	for stepK := range manifests {
		m, err := readManifest(ctx, s, stepK)
		if err != nil {
			if isNotExist(err) || errors.Is(err, ErrCorrupt) {
				continue // deleted meanwhile, or unreadable: leave it to people
			}
			return nil, err
		}
		for _, f := range m.Files {
			k := stepK + "/" + f.key()
			referenced[k] = true
			if i := strings.IndexByte(f.key(), '/'); i >= 0 {
				referenced[stepK+"/"+f.key()[:i+1]] = true
			}
		}
	}
	prefixes := make([]string, 0, len(groups))
	for p := range groups {
		prefixes = append(prefixes, p)
	}
	sort.Strings(prefixes)
	var removed []string
	for _, p := range prefixes {
		g := groups[p]
		if referenced[p] || !g.newest.Before(cutoff) {
			continue
		}
		var err error
		if g.dir {
			err = removePrefix(ctx, s, p)
		} else {
			err = forEach(ctx, len(g.keys), 8, func(ctx context.Context, i int) error {
				return s.Delete(ctx, g.keys[i])
			})
		}
		if err != nil {
			return removed, fmt.Errorf("ckpt: gc %s: %w", s.URI(p), err)
		}
		removed = append(removed, s.URI(p))
	}
	return removed, nil
}
