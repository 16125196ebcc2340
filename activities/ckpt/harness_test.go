package ckpt

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"github.com/googleapis/gax-go/v2"
	"google.golang.org/api/option"
)

const testBucket = "temper-test"

// emulator is fake-gcs-server in-process, reached over real HTTP through an
// optional fault-injecting handler, by the real storage client.
type emulator struct {
	srv    *fakestorage.Server
	ts     *httptest.Server
	faults *faultHandler
	client *storage.Client
}

func newEmulator(t testing.TB, faulty bool) *emulator { return newEmulatorBehind(t, faulty, nil) }

// newEmulatorBehind is newEmulator with the emulator's handler (after any faults) wrapped by wrap.
func newEmulatorBehind(t testing.TB, faulty bool, wrap func(http.Handler) http.Handler) *emulator {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		NoListener: true,
		Scheme:     "http",
		PublicHost: "127.0.0.1", // else every XML read says "object doesn't exist"
	})
	if err != nil {
		t.Fatal(err)
	}
	srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: testBucket})
	e := &emulator{srv: srv}
	var h http.Handler = srv.HTTPHandler()
	if faulty {
		e.faults = &faultHandler{next: h, rng: rand.New(rand.NewPCG(42, 7)), rate: 0.2}
		e.faults.forcedCreates.Store(2)
		h = e.faults
	}
	if wrap != nil {
		h = wrap(h)
	}
	e.ts = httptest.NewServer(h)
	e.client = e.newClient(t, e.ts.URL)
	t.Cleanup(func() {
		e.client.Close()
		e.ts.Close()
		srv.Stop()
	})
	return e
}

