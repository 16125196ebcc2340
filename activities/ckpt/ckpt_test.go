// Over 500 lines on purpose: the checkpoint store contract tests share one set of helpers.

package ckpt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"cloud.google.com/go/storage"
)

func TestOpenURIs(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		uri     string
		wantErr string // substring; "" means success
		wantURI string // URI("k") of the store
	}{
		{uri: "file:///tmp/x", wantURI: "file:///tmp/x/k"},
		{uri: "/tmp/x/", wantURI: "file:///tmp/x/k"},
		{uri: "gs://bkt/a/b/", wantURI: "gs://bkt/a/b/k"},
		{uri: "gs://bkt", wantURI: "gs://bkt/k"},
		{uri: "s3://bkt/x", wantErr: `unsupported scheme "s3" (allowed: file, gs)`},
		{uri: "file://relative/x", wantErr: "absolute path"},
		{uri: "gs:///x", wantErr: "missing bucket"},
		{uri: "", wantErr: "file:// or gs://"},
	} {
		t.Run(tc.uri, func(t *testing.T) {
			opts := Options{}
			if strings.HasPrefix(tc.uri, "gs://") {
				opts.GCS = newEmulator(t, false).client // never dial real GCS
			}
			s, err := Open(ctx, tc.uri, opts)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Open(%q) error = %v, want %q", tc.uri, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if got := s.URI("k"); got != tc.wantURI {
				t.Errorf("URI = %q, want %q", got, tc.wantURI)
			}
		})
	}
}

func TestParseCheckpointURI(t *testing.T) {
	for _, tc := range []struct {
		uri, root, run, phase string
		step                  int64
		bad                   bool
	}{
		{uri: "file:///d/runs/r1/sft/step-000120/", root: "file:///d", run: "r1", phase: "sft", step: 120},
		{uri: "gs://b/p/runs/r1/grpo/step-1234567", root: "gs://b/p", run: "r1", phase: "grpo", step: 1234567},
		{uri: "gs://b/runs/r/ph/step-000001/", root: "gs://b", run: "r", phase: "ph", step: 1},
		{uri: "file:///runs/r/ph/step-000001/", root: "file:///", run: "r", phase: "ph", step: 1},
		{uri: "gs://b/p/runs/r1/sft/step-12/", bad: true},
		{uri: "gs://b/p/r1/sft/step-000012/", bad: true},
		{uri: "gs://b/runs/../sft/step-000012/", bad: true},
	} {
		l, err := parseCkptURI(tc.uri)
		if tc.bad {
			if err == nil {
				t.Errorf("parseCkptURI(%q) = %+v, want error", tc.uri, l)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseCkptURI(%q): %v", tc.uri, err)
			continue
		}
		if l.root.String() != tc.root || l.run != tc.run || l.phase != tc.phase || l.step != tc.step {
			t.Errorf("parseCkptURI(%q) = %s %s %s %d", tc.uri, l.root, l.run, l.phase, l.step)
		}
		if _, err := parseCkptURI(l.uri()); err != nil {
			t.Errorf("round trip of %q: %v", l.uri(), err)
		}
	}
}

func TestStore(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, b *backend) {
		s := b.store(t)
		big := payload(1, 5*testPartSize+777) // parts + compose on GCS
		for _, tc := range []struct {
			key  string
			data []byte
		}{
			{"a/empty", nil},
			{"a/small", []byte("hello")},
			{"a/exact", payload(2, minPartSize)},
			{"a/big", big},
		} {
			n, err := s.Put(ctx, tc.key, bytes.NewReader(tc.data))
			if err != nil || n != int64(len(tc.data)) {
				t.Fatalf("Put %s = %d, %v", tc.key, n, err)
			}
			rc, err := s.Get(ctx, tc.key)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(rc)
			rc.Close()
			if err != nil || !bytes.Equal(got, tc.data) {
				t.Fatalf("Get %s: %d bytes, err %v; want %d bytes", tc.key, len(got), err, len(tc.data))
			}
			info, err := s.Stat(ctx, tc.key)
			if err != nil || info.Size != int64(len(tc.data)) {
				t.Fatalf("Stat %s = %+v, %v", tc.key, info, err)
			}
		}
		objs, err := s.List(ctx, "a/")
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, o := range objs {
			keys = append(keys, o.Key)
		}
		if want := []string{"a/big", "a/empty", "a/exact", "a/small"}; !slices.Equal(keys, want) {
			t.Fatalf("List = %v, want %v (no leftover parts)", keys, want)
		}
		created, err := s.PutIfAbsent(ctx, "m", strings.NewReader("one"))
		if err != nil || !created {
			t.Fatalf("first PutIfAbsent = %v, %v", created, err)
		}
		created, err = s.PutIfAbsent(ctx, "m", strings.NewReader("two"))
		if err != nil || created {
			t.Fatalf("second PutIfAbsent = %v, %v; want false", created, err)
		}
		if err := s.Delete(ctx, "a/big"); err != nil {
			t.Fatal(err)
		}
		if err := s.Delete(ctx, "a/big"); err != nil {
			t.Fatalf("deleting a missing object: %v", err)
		}
		if _, err := s.Get(ctx, "a/big"); !errors.Is(err, ErrNotExist) || !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Get deleted = %v, want ErrNotExist", err)
		}
		if _, err := s.Stat(ctx, "nope"); !errors.Is(err, ErrNotExist) || !strings.Contains(err.Error(), s.URI("nope")) {
			t.Fatalf("Stat missing = %v", err)
		}
		if _, err := s.Put(ctx, "../x", strings.NewReader("x")); err == nil {
			t.Fatal("Put ../x succeeded")
		}
	})
}

