package ckpt

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/iterator"
)

// gcsStore keeps objects in a bucket under a prefix.
//
// Uploads: an object up to 256 KiB goes in one request. A larger one is cut
// into PartSize parts, up to Parallelism of them in flight, each one storage
// Writer whose ChunkSize is just above PartSize, so the part is a single
// request buffered once (and therefore retryable); the parts are then composed
// into the target (in a tree when there are more than 32) and deleted. The
// composed object's size and CRC32C are checked against what was streamed.
// Memory per upload is about Parallelism*PartSize whatever the object size.
type gcsStore struct {
	client   *storage.Client
	owned    bool
	bucket   string
	prefix   string // "" or ends in "/"
	bkt      *storage.BucketHandle
	partSize int
	parallel int
}

const maxComposeSources = 32

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func newGCSStore(client *storage.Client, owned bool, bucket, prefix string, opts Options) *gcsStore {
	if prefix != "" {
		prefix += "/"
	}
	// storage.ShouldRetry also covers dropped connections (a bare EOF), which the
	// upload path's own default classifier does not retry.
	retry := append([]storage.RetryOption{
		storage.WithPolicy(storage.RetryAlways),
		storage.WithErrorFunc(storage.ShouldRetry),
		storage.WithMaxRetryDuration(DefaultMaxRetryDuration),
	}, opts.Retry...)
	return &gcsStore{
		client:   client,
		owned:    owned,
		bucket:   bucket,
		prefix:   prefix,
		bkt:      client.Bucket(bucket).Retryer(retry...),
		partSize: opts.PartSize,
		parallel: opts.Parallelism,
	}
}

func (s *gcsStore) URI(key string) string { return "gs://" + s.bucket + "/" + s.prefix + key }

func (s *gcsStore) obj(key string) *storage.ObjectHandle { return s.bkt.Object(s.prefix + key) }

func (s *gcsStore) Close() error {
	if s.owned {
		return s.client.Close()
	}
	return nil
}

// chunkFor is the smallest storage Writer ChunkSize (a multiple of 256 KiB)
// strictly larger than n: the writer then sees EOF inside its first chunk and
// sends n bytes as one retryable request.
func chunkFor(n int) int {
	const q = 256 << 10
	return (n/q + 1) * q
}

func (s *gcsStore) Put(ctx context.Context, key string, r io.Reader) (int64, error) {
	if err := validKey(key); err != nil {
		return 0, fmt.Errorf("ckpt: put %s: %w", s.URI(key), err)
	}
	br := bufio.NewReaderSize(r, minPartSize)
	head, err := br.Peek(minPartSize)
	if err == io.EOF { // the whole object fits in one small request
		_, _, err := s.uploadOne(ctx, s.obj(key), bytes.NewReader(head), chunkFor(len(head)))
		if err != nil {
			return 0, fmt.Errorf("ckpt: put %s: %w", s.URI(key), err)
		}
		return int64(len(head)), nil
	}
	if err != nil {
		return 0, fmt.Errorf("ckpt: put %s: %w", s.URI(key), err)
	}
	n, err := s.putParts(ctx, key, br)
	if err != nil {
		return n, fmt.Errorf("ckpt: put %s: %w", s.URI(key), err)
	}
	return n, nil
}

// uploadOne streams r into h with one storage Writer and returns the CRC32C
// and length of what it sent.
func (s *gcsStore) uploadOne(ctx context.Context, h *storage.ObjectHandle, r io.Reader, chunk int) (uint32, int64, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := h.NewWriter(ctx)
	w.ChunkSize = chunk
	w.ContentType = "application/octet-stream"
	crc := crc32.New(castagnoli)
	n, err := io.Copy(w, io.TeeReader(r, crc))
	if err != nil {
		cancel() // abort: never finalize a partial object
		return crc.Sum32(), n, err
	}
	// The checksum goes back even on error: PutIfAbsent compares it with what
	// a precondition failure found in place.
	return crc.Sum32(), n, w.Close()
}

