package tpu

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"

	"github.com/temperml/temper/algorithms/model"
)

// Diagnostics behind the profile in the tpu report. Minutes of CPU; opt in with TEMPER_BENCH=1
// (TEMPER_BENCH_PRESETS picks the preset, default base; TEMPER_BENCH_MODE=parallel):
//
//	TEMPER_BENCH=1 GOEXPERIMENT=simd go test ./tpu/ -run 'Breakdown|Census|Memory' -v
func diagnosticRuntime(t *testing.T) (*Runtime, padded) {
	t.Helper()
	if os.Getenv("TEMPER_BENCH") == "" {
		t.Skip("set TEMPER_BENCH=1")
	}
	preset := "base"
	if p := os.Getenv("TEMPER_BENCH_PRESETS"); p != "" {
		preset = strings.Split(p, ",")[0]
	}
	cfg, err := model.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	r := newRuntime(t, Options{Model: cfg, Seed: 1, Executor: os.Getenv("TEMPER_BENCH_MODE"), ExecTimeout: -1})
	p, err := r.pad(randomBatch(t, cfg.Vocab, 16, 128, 1), true)
	if err != nil {
		t.Fatal(err)
	}
	return r, p
}

// TestTrainStepBreakdown times forward+loss, forward+backward+grad norm, and the full step
// (AdamW included) on 16×128, so the optimizer's and the backward pass's shares are measured.
func TestTrainStepBreakdown(t *testing.T) {
	r, p := diagnosticRuntime(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.ensureOptimizer(); err != nil {
		t.Fatal(err)
	}
	in := []shapes.Shape{i32(p), i32(p), f32(p), i32(p), boolean(p)}
	forward := func(nodes []*Node) []*Node {
		logits := model.Forward(r.scope, r.cfg, nodes[0], nodes[3], nodes[4])
		return []*Node{model.CrossEntropy(logits, nodes[1], nodes[2])}
	}
	backward := func(nodes []*Node) []*Node {
		loss := forward(nodes)[0]
		ws := make([]*Node, len(r.params))
		for i, v := range r.params {
			ws[i] = v.NodeValue(loss.Graph())
		}
		var sq *Node
		for _, gr := range Gradient(loss, ws...) {
			if s := ReduceAllSum(Square(gr)); sq == nil {
				sq = s
			} else {
				sq = Add(sq, s)
			}
		}
		return []*Node{loss, Sqrt(sq)}
	}
	for _, c := range []struct {
		name string
		fn   func([]*Node) []*Node
		lr   bool
	}{{"forward+loss", forward, false}, {"forward+backward+norm", backward, false}, {"full train step", r.trainGraph, true}} {
		shp, args := in, []any{p.tokens(), p.targets(), p.lossMask(), p.positions(), p.validMask()}
		if c.lr {
			shp = append(append([]shapes.Shape(nil), in...), shapes.Make(dtypes.Float32))
			args = append(args, tensors.FromScalar(float32(1e-3)))
		}
		var total float64
		const runs = 3
		for i := range runs + 1 {
			outs, sec, err := r.run(CacheKey{c.name, p.shape()}, c.fn, shp, args...)
			if err != nil {
				t.Fatal(err)
			}
			finalize(outs)
			if i > 0 { // the first run allocates
				total += sec
			}
		}
		t.Logf("%-22s %.3f s", c.name, total/runs)
	}
}

// TestGraphOpCensus counts the train graph's ops by type and output elements; same-shape
// transposes are (almost all) identity permutations that the Go backend still copies.
func TestGraphOpCensus(t *testing.T) {
	r, p := diagnosticRuntime(t)
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.ensureOptimizer(); err != nil {
		t.Fatal(err)
	}
	in := []shapes.Shape{i32(p), i32(p), f32(p), i32(p), boolean(p), shapes.Make(dtypes.Float32)}
	if _, _, err := r.run(CacheKey{"train", p.shape()}, r.trainGraph, in, p.tokens(), p.targets(), p.lossMask(),
		p.positions(), p.validMask(), tensors.FromScalar(float32(1e-3))); err != nil {
		t.Fatal(err)
	}
	g, err := r.cache.entries[CacheKey{"train", p.shape()}].Compile(in...)
	if err != nil {
		t.Fatal(err)
	}
	type agg struct{ nodes, elems int }
	ops := map[string]*agg{}
	var sameShape agg
	for _, n := range g.Nodes() {
		k := n.Type().String()
		if ops[k] == nil {
			ops[k] = &agg{}
		}
		ops[k].nodes++
		ops[k].elems += n.Shape().Size()
		if k == "Transpose" && n.Inputs()[0].Shape().Equal(n.Shape()) {
			sameShape.nodes++
			sameShape.elems += n.Shape().Size()
		}
	}
	names := make([]string, 0, len(ops))
	for k := range ops {
		names = append(names, k)
	}
	sort.Slice(names, func(i, j int) bool { return ops[names[i]].elems > ops[names[j]].elems })
	var sb strings.Builder
	for _, k := range names {
		fmt.Fprintf(&sb, "%-16s %5d nodes %8.1fM elements\n", k, ops[k].nodes, float64(ops[k].elems)/1e6)
	}
	fmt.Fprintf(&sb, "same-shape transposes: %d nodes, %.1fM elements", sameShape.nodes, float64(sameShape.elems)/1e6)
	t.Logf("train graph %s:\n%s", p.shape(), sb.String())
}

// TestTrainingMemory trains 4 steps and checks the process's peak RSS stays under 2 GiB (run it
// alone: VmHWM is process-wide).
func TestTrainingMemory(t *testing.T) {
	r, _ := diagnosticRuntime(t)
	b := randomBatch(t, r.Config().Vocab, 16, 128, 1)
	for i := range 4 {
		m, err := r.TrainStep(b, 1e-3)
		if err != nil {
			t.Fatal(err)
		}
		mem, err := ReadMemory()
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("step %d: loss %.3f, %.2f s, rss %d MiB, peak %d MiB", i, m.Loss, m.Seconds, mem.RSS>>20, mem.PeakRSS>>20)
		if mem.PeakRSS > 2<<30 {
			t.Fatalf("peak rss %d MiB > 2048 MiB", mem.PeakRSS>>20)
		}
	}
}
