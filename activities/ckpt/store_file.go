package ckpt

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// fileStore keeps objects as files under a root directory. Put writes a temp
// file next to the target, fsyncs it and renames it into place; PutIfAbsent
// links the temp file to the target, which fails if the target exists.
type fileStore struct {
	root string
}

func newFileStore(root string) *fileStore { return &fileStore{root: root} }

func (s *fileStore) URI(key string) string {
	return "file://" + filepath.ToSlash(filepath.Join(s.root, filepath.FromSlash(key)))
}

func (s *fileStore) path(key string) string {
	return filepath.Join(s.root, filepath.FromSlash(key))
}

func (s *fileStore) Close() error { return nil }

// writeTemp streams r into a fresh temp file beside key's path and fsyncs it.
func (s *fileStore) writeTemp(ctx context.Context, key string, r io.Reader) (tmp string, n int64, err error) {
	if err := ctx.Err(); err != nil {
		return "", 0, err
	}
	p := s.path(key)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return "", 0, err
	}
	f, err := os.CreateTemp(filepath.Dir(p), "."+filepath.Base(p)+".put-*")
	if err != nil {
		return "", 0, err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	n, err = io.Copy(f, ctxReader{ctx, r})
	if err != nil {
		return "", n, err
	}
	if err = f.Sync(); err != nil {
		return "", n, err
	}
	if err = f.Close(); err != nil {
		return "", n, err
	}
	return f.Name(), n, nil
}

func (s *fileStore) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	if err := validKey(key); err != nil {
		return 0, fmt.Errorf("ckpt: put %s: %w", s.URI(key), err)
	}
	tmp, n, err := s.writeTemp(ctx, key, r)
	if err != nil {
		return n, fmt.Errorf("ckpt: put %s: %w", s.URI(key), err)
	}
	if err := os.Rename(tmp, s.path(key)); err != nil {
		os.Remove(tmp)
		return n, fmt.Errorf("ckpt: put %s: %w", s.URI(key), err)
	}
	if err := syncDir(filepath.Dir(s.path(key))); err != nil {
		return n, fmt.Errorf("ckpt: put %s: %w", s.URI(key), err)
	}
	return n, nil
}

func (s *fileStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) (bool, error) {
	if err := validKey(key); err != nil {
		return false, fmt.Errorf("ckpt: create %s: %w", s.URI(key), err)
	}
	tmp, _, err := s.writeTemp(ctx, key, r)
	if err != nil {
		return false, fmt.Errorf("ckpt: create %s: %w", s.URI(key), err)
	}
	defer os.Remove(tmp)
	if err := os.Link(tmp, s.path(key)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, fmt.Errorf("ckpt: create %s: %w", s.URI(key), err)
	}
	if err := syncDir(filepath.Dir(s.path(key))); err != nil {
		return true, fmt.Errorf("ckpt: create %s: %w", s.URI(key), err)
	}
	return true, nil
}

func (s *fileStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := validKey(key); err != nil {
		return nil, fmt.Errorf("ckpt: get %s: %w", s.URI(key), err)
	}
	f, err := os.Open(s.path(key))
	if err != nil {
		return nil, fmt.Errorf("ckpt: get %s: %w", s.URI(key), fileErr(err))
	}
	if st, err := f.Stat(); err != nil || st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("ckpt: get %s: %w", s.URI(key), ErrNotExist)
	}
	return f, nil
}

func (s *fileStore) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := validKey(key); err != nil {
		return ObjectInfo{}, fmt.Errorf("ckpt: stat %s: %w", s.URI(key), err)
	}
	st, err := os.Stat(s.path(key))
	if err == nil && st.IsDir() {
		err = ErrNotExist
	}
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("ckpt: stat %s: %w", s.URI(key), fileErr(err))
	}
	return ObjectInfo{Key: key, Size: st.Size(), Updated: st.ModTime()}, nil
}

func (s *fileStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	// Walk the deepest directory the prefix names completely, filter the rest.
	dir := prefix
	if !strings.HasSuffix(dir, "/") {
		dir = path.Dir(dir)
	}
	dir = strings.TrimSuffix(dir, "/")
	if dir == "." {
		dir = ""
	}
	start := filepath.Join(s.root, filepath.FromSlash(dir))
	var out []ObjectInfo
	err := filepath.WalkDir(start, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // vanished under us (a concurrent rename or removal)
			}
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			return cerr
		}
		if d.IsDir() {
			return nil
		}
		rel, err := filepath.Rel(s.root, p)
		if err != nil {
			return err
		}
		key := filepath.ToSlash(rel)
		if !strings.HasPrefix(key, prefix) {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		out = append(out, ObjectInfo{Key: key, Size: info.Size(), Updated: info.ModTime()})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("ckpt: list %s: %w", s.URI(prefix), err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (s *fileStore) Delete(ctx context.Context, key string) error {
	if err := validKey(key); err != nil {
		return fmt.Errorf("ckpt: delete %s: %w", s.URI(key), err)
	}
	if err := os.Remove(s.path(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("ckpt: delete %s: %w", s.URI(key), err)
	}
	return nil
}

// removeDir makes the directory prefix disappear atomically (rename to a
// .trash- sibling) and then deletes it. A crash in between leaves only trash,
// which GC collects.
func (s *fileStore) removeDir(ctx context.Context, prefix string) error {
	prefix = strings.TrimSuffix(prefix, "/")
	p := s.path(prefix)
	trash := filepath.Join(filepath.Dir(p), ".trash-"+filepath.Base(p)+"-"+randomHex(4))
	if err := os.Rename(p, trash); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("ckpt: remove %s: %w", s.URI(prefix), err)
	}
	if err := syncDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("ckpt: remove %s: %w", s.URI(prefix), err)
	}
	if err := os.RemoveAll(trash); err != nil {
		return fmt.Errorf("ckpt: remove %s: %w", s.URI(prefix), err)
	}
	return nil
}

// leftoverDirs returns the temp and trash directories of every phase as
// pseudo-objects ("runs/<run>/<phase>/.tmp-.../") stamped with their mtime.
func (s *fileStore) leftoverDirs() []ObjectInfo {
	var out []ObjectInfo
	for _, pat := range []string{".tmp-*", ".trash-*"} {
		matches, _ := filepath.Glob(filepath.Join(s.root, "runs", "*", "*", pat))
		for _, m := range matches {
			st, err := os.Stat(m)
			if err != nil || !st.IsDir() {
				continue
			}
			rel, err := filepath.Rel(s.root, m)
			if err != nil {
				continue
			}
			out = append(out, ObjectInfo{Key: filepath.ToSlash(rel) + "/", Updated: st.ModTime()})
		}
	}
	return out
}

func fileErr(err error) error {
	if errors.Is(err, fs.ErrNotExist) {
		return ErrNotExist
	}
	return err
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return err
	}
	return nil
}

// ctxReader stops a long local copy when the context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