// putParts uploads br in parts, s.parallel at a time, and composes them into key. A part already
// being sent when another fails (or the source fails) is left to finish, not cancelled: a cancelled
// request can still land on the server after the client gave up on it, i.e. after the cleanup below
// deleted the parts, and leave an orphan under the writer's prefix (seen with the emulator). Only the
// caller's own cancellation interrupts them.
func (s *gcsStore) putParts(parent context.Context, key string, br *bufio.Reader) (int64, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		parts    []string
		total    int64
	)
	fail := func(err error) {
		mu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		mu.Unlock()
		cancel()
	}
	failed := func() error { mu.Lock(); defer mu.Unlock(); return firstErr }
	tag := randomHex(4)
	crc := crc32.New(castagnoli)
	src := io.TeeReader(br, crc)
	sem := make(chan struct{}, s.parallel)
	for i := 0; ; i++ {
		if _, err := br.Peek(1); err != nil {
			if err != io.EOF {
				fail(err)
			}
			break
		}
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if failed() != nil || ctx.Err() != nil {
			break
		}
		name := fmt.Sprintf("%s%s.part-%s-%05d", s.prefix, key, tag, i)
		parts = append(parts, name)
		wctx, wcancel := context.WithCancel(parent)
		w := s.bkt.Object(name).NewWriter(wctx)
		w.ChunkSize = chunkFor(s.partSize)
		w.ContentType = "application/octet-stream"
		n, err := io.CopyN(w, src, int64(s.partSize))
		total += n
		if err != nil && err != io.EOF {
			wcancel() // aborts w before its last chunk: the part is never finalized
			fail(err)
			<-sem
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			defer wcancel()
			// Close sends the part (the writer already holds it) and waits.
			if err := w.Close(); err != nil {
				fail(fmt.Errorf("part %d: %w", i, err))
			}
		}()
	}
	wg.Wait()
	cleanup := parts
	defer func() { s.deleteNames(context.WithoutCancel(ctx), cleanup) }()
	if err := failed(); err != nil {
		return total, err
	}
	if err := ctx.Err(); err != nil {
		return total, err
	}
	// Compose in a tree: GCS takes at most 32 sources per call.
	srcs := parts
	for level := 0; len(srcs) > maxComposeSources; level++ {
		var next []string
		for g := 0; g*maxComposeSources < len(srcs); g++ {
			next = append(next, fmt.Sprintf("%s%s.part-%s-c%d-%05d", s.prefix, key, tag, level, g))
		}
		cleanup = append(cleanup, next...)
		err := forEach(ctx, len(next), s.parallel, func(ctx context.Context, g int) error {
			group := srcs[g*maxComposeSources : min((g+1)*maxComposeSources, len(srcs))]
			_, err := s.compose(ctx, next[g], group)
			return err
		})
		if err != nil {
			return total, err
		}
		srcs = next
	}
	attrs, err := s.compose(ctx, s.prefix+key, srcs)
	if err != nil {
		return total, err
	}
	if attrs.Size != total || attrs.CRC32C != crc.Sum32() {
		return total, fmt.Errorf("composed object has size %d crc32c %08x, streamed %d bytes crc32c %08x",
			attrs.Size, attrs.CRC32C, total, crc.Sum32())
	}
	return total, nil
}

func (s *gcsStore) compose(ctx context.Context, dst string, srcs []string) (*storage.ObjectAttrs, error) {
	handles := make([]*storage.ObjectHandle, len(srcs))
	for i, n := range srcs {
		handles[i] = s.bkt.Object(n)
	}
	c := s.bkt.Object(dst).ComposerFrom(handles...)
	c.ContentType = "application/octet-stream"
	attrs, err := c.Run(ctx)
	if err != nil {
		return nil, fmt.Errorf("compose %d parts: %w", len(srcs), err)
	}
	return attrs, nil
}

// deleteNames removes temporary objects best-effort; GC collects what is left.
func (s *gcsStore) deleteNames(ctx context.Context, names []string) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_ = forEach(ctx, len(names), 2*s.parallel, func(ctx context.Context, i int) error {
		if err := s.bkt.Object(names[i]).Delete(ctx); err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
			return err
		}
		return nil
	})
}

