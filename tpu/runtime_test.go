package tpu

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/sample"
)

func TestOptionsValidate(t *testing.T) {
	bad := tinyCfg()
	bad.Heads = 3
	for _, tc := range []struct {
		name string
		opts Options
		want string // "" → valid
	}{
		{"defaults", Options{Model: tinyCfg()}, ""},
		{"parallel", Options{Model: tinyCfg(), Executor: ExecutorParallel}, ""},
		{"no model", Options{}, "tpu: options: model: config family"},
		{"bad model", Options{Model: bad}, "kv_heads=2: must divide heads=3"},
		{"executor", Options{Model: tinyCfg(), Executor: "turbo"}, `executor="turbo"`},
		{"backend", Options{Model: tinyCfg(), Backend: "tpu"}, `backend="tpu"`},
		{"xla without plugin", Options{Model: tinyCfg(), Backend: BackendXLA}, "needs plugin"},
		{"xla ignores executor", Options{Model: tinyCfg(), Plugin: "cpu", Executor: ExecutorSequential}, ""},
		{"xla bad executor", Options{Model: tinyCfg(), Plugin: "cpu", Executor: "turbo"}, `executor="turbo"`},
		{"go with plugin", Options{Model: tinyCfg(), Backend: BackendGo, Plugin: "cpu"}, "xla backend only"},
		{"beta1", Options{Model: tinyCfg(), Optimizer: AdamW{Beta1: 1}}, "optimizer.beta1=1"},
		{"weight decay", Options{Model: tinyCfg(), Optimizer: AdamW{WeightDecay: -1}}, "optimizer.weight_decay=-1"},
		{"buckets", Options{Model: tinyCfg(), Buckets: Buckets{Seq: []int{16, 8}}}, "buckets.seq=[16 8]"},
		{"peak", Options{Model: tinyCfg(), PeakGFLOPS: -1}, "peak_gflops=-1"},
		{"max execs", Options{Model: tinyCfg(), MaxExecs: -1}, "max_execs=-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.opts.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
}

// xlaWant is the error a request for the xla backend must contain: the build tag when the binary
// lacks it, else linked (what a build with the tag says when the plugin is missing).
func xlaWant(linked string) string {
	if !xlaLinked {
		return "built without -tags xla"
	}
	return linked
}

// TestResolveBackend: the flags' backend and plugin as the engine is asked for them.
func TestResolveBackend(t *testing.T) {
	for _, tc := range []struct{ backend, plugin, wantBackend, wantPlugin string }{
		{"", "", "go", ""},
		{"go", "", "go", ""},
		{"xla", "", "xla", "cpu"},
		{"", "cuda", "xla", "cuda"},
		{"", "/opt/libtpu.so", "xla", "/opt/libtpu.so"},
		{"go", "cpu", "go", "cpu"}, // contradictory: Options.Validate names it
	} {
		b, p := ResolveBackend(tc.backend, tc.plugin)
		if b != tc.wantBackend || p != tc.wantPlugin {
			t.Errorf("ResolveBackend(%q, %q) = %q, %q; want %q, %q", tc.backend, tc.plugin, b, p, tc.wantBackend, tc.wantPlugin)
		}
	}
}

func TestBackends(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want string // error substring; "" → must work and describe itself as desc
		desc string
	}{
		{"go default", Options{}, "", "go (sequential)"},
		{"go parallel", Options{Executor: ExecutorParallel}, "", "go (parallel)"},
		// Without -tags xla every xla request names the build tag; with it, these machines have no
		// plugin, so each must say which one is missing and how to install one.
		{"xla cuda", Options{Backend: BackendXLA, Plugin: "cuda"}, xlaWant(`no PJRT plugin "cuda"`), ""},
		{"plugin implies xla", Options{Plugin: "cpu"}, xlaWant(`no PJRT plugin "cpu"`), ""},
		{"xla tpu", Options{Backend: BackendXLA, Plugin: "tpu"}, xlaWant("pjrt_c_api_tpu_plugin.so"), ""},
		{"xla missing path", Options{Backend: BackendXLA, Plugin: "/nonexistent/pjrt_c_api_cpu_plugin.so"}, xlaWant("no such file"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Model = tinyCfg()
			r, err := New(tc.opts)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "tpu: new backend xla") {
					t.Fatalf("err %v, want %q", err, tc.want)
				}
				if xlaLinked && !strings.Contains(err.Error(), "install a PJRT plugin") {
					t.Fatalf("err %v: does not say what to install", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if r.BackendName() != tc.desc {
				t.Fatalf("backend %q, want %q", r.BackendName(), tc.desc)
			}
			if tc.opts.Executor == ExecutorParallel && !strings.Contains(r.backend.Description(), "parallelism=-1") {
				t.Fatalf("parallel executor: backend %q, want unbounded parallelism", r.backend.Description())
			}
			if _, err := r.TrainStep(randomBatch(t, r.Config().Vocab, 2, 8, 1), 1e-3); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestBuckets(t *testing.T) {
	for _, tc := range []struct {
		n, lo int
		list  []int
		want  int
		err   string
	}{
		{1, 1, nil, 1, ""}, {3, 1, nil, 4, ""}, {4, 1, nil, 4, ""}, {5, 8, nil, 8, ""}, {9, 8, nil, 16, ""},
		{100, 8, nil, 128, ""}, {3, 1, []int{2, 6, 10}, 6, ""}, {6, 1, []int{2, 6, 10}, 6, ""},
		{11, 1, []int{2, 6, 10}, 0, "seq 11 exceeds the largest bucket 10"},
	} {
		got, err := bucketOf("seq", tc.n, tc.list, tc.lo)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("bucketOf(%d, %v): err %v, want %q", tc.n, tc.list, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("bucketOf(%d, %v, %d) = %d, %v; want %d", tc.n, tc.list, tc.lo, got, err, tc.want)
		}
	}
	// The default sequence buckets: powers of two up to 32, then multiples of 32.
	for n, want := range map[int]int{1: 8, 8: 8, 9: 16, 17: 32, 32: 32, 33: 64, 64: 64, 65: 96, 100: 128, 129: 160, 160: 160, 161: 192, 500: 512} {
		if got, err := (Buckets{}).seqBucket(n); err != nil || got != want {
			t.Errorf("default seqBucket(%d) = %d, %v; want %d", n, got, err, want)
		}
	}
	if got, err := (Buckets{Seq: []int{16, 256}}).seqBucket(100); err != nil || got != 256 {
		t.Errorf("listed seqBucket(100) = %d, %v; want 256", got, err)
	}
}

// TestExecCache: inputs of one bucket share an executable; other buckets compile; the least
// recently used executable is evicted past MaxExecs.
func TestExecCache(t *testing.T) {
	r := newRuntime(t, Options{MaxExecs: 2})
	v := r.Config().Vocab
	steps := []struct {
		n, seq int
		key    string
		hit    bool
	}{
		{3, 10, "train[4x16]", false},
		{4, 12, "train[4x16]", true},
		{2, 16, "train[2x16]", false},
		{3, 9, "train[4x16]", true},
		{5, 10, "train[8x16]", false}, // evicts 2x16
		{2, 11, "train[2x16]", false},
	}
	for i, s := range steps {
		before := r.Stats().Cache
		if _, err := r.TrainStep(randomBatch(t, v, s.n, s.seq, uint64(i)), 1e-3); err != nil {
			t.Fatal(err)
		}
		after := r.Stats().Cache
		hit := after.Hits == before.Hits+1 && after.Misses == before.Misses
		miss := after.Misses == before.Misses+1 && after.Hits == before.Hits
		if (s.hit && !hit) || (!s.hit && !miss) {
			t.Fatalf("step %d (%dx%d): hits %d→%d misses %d→%d, want hit=%v", i, s.n, s.seq,
				before.Hits, after.Hits, before.Misses, after.Misses, s.hit)
		}
		if last := after.Keys[len(after.Keys)-1].String(); last != s.key {
			t.Fatalf("step %d: most recent key %s, want %s", i, last, s.key)
		}
	}
	c := r.Stats().Cache
	if c.Evictions != 2 || len(c.Keys) != 2 || c.CompileSeconds <= 0 {
		t.Fatalf("cache %+v: want 2 evictions, 2 keys, compile time > 0", c)
	}
}

// TestPaddingIsExact: a batch padded into a larger bucket gives the loss, log-probs and logits of
// the same batch run in an exact-size bucket.
func TestPaddingIsExact(t *testing.T) {
	exact := newRuntime(t, Options{Seed: 3, Buckets: Buckets{Batch: []int{3}, Seq: []int{10}}})
	padded := newRuntime(t, Options{Seed: 3})
	b := randomBatch(t, exact.Config().Vocab, 3, 10, 8)
	b.LossMask[1][0], b.LossMask[2][9] = 0, 0.5
	le, err := exact.EvalLoss(b)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := padded.EvalLoss(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := le.Loss - lp.Loss; d > 1e-5 || d < -1e-5 || le.Tokens != 29 || lp.Tokens != 29 {
		t.Fatalf("loss %v (%d tokens) exact vs %v (%d tokens) padded", le.Loss, le.Tokens, lp.Loss, lp.Tokens)
	}
	ge, err := exact.Logits(b)
	if err != nil {
		t.Fatal(err)
	}
	gp, err := padded.Logits(b)
	if err != nil {
		t.Fatal(err)
	}
	if ge.Batch != 3 || ge.Seq != 10 || len(gp.Data) != len(ge.Data) {
		t.Fatalf("logits shapes %dx%dx%d vs %d values", ge.Batch, ge.Seq, ge.Vocab, len(gp.Data))
	}
	for i := range ge.Data {
		if d := ge.Data[i] - gp.Data[i]; d > 1e-4 || d < -1e-4 {
			t.Fatalf("logit %d: %v exact vs %v padded", i, ge.Data[i], gp.Data[i])
		}
	}
	pe, err := exact.LogProbs(b)
	if err != nil {
		t.Fatal(err)
	}
	pp, err := padded.LogProbs(b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range pe {
		for j := range pe[i] {
			if d := pe[i][j] - pp[i][j]; d > 1e-4 || d < -1e-4 || pe[i][j] > 0 {
				t.Fatalf("logprob [%d,%d]: %v exact vs %v padded", i, j, pe[i][j], pp[i][j])
			}
		}
	}
	if got := padded.Stats().Cache.Keys; len(got) != 3 || got[0].Shape != "4x16" {
		t.Fatalf("padded runtime keys %v, want loss/logits/logprobs at 4x16", got)
	}
}

// TestPanicBecomesError: a graph that panics (bad shapes) or host code that panics inside an
// execution turns into an error naming the operation, and the runtime keeps working.
func TestPanicBecomesError(t *testing.T) {
	r := newRuntime(t, Options{})
	r.mu.Lock()
	err := r.guard("bad graph", func() error {
		_, _, err := r.run(CacheKey{"bad", "2x3"}, func(in []*Node) []*Node {
			return []*Node{Add(in[0], Reshape(in[0], 3, 2))} // [2,3] + [3,2]: panics while building
		}, []shapes.Shape{shapes.Make(dtypes.Float32, 2, 3)}, tensors.FromShape(shapes.Make(dtypes.Float32, 2, 3)))
		return err
	})
	r.mu.Unlock()
	if err == nil || !strings.HasPrefix(err.Error(), "tpu: bad graph: compile bad[2x3]") {
		t.Fatalf("err %v, want a compile error of bad[2x3]", err)
	}
	r.mu.Lock()
	err = r.guard("raw panic", func() error { panic("boom") })
	r.mu.Unlock()
	if err == nil || err.Error() != "tpu: raw panic: panic: boom" {
		t.Fatalf("err %v, want tpu: raw panic: panic: boom", err)
	}
	if _, err := r.TrainStep(randomBatch(t, r.Config().Vocab, 2, 8, 1), 1e-3); err != nil {
		t.Fatalf("runtime unusable after recovered panics: %v", err)
	}
	// A failed execution that lost a donated variable leaves the runtime unusable.
	r.mu.Lock()
	err = r.guard("lossy", func() error {
		if err := r.params[3].Reset(); err != nil {
			return err
		}
		return errors.New("execution failed after donating its inputs")
	})
	r.mu.Unlock()
	if err == nil || !strings.Contains(err.Error(), "execution failed after donating") {
		t.Fatalf("err %v", err)
	}
	_, err = r.Logits(randomBatch(t, r.Config().Vocab, 1, 4, 1))
	if err == nil || !strings.Contains(err.Error(), "unusable after an earlier failure: variable /model/layers/0/attn/out lost its value in the failed lossy") {
		t.Fatalf("after losing a variable: err %v", err)
	}
}

// TestWatchdog: an execution that overruns ExecTimeout returns ErrStuck with advice, and the
// runtime refuses further work; Close still returns.
func TestWatchdog(t *testing.T) {
	t.Run("injected hang", func(t *testing.T) {
		release := make(chan struct{})
		var once sync.Once
		opts := Options{Executor: ExecutorParallel, ExecTimeout: 50 * time.Millisecond,
			execHook: func(op string) {
				if op == "train step" {
					once.Do(func() { <-release })
				}
			}}
		r := newRuntime(t, opts)
		defer close(release)
		b := randomBatch(t, r.Config().Vocab, 2, 8, 1)
		_, err := r.TrainStep(b, 1e-3)
		if !errors.Is(err, ErrStuck) || !strings.Contains(err.Error(), `Executor "sequential"`) ||
			!strings.HasPrefix(err.Error(), "tpu: train step: execution stuck: train step still running after 50ms on backend go (parallel)") {
			t.Fatalf("err %v, want ErrStuck advising the sequential executor", err)
		}
		if _, err := r.Logits(b); !errors.Is(err, ErrStuck) || !strings.Contains(err.Error(), "unusable after an earlier failure") {
			t.Fatalf("after a stuck execution: err %v, want unusable", err)
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("real graph", func(t *testing.T) {
		r := newRuntime(t, Options{ExecTimeout: time.Microsecond})
		_, err := r.TrainStep(randomBatch(t, r.Config().Vocab, 8, 32, 1), 1e-3)
		if !errors.Is(err, ErrStuck) || !strings.Contains(err.Error(), "raise Options.ExecTimeout") {
			t.Fatalf("err %v, want ErrStuck advising a longer timeout", err)
		}
	})
}

func TestClosed(t *testing.T) {
	r := newRuntime(t, Options{})
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second close: %v", err)
	}
	b := randomBatch(t, r.Config().Vocab, 1, 4, 1)
	errs := map[string]error{}
	_, errs["train"] = r.TrainStep(b, 1e-3)
	_, errs["logits"] = r.Logits(b)
	_, errs["generate"] = r.Generate([][]int{{1}}, sample.Options{MaxNewTokens: 1})
	_, errs["export"] = r.ExportWeights()
	_, errs["optimizer"] = r.OptimizerState()
	errs["save"] = r.SaveModelDir(t.TempDir())
	for name, err := range errs {
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after close: err %v, want ErrClosed", name, err)
		}
	}
}

func TestReadMemory(t *testing.T) {
	if _, err := os.Stat("/proc/self/status"); err != nil {
		t.Skip("no /proc")
	}
	m, err := ReadMemory()
	if err != nil {
		t.Fatal(err)
	}
	if m.RSS <= 0 || m.PeakRSS < m.RSS {
		t.Fatalf("memory %+v: want 0 < rss <= peak", m)
	}
}

func TestStats(t *testing.T) {
	r := newRuntime(t, Options{PeakGFLOPS: 10})
	b := randomBatch(t, r.Config().Vocab, 3, 10, 1)
	var flops, sec float64
	for range 3 {
		m, err := r.TrainStep(b, 1e-3)
		if err != nil {
			t.Fatal(err)
		}
		flops += m.FLOPs
		sec += m.Seconds
	}
	want := 3 * 30 * r.Config().TrainFLOPsPerToken(10)
	s := r.Stats()
	if s.Train.Calls != 3 || s.Train.Tokens != 90 || s.Train.FLOPs != want || flops != want || s.Train.Seconds != sec {
		t.Fatalf("train stats %+v, want 3 calls, 90 tokens, %g FLOPs, %g s", s.Train, want, sec)
	}
	if g := want / sec / 1e9; s.Train.GFLOPS != g || s.Train.MFU != g/10 || s.Train.TokensPerSec != 90/sec {
		t.Fatalf("derived %+v, want %g GFLOP/s, MFU %g", s.Train, g, g/10)
	}
	if s.Cache.Misses != 1 || s.Cache.Hits != 2 {
		t.Fatalf("cache %+v, want 1 miss 2 hits", s.Cache)
	}
	r.ResetStats()
	if s := r.Stats(); s.Train.Calls != 0 || s.Cache.Misses != 1 {
		t.Fatalf("after reset %+v", s)
	}
}

func TestModelDirRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	a := newRuntime(t, Options{Seed: 1})
	if _, err := a.TrainStep(randomBatch(t, a.Config().Vocab, 2, 8, 1), 1e-2); err != nil {
		t.Fatal(err)
	}
	if err := a.SaveModelDir(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{hf.ConfigFile, hf.WeightsFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	b, err := loadDir(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !sameArchitecture(a.Config(), b.Config()) {
		t.Fatalf("config %+v → %+v", a.Config(), b.Config())
	}
	sameLogits(t, a, b, randomBatch(t, a.Config().Vocab, 2, 12, 2), 0)
	other := tinyCfg()
	other.DModel = 48
	c := newRuntime(t, Options{Model: other})
	f, err := os.Open(filepath.Join(dir, hf.WeightsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := c.LoadWeights(f); err == nil || !strings.Contains(err.Error(), `"model.embed_tokens.weight" has shape [37 32], config.json implies [37 48]`) {
		t.Fatalf("loading into another architecture: err %v", err)
	}
	if _, err := loadDir(t.TempDir(), Options{}); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Fatalf("empty dir: err %v", err)
	}
}

// TestConcurrentUse: training, generation, evaluation and Stats from several goroutines (run
// with -race).
func TestConcurrentUse(t *testing.T) {
	r := newRuntime(t, Options{Seed: 1})
	v := r.Config().Vocab
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 3 {
		wg.Go(func() {
			b := randomBatch(t, v, 2, 8, uint64(i))
			for range 3 {
				if _, err := r.TrainStep(b, 1e-3); err != nil {
					errs <- err
				}
				if _, err := r.Generate(b.Tokens, sample.Options{MaxNewTokens: 3}); err != nil {
					errs <- err
				}
				if _, err := r.LogProbs(b); err != nil {
					errs <- err
				}
				_ = r.Stats()
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if s := r.Stats(); s.Train.Calls != 9 || s.Generate.Calls != 9 || s.Eval.Calls != 9 {
		t.Fatalf("stats %+v, want 9 calls of each", s)
	}
}
