package ckpt

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"
)

// BenchmarkCheckpoint saves and loads a 100 MiB checkpoint (one model file
// plus state.json) to local disk and to the in-process GCS emulator, and
// reports MB/s (10^6 bytes per second). Save includes hashing, the fsyncs or
// the part uploads + compose, and the manifest commit; load reads the file
// back through the verifying reader.
//
//	go test -bench Checkpoint -run '^$' ./activities/ckpt/
func BenchmarkCheckpoint(b *testing.B) {
	const size = 100 << 20
	data := payload(1, size)
	ctx := context.Background()
	emu := newEmulator(b, false)
	type variant struct {
		name string
		root string
		opts Options
	}
	variants := []variant{
		{"local", "file://" + b.TempDir(), Options{}},
		{"gcs", "gs://" + testBucket + "/bench", Options{GCS: emu.client}},
		{"gcs-serial", "gs://" + testBucket + "/bench-serial", Options{GCS: emu.client, Parallelism: 1}},
		{"gcs-8x8MiB", "gs://" + testBucket + "/bench-8", Options{GCS: emu.client, Parallelism: 8, PartSize: 8 << 20}},
		// The same GCS code against a stub that only counts bytes: our side alone.
		{"gcs-client-only", "gs://" + testBucket + "/bench-stub", Options{GCS: newDiscardClient(b)}},
	}
	for _, v := range variants {
		c := New(v.opts)
		step := int64(0)
		saveOne := func() Ref {
			step++
			w, err := c.NewWriter(ctx, v.root, "r", "sft", step)
			if err != nil {
				b.Fatal(err)
			}
			if err := w.Add(ctx, ModelName, bytes.NewReader(data)); err != nil {
				b.Fatal(err)
			}
			if err := w.AddState(ctx, testState(step)); err != nil {
				b.Fatal(err)
			}
			ref, err := w.Commit(ctx)
			if err != nil {
				b.Fatal(err)
			}
			return ref
		}
		b.Run(v.name+"/save", func(b *testing.B) {
			var elapsed time.Duration
			for i := 0; i < b.N; i++ {
				start := time.Now()
				saveOne()
				elapsed += time.Since(start)
				if v.name == "gcs-client-only" {
					continue // the stub keeps no bytes (and cannot list)
				}
				b.StopTimer()
				if _, err := c.Retain(ctx, v.root, "r", "sft", 1); err != nil { // bound emulator memory
					b.Fatal(err)
				}
				b.StartTimer()
			}
			b.ReportMetric(float64(size)*float64(b.N)/1e6/elapsed.Seconds(), "MB/s")
		})
		if v.name != "local" && v.name != "gcs" {
			continue // loads do not depend on upload settings
		}
		b.Run(v.name+"/load", func(b *testing.B) {
			b.StopTimer()
			ref := saveOne()
			buf := make([]byte, 1<<20)
			b.StartTimer()
			for i := 0; i < b.N; i++ {
				ck, err := c.Read(ctx, ref.URI)
				if err != nil {
					b.Fatal(err)
				}
				rc, err := ck.Open(ctx, ModelName)
				if err != nil {
					b.Fatal(err)
				}
				n, err := io.CopyBuffer(struct{ io.Writer }{io.Discard}, rc, buf)
				rc.Close()
				if err != nil || n != size {
					b.Fatalf("load: %d bytes, %v", n, err)
				}
			}
			b.ReportMetric(float64(size)*float64(b.N)/1e6/b.Elapsed().Seconds(), "MB/s")
		})
	}
}

// BenchmarkEmulatorCeiling is the stock storage client writing 100 MiB to the
// same emulator with no checkpoint logic: one unbuffered request (fastest, but
// not retryable) and the default 16 MiB resumable upload. It bounds what any
// save to this emulator on this machine can reach.
func BenchmarkEmulatorCeiling(b *testing.B) {
	const size = 100 << 20
	data := payload(1, size)
	emu := newEmulator(b, false)
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		chunk int
	}{{"single-request-unbuffered", 0}, {"resumable-16MiB", 16 << 20}} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				w := emu.client.Bucket(testBucket).Object("raw").NewWriter(ctx)
				w.ChunkSize = tc.chunk
				w.ContentType = "application/octet-stream"
				if _, err := bytes.NewReader(data).WriteTo(w); err != nil {
					b.Fatal(err)
				}
				if err := w.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(size)*float64(b.N)/1e6/b.Elapsed().Seconds(), "MB/s")
		})
	}
}
