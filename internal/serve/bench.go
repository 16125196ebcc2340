package serve

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/stats"
	"github.com/temperml/temper/algorithms/tokenize"
)

// BenchRuntime is one model for `temper bench serve`: its continuous batch and its in-process
// batched generation (tpu.Runtime's, wired by cmd/temper).
type BenchRuntime interface {
	Config() model.Config
	// NewEngine starts a continuous batch; close releases it.
	NewEngine() (eng Engine, close func(), err error)
	Generate(prompts [][]int, opts sample.Options) ([]model.Completion, error)
}

// BenchOptions configure Bench. Zero values take the defaults.
type BenchOptions struct {
	Presets   []string // default tiny, small, base
	Clients   []int    // concurrent streaming clients; default 1, 8, 32
	PromptLen int      // tokens per prompt; default 16
	Tokens    int      // max_tokens per request; default 128
	Repeats   int      // pairs of timed runs (in-process, serve), the order alternating; default 5
	// Open builds the runtime of a preset (random weights, seeded); close releases it.
	Open     func(preset string) (rt BenchRuntime, close func(), err error)
	Progress func(line string)
}

// BenchRow is one (preset, clients) measurement: the same requests (prompts, seeds, max_tokens)
// served to concurrent streaming HTTP clients and generated in-process as one batch.
type BenchRow struct {
	Preset           string  `json:"preset"`
	Clients          int     `json:"clients"`
	InProcessTokens  int     `json:"in_process_tokens"`
	InProcessSeconds float64 `json:"in_process_seconds"`
	InProcessTokS    float64 `json:"in_process_tokens_per_sec"`
	ServeTokens      int     `json:"serve_tokens"`
	ServeSeconds     float64 `json:"serve_seconds"`
	ServeTokS        float64 `json:"serve_tokens_per_sec"`
	// Ratio is serve / in-process tokens per second: the median over back-to-back pairs of runs.
	Ratio float64 `json:"ratio"`
	// CPU seconds of the whole process (server and clients) of the least costly runs, and the
	// median ratio of tokens per CPU second over the pairs: the wall-clock ratio were both sides
	// given the same cores.
	InProcessCPU float64 `json:"in_process_cpu_seconds"`
	ServeCPU     float64 `json:"serve_cpu_seconds"`
	CPURatio     float64 `json:"cpu_ratio"`
	TTFTClient0  float64 `json:"ttft_client0_seconds"`
	TTFTMedian   float64 `json:"ttft_median_seconds"`
	TTFTMax      float64 `json:"ttft_max_seconds"`
	LatencyMean  float64 `json:"latency_mean_seconds"`
	SameTokens   bool    `json:"same_tokens"` // every request got the in-process tokens
}

// BenchReport is `temper bench serve`'s result.
type BenchReport struct {
	PromptLen int        `json:"prompt_len"`
	Tokens    int        `json:"max_tokens"`
	Repeats   int        `json:"repeats"`
	Rows      []BenchRow `json:"rows"`
}

func (o BenchOptions) withDefaults() BenchOptions {
	if len(o.Presets) == 0 {
		o.Presets = []string{"tiny", "small", "base"}
	}
	if len(o.Clients) == 0 {
		o.Clients = []int{1, 8, 32}
	}
	if o.PromptLen <= 0 {
		o.PromptLen = 16
	}
	if o.Tokens <= 0 {
		o.Tokens = 128
	}
	if o.Repeats <= 0 {
		o.Repeats = 5
	}
	if o.Progress == nil {
		o.Progress = func(string) {}
	}
	return o
}

// Bench measures the server's overhead: for each preset and number of clients, the aggregate
// tokens/s of that many concurrent streaming /v1/completions clients (token-id prompts, over
// loopback TCP, in this process) against the same model's in-process batched generation of the
// same requests (same prompts, seeds and max_tokens), alternating the two sides. SameTokens says
// whether every request got exactly the in-process tokens (the server's record of them).
func Bench(ctx context.Context, o BenchOptions) (BenchReport, error) {
	o = o.withDefaults()
	if o.Open == nil {
		return BenchReport{}, errors.New("serve: bench: no runtime (Open)")
	}
	rep := BenchReport{PromptLen: o.PromptLen, Tokens: o.Tokens, Repeats: o.Repeats}
	for _, preset := range o.Presets {
		rt, closeRT, err := o.Open(preset)
		if err != nil {
			return rep, err
		}
		rows, err := benchPreset(ctx, o, preset, rt)
		closeRT()
		if err != nil {
			return rep, err
		}
		rep.Rows = append(rep.Rows, rows...)
	}
	return rep, nil
}