func (s *gcsStore) PutIfAbsent(ctx context.Context, key string, r io.Reader) (bool, error) {
	if err := validKey(key); err != nil {
		return false, fmt.Errorf("ckpt: create %s: %w", s.URI(key), err)
	}
	br := bufio.NewReaderSize(r, minPartSize)
	head, err := br.Peek(minPartSize)
	chunk := chunkFor(len(head))
	if err == nil {
		chunk = chunkFor(s.partSize) // large: a resumable upload in PartSize chunks
	} else if err != io.EOF {
		return false, fmt.Errorf("ckpt: create %s: %w", s.URI(key), err)
	}
	h := s.obj(key).If(storage.Conditions{DoesNotExist: true})
	crc, n, err := s.uploadOne(ctx, h, br, chunk)
	if err == nil {
		return true, nil
	}
	var gerr *googleapi.Error
	if !errors.As(err, &gerr) || gerr.Code != http.StatusPreconditionFailed {
		return false, fmt.Errorf("ckpt: create %s: %w", s.URI(key), err)
	}
	// The object exists. If it holds exactly our bytes, an earlier attempt of
	// this very request succeeded and only its response was lost.
	attrs, err := s.obj(key).Attrs(ctx)
	if err != nil {
		return false, fmt.Errorf("ckpt: create %s: %w", s.URI(key), gcsErr(err))
	}
	return attrs.Size == n && attrs.CRC32C == crc, nil
}

func (s *gcsStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if err := validKey(key); err != nil {
		return nil, fmt.Errorf("ckpt: get %s: %w", s.URI(key), err)
	}
	r, err := s.obj(key).NewReader(ctx)
	if err != nil {
		return nil, fmt.Errorf("ckpt: get %s: %w", s.URI(key), gcsErr(err))
	}
	return r, nil
}

func (s *gcsStore) Stat(ctx context.Context, key string) (ObjectInfo, error) {
	if err := validKey(key); err != nil {
		return ObjectInfo{}, fmt.Errorf("ckpt: stat %s: %w", s.URI(key), err)
	}
	a, err := s.obj(key).Attrs(ctx)
	if err != nil {
		return ObjectInfo{}, fmt.Errorf("ckpt: stat %s: %w", s.URI(key), gcsErr(err))
	}
	return ObjectInfo{Key: key, Size: a.Size, Updated: a.Updated}, nil
}

func (s *gcsStore) List(ctx context.Context, prefix string) ([]ObjectInfo, error) {
	q := &storage.Query{Prefix: s.prefix + prefix}
	if err := q.SetAttrSelection([]string{"Name", "Size", "Updated"}); err != nil {
		return nil, fmt.Errorf("ckpt: list %s: %w", s.URI(prefix), err)
	}
	it := s.bkt.Objects(ctx, q)
	var out []ObjectInfo
	for {
		a, err := it.Next()
		if err == iterator.Done {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("ckpt: list %s: %w", s.URI(prefix), err)
		}
		out = append(out, ObjectInfo{Key: a.Name[len(s.prefix):], Size: a.Size, Updated: a.Updated})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out, nil
}

func (s *gcsStore) Delete(ctx context.Context, key string) error {
	if err := validKey(key); err != nil {
		return fmt.Errorf("ckpt: delete %s: %w", s.URI(key), err)
	}
	// A retried delete whose first attempt succeeded sees "not found": fine.
	if err := s.obj(key).Delete(ctx); err != nil && !errors.Is(err, storage.ErrObjectNotExist) {
		return fmt.Errorf("ckpt: delete %s: %w", s.URI(key), err)
	}
	return nil
}

func gcsErr(err error) error {
	if errors.Is(err, storage.ErrObjectNotExist) {
		return ErrNotExist
	}
	return err
}

// forEach runs fn(0..n-1) with at most par at once and returns the first error;
// the first error cancels the others' context.
func forEach(ctx context.Context, n, par int, fn func(ctx context.Context, i int) error) error {
	if n == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	sem := make(chan struct{}, max(par, 1))
	for i := 0; i < n; i++ {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				once.Do(func() { first = err; cancel() })
			}
		}()
	}
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}
