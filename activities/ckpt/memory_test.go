package ckpt

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"mime"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/option"
)

// randStream yields n pseudo-random bytes without holding them.
type randStream struct {
	r *rand.Rand
	n int64
}

func newRandStream(seed uint64, n int64) *randStream {
	return &randStream{r: rand.New(rand.NewPCG(seed, seed+1)), n: n}
}

func (s *randStream) Read(p []byte) (int, error) {
	if s.n == 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > s.n {
		p = p[:s.n]
	}
	i := 0
	for ; i+8 <= len(p); i += 8 {
		binary.LittleEndian.PutUint64(p[i:], s.r.Uint64())
	}
	for ; i < len(p); i++ {
		p[i] = byte(s.r.Uint32())
	}
	s.n -= int64(len(p))
	return len(p), nil
}

// peakHeap samples the live-object heap every millisecond while fn runs and
// returns the peak above the level before it started.
func peakHeap(fn func()) (peak uint64) {
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var max atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			if v := read(); v > max.Load() {
				max.Store(v)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	fn()
	close(done)
	wg.Wait()
	if max.Load() < base {
		return 0
	}
	return max.Load() - base
}

// discardGCS implements the JSON-API calls a GCS save makes (multipart
// upload, compose, delete, object metadata), keeping only sizes and CRC32Cs,
// so that heap and time measure the client side alone.
type discardGCS struct {
	mu   sync.Mutex
	objs map[string][2]uint64 // name -> size, crc
}

func (d *discardGCS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := r.URL.EscapedPath()
	reply := func(name string, size, crc uint64) {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], uint32(crc))
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{
			"bucket": testBucket, "name": name, "size": fmt.Sprint(size),
			"crc32c": base64.StdEncoding.EncodeToString(b[:]), "generation": "1",
		})
	}
	switch {
	case r.Method == http.MethodPost && strings.HasPrefix(path, "/upload/"):
		_, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
		mr := multipart.NewReader(r.Body, params["boundary"])
		var meta struct{ Name string }
		part, _ := mr.NextPart()
		json.NewDecoder(part).Decode(&meta)
		part, err := mr.NextPart()
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		h := crc32.New(castagnoli)
		n, _ := io.Copy(h, part)
		name := r.URL.Query().Get("name")
		d.mu.Lock()
		d.objs[name] = [2]uint64{uint64(n), uint64(h.Sum32())}
		d.mu.Unlock()
		reply(name, uint64(n), uint64(h.Sum32()))
	case r.Method == http.MethodPost && strings.HasSuffix(path, "/compose"):
		var req struct{ SourceObjects []struct{ Name string } }
		json.NewDecoder(r.Body).Decode(&req)
		var size, crc uint64
		d.mu.Lock()
		for _, s := range req.SourceObjects {
			o := d.objs[s.Name]
			crc = uint64(crc32Combine(uint32(crc), uint32(o[1]), int64(o[0])))
			size += o[0]
		}
		name, _ := url.PathUnescape(strings.TrimSuffix(strings.SplitN(path, "/o/", 2)[1], "/compose"))
		d.objs[name] = [2]uint64{size, crc}
		d.mu.Unlock()
		reply(name, size, crc)
	case r.Method == http.MethodDelete:
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodGet && strings.HasPrefix(path, "/storage/v1/b/"+testBucket+"/o/"):
		name, _ := url.PathUnescape(strings.TrimPrefix(path, "/storage/v1/b/"+testBucket+"/o/"))
		d.mu.Lock()
		o, ok := d.objs[name]
		d.mu.Unlock()
		if !ok {
			http.Error(w, `{"error":{"code":404,"message":"no such object"}}`, http.StatusNotFound)
			return
		}
		reply(name, o[0], o[1])
	default:
		http.Error(w, "not in stub: "+r.Method+" "+path, http.StatusNotImplemented)
	}
}

func newDiscardClient(t testing.TB) *storage.Client {
	ts := httptest.NewServer(&discardGCS{objs: map[string][2]uint64{}})
	gcs, err := storage.NewClient(context.Background(), option.WithEndpoint(ts.URL+"/storage/v1/"), option.WithoutAuthentication())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { gcs.Close(); ts.Close() })
	return gcs
}

// crc32Combine returns the CRC32C of A||B from crc(A), crc(B) and len(B) (zlib's method).
func crc32Combine(crc1, crc2 uint32, len2 int64) uint32 {
	if len2 <= 0 {
		return crc1
	}
	times := func(mat []uint32, vec uint32) (sum uint32) {
		for i := 0; vec != 0; i, vec = i+1, vec>>1 {
			if vec&1 != 0 {
				sum ^= mat[i]
			}
		}
		return sum
	}
	square := func(sq, mat []uint32) {
		for n := range 32 {
			sq[n] = times(mat, mat[n])
		}
	}
	even, odd := make([]uint32, 32), make([]uint32, 32)
	odd[0] = 0x82f63b78 // Castagnoli, reversed
	row := uint32(1)
	for n := 1; n < 32; n++ {
		odd[n] = row
		row <<= 1
	}
	square(even, odd)
	square(odd, even)
	for {
		square(even, odd)
		if len2&1 != 0 {
			crc1 = times(even, crc1)
		}
		if len2 >>= 1; len2 == 0 {
			break
		}
		square(odd, even)
		if len2&1 != 0 {
			crc1 = times(odd, crc1)
		}
		if len2 >>= 1; len2 == 0 {
			break
		}
	}
	return crc1 ^ crc2
}

// TestSaveMemoryBounded streams a 100 MiB file into a checkpoint and checks
// that the heap never holds a whole extra copy: locally it is a small buffer,
// on GCS about Parallelism x PartSize.
func TestSaveMemoryBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 100 MiB twice")
	}
	if a, b := []byte("hello, "), []byte("world"); crc32Combine(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), int64(len(b))) != crc32.Checksum([]byte("hello, world"), castagnoli) {
		t.Fatal("crc32Combine is wrong")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(25)) // measure live bytes, not GC slack
	const size = 100 << 20
	ctx := context.Background()

	gcs := newDiscardClient(t)

	for _, tc := range []struct {
		name  string
		root  string
		opts  Options
		limit uint64
	}{
		{"local", "file://" + t.TempDir(), Options{}, 8 << 20},
		{"gcs", "gs://" + testBucket + "/mem", Options{GCS: gcs}, 100 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.opts)
			w, err := c.NewWriter(ctx, tc.root, "r", "sft", 1)
			if err != nil {
				t.Fatal(err)
			}
			var addErr error
			peak := peakHeap(func() {
				addErr = w.Add(ctx, ModelName, newRandStream(1, size))
			})
			if addErr != nil {
				t.Fatal(addErr)
			}
			t.Logf("%s: peak live heap above baseline while saving %d MiB: %.1f MiB (limit %d MiB)",
				tc.name, size>>20, float64(peak)/(1<<20), tc.limit>>20)
			if peak > tc.limit {
				t.Errorf("peak heap %.1f MiB exceeds %d MiB", float64(peak)/(1<<20), tc.limit>>20)
			}
			if tc.name == "local" {
				if _, err := w.Commit(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