func benchPreset(ctx context.Context, o BenchOptions, preset string, rt BenchRuntime) ([]BenchRow, error) {
	cfg := rt.Config()
	if o.PromptLen+o.Tokens > cfg.MaxSeq {
		return nil, fmt.Errorf("serve: bench %s: prompt %d + tokens %d over max_seq %d", preset, o.PromptLen, o.Tokens, cfg.MaxSeq)
	}
	m, err := ByteModel(preset, cfg)
	if err != nil {
		return nil, err
	}
	eng, closeEng, err := rt.NewEngine()
	if err != nil {
		return nil, err
	}
	defer closeEng()
	maxClients := slices.Max(o.Clients)
	// The tokens each request got, as the server sampled them (keyed by prompt: prompts are distinct).
	var mu sync.Mutex
	got := map[string][]int{}
	record := func(c Call) {
		mu.Lock()
		got[fmt.Sprint(c.Prompts[0])] = c.Choices[0].Tokens
		mu.Unlock()
	}
	srv := New(m, eng, Options{OnCall: record, Scheduler: SchedulerOptions{MaxBatch: max(DefaultMaxBatch, maxClients), MaxQueue: max(DefaultMaxQueue, maxClients)}})
	defer srv.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("serve: bench: %w", err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	url := "http://" + ln.Addr().String() + "/v1/completions"
	client := &http.Client{Transport: &http.Transport{MaxIdleConns: 2 * maxClients, MaxIdleConnsPerHost: 2 * maxClients}}

	var rows []BenchRow
	for _, n := range o.Clients {
		rng := rand.New(rand.NewPCG(uint64(n), 7))
		prompts := make([][]int, n)
		seeds := make([]uint64, n)
		for i := range prompts {
			prompts[i] = []int{tokenize.ByteBOS}
			for range o.PromptLen - 1 {
				prompts[i] = append(prompts[i], 32+rng.IntN(95)) // printable ASCII
			}
			seeds[i] = uint64(1000*n + i)
		}
		// What the server gives choice 0 of a request with seed s.
		perRow := make([]uint64, n)
		for i, s := range seeds {
			perRow[i] = sample.Options{Seed: s}.SeedFor(0)
		}
		gopts := sample.Options{MaxNewTokens: o.Tokens, Temperature: 1, Seeds: perRow, StopTokens: m.StopIDs}
		row := BenchRow{Preset: preset, Clients: n}
		var want [][]int
		var last [2][2]float64 // tokens per wall and per CPU second of the last run: [in-process, serve]
		inProcess := func() error {
			start, cpu0 := time.Now(), cpuSeconds()
			out, err := rt.Generate(prompts, gopts)
			if err != nil {
				return err
			}
			sec, cpu := time.Since(start).Seconds(), cpuSeconds()-cpu0
			toks := 0
			want = want[:0]
			for _, c := range out {
				toks += len(c.Tokens)
				want = append(want, c.Tokens)
			}
			if row.InProcessSeconds == 0 || sec < row.InProcessSeconds {
				row.InProcessSeconds, row.InProcessTokens = sec, toks
			}
			if row.InProcessCPU == 0 || cpu < row.InProcessCPU {
				row.InProcessCPU = cpu
			}
			last[0] = [2]float64{float64(toks) / sec, float64(toks) / cpu}
			return nil
		}
		served := func() error {
			cpu0 := cpuSeconds()
			res, sec, err := runClients(ctx, client, url, preset, prompts, seeds, o.Tokens)
			if err != nil {
				return err
			}
			cpu := cpuSeconds() - cpu0
			if row.ServeCPU == 0 || cpu < row.ServeCPU {
				row.ServeCPU = cpu
			}
			toks := 0
			same := len(want) == len(res)
			mu.Lock()
			for i, r := range res {
				toks += r.tokens
				same = same && slices.Equal(got[fmt.Sprint(prompts[i])], want[i])
			}
			mu.Unlock()
			last[1] = [2]float64{float64(toks) / sec, float64(toks) / cpu}
			if row.ServeSeconds == 0 || sec < row.ServeSeconds {
				row.ServeSeconds, row.ServeTokens, row.SameTokens = sec, toks, same
				var ttft []float64
				row.LatencyMean = 0
				for _, r := range res {
					ttft = append(ttft, r.ttft)
					row.LatencyMean += r.latency / float64(len(res))
				}
				row.TTFTClient0 = ttft[0]
				slices.Sort(ttft)
				row.TTFTMedian, row.TTFTMax = ttft[len(ttft)/2], ttft[len(ttft)-1]
			}
			return nil
		}
		// Warm both sides (compiles), then alternate the timed runs.
		if err := inProcess(); err != nil {
			return nil, err
		}
		if err := served(); err != nil {
			return nil, err
		}
		row.InProcessSeconds, row.ServeSeconds, row.InProcessCPU, row.ServeCPU = 0, 0, 0, 0
		// Each pair of back-to-back runs meets about the same load from the rest of the machine:
		// the ratios are the medians over the pairs.
		var ratios, cpuRatios []float64
		for k := range o.Repeats {
			sides := []func() error{inProcess, served}
			if k%2 == 1 {
				sides[0], sides[1] = served, inProcess
			}
			for _, side := range sides {
				if err := side(); err != nil {
					return nil, err
				}
			}
			ratios = append(ratios, last[1][0]/last[0][0])
			cpuRatios = append(cpuRatios, last[1][1]/last[0][1])
		}
		row.InProcessTokS = float64(row.InProcessTokens) / row.InProcessSeconds
		row.ServeTokS = float64(row.ServeTokens) / row.ServeSeconds
		row.Ratio, row.CPURatio = stats.Median(ratios), stats.Median(cpuRatios)
		o.Progress(fmt.Sprintf("%-5s %2d clients: serve %.0f tok/s, in-process %.0f tok/s (×%.2f; per CPU second ×%.2f), ttft client 0 %.0f ms",
			preset, n, row.ServeTokS, row.InProcessTokS, row.Ratio, row.CPURatio, 1000*row.TTFTClient0))
		rows = append(rows, row)
	}
	return rows, nil
}

// cpuSeconds is the process's user + system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// clientResult is one streaming client's view.
type clientResult struct {
	tokens  int     // completion tokens (the stream's usage)
	ttft    float64 // seconds to the first text
	latency float64 // seconds to the end of the stream
}

// runClients sends one streaming completions request per prompt at once and reads every stream to
// its end; it returns the results and the wall time of the whole.
func runClients(ctx context.Context, client *http.Client, url, modelName string, prompts [][]int, seeds []uint64, maxTokens int) ([]clientResult, float64, error) {
	res := make([]clientResult, len(prompts))
	errs := make([]error, len(prompts))
	var wg sync.WaitGroup
	start := time.Now()
	for i := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res[i], errs[i] = streamOne(ctx, client, url, modelName, prompts[i], seeds[i], maxTokens, start)
		}()
	}
	wg.Wait()
	sec := time.Since(start).Seconds()
	for i, err := range errs {
		if err != nil {
			return nil, 0, fmt.Errorf("serve: bench: client %d: %w", i, err)
		}
	}
	return res, sec, nil
}

