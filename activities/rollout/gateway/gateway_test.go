package gateway

import (
	"bytes"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/temperml/temper/algorithms/episode"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/internal/serve"
	"github.com/temperml/temper/tpu"
)

func TestWithSeed(t *testing.T) {
	cases := []struct{ name, in, want string }{
		{"no seed", `{"model":"policy","n":1}`, `{"model":"policy","n":1,"seed":7}`},
		{"null seed", `{"seed":null}`, `{"seed":7}`},
		{"own seed", `{"seed":3, "model":"policy"}`, `{"seed":3, "model":"policy"}`},
		{"not an object", `[1,2]`, `[1,2]`},
		{"not JSON", `{"seed":`, `{"seed":`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := string(withSeed([]byte(c.in), 7)); got != c.want {
				t.Fatalf("got %s, want %s", got, c.want)
			}
		})
	}
	if SeedFor(1, 0) == SeedFor(1, 1) || SeedFor(1, 0) == SeedFor(2, 0) || SeedFor(1, 0) >= 1<<53 || SeedFor(1, 0) < 0 {
		t.Fatalf("seeds %d %d %d: want distinct, in [0, 2^53)", SeedFor(1, 0), SeedFor(1, 1), SeedFor(2, 0))
	}
}

// policy is a tiny random model on the real runtime: its continuous batches are the gateway's.
type policy struct{ rt *tpu.Runtime }

func newPolicy(t *testing.T) (policy, *serve.Model) {
	t.Helper()
	cfg, err := model.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	rt, err := tpu.New(tpu.Options{Model: cfg, Seed: 5})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() })
	m, err := serve.ByteModel(ModelName, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return policy{rt}, m
}

