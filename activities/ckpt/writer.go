// Over 500 lines on purpose: the Writer and its two stages (directory, object store) share one commit protocol and read best together.

package ckpt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Writer builds one checkpoint. Files stream in through Create or Add (several
// may be open at once, from different goroutines); Commit writes the manifest
// last and makes the checkpoint visible at once. Until then readers see
// nothing. Use each Writer once.
type Writer struct {
	loc   ckptLoc
	store Store
	id    string
	stage stage
	now   func() time.Time

	mu        sync.Mutex
	files     map[string]FileEntry
	open      map[string]*hashWriter
	err       error
	committed bool
}

// stage is where a Writer puts bytes before the commit.
type stage interface {
	// create opens the raw sink for file name; hashing is done by the Writer.
	create(ctx context.Context, name string) (io.WriteCloser, error)
	// object is the FileEntry.Object for name ("" when the bytes sit at name).
	object(name string) string
	// commit publishes the checkpoint with manifest m (encoded as data). won is
	// false when another writer committed the same step first.
	commit(ctx context.Context, m *Manifest, data []byte) (won bool, err error)
	// abort removes what this writer staged.
	abort(ctx context.Context) error
}

// NewWriter starts checkpoint root/runs/run/phase/step-NNNNNN.
func (c *Client) NewWriter(ctx context.Context, root, run, phase string, step int64) (*Writer, error) {
	l, err := c.ckptLocFor(root, run, phase, step)
	if err != nil {
		return nil, err
	}
	s, err := c.store(ctx, l.root)
	if err != nil {
		return nil, err
	}
	w := &Writer{
		loc:   l,
		store: s,
		id:    "w-" + randomHex(8),
		now:   c.opts.Now,
		files: map[string]FileEntry{},
		open:  map[string]*hashWriter{},
	}
	if fsStore, ok := s.(*fileStore); ok {
		w.stage, err = newDirStage(fsStore, l, w.id)
		if err != nil {
			return nil, fmt.Errorf("ckpt: write %s: %w", l.uri(), err)
		}
	} else {
		w.stage = &objectStage{s: s, key: l.key(), id: w.id}
	}
	return w, nil
}

func (c *Client) ckptLocFor(root, run, phase string, step int64) (ckptLoc, error) {
	loc, err := parseLocation(root)
	if err != nil {
		return ckptLoc{}, err
	}
	if err := validName("run", run); err != nil {
		return ckptLoc{}, fmt.Errorf("ckpt: %s: %w", root, err)
	}
	if err := validName("phase", phase); err != nil {
		return ckptLoc{}, fmt.Errorf("ckpt: %s: %w", root, err)
	}
	if step < 0 {
		return ckptLoc{}, fmt.Errorf("ckpt: %s: negative step %d", root, step)
	}
	return ckptLoc{root: loc, run: run, phase: phase, step: step}, nil
}

// Ref is where the checkpoint will be (or is, after Commit).
func (w *Writer) Ref() Ref { return w.loc.ref() }

// Create opens file name for streaming; bytes are hashed as they pass. Close
// the returned writer before Commit; an error from Write or Close fails the
// whole checkpoint.
func (w *Writer) Create(ctx context.Context, name string) (io.WriteCloser, error) {
	if err := validFile(name); err != nil {
		return nil, fmt.Errorf("ckpt: create %s%s: %w", w.loc.uri(), name, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case w.committed:
		return nil, fmt.Errorf("ckpt: create %s%s: writer already committed", w.loc.uri(), name)
	case w.open[name] != nil:
		return nil, fmt.Errorf("ckpt: create %s%s: already open", w.loc.uri(), name)
	}
	if _, dup := w.files[name]; dup {
		return nil, fmt.Errorf("ckpt: create %s%s: already written", w.loc.uri(), name)
	}
	sink, err := w.stage.create(ctx, name)
	if err != nil {
		err = fmt.Errorf("ckpt: create %s%s: %w", w.loc.uri(), name, err)
		w.setErrLocked(err)
		return nil, err
	}
	f := &hashWriter{w: w, name: name, sink: sink, h: sha256.New()}
	w.open[name] = f
	return f, nil
}

// Add streams r into file name.
func (w *Writer) Add(ctx context.Context, name string, r io.Reader) error {
	f, err := w.Create(ctx, name)
	if err != nil {
		return err
	}
	buf := make([]byte, 1<<20)
	if _, err := io.CopyBuffer(f, r, buf); err != nil {
		f.(*hashWriter).abort(err)
		return err
	}
	return f.Close()
}

// AddState writes s as state.json.
func (w *Writer) AddState(ctx context.Context, s State) error {
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("ckpt: encode %s%s: %w", w.loc.uri(), StateName, err)
	}
	return w.Add(ctx, StateName, bytes.NewReader(data))
}

func (w *Writer) setErrLocked(err error) {
	if w.err == nil {
		w.err = err
	}
}

// Commit publishes the checkpoint. If another writer committed the same step
// first, Commit discards this writer's bytes and returns the winner's Ref with
// no error: saving a step is idempotent. If Commit fails because of the
// writer's own state (a file still open, a failed file) call Abort.
func (w *Writer) Commit(ctx context.Context) (Ref, error) {
	uri := w.loc.uri()
	w.mu.Lock()
	if w.committed {
		w.mu.Unlock()
		return Ref{}, fmt.Errorf("ckpt: commit %s: writer already committed", uri)
	}
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return Ref{}, fmt.Errorf("ckpt: commit %s: %w", uri, err)
	}
	for name := range w.open {
		w.mu.Unlock()
		return Ref{}, fmt.Errorf("ckpt: commit %s: file %s not closed", uri, name)
	}
	w.committed = true
	m := Manifest{Version: 1, Run: w.loc.run, Phase: w.loc.phase, Step: w.loc.step, Writer: w.id, Created: w.now().UTC()}
	for _, f := range w.files {
		m.Files = append(m.Files, f)
	}
	w.mu.Unlock()
	sort.Slice(m.Files, func(i, j int) bool { return m.Files[i].Name < m.Files[j].Name })
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Ref{}, fmt.Errorf("ckpt: commit %s: %w", uri, err)
	}
	won, err := w.stage.commit(ctx, &m, data)
	if err != nil {
		// Leave the staged bytes: on an object store the manifest may have landed
		// even though the call failed. GC removes them if nothing refers to them.
		return Ref{}, fmt.Errorf("ckpt: commit %s: %w", uri, err)
	}
	if !won {
		winner, err := readManifest(ctx, w.store, w.loc.key())
		if err != nil {
			return Ref{}, fmt.Errorf("ckpt: commit %s: lost to another writer, reading its manifest: %w", uri, err)
		}
		// Only discard our bytes once the manifest in place is provably not ours.
		if winner.Writer != w.id {
			_ = w.stage.abort(ctx)
		}
	}
	return w.loc.ref(), nil
}

