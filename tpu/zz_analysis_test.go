package tpu

import (
	"fmt"
	"os"
	"sort"
	"testing"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"

	"github.com/temperml/temper/algorithms/model"
)

func TestZZGraphOps(t *testing.T) {
	if os.Getenv("ZZ") == "" {
		t.Skip()
	}
	cfg, _ := model.Preset("base")
	r := newRuntime(t, Options{Model: cfg})
	b := randomBatch(t, cfg.Vocab, 16, 128, 1)
	if _, err := r.TrainStep(b, 1e-3); err != nil {
		t.Fatal(err)
	}
	e := r.cache.entries[CacheKey{"train", "16x128"}]
	p := shapes.Make(dtypes.Int32, 16, 128)
	g, err := e.Compile(p, p, shapes.Make(dtypes.Float32, 16, 128), p, shapes.Make(dtypes.Bool, 16, 128), shapes.Make(dtypes.Float32))
	if err != nil {
		t.Fatal(err)
	}
	type agg struct{ n, elems int }
	m := map[string]*agg{}
	for _, n := range g.Nodes() {
		k := n.Type().String()
		if m[k] == nil {
			m[k] = &agg{}
		}
		m[k].n++
		m[k].elems += n.Shape().Size()
		if (k == "BroadcastInDim" || k == "Pad") && n.Shape().Size() > 100000 {
			fmt.Println(k, n.Inputs()[0].Shape(), "->", n.Shape())
		}
	}
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return m[ks[i]].elems > m[ks[j]].elems })
	for _, k := range ks {
		fmt.Printf("%-22s %5d nodes %8.1fM elems\n", k, m[k].n, float64(m[k].elems)/1e6)
	}
}

func TestZZMem(t *testing.T) {
	if os.Getenv("ZZMEM") == "" {
		t.Skip()
	}
	cfg, _ := model.Preset(os.Getenv("ZZMEM"))
	r := newRuntime(t, Options{Model: cfg, Executor: os.Getenv("ZZMODE")})
	b := randomBatch(t, cfg.Vocab, 16, 128, 1)
	for i := range 4 {
		m, err := r.TrainStep(b, 1e-3)
		if err != nil {
			t.Fatal(err)
		}
		mem, _ := ReadMemory()
		fmt.Printf("step %d loss %.3f %.2fs rss %d MB peak %d MB\n", i, m.Loss, m.Seconds, mem.RSS>>20, mem.PeakRSS>>20)
	}
}