func (p policy) decoder(t *testing.T) *tpu.Decoder {
	t.Helper()
	d, err := p.rt.NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// post sends one chat request and returns the status and body.
func post(t *testing.T, base string, body map[string]any) (int, []byte) {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := http.Post(base+"/v1/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// agentScript is what an agent of these tests asks, in order: two chat calls, the second after
// the first's answer and a tool result. The second request has no seed: the gateway gives one.
func agentScript(t *testing.T, base, question string, seed int) {
	t.Helper()
	status, body := post(t, base, map[string]any{"model": ModelName, "max_tokens": 24, "temperature": 1, "seed": seed,
		"messages": []map[string]any{{"role": "user", "content": question}}})
	if status != 200 {
		t.Fatalf("call 1: %d %s", status, body)
	}
	var r struct {
		Choices []struct {
			Message struct{ Content string } `json:"message"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &r); err != nil {
		t.Fatal(err)
	}
	status, body = post(t, base, map[string]any{"model": ModelName, "max_tokens": 24, "temperature": 1,
		"messages": []map[string]any{{"role": "user", "content": question},
			{"role": "assistant", "content": "", "tool_calls": []map[string]any{{"id": "c0", "type": "function",
				"function": map[string]any{"name": "calc", "arguments": `{"expr":"1+1"}`}}}},
			{"role": "tool", "tool_call_id": "c0", "content": "2"}}})
	if status != 200 {
		t.Fatalf("call 2: %d %s", status, body)
	}
}

// episodeOn serves one episode on a fresh listener and decoder, runs script against it and
// returns its calls.
func episodeOn(t *testing.T, p policy, m *serve.Model, seed uint64, script func(base string)) []episode.Call {
	t.Helper()
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dec := p.decoder(t)
	defer dec.Close()
	ep, err := Serve(ln, dec, Options{Model: m, Version: 2, Seed: seed, MaxCalls: 8})
	if err != nil {
		t.Fatal(err)
	}
	script("http://" + ln.Addr().String())
	return ep.Close()
}

// TestEpisodeBitsDoNotDependOnNeighbours: an episode's calls (tokens and log-probabilities, to the
// bit) are the same served alone on the worker as beside other episodes served at the same time
// from the same policy, and the same again when replayed; the request without a seed got the
// episode's (a different episode seed changes it).
func TestEpisodeBitsDoNotDependOnNeighbours(t *testing.T) {
	p, m := newPolicy(t)
	script := func(base string) { agentScript(t, base, "12*34=", 11) }
	alone := episodeOn(t, p, m, 9, script)
	if len(alone) != 2 || alone[0].Version != 2 {
		t.Fatalf("recorded %+v: want 2 calls of version 2", alone)
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for i := range 3 { // neighbours: other episodes, calling in a loop while ours runs
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; ; k++ {
				select {
				case <-stop:
					return
				default:
				}
				episodeOn(t, p, m, uint64(100+i), func(base string) {
					agentScript(t, base, strings.Repeat("9", 1+(i*7+k)%23)+"*7=", 100+k)
				})
			}
		}()
	}
	time.Sleep(50 * time.Millisecond)
	beside := episodeOn(t, p, m, 9, script)
	close(stop)
	wg.Wait()
	again := episodeOn(t, p, m, 9, script)
	for name, got := range map[string][]episode.Call{"beside others": beside, "replayed": again} {
		if !reflect.DeepEqual(got, alone) {
			t.Errorf("%s: calls differ from the episode served alone:\n%+v\n%+v", name, got, alone)
		}
	}
	other := episodeOn(t, p, m, 10, script)
	if !reflect.DeepEqual(other[0], alone[0]) {
		t.Errorf("the seeded first call changed with the episode's seed")
	}
	if slices.Equal(other[1].Tokens, alone[1].Tokens) {
		t.Errorf("the unseeded second call sampled the same %d tokens under another episode seed", len(alone[1].Tokens))
	}
}

// TestOneRowAtATime: concurrent requests of one episode are decoded one after the other, never
// side by side (a row's bits would then depend on the batch's width), and each is recorded.
func TestOneRowAtATime(t *testing.T) {
	p, m := newPolicy(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dec := &liveRows{Decoder: p.decoder(t), live: map[int]bool{}}
	defer dec.Close()
	ep, err := Serve(ln, dec, Options{Model: m, Version: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			post(t, "http://"+ln.Addr().String(), map[string]any{"model": ModelName, "max_tokens": 16, "temperature": 1,
				"messages": []map[string]any{{"role": "user", "content": strings.Repeat("x", i+1)}}})
		}()
	}
	wg.Wait()
	if calls := ep.Close(); len(calls) != 4 || dec.most != 1 {
		t.Fatalf("%d calls recorded, at most %d rows at once: want 4, one at a time", len(calls), dec.most)
	}
}

// TestEpisodeLimits: a request past the call budget is refused in OpenAI's schema and records
// nothing; n > 1 is refused (one row at a time); Close ends a call in flight and leaves the
// decoder empty; the endpoint is gone after Close.
func TestEpisodeLimits(t *testing.T) {
	p, m := newPolicy(t)
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Each decode step takes 2 ms and the first one is signalled, so that the long call is in flight
	// when Close comes however fast the machine decodes (200 tokens took under 20 ms on a quiet one).
	dec := &liveRows{Decoder: p.decoder(t), live: map[int]bool{}, stepDelay: 2 * time.Millisecond, stepped: make(chan struct{})}
	defer dec.Close()
	ep, err := Serve(ln, dec, Options{Model: m, Version: 1, Seed: 1, MaxCalls: 2})
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	msgs := []map[string]any{{"role": "user", "content": "hi"}}
	if status, body := post(t, base, map[string]any{"model": ModelName, "messages": msgs, "n": 2, "max_tokens": 4}); status != 400 || !strings.Contains(string(body), `"n"`) {
		t.Errorf("n=2: %d %s, want 400 naming n", status, body)
	}
	// A long call, left running: Close must end it.
	done := make(chan int, 1)
	go func() {
		status, _ := post(t, base, map[string]any{"model": ModelName, "messages": msgs, "max_tokens": 200, "temperature": 1})
		done <- status
	}()
	for ep.Requests() < 2 {
		time.Sleep(time.Millisecond)
	}
	status, body := post(t, base, map[string]any{"model": ModelName, "messages": msgs, "max_tokens": 4})
	if status != 400 || !strings.Contains(string(body), "episode_call_budget") || !strings.Contains(string(body), "max_calls") {
		t.Errorf("call 3 of 2: %d %s, want 400 episode_call_budget", status, body)
	}
	select {
	case <-dec.stepped:
	case <-time.After(10 * time.Second):
		t.Fatal("the long call never reached a decode step")
	}
	calls := ep.Close()
	if len(calls) != 0 || len(dec.live) != 0 || dec.joined == 0 {
		t.Errorf("after close: %d calls recorded, rows %v left in the decoder (%d joined): want none", len(calls), dec.live, dec.joined)
	}
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight did not end at close")
	}
	if _, err := http.Get(base + "/v1/models"); err == nil {
		t.Error("the endpoint still answers after close")
	}
}

// liveRows counts the rows a decoder holds (the scheduler's goroutine alone calls it, and the test
// reads it after Close).
type liveRows struct {
	*tpu.Decoder
	live   map[int]bool
	joined int
	most   int // rows held at once, at most

	stepDelay time.Duration // each Step sleeps this long first
	stepped   chan struct{} // closed at the first Step, if set
	once      sync.Once
}

func (d *liveRows) Step(ids, tokens []int) ([]float32, error) {
	if d.stepped != nil {
		d.once.Do(func() { close(d.stepped) })
	}
	time.Sleep(d.stepDelay)
	return d.Decoder.Step(ids, tokens)
}

func (d *liveRows) Join(prompts [][]int) ([]int, []float32, error) {
	ids, lg, err := d.Decoder.Join(prompts)
	for _, id := range ids {
		d.live[id] = true
		d.joined++
	}
	d.most = max(d.most, len(d.live))
	return ids, lg, err
}

func (d *liveRows) Leave(id int) error {
	delete(d.live, id)
	return d.Decoder.Leave(id)
}