// Abort discards everything written so far, including files still open. After
// Commit was called it does nothing (a failed commit's leftovers belong to GC).
func (w *Writer) Abort(ctx context.Context) error {
	aborted := errors.New("aborted")
	w.mu.Lock()
	if w.committed {
		w.mu.Unlock()
		return nil
	}
	w.committed = true
	w.setErrLocked(aborted)
	var open []*hashWriter
	for _, f := range w.open {
		open = append(open, f)
	}
	w.mu.Unlock()
	for _, f := range open {
		f.abort(aborted)
	}
	if err := w.stage.abort(ctx); err != nil {
		return fmt.Errorf("ckpt: abort %s: %w", w.loc.uri(), err)
	}
	return nil
}

// hashWriter hashes and counts bytes on their way to a stage sink.
type hashWriter struct {
	w    *Writer
	name string
	sink io.WriteCloser
	h    hash.Hash
	n    int64
	done atomic.Bool // set by the first Close or abort
	err  error
}

func (f *hashWriter) Write(p []byte) (int, error) {
	n, err := f.sink.Write(p)
	f.h.Write(p[:n])
	f.n += int64(n)
	if err != nil {
		err = fmt.Errorf("ckpt: write %s%s: %w", f.w.loc.uri(), f.name, err)
		f.abort(err)
	}
	return n, err
}

