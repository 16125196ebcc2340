package ckpt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Checkpoint is a committed checkpoint opened for reading.
type Checkpoint struct {
	Ref      Ref
	Manifest Manifest

	store Store
	key   string
}

// Read opens the checkpoint at uri (its manifest must exist). The error wraps
// ErrNotExist when it is not committed, ErrCorrupt when the manifest is bad.
func (c *Client) Read(ctx context.Context, uri string) (*Checkpoint, error) {
	l, err := parseCkptURI(uri)
	if err != nil {
		return nil, err
	}
	s, err := c.store(ctx, l.root)
	if err != nil {
		return nil, err
	}
	m, err := readManifest(ctx, s, l.key())
	if err != nil {
		if isNotExist(err) {
			return nil, fmt.Errorf("ckpt: read %s: not committed: %w", l.uri(), ErrNotExist)
		}
		return nil, err
	}
	if m.Step != l.step || m.Run != l.run || m.Phase != l.phase {
		return nil, fmt.Errorf("ckpt: read %s: %w: manifest is for %s/%s step %d", l.uri(), ErrCorrupt, m.Run, m.Phase, m.Step)
	}
	return &Checkpoint{Ref: l.ref(), Manifest: *m, store: s, key: l.key()}, nil
}

// Read opens a checkpoint with the default Client (for the CLI).
func Read(ctx context.Context, uri string) (*Checkpoint, error) { return defaultClient.Read(ctx, uri) }

// Open streams file name. The reader checks size and sha256 as bytes pass and
// returns an error wrapping ErrCorrupt instead of io.EOF when they do not
// match the manifest; read to EOF to get that guarantee.
func (ck *Checkpoint) Open(ctx context.Context, name string) (io.ReadCloser, error) {
	f, ok := ck.Manifest.File(name)
	if !ok {
		return nil, fmt.Errorf("ckpt: open %s%s: not in manifest: %w", ck.Ref.URI, name, ErrNotExist)
	}
	key := ck.key + "/" + f.key()
	rc, err := ck.store.Get(ctx, key)
	if err != nil {
		if isNotExist(err) {
			return nil, fmt.Errorf("ckpt: read %s%s: %w: listed in manifest but missing", ck.Ref.URI, name, ErrCorrupt)
		}
		return nil, err
	}
	return &verifyReader{rc: rc, h: sha256.New(), want: f, uri: ck.Ref.URI + name}, nil
}

// ReadState decodes state.json.
func (ck *Checkpoint) ReadState(ctx context.Context) (State, error) {
	rc, err := ck.Open(ctx, StateName)
	if err != nil {
		return State{}, err
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return State{}, err
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return State{}, fmt.Errorf("ckpt: decode %s%s: %w", ck.Ref.URI, StateName, err)
	}
	return s, nil
}

// Verify reads every file and checks it against the manifest.
func (ck *Checkpoint) Verify(ctx context.Context) error {
	files := ck.Manifest.Files
	return forEach(ctx, len(files), 2, func(ctx context.Context, i int) error {
		rc, err := ck.Open(ctx, files[i].Name)
		if err != nil {
			return err
		}
		defer rc.Close()
		buf := make([]byte, 1<<20)
		_, err = io.CopyBuffer(struct{ io.Writer }{io.Discard}, rc, buf)
		return err
	})
}

// Verify checks the checkpoint at uri byte for byte.
func (c *Client) Verify(ctx context.Context, uri string) error {
	ck, err := c.Read(ctx, uri)
	if err != nil {
		return err
	}
	return ck.Verify(ctx)
}

// Verify checks the checkpoint at uri with the default Client (for the CLI).
func Verify(ctx context.Context, uri string) error { return defaultClient.Verify(ctx, uri) }

type verifyReader struct {
	rc   io.ReadCloser
	h    hash.Hash
	n    int64
	want FileEntry
	uri  string
	err  error
}

func (r *verifyReader) Read(p []byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	n, err := r.rc.Read(p)
	r.h.Write(p[:n])
	r.n += int64(n)
	if r.n > r.want.Size {
		r.err = fmt.Errorf("ckpt: read %s: %w: longer than the %d bytes in the manifest", r.uri, ErrCorrupt, r.want.Size)
		return n, r.err
	}
	if err == io.EOF {
		if r.n != r.want.Size {
			r.err = fmt.Errorf("ckpt: read %s: %w: %d bytes, manifest says %d", r.uri, ErrCorrupt, r.n, r.want.Size)
			return n, r.err
		}
		if got := hex.EncodeToString(r.h.Sum(nil)); got != r.want.SHA256 {
			r.err = fmt.Errorf("ckpt: read %s: %w: sha256 %s, manifest says %s", r.uri, ErrCorrupt, got, r.want.SHA256)
			return n, r.err
		}
		r.err = io.EOF
	} else if err != nil {
		r.err = fmt.Errorf("ckpt: read %s: %w", r.uri, err)
		return n, r.err
	}
	return n, err
}

