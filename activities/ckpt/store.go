package ckpt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"time"

	"cloud.google.com/go/storage"
)

// Store is a flat, byte-oriented object store addressed by slash-separated
// keys relative to its root URI. Objects are opaque blobs; nothing here knows
// about tensors. Put and PutIfAbsent stream: they never hold a whole object in
// memory.
type Store interface {
	// URI names key for people and error messages ("gs://b/p/key", "file:///d/key").
	URI(key string) string
	// Put writes key from r, replacing any previous object atomically: readers
	// see the old object or the new one, never a prefix. It returns the bytes written.
	Put(ctx context.Context, key string, r io.Reader) (int64, error)
	// PutIfAbsent writes key only if no object exists there. created is false when
	// another object was already there. A create whose response was lost and whose
	// retry found an object with identical size and CRC32C counts as created.
	PutIfAbsent(ctx context.Context, key string, r io.Reader) (created bool, err error)
	// Get opens key for streaming; the error wraps ErrNotExist when it is missing.
	Get(ctx context.Context, key string) (io.ReadCloser, error)
	// Stat describes key; the error wraps ErrNotExist when it is missing.
	Stat(ctx context.Context, key string) (ObjectInfo, error)
	// List returns every object whose key starts with prefix, sorted by key.
	List(ctx context.Context, prefix string) ([]ObjectInfo, error)
	// Delete removes key; deleting a missing object is not an error.
	Delete(ctx context.Context, key string) error
	// Close releases clients the store created itself (not injected ones).
	Close() error
}

// ObjectInfo describes one stored object.
type ObjectInfo struct {
	Key     string    `json:"key"`
	Size    int64     `json:"size"`
	Updated time.Time `json:"updated"`
}

// ErrNotExist is wrapped by errors for missing objects and checkpoints.
// errors.Is(err, fs.ErrNotExist) also holds for it.
var ErrNotExist error = notExistError{}

type notExistError struct{}

func (notExistError) Error() string        { return "does not exist" }
func (notExistError) Is(target error) bool { return target == fs.ErrNotExist }

// Defaults for Options.
const (
	DefaultPartSize    = 16 << 20
	DefaultParallelism = 4
	minPartSize        = 256 << 10 // also the largest object sent without a part pipeline
	// DefaultMaxRetryDuration bounds the retries of one non-upload GCS call.
	DefaultMaxRetryDuration = 5 * time.Minute
)

// Options configure stores and Clients. The zero value is ready to use.
type Options struct {
	// GCS is the client used for gs:// URIs. When nil, one is created on first use
	// with Application Default Credentials; the storage package itself honours
	// STORAGE_EMULATOR_HOST. Injected clients are never closed by this package.
	GCS *storage.Client
	// PartSize is the size of the parts a large GCS object is split into; parts
	// upload concurrently and are composed server-side. Each part is one request,
	// buffered once by the storage Writer (its ChunkSize is set just above
	// PartSize) so that it can be retried. Default DefaultPartSize, minimum 256 KiB.
	PartSize int
	// Parallelism is the number of parts of one object in flight at once; memory
	// per uploading object is about Parallelism*PartSize. Default DefaultParallelism.
	Parallelism int
	// Retry options for GCS calls, applied after storage.WithPolicy(storage.RetryAlways),
	// storage.WithErrorFunc(storage.ShouldRetry) and
	// storage.WithMaxRetryDuration(DefaultMaxRetryDuration). The storage client
	// bounds upload retries only by the context, so give saves a deadline (an
	// activity's context has one):
	// every call this package makes is safe to repeat (uploads go to writer-unique
	// names or carry a DoesNotExist precondition; compose sources are immutable).
	// Tests shorten the backoff with storage.WithBackoff.
	Retry []storage.RetryOption
	// Now is the clock GC measures ages with. Default time.Now.
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.PartSize <= 0 {
		o.PartSize = DefaultPartSize
	}
	if o.PartSize < minPartSize {
		o.PartSize = minPartSize
	}
	if o.Parallelism <= 0 {
		o.Parallelism = DefaultParallelism
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// Open returns the store rooted at uri: "file:///abs/dir" (a bare path is taken
// as a local directory) or "gs://bucket/prefix". The caller closes it.
func Open(ctx context.Context, uri string, opts Options) (Store, error) {
	loc, err := parseLocation(uri)
	if err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	switch loc.scheme {
	case "file":
		return newFileStore(loc.path), nil
	default:
		client, owned := opts.GCS, false
		if client == nil {
			client, err = storage.NewClient(ctx)
			if err != nil {
				return nil, fmt.Errorf("ckpt: open %s: storage client: %w", uri, err)
			}
			owned = true
		}
		return newGCSStore(client, owned, loc.bucket, loc.path, opts), nil
	}
}

// location is a parsed root URI. For file, path is an absolute OS path; for gs,
// path is the object-name prefix without leading or trailing slashes.
type location struct {
	scheme, bucket, path string
}

func (l location) String() string {
	if l.scheme == "file" {
		return "file://" + filepath.ToSlash(l.path)
	}
	if l.path == "" {
		return "gs://" + l.bucket
	}
	return "gs://" + l.bucket + "/" + l.path
}

// parseLocation accepts file:///abs, gs://bucket[/prefix] and bare paths. URIs
// are not percent-decoded: checkpoint names are restricted to characters that
// need no escaping.
func parseLocation(uri string) (location, error) {
	scheme, rest, ok := strings.Cut(uri, "://")
	if !ok {
		if uri == "" || strings.Contains(uri, ":") && !filepath.IsAbs(uri) {
			return location{}, fmt.Errorf("ckpt: open %q: want a URI with scheme file:// or gs://", uri)
		}
		abs, err := filepath.Abs(uri)
		if err != nil {
			return location{}, fmt.Errorf("ckpt: open %q: %w", uri, err)
		}
		return location{scheme: "file", path: abs}, nil
	}
	switch scheme {
	case "file":
		if !strings.HasPrefix(rest, "/") {
			return location{}, fmt.Errorf("ckpt: open %q: file URIs need an absolute path (file:///abs/dir)", uri)
		}
		p := filepath.Clean(filepath.FromSlash(rest))
		return location{scheme: "file", path: p}, nil
	case "gs":
		bucket, prefix, _ := strings.Cut(rest, "/")
		if bucket == "" {
			return location{}, fmt.Errorf("ckpt: open %q: missing bucket (gs://bucket/prefix)", uri)
		}
		prefix = strings.Trim(prefix, "/")
		if strings.Contains(prefix, "//") {
			return location{}, fmt.Errorf("ckpt: open %q: empty path element", uri)
		}
		return location{scheme: "gs", bucket: bucket, path: prefix}, nil
	default:
		return location{}, fmt.Errorf("ckpt: open %q: unsupported scheme %q (allowed: file, gs)", uri, scheme)
	}
}

// validKey rejects keys that could escape the root or alias another key.
func validKey(key string) error {
	if !fs.ValidPath(key) || key == "." {
		return fmt.Errorf("invalid key %q", key)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b)
}

// isNotExist reports whether err means "no such object" for either backend.
func isNotExist(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, storage.ErrObjectNotExist)
}
