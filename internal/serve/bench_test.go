package serve

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/tpu"
)

// tpuBench is a BenchRuntime on a randomly initialised preset (what cmd/temper wires).
type tpuBench struct{ rt *tpu.Runtime }

func (b tpuBench) Config() model.Config { return b.rt.Config() }

func (b tpuBench) NewEngine() (Engine, func(), error) {
	d, err := b.rt.NewDecoder()
	if err != nil {
		return nil, nil, err
	}
	return d, d.Close, nil
}

func (b tpuBench) Generate(prompts [][]int, opts sample.Options) ([]model.Completion, error) {
	return b.rt.Generate(prompts, opts)
}

func openPreset(preset string) (BenchRuntime, func(), error) {
	cfg, err := model.Preset(preset)
	if err != nil {
		return nil, nil, err
	}
	rt, err := tpu.New(tpu.Options{Model: cfg, Seed: 1})
	if err != nil {
		return nil, nil, err
	}
	return tpuBench{rt}, func() { _ = rt.Close() }, nil
}

// TestBenchSmoke: the benchmark runs end to end on the tiny model, and the served requests get
// exactly the in-process tokens (same prompts, seeds and max_tokens).
func TestBenchSmoke(t *testing.T) {
	rep, err := Bench(context.Background(), BenchOptions{Presets: []string{"tiny"}, Clients: []int{1, 3}, Tokens: 12, Repeats: 1, Open: openPreset})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 2 {
		t.Fatalf("rows %+v", rep.Rows)
	}
	for _, r := range rep.Rows {
		if !r.SameTokens || r.ServeTokens != r.InProcessTokens || r.ServeTokS <= 0 || r.TTFTClient0 <= 0 {
			t.Fatalf("row %+v", r)
		}
	}
	if !strings.Contains(rep.String(), "tiny") {
		t.Fatal(rep.String())
	}
}

// TestBenchServe is `temper bench serve` as a test: TEMPER_BENCH_SERVE=1 go test -run TestBenchServe
// -v ./internal/serve/ (TEMPER_BENCH_PRESETS=small to pick presets).
func TestBenchServe(t *testing.T) {
	if os.Getenv("TEMPER_BENCH_SERVE") == "" {
		t.Skip("set TEMPER_BENCH_SERVE=1 to run the serving benchmark")
	}
	o := BenchOptions{Open: openPreset, Progress: func(s string) { t.Log(s) }}
	if r := os.Getenv("TEMPER_BENCH_REPEATS"); r != "" {
		n, err := strconv.Atoi(r)
		if err != nil {
			t.Fatal(err)
		}
		o.Repeats = n
	}
	if p := os.Getenv("TEMPER_BENCH_PRESETS"); p != "" {
		o.Presets = strings.Split(p, ",")
	}
	if c := os.Getenv("TEMPER_BENCH_CLIENTS"); c != "" {
		for _, f := range strings.Split(c, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatal(err)
			}
			o.Clients = append(o.Clients, n)
		}
	}
	rep, err := Bench(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Log("\n" + rep.String())
}