// streamOne is one client: a streaming request (with the usage at its end), read to [DONE].
func streamOne(ctx context.Context, client *http.Client, url, modelName string, prompt []int, seed uint64, maxTokens int, start time.Time) (clientResult, error) {
	body, _ := json.Marshal(map[string]any{"model": modelName, "prompt": prompt, "max_tokens": maxTokens, "temperature": 1,
		"seed": int64(seed), "stream": true, "stream_options": map[string]bool{"include_usage": true}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return clientResult{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return clientResult{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e bytes.Buffer
		_, _ = e.ReadFrom(resp.Body)
		return clientResult{}, fmt.Errorf("status %d: %s", resp.StatusCode, strings.TrimSpace(e.String()))
	}
	var r clientResult
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		data, ok := bytes.CutPrefix(sc.Bytes(), []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			r.latency = time.Since(start).Seconds()
			return r, nil
		}
		// A lean client: only the usage chunk and errors are decoded; the first text is spotted
		// in the bytes (a completions chunk has one "text" field, its choice's).
		if r.ttft == 0 {
			if i := bytes.Index(data, []byte(`"text":"`)); i >= 0 && i+8 < len(data) && data[i+8] != '"' {
				r.ttft = time.Since(start).Seconds()
			}
		}
		if !bytes.Contains(data, []byte(`"usage":{`)) && !bytes.HasPrefix(data, []byte(`{"error"`)) {
			continue
		}
		var chunk struct {
			Usage *usage    `json:"usage"`
			Error *apiError `json:"error"`
		}
		if err := json.Unmarshal(data, &chunk); err != nil {
			return r, fmt.Errorf("chunk %q: %w", data, err)
		}
		if chunk.Error != nil {
			return r, fmt.Errorf("stream error: %s", chunk.Error.Message)
		}
		if chunk.Usage != nil {
			r.tokens = chunk.Usage.CompletionTokens
		}
	}
	if err := sc.Err(); err != nil {
		return r, err
	}
	return r, errors.New("stream ended without [DONE]")
}

// String renders the report as a table.
func (r BenchReport) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "serve vs in-process batched generation: %d-token prompts, max_tokens %d, temperature 1, %d pairs of runs (order alternating)\n", r.PromptLen, r.Tokens, r.Repeats)
	fmt.Fprintf(&b, "%-6s %7s %12s %12s %7s %9s %10s %10s %10s %10s %6s\n", "preset", "clients", "serve tok/s", "inproc tok/s", "ratio", "cpu ratio", "ttft c0", "ttft p50", "ttft max", "latency", "same")
	for _, x := range r.Rows {
		fmt.Fprintf(&b, "%-6s %7d %12.0f %12.0f %7.2f %9.2f %8.0fms %8.0fms %8.0fms %8.0fms %6v\n", x.Preset, x.Clients, x.ServeTokS, x.InProcessTokS, x.Ratio, x.CPURatio,
			1000*x.TTFTClient0, 1000*x.TTFTMedian, 1000*x.TTFTMax, 1000*x.LatencyMean, x.SameTokens)
	}
	b.WriteString("tok/s: the best run of each side; ratio: serve / in-process tokens/s, median over the pairs; cpu ratio: the same per CPU second of this process (clients included); ttft and latency: the best serve run\n")
	return b.String()
}
