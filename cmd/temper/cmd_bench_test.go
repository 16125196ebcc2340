package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestBenchPeerFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "model", "--peer", "--repeats", "0"}, "--repeats=0: must be >= 1"},
		{[]string{"bench", "model", "--peer", "--peer-decode-attend", "all"}, `--peer-decode-attend="all": allowed "filled", "full"`},
		// No build or machine here has a PJRT plugin: one error, naming the tag or what to install.
		{[]string{"bench", "model", "--backend", "xla", "--presets", "tiny"}, `tpu: new backend xla`},
		{[]string{"bench", "model", "--plugin", "tpu", "--presets", "tiny"}, `plugin "tpu"`},
	} {
		out, err := cli(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v (output %q), want %q", tc.args, err, out, tc.want)
		}
	}
}

// TestBenchPeak: `bench peak` on tiny sizes, as text and as the one JSON object scripts read.
func TestBenchPeak(t *testing.T) {
	flags := []string{"bench", "peak", "--seconds", "0.01", "--shapes", "64x64x64,32×48×40", "--stream-mib", "1"}
	out, err := cli(t, append(flags, "--json")...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	js := out[strings.Index(out, "{") : strings.LastIndex(out, "}")+1]
	var rep struct {
		ISA        string  `json:"isa"`
		Seconds    float64 `json:"seconds"`
		PeakGFLOPS float64 `json:"peak_gflops"`
		Matmul     []struct {
			Shape struct{ M, K, N int } `json:"shape"`
		} `json:"matmul"`
		Stream []struct {
			Kernel     string `json:"kernel"`
			ArrayBytes int64  `json:"array_bytes"`
		} `json:"stream"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if rep.ISA == "" || rep.Seconds != 0.01 || !(rep.PeakGFLOPS > 0) || len(rep.Matmul) != 2 || rep.Matmul[1].Shape.K != 48 ||
		len(rep.Stream) != 2 || rep.Stream[1].Kernel != "triad" || rep.Stream[0].ArrayBytes != 1<<20 {
		t.Errorf("report %+v\n%s", rep, out)
	}
	out, err = cli(t, append(flags[:len(flags)-2], "--stream-mib", "-1")...)
	if err != nil || !strings.Contains(out, "attainable: ") || !strings.Contains(out, "engine kernels: ") || strings.Contains(out, "triad") {
		t.Errorf("text without streams: %v\n%s", err, out)
	}
}

func TestBenchPeakFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "peak", "--seconds", "0"}, "--seconds=0: must be a positive number"},
		{[]string{"bench", "peak", "--seconds", "-2"}, "--seconds=-2"},
		{[]string{"bench", "peak", "--shapes", "64x64"}, `--shapes "64x64"`},
		{[]string{"bench", "peak", "--shapes", "8x8x8", "--stream-mib", "-2"}, "--stream-mib=-2"},
		{[]string{"bench", "model", "--peak", "-1"}, "--peak=-1"},
		{[]string{"bench", "model", "--peer", "--peak", "100"}, "--peer: --peak"},
		{[]string{"bench", "model", "--shapes", "1x2x"}, `--shapes "1x2x"`},
	} {
		out, err := cli(t, tc.args...)
		var ee *exitError
		if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.As(err, &ee) || ee.code != 2 {
			t.Errorf("%q: err %v (output %q), want exit 2 and %q", tc.args, err, out, tc.want)
		}
	}
}

// TestBenchMemoryCurveFlags: the memory curve's flags (bench model --seq A,B --remat R) and the
// point each of its child processes runs (bench memory-point).
func TestBenchMemoryCurveFlags(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "model", "--seq", "512,0"}, `--seq "512,0": want positive token counts`},
		{[]string{"bench", "model", "--seq", "64", "--svg", "x.svg"}, `--svg "x.svg": only for the memory curve`},
		{[]string{"bench", "model", "--seq", "64,128", "--peer"}, "drop --peer"},
		{[]string{"bench", "memory-point", "--seq", "16,32", "--presets", "tiny"}, "want one length and one preset"},
		{[]string{"bench", "model", "--seq", "16,32", "--presets", "tiny"}, "is a test binary"}, // never re-run this binary's tests
		{[]string{"bench", "memory-point", "--seq", "16", "--presets", "tiny", "--batch", "1", "--remat", "all"}, `--remat="all"`},
	} {
		out, err := cli(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: err %v (output %q), want %q", tc.args, err, out, tc.want)
		}
	}
	out, err := cli(t, "bench", "memory-point", "--presets", "tiny", "--seq", "16", "--batch", "1", "--steps", "1", "--remat", "layer")
	if err != nil {
		t.Fatal(err)
	}
	_, js, ok := strings.Cut(out, "MEMORY-POINT ")
	var p struct {
		Preset  string `json:"preset"`
		Seq     int    `json:"seq"`
		Remat   string `json:"remat"`
		PeakRSS int64  `json:"peak_rss_bytes"`
	}
	if !ok || json.Unmarshal([]byte(strings.TrimSpace(js)), &p) != nil || p.Preset != "tiny" || p.Seq != 16 || p.Remat != "layer" || p.PeakRSS <= 0 {
		t.Errorf("bench memory-point: output %q, parsed %+v", out, p)
	}
}

func TestParseMemoryBudget(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"", 0, true}, {"0", 0, true}, {"6GB", 6e9, true}, {"1500000", 1500000, true},
		{"lots", 0, false}, {"-5", 0, false}, {"6GiB", 0, false},
	} {
		got, err := parseMemoryBudget(tc.in)
		if (err == nil) != tc.ok || got != tc.want || (err != nil && !strings.Contains(err.Error(), "--memory-budget")) {
			t.Errorf("parseMemoryBudget(%q) = %d, %v; want %d (ok %v)", tc.in, got, err, tc.want, tc.ok)
		}
	}
	if _, err := cli(t, "worker", "--memory-budget", "lots"); err == nil || !strings.Contains(err.Error(), `--memory-budget "lots"`) {
		t.Errorf("temper worker --memory-budget lots: %v", err)
	}
}
