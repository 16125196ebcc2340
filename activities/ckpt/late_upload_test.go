package ckpt

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// lateUploads applies every upload request to the emulator a while after it has read its body, even
// if the client has given up by then: a request in flight lands on a real server too, after the
// client's context was cancelled.
type lateUploads struct {
	next  http.Handler
	delay time.Duration
}

func (l lateUploads) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/upload/") {
		l.next.ServeHTTP(w, r)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	time.Sleep(l.delay)
	r2 := r.Clone(context.Background())
	r2.Body = io.NopCloser(bytes.NewReader(body))
	l.next.ServeHTTP(w, r2)
}

// slowErrReader fails after a pause, so the parts before it are on the wire when the stream breaks.
type slowErrReader struct {
	pause time.Duration
	err   error
}

func (s slowErrReader) Read([]byte) (int, error) { time.Sleep(s.pause); return 0, s.err }

// TestFailedStreamLeavesNoLateParts: when a multi-part upload's source breaks while an earlier part is
// still being sent, that part is allowed to finish and is then deleted, so nothing appears under the
// writer's prefix afterwards. (Cancelling it instead left it to land after the cleanup: the orphan
// TestAbortedSaveIsInvisible once saw in CI.)
func TestFailedStreamLeavesNoLateParts(t *testing.T) {
	ctx := context.Background()
	e := newEmulatorBehind(t, false, func(h http.Handler) http.Handler { return lateUploads{next: h, delay: 300 * time.Millisecond} })
	opts := Options{GCS: e.client, PartSize: testPartSize, Parallelism: 3, Retry: fastRetry}
	root := "gs://" + testBucket + "/late"
	boom := errors.New("source broke")
	_, err := New(opts).Save(ctx, root, "r", "sft", 1, func(w *Writer) error {
		src := io.MultiReader(bytes.NewReader(payload(1, testPartSize+1000)), slowErrReader{100 * time.Millisecond, boom})
		return w.Add(ctx, ModelName, src)
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Save error = %v, want %v", err, boom)
	}
	time.Sleep(500 * time.Millisecond) // past any upload still being applied
	s, err := Open(ctx, root, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if objs, err := s.List(ctx, "runs/"); err != nil || len(objs) != 0 {
		t.Fatalf("after a failed save the store holds %v (%v)", objs, err)
	}
}