func TestSaveListLatestVerifyExport(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, b *backend) {
		written := map[int64]map[string][]byte{}
		for _, step := range []int64{30, 10, 20} {
			ref, files := mustSave(t, b, "run-1", "sft", step)
			written[step] = files
			if want := fmt.Sprintf("%s/runs/run-1/sft/step-%06d/", b.root, step); ref.URI != want {
				t.Fatalf("URI = %q, want %q", ref.URI, want)
			}
		}
		mustSave(t, b, "run-1", "grpo", 5)
		refs, err := b.client.List(ctx, b.root, "run-1", "sft")
		if err != nil {
			t.Fatal(err)
		}
		if steps := stepsOf(refs); !slices.Equal(steps, []int64{10, 20, 30}) {
			t.Fatalf("List steps = %v", steps)
		}
		all, err := b.client.List(ctx, b.root, "", "")
		if err != nil || len(all) != 4 || all[0].Phase != "grpo" {
			t.Fatalf("List all = %+v, %v", all, err)
		}
		latest, skipped, err := b.client.Latest(ctx, b.root, "run-1", "sft")
		if err != nil || latest.Step != 30 || len(skipped) != 0 {
			t.Fatalf("Latest = %+v %v %v", latest, skipped, err)
		}
		for _, r := range refs {
			if err := b.client.Verify(ctx, r.URI); err != nil {
				t.Fatalf("Verify %s: %v", r.URI, err)
			}
			ck, err := b.client.Read(ctx, r.URI)
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range written[r.Step] {
				got, err := readAll(t, ck, name)
				if err != nil || !bytes.Equal(got, want) {
					t.Fatalf("%s%s: %d bytes, %v", r.URI, name, len(got), err)
				}
			}
			st, err := ck.ReadState(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if want := testState(r.Step); !stateEqual(st, want) {
				t.Fatalf("state = %+v, want %+v", st, want)
			}
		}

		// Saving a committed step again returns it without rewriting (retried activity).
		called := false
		ref, err := b.client.Save(ctx, b.root, "run-1", "sft", 20, func(*Writer) error { called = true; return nil })
		if err != nil || called || ref.Step != 20 {
			t.Fatalf("re-Save = %+v, %v, fill called %v", ref, err, called)
		}

		dir := t.TempDir()
		names, err := b.client.Export(ctx, latest.URI, dir)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(names, []string{"config.json", ModelName, "tokenizer_config.json"}) {
			t.Fatalf("exported %v", names)
		}
		got, _ := os.ReadFile(filepath.Join(dir, ModelName))
		if !bytes.Equal(got, written[30][ModelName]) {
			t.Fatal("exported model differs")
		}
		ents, _ := os.ReadDir(dir)
		if len(ents) != 3 {
			t.Fatalf("export dir has %d entries, want 3", len(ents))
		}
	})
}