func (f *hashWriter) Close() error {
	if !f.done.CompareAndSwap(false, true) {
		return f.err
	}
	err := f.sink.Close()
	f.w.mu.Lock()
	defer f.w.mu.Unlock()
	delete(f.w.open, f.name)
	if err != nil {
		err = fmt.Errorf("ckpt: write %s%s: %w", f.w.loc.uri(), f.name, err)
		f.w.setErrLocked(err)
		return err
	}
	f.w.files[f.name] = FileEntry{
		Name:   f.name,
		Object: f.w.stage.object(f.name),
		Size:   f.n,
		SHA256: hex.EncodeToString(f.h.Sum(nil)),
	}
	return nil
}

// abort fails the file and the writer without finishing the sink's object.
func (f *hashWriter) abort(err error) {
	if !f.done.CompareAndSwap(false, true) {
		return
	}
	f.err = err
	if a, ok := f.sink.(interface{ abort(error) }); ok {
		a.abort(err)
	} else {
		f.sink.Close()
	}
	f.w.mu.Lock()
	delete(f.w.open, f.name)
	f.w.setErrLocked(err)
	f.w.mu.Unlock()
}

// dirStage writes into <phase>/.tmp-<step>-<id>/ and commits by renaming that
// directory to step-NNNNNN: rename of a directory onto a non-empty one fails,
// so exactly one writer wins.
type dirStage struct {
	s   *fileStore
	tmp string // absolute temp dir
	dst string // absolute final dir
}

func newDirStage(s *fileStore, l ckptLoc, id string) (*dirStage, error) {
	phaseDir := s.path(phaseKey(l.run, l.phase))
	if err := os.MkdirAll(phaseDir, 0o755); err != nil {
		return nil, err
	}
	tmp := filepath.Join(phaseDir, fmt.Sprintf(".tmp-%06d-%s", l.step, id))
	if err := os.Mkdir(tmp, 0o755); err != nil {
		return nil, err
	}
	return &dirStage{s: s, tmp: tmp, dst: s.path(l.key())}, nil
}

func (d *dirStage) object(string) string { return "" }

func (d *dirStage) create(ctx context.Context, name string) (io.WriteCloser, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(d.tmp, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, err
	}
	return &syncFile{f}, nil
}

// syncFile fsyncs on Close so the commit's rename publishes durable bytes.
type syncFile struct{ *os.File }

func (f *syncFile) Close() error {
	if err := f.File.Sync(); err != nil {
		f.File.Close()
		return err
	}
	return f.File.Close()
}

func (f *syncFile) abort(error) { f.File.Close() }

func (d *dirStage) commit(ctx context.Context, _ *Manifest, manifest []byte) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := writeSynced(filepath.Join(d.tmp, ManifestName), manifest); err != nil {
		os.RemoveAll(d.tmp)
		return false, err
	}
	if err := syncDir(d.tmp); err != nil {
		os.RemoveAll(d.tmp)
		return false, err
	}
	err := os.Rename(d.tmp, d.dst)
	if err == nil {
		return true, syncDir(filepath.Dir(d.dst))
	}
	if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.ENOTEMPTY) {
		if _, serr := os.Stat(filepath.Join(d.dst, ManifestName)); serr == nil {
			return false, nil
		}
		os.RemoveAll(d.tmp)
		return false, fmt.Errorf("%s exists without a manifest (an interrupted delete?); GC removes it", d.dst)
	}
	os.RemoveAll(d.tmp)
	return false, err
}

func (d *dirStage) abort(context.Context) error { return os.RemoveAll(d.tmp) }

func writeSynced(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return (&syncFile{f}).Close()
}

// objectStage uploads each file to <step>/<writer id>/<name> and commits by
// creating <step>/MANIFEST.json with a DoesNotExist precondition.
type objectStage struct {
	s   Store
	key string // step key
	id  string
}

func (o *objectStage) object(name string) string { return o.id + "/" + name }