// Close reports corruption again (io.ReadFull swallows an error that arrives
// with the last bytes) and verifies when exactly the manifest's size was read
// without reaching EOF.
func (r *verifyReader) Close() error {
	cerr := r.rc.Close()
	if errors.Is(r.err, ErrCorrupt) {
		return r.err
	}
	if r.err == nil && r.n == r.want.Size {
		if got := hex.EncodeToString(r.h.Sum(nil)); got != r.want.SHA256 {
			r.err = fmt.Errorf("ckpt: read %s: %w: sha256 %s, manifest says %s", r.uri, ErrCorrupt, got, r.want.SHA256)
			return r.err
		}
		r.err = io.EOF
	}
	return cerr
}

// ListCheckpoints lists the committed checkpoints under a store, run or phase
// URI (ROOT[/runs/RUN[/PHASE]]) with the default Client (for the CLI).
func ListCheckpoints(ctx context.Context, uri string) ([]Ref, error) {
	root, run, phase := splitRunsURI(uri)
	return defaultClient.List(ctx, root, run, phase)
}

// splitRunsURI splits "ROOT/runs/RUN/PHASE" into its parts; RUN and PHASE may be absent.
func splitRunsURI(uri string) (root, run, phase string) {
	uri = strings.TrimSuffix(uri, "/")
	i := strings.LastIndex(uri, "/runs/")
	if i < 0 {
		return uri, "", ""
	}
	root = uri[:i]
	rest := strings.Split(uri[i+len("/runs/"):], "/")
	run = rest[0]
	if len(rest) > 1 {
		phase = rest[1]
	}
	return root, run, phase
}

// Export copies a checkpoint's model files and any config/tokenizer files
// into dir as a Hugging Face-style model directory, verifying each file; it
// returns the names copied. Existing files of the same name are replaced.
func (c *Client) Export(ctx context.Context, uri, dir string) ([]string, error) {
	ck, err := c.Read(ctx, uri)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("ckpt: export %s to %s: %w", uri, dir, err)
	}
	var names []string
	for _, f := range ck.Manifest.Files {
		if !exportable(f.Name) {
			continue
		}
		if err := ck.ExportFile(ctx, f.Name, dir); err != nil {
			return names, err
		}
		names = append(names, f.Name)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("ckpt: export %s: no model, config or tokenizer files in checkpoint", uri)
	}
	return names, nil
}

// Export copies a checkpoint's model directory with the default Client (for the CLI).
func Export(ctx context.Context, uri, dir string) ([]string, error) {
	return defaultClient.Export(ctx, uri, dir)
}

// exportable picks what a Hugging Face model directory holds: weights
// (model*.safetensors and the shard index), config and tokenizer files.
func exportable(name string) bool {
	switch name {
	case "config.json", "generation_config.json", "special_tokens_map.json", "added_tokens.json",
		"merges.txt", "model.safetensors.index.json":
		return true
	}
	if strings.HasPrefix(name, "model") && strings.HasSuffix(name, ".safetensors") {
		return true
	}
	for _, p := range []string{"tokenizer", "vocab.", "chat_template."} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// ExportFile copies file name into the local directory dir: written under a temporary name and
// renamed into place only once its size and sha256 matched the manifest, so it is whole or absent.
func (ck *Checkpoint) ExportFile(ctx context.Context, name, dir string) (err error) {
	dst := filepath.Join(dir, name)
	rc, err := ck.Open(ctx, name)
	if err != nil {
		return err
	}
	defer rc.Close()
	tmp, err := os.CreateTemp(dir, "."+path.Base(name)+".export-*")
	if err != nil {
		return fmt.Errorf("ckpt: export %s%s: %w", ck.Ref.URI, name, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	buf := make([]byte, 1<<20)
	if _, err = io.CopyBuffer(struct{ io.Writer }{tmp}, rc, buf); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("ckpt: export %s%s to %s: %w", ck.Ref.URI, name, dst, err)
		}
		return err // already names the file and URI
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("ckpt: export %s: %w", dst, err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("ckpt: export %s: %w", dst, err)
	}
	if err = os.Rename(tmp.Name(), dst); err != nil {
		return fmt.Errorf("ckpt: export %s: %w", dst, err)
	}
	return nil
}