func TestAbortedSaveIsInvisible(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, b *backend) {
		boom := errors.New("source broke")
		_, err := b.client.Save(ctx, b.root, "r", "sft", 1, func(w *Writer) error {
			if err := w.Add(ctx, ModelName, bytes.NewReader(payload(1, 600<<10))); err != nil {
				return err
			}
			// A stream that fails half way: nothing of it may ever be visible.
			return w.Add(ctx, OptimName, io.MultiReader(bytes.NewReader(payload(2, 400<<10)), errReader{boom}))
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Save error = %v, want %v", err, boom)
		}
		if _, err := b.client.Lookup(ctx, b.root, "r", "sft", 1); !errors.Is(err, ErrNotExist) {
			t.Fatalf("Lookup after abort = %v", err)
		}
		objs, err := b.store(t).List(ctx, "runs/")
		if err != nil || len(objs) != 0 {
			t.Fatalf("after abort the store holds %v (%v)", objs, err)
		}
		w, err := b.client.NewWriter(ctx, b.root, "r", "sft", 2)
		if err != nil {
			t.Fatal(err)
		}
		f, _ := w.Create(ctx, ModelName)
		f.Write(payload(3, 300<<10))
		if _, err := w.Commit(ctx); err == nil || !strings.Contains(err.Error(), "not closed") {
			t.Fatalf("Commit with open file = %v", err)
		}
		if err := w.Abort(ctx); err != nil { // also stops the open file's upload
			t.Fatal(err)
		}
		if err := f.Close(); err == nil {
			t.Fatal("Close after Abort succeeded")
		}
		if objs, err := b.store(t).List(ctx, "runs/"); err != nil || len(objs) != 0 {
			t.Fatalf("after Abort with an open file the store holds %v (%v)", objs, err)
		}
	})
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

func TestConcurrentWritersSameStep(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, b *backend) {
		const writers = 4
		var wg sync.WaitGroup
		refs := make([]Ref, writers)
		errs := make([]error, writers)
		candidates := make([][]byte, writers)
		start := make(chan struct{})
		for i := range writers {
			files := testFiles(7, uint64(i+1)) // every writer has different bytes
			candidates[i] = files[ModelName]
			wg.Add(1)
			go func() {
				defer wg.Done()
				w, err := b.client.NewWriter(ctx, b.root, "r", "sft", 7)
				if err != nil {
					errs[i] = err
					return
				}
				<-start
				if err := fill(ctx, w, files, nil); err != nil {
					errs[i] = err
					return
				}
				refs[i], errs[i] = w.Commit(ctx)
			}()
		}
		close(start)
		wg.Wait()
		for i := range writers {
			if errs[i] != nil {
				t.Fatalf("writer %d: %v", i, errs[i])
			}
			if refs[i] != refs[0] {
				t.Fatalf("writer %d got %+v, writer 0 got %+v", i, refs[i], refs[0])
			}
		}
		ck, err := b.client.Read(ctx, refs[0].URI)
		if err != nil {
			t.Fatal(err)
		}
		if err := ck.Verify(ctx); err != nil {
			t.Fatal(err)
		}
		model, _ := readAll(t, ck, ModelName)
		winners := 0
		for _, c := range candidates {
			if bytes.Equal(c, model) {
				winners++
			}
		}
		if winners != 1 {
			t.Fatalf("committed model matches %d writers, want exactly 1", winners)
		}
		// Losers cleaned up after themselves: only the winner's files remain.
		objs, _ := b.store(t).List(ctx, "runs/")
		if len(objs) != len(ck.Manifest.Files)+1 {
			var keys []string
			for _, o := range objs {
				keys = append(keys, o.Key)
			}
			t.Fatalf("store holds %d objects, want %d: %v", len(objs), len(ck.Manifest.Files)+1, keys)
		}
	})
}

func TestRetentionKeepsLastAndBest(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, b *backend) {
		var refs []Ref
		for step := int64(1); step <= 6; step++ {
			r, _ := mustSave(t, b, "r", "sft", step)
			refs = append(refs, r)
		}
		// The mark moves: step 4 first, then step 2; only step 2 stays marked.
		for _, i := range []int{3, 1} {
			if err := b.client.MarkBest(ctx, refs[i].URI); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.client.MarkBest(ctx, b.root+"/runs/r/sft/step-000099/"); !errors.Is(err, ErrNotExist) {
			t.Fatalf("MarkBest of a missing checkpoint = %v", err)
		}
		deleted, err := b.client.Retain(ctx, b.root, "r", "sft", 2)
		if err != nil {
			t.Fatal(err)
		}
		if got := stepsOf(deleted); !slices.Equal(got, []int64{1, 3, 4}) {
			t.Fatalf("deleted %v, want [1 3 4]", got)
		}
		left, _ := b.client.List(ctx, b.root, "r", "sft")
		for _, r := range left {
			if r.Best != (r.Step == 2) {
				t.Errorf("step %d Best = %v", r.Step, r.Best)
			}
		}
		if steps := stepsOf(left); !slices.Equal(steps, []int64{2, 5, 6}) {
			t.Fatalf("left %v, want [2 5 6]", steps)
		}
		for _, step := range []int64{1, 3, 4} {
			objs, _ := b.store(t).List(ctx, stepKey("r", "sft", step))
			if len(objs) != 0 {
				t.Fatalf("step %d still has %d objects", step, len(objs))
			}
		}
		if _, err := b.client.Retain(ctx, b.root, "r", "sft", 0); err != nil {
			t.Fatal(err)
		}
		left, _ = b.client.List(ctx, b.root, "r", "sft")
		if len(left) != 1 || left[0].Step != 2 {
			t.Fatalf("after keep 0: %+v, want only the best", left)
		}
	})
}