func (o *objectStage) create(ctx context.Context, name string) (io.WriteCloser, error) {
	pr, pw := io.Pipe()
	p := &pipeSink{pw: pw, done: make(chan error, 1)}
	key := o.key + "/" + o.object(name)
	go func() {
		_, err := o.s.Put(ctx, key, pr)
		pr.CloseWithError(errOr(err, io.ErrClosedPipe))
		p.done <- err
	}()
	return p, nil
}

func errOr(err, other error) error {
	if err != nil {
		return err
	}
	return other
}

// pipeSink feeds a Store.Put running in its own goroutine.
type pipeSink struct {
	pw   *io.PipeWriter
	done chan error
}

func (p *pipeSink) Write(b []byte) (int, error) { return p.pw.Write(b) }

func (p *pipeSink) Close() error {
	p.pw.Close()
	return <-p.done
}

// abort makes Put see a read error, so it finalizes nothing.
func (p *pipeSink) abort(err error) {
	p.pw.CloseWithError(err)
	<-p.done
}

func (o *objectStage) commit(ctx context.Context, m *Manifest, data []byte) (bool, error) {
	// Never publish a manifest over bytes that are gone (say, a GC that judged
	// this writer dead): check every staged object first.
	err := forEach(ctx, len(m.Files), 8, func(ctx context.Context, i int) error {
		f := m.Files[i]
		info, err := o.s.Stat(ctx, o.key+"/"+f.Object)
		if err != nil {
			return err
		}
		if info.Size != f.Size {
			return fmt.Errorf("staged %s has %d bytes, wrote %d", o.s.URI(o.key+"/"+f.Object), info.Size, f.Size)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	return o.s.PutIfAbsent(ctx, o.key+"/"+ManifestName, bytes.NewReader(data))
}

func (o *objectStage) abort(ctx context.Context) error {
	return removePrefix(ctx, o.s, o.key+"/"+o.id+"/")
}

// removePrefix deletes every object under prefix (a directory on local disk).
func removePrefix(ctx context.Context, s Store, prefix string) error {
	if d, ok := s.(interface {
		removeDir(ctx context.Context, prefix string) error
	}); ok {
		return d.removeDir(ctx, prefix)
	}
	objs, err := s.List(ctx, prefix)
	if err != nil {
		return err
	}
	return forEach(ctx, len(objs), 8, func(ctx context.Context, i int) error {
		return s.Delete(ctx, objs[i].Key)
	})
}

// Save writes checkpoint step unless it is already committed, in which case
// it returns the existing Ref without calling fill: a retried activity finds
// its own earlier output. fill adds the files; when it fails nothing is
// committed.
func (c *Client) Save(ctx context.Context, root, run, phase string, step int64, fill func(w *Writer) error) (Ref, error) {
	ref, err := c.Lookup(ctx, root, run, phase, step)
	if err == nil {
		return ref, nil
	}
	if !errors.Is(err, ErrNotExist) {
		return Ref{}, err
	}
	w, err := c.NewWriter(ctx, root, run, phase, step)
	if err != nil {
		return Ref{}, err
	}
	if err := fill(w); err != nil {
		_ = w.Abort(context.WithoutCancel(ctx))
		return Ref{}, err
	}
	ref, err = w.Commit(ctx)
	if err != nil {
		_ = w.Abort(context.WithoutCancel(ctx)) // no-op once the commit itself was attempted
	}
	return ref, err
}

// Lookup returns the Ref of a committed checkpoint (its manifest exists; the
// bytes are not verified). The error wraps ErrNotExist when it is not committed.
func (c *Client) Lookup(ctx context.Context, root, run, phase string, step int64) (Ref, error) {
	l, err := c.ckptLocFor(root, run, phase, step)
	if err != nil {
		return Ref{}, err
	}
	s, err := c.store(ctx, l.root)
	if err != nil {
		return Ref{}, err
	}
	if _, err := s.Stat(ctx, l.key()+"/"+ManifestName); err != nil {
		if isNotExist(err) {
			return Ref{}, fmt.Errorf("ckpt: lookup %s: not committed: %w", l.uri(), ErrNotExist)
		}
		return Ref{}, err
	}
	return l.ref(), nil
}