func (e *emulator) newClient(t testing.TB, url string) *storage.Client {
	t.Helper()
	c, err := storage.NewClient(context.Background(),
		option.WithEndpoint(url+"/storage/v1/"),
		option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// direct returns a client that bypasses the fault handler (for the test's own checks).
func (e *emulator) direct(t testing.TB) *storage.Client {
	ts := httptest.NewServer(e.srv.HTTPHandler())
	c := e.newClient(t, ts.URL)
	t.Cleanup(func() { c.Close(); ts.Close() })
	return c
}

// fastRetry keeps retries quick in tests; production uses the client's backoff.
var fastRetry = []storage.RetryOption{storage.WithBackoff(gax.Backoff{Initial: time.Millisecond, Max: 20 * time.Millisecond, Multiplier: 2})}

// faultHandler fails a seeded fraction of requests: 503 before processing, a
// dropped connection before processing, a dropped connection after the
// emulator applied the request (the response is lost), or, for object
// downloads, a body cut in the middle.
type faultHandler struct {
	next    http.Handler
	enabled atomic.Bool
	mu      sync.Mutex
	rng     *rand.Rand
	rate    float64
	counts  [4]atomic.Int64
	total   atomic.Int64
	// creates with ifGenerationMatch=0 (manifests) applied but answered with a
	// dropped connection: the retry meets its own object.
	lostCreates atomic.Int64
	// forcedCreates: this many first creates always get drop-after, so the
	// lost-response path of a manifest commit is exercised on every run.
	forcedCreates atomic.Int64
}

func (f *faultHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.total.Add(1)
	if !f.enabled.Load() {
		f.next.ServeHTTP(w, r)
		return
	}
	f.mu.Lock()
	x, kind := f.rng.Float64(), f.rng.IntN(4)
	f.mu.Unlock()
	if r.URL.Query().Get("ifGenerationMatch") == "0" && f.forcedCreates.Add(-1) >= 0 {
		x, kind = 0, 2
	}
	if x >= f.rate {
		f.next.ServeHTTP(w, r)
		return
	}
	isDownload := r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/"+testBucket+"/")
	if kind == 3 && !isDownload {
		kind = 2
	}
	f.counts[kind].Add(1)
	switch kind {
	case 0:
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"code":503,"message":"injected fault"}}`)
	case 1:
		io.Copy(io.Discard, r.Body)
		panic(http.ErrAbortHandler)
	case 2:
		rec := httptest.NewRecorder()
		f.next.ServeHTTP(rec, r)
		if r.URL.Query().Get("ifGenerationMatch") == "0" && rec.Code == http.StatusOK {
			f.lostCreates.Add(1)
		}
		panic(http.ErrAbortHandler)
	case 3:
		rec := httptest.NewRecorder()
		f.next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(rec.Code)
		w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		panic(http.ErrAbortHandler)
	}
}

func (f *faultHandler) String() string {
	return fmt.Sprintf("%d requests; injected: %d 503, %d drop-before, %d drop-after (%d of them manifest creates), %d cut-body",
		f.total.Load(), f.counts[0].Load(), f.counts[1].Load(), f.counts[2].Load(), f.lostCreates.Load(), f.counts[3].Load())
}

// backend is one store under test, with a Client rooted at it.
type backend struct {
	name   string
	root   string
	opts   Options
	client *Client
	emu    *emulator // nil for local
}

// small parts make a few hundred KiB exercise the parallel compose path.
const testPartSize = 256 << 10

func backends(t *testing.T) []*backend {
	t.Helper()
	dir := t.TempDir()
	lopts := Options{}
	emu := newEmulator(t, false)
	gopts := Options{GCS: emu.client, PartSize: testPartSize, Parallelism: 3, Retry: fastRetry}
	return []*backend{
		{name: "local", root: "file://" + dir, opts: lopts, client: New(lopts)},
		{name: "gcs", root: "gs://" + testBucket + "/" + strings.ReplaceAll(t.Name(), "/", "_"), opts: gopts, client: New(gopts), emu: emu},
	}
}

func forEachBackend(t *testing.T, fn func(t *testing.T, b *backend)) {
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) { fn(t, b) })
	}
}

func (b *backend) store(t testing.TB) Store {
	t.Helper()
	s, err := Open(context.Background(), b.root, b.opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// payload is deterministic pseudo-random content.
func payload(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	for i := n &^ 7; i < n; i++ {
		b[i] = byte(r.Uint32())
	}
	return b
}

// files of a test checkpoint for step.
func testFiles(step int64, variant uint64) map[string][]byte {
	return map[string][]byte{
		ModelName:               payload(uint64(step)*100+variant, 700<<10+13), // 3 parts at 256 KiB
		OptimName:               payload(uint64(step)*100+variant+50, 300<<10),
		"config.json":           []byte(`{"model_type":"test"}`),
		"tokenizer_config.json": []byte(`{"model_max_length":4096}`),
	}
}

func testState(step int64) State {
	return State{
		Step:          step,
		Cursor:        Cursor{Epoch: 1, Index: step * 32, Seed: 1<<64 - 1},
		RNG:           RNG{Algorithm: "pcg", Words: Words{1<<63 + 1, 1<<53 + 1}},
		PolicyVersion: step,
		ConfigHash:    "abc123",
		Scalars:       map[string]float64{"lr": 3e-4, "loss": 0.1 + 0.2},
	}
}

func save(ctx context.Context, c *Client, root, run, phase string, step int64, files map[string][]byte, st *State) (Ref, error) {
	return c.Save(ctx, root, run, phase, step, func(w *Writer) error {
		return fill(ctx, w, files, st)
	})
}

func fill(ctx context.Context, w *Writer, files map[string][]byte, st *State) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(files))
	for name, data := range files { // several files stream in parallel
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- w.Add(ctx, name, bytes.NewReader(data))
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	if st != nil {
		return w.AddState(ctx, *st)
	}
	return nil
}

func mustSave(t *testing.T, b *backend, run, phase string, step int64) (Ref, map[string][]byte) {
	t.Helper()
	files := testFiles(step, 0)
	st := testState(step)
	ref, err := save(context.Background(), b.client, b.root, run, phase, step, files, &st)
	if err != nil {
		t.Fatalf("save step %d: %v", step, err)
	}
	return ref, files
}

func readAll(t *testing.T, ck *Checkpoint, name string) ([]byte, error) {
	t.Helper()
	rc, err := ck.Open(context.Background(), name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}