func TestGCRemovesOnlyOldLeftovers(t *testing.T) {
	ctx := context.Background()
	forEachBackend(t, func(t *testing.T, b *backend) {
		good, _ := mustSave(t, b, "r", "sft", 1)
		// A crashed writer: files staged, never committed nor aborted.
		w, err := b.client.NewWriter(ctx, b.root, "r", "sft", 2)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Add(ctx, ModelName, bytes.NewReader(payload(9, 300<<10))); err != nil {
			t.Fatal(err)
		}
		s := b.store(t)
		// A zombie writer's uploads inside a committed step.
		if b.emu != nil {
			if _, err := s.Put(ctx, stepKey("r", "sft", 1)+"/w-dead/model.safetensors", strings.NewReader("zombie")); err != nil {
				t.Fatal(err)
			}
		}
		before, _ := s.List(ctx, "runs/")

		removed, err := b.client.GC(ctx, b.root, time.Hour)
		if err != nil || len(removed) != 0 {
			t.Fatalf("GC of fresh leftovers removed %v (%v)", removed, err)
		}
		later := New(b.opts)
		later.opts.Now = func() time.Time { return time.Now().Add(2 * time.Hour) }
		removed, err = later.GC(ctx, b.root, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		wantRemoved := 1
		if b.emu != nil {
			wantRemoved = 2
		}
		if len(removed) != wantRemoved {
			t.Fatalf("GC removed %v, want %d groups (store had %v)", removed, wantRemoved, before)
		}
		after, _ := s.List(ctx, "runs/")
		ck, err := b.client.Read(ctx, good.URI)
		if err != nil {
			t.Fatal(err)
		}
		if len(after) != len(ck.Manifest.Files)+1 {
			t.Fatalf("after GC the store holds %v", after)
		}
		if err := ck.Verify(ctx); err != nil {
			t.Fatalf("GC damaged a committed checkpoint: %v", err)
		}
		if _, err := w.Commit(ctx); err == nil {
			t.Fatal("commit after GC removed the staging succeeded")
		}
	})
}

// corrupt rewrites the stored bytes of a checkpoint file.
func corrupt(t *testing.T, b *backend, ref Ref, name string, mutate func([]byte) []byte) {
	t.Helper()
	ctx := context.Background()
	ck, err := b.client.Read(ctx, ref.URI)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := ck.Manifest.File(name)
	key := stepKey(ref.Run, ref.Phase, ref.Step) + "/" + f.key()
	s := b.store(t)
	rc, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(rc)
	rc.Close()
	if _, err := s.Put(ctx, key, bytes.NewReader(mutate(data))); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptionDetectedAndLatestFallsBack(t *testing.T) {
	ctx := context.Background()
	flip := func(d []byte) []byte { d[len(d)/2] ^= 0x01; return d }
	for _, tc := range []struct {
		name    string
		file    string
		mutate  func([]byte) []byte
		wantMsg string
	}{
		{"flipped byte", ModelName, flip, "sha256"},
		{"truncated", OptimName, func(d []byte) []byte { return d[:len(d)-1] }, "bytes, manifest says"},
		{"extended", "config.json", func(d []byte) []byte { return append(d, '\n') }, "longer than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			forEachBackend(t, func(t *testing.T, b *backend) {
				mustSave(t, b, "r", "sft", 1)
				bad, _ := mustSave(t, b, "r", "sft", 2)
				corrupt(t, b, bad, tc.file, tc.mutate)

				ck, err := b.client.Read(ctx, bad.URI)
				if err != nil {
					t.Fatal(err)
				}
				_, err = readAll(t, ck, tc.file)
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), bad.URI+tc.file) || !strings.Contains(err.Error(), tc.wantMsg) {
					t.Fatalf("read error = %v; want ErrCorrupt naming %s%s and %q", err, bad.URI, tc.file, tc.wantMsg)
				}
				// A reader that takes exactly the manifest's length and never sees
				// EOF learns of the damage from Close.
				rc, _ := ck.Open(ctx, tc.file)
				f, _ := ck.Manifest.File(tc.file)
				buf := make([]byte, f.Size)
				if _, err := io.ReadFull(rc, buf); err == nil {
					// The first Size bytes of an extended file are intact: no error then.
					if err := rc.Close(); !errors.Is(err, ErrCorrupt) && tc.name != "extended" {
						t.Fatalf("Close after reading %d bytes = %v, want ErrCorrupt", f.Size, err)
					}
				} else {
					rc.Close()
				}
				if err := b.client.Verify(ctx, bad.URI); !errors.Is(err, ErrCorrupt) {
					t.Fatalf("Verify = %v", err)
				}
				ref, skipped, err := b.client.Latest(ctx, b.root, "r", "sft")
				if err != nil || ref.Step != 1 {
					t.Fatalf("Latest = %+v, %v; want step 1", ref, err)
				}
				if len(skipped) != 1 || skipped[0].Ref.Step != 2 || !strings.Contains(skipped[0].Reason, tc.file) {
					t.Fatalf("skipped = %+v", skipped)
				}
				t.Logf("skipped: %s", skipped[0].Reason)
			})
		})
	}
	t.Run("missing file and no good checkpoint", func(t *testing.T) {
		forEachBackend(t, func(t *testing.T, b *backend) {
			bad, _ := mustSave(t, b, "r", "sft", 3)
			ck, _ := b.client.Read(ctx, bad.URI)
			f, _ := ck.Manifest.File(ModelName)
			b.store(t).Delete(ctx, stepKey("r", "sft", 3)+"/"+f.key())
			_, skipped, err := b.client.Latest(ctx, b.root, "r", "sft")
			if !errors.Is(err, ErrNoCheckpoint) || len(skipped) != 1 || !strings.Contains(skipped[0].Reason, "missing") {
				t.Fatalf("Latest = %v, skipped %+v", err, skipped)
			}
		})
	})
}

func TestEmulatorHostEnv(t *testing.T) {
	// With no injected client, Open builds one that honours STORAGE_EMULATOR_HOST.
	e := newEmulator(t, false)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(e.ts.URL, "http://"))
	ctx := context.Background()
	c := New(Options{PartSize: testPartSize})
	defer c.Close()
	root := "gs://" + testBucket + "/env"
	files := testFiles(1, 0)
	ref, err := save(ctx, c, root, "r", "sft", 1, files, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Verify(ctx, ref.URI); err != nil {
		t.Fatal(err)
	}
	// The package-level functions the CLI calls use the same path (with a
	// default client of this test's own: it caches its storage client).
	old := defaultClient
	defaultClient = New(Options{})
	t.Cleanup(func() { defaultClient.Close(); defaultClient = old })
	refs, err := ListCheckpoints(ctx, root)
	if err != nil || len(refs) != 1 {
		t.Fatalf("ListCheckpoints = %+v, %v", refs, err)
	}
	if err := Verify(ctx, refs[0].URI); err != nil {
		t.Fatal(err)
	}
	if names, err := Export(ctx, refs[0].URI, t.TempDir()); err != nil || len(names) != 3 {
		t.Fatalf("Export = %v, %v", names, err)
	}
}

func TestUnreachableGCSFailsInBoundedTime(t *testing.T) {
	emu := newEmulator(t, false)
	dead := emu.newClient(t, "http://127.0.0.1:1") // nothing listens there
	c := New(Options{GCS: dead, Retry: append(fastRetry, storage.WithMaxRetryDuration(300*time.Millisecond))})
	start := time.Now()
	_, err := c.List(context.Background(), "gs://"+testBucket+"/x", "r", "sft")
	if err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("List against a dead endpoint = %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	if _, err := save(ctx, c, "gs://"+testBucket+"/x", "r", "sft", 1, testFiles(1, 0), nil); err == nil {
		t.Fatal("save against a dead endpoint succeeded")
	}
	t.Logf("list error after %v: %v", time.Since(start).Round(time.Millisecond), err)
}

func stateEqual(a, b State) bool {
	ja, _ := a.MarshalJSON()
	jb, _ := b.MarshalJSON()
	return bytes.Equal(ja, jb)
}

// stepsOf lists the refs' steps in order.
func stepsOf(refs []Ref) []int64 {
	var steps []int64
	for _, r := range refs {
		steps = append(steps, r.Step)
	}
	return steps
}
