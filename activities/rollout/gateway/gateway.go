package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/temperml/temper/algorithms/episode"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/internal/serve"
)

// ModelName is the served policy's name in the API (an agent's requests name it as "model").
const ModelName = "policy"

// Options configure one episode's endpoint.
type Options struct {
	// Model is the policy's tokenizer and chat side (serve.ByteModel for Temper's byte-level models).
	Model *serve.Model
	// Version is the policy version every recorded call carries.
	Version int
	// Seed seeds the requests that carry no seed of their own: request k (from 0) samples with
	// SeedFor(Seed, k), so that an agent that sets none still gets the same tokens when its episode
	// is replayed.
	Seed uint64
	// MaxCalls bounds the model calls of the episode; later requests are refused (400,
	// episode_call_budget). 0: no bound.
	MaxCalls int
}

// SeedFor is the seed of request k of an episode seeded seed, when the request has none. It stays
// below 2^53, so that a JavaScript agent can carry it exactly.
func SeedFor(seed uint64, k int) int64 {
	return int64(sample.SplitMix64(seed^uint64(k+1)*0x9e3779b97f4a7c15) & (1<<53 - 1))
}

// Episode is one agent episode's model endpoint: an OpenAI-compatible server (internal/serve) over
// its own continuous batch of the policy, one row at a time, that records every finished call.
type Episode struct {
	opts Options
	srv  *serve.Server
	http *http.Server
	done chan struct{}

	mu       sync.Mutex
	calls    []episode.Call
	requests int // completion requests received (seeds and the call budget count them)
}

// Serve serves an episode's endpoint on ln through dec (a fresh continuous batch of the policy,
// which the episode owns until Close). Requests are decoded one row at a time (serve's MaxBatch 1:
// a request may not ask for n > 1), so a call's tokens and log-probabilities depend on its own
// prompt, parameters and seed only, never on what else runs on the worker.
func Serve(ln net.Listener, dec serve.Engine, opts Options) (*Episode, error) {
	if opts.Model == nil {
		return nil, fmt.Errorf("gateway: serve: no model")
	}
	if opts.MaxCalls < 0 {
		return nil, fmt.Errorf("gateway: serve: max calls %d: want >= 0", opts.MaxCalls)
	}
	e := &Episode{opts: opts, done: make(chan struct{})}
	e.srv = serve.New(opts.Model, dec, serve.Options{
		Scheduler: serve.SchedulerOptions{MaxBatch: 1, MaxQueue: 64},
		OnCall:    e.record,
	})
	e.http = &http.Server{Handler: e.handler(e.srv.Handler()), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(e.done)
		_ = e.http.Serve(ln) // ends with ErrServerClosed at Close
	}()
	return e, nil
}

// record keeps one finished request's choices as calls, in the order they finished.
func (e *Episode) record(c serve.Call) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ch := range c.Choices {
		e.calls = append(e.calls, episode.Call{Prompt: c.Prompts[ch.Prompt], Tokens: ch.Tokens, LogProbs: ch.LogProbs, Version: e.opts.Version})
	}
}

// handler counts completion requests, refuses those past the call budget, and gives a request
// without a seed the episode's seed for its index.
func (e *Episode) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || (r.URL.Path != "/v1/chat/completions" && r.URL.Path != "/v1/completions") {
			next.ServeHTTP(w, r)
			return
		}
		e.mu.Lock()
		k := e.requests
		e.requests++
		e.mu.Unlock()
		if e.opts.MaxCalls > 0 && k >= e.opts.MaxCalls {
			writeError(w, http.StatusBadRequest, "episode_call_budget",
				fmt.Sprintf("this episode may call the model %d times (rollout.agent.max_calls); request %d refused", e.opts.MaxCalls, k+1))
			return
		}
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				writeError(w, http.StatusRequestEntityTooLarge, "request_too_large", fmt.Sprintf("request body over %d bytes", maxBody))
				return
			}
			writeError(w, http.StatusBadRequest, "", fmt.Sprintf("read request body: %v", err))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(withSeed(body, SeedFor(e.opts.Seed, k))))
		r.ContentLength = -1
		next.ServeHTTP(w, r)
	})
}

// maxBody bounds a request body, as serve does.
const maxBody = 32 << 20

// withSeed returns body with "seed": seed added when it is a JSON object without a seed (or with
// a null one); anything else is passed on as it is, for the server to judge.
func withSeed(body []byte, seed int64) []byte {
	var m map[string]json.RawMessage
	if json.Unmarshal(body, &m) != nil || m == nil {
		return body
	}
	if s, ok := m["seed"]; ok && string(bytes.TrimSpace(s)) != "null" {
		return body
	}
	m["seed"] = json.RawMessage(fmt.Sprint(seed))
	out, err := json.Marshal(m)
	if err != nil {
		return body
	}
	return out
}

// writeError answers in OpenAI's error schema.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": msg, "type": "invalid_request_error", "param": nil, "code": code}})
}

// Close stops serving: it closes the listener and every connection, ends the requests still
// running, and waits until the batch is empty and no handler runs, so that the caller may close
// the decoder. It returns the calls recorded.
func (e *Episode) Close() []episode.Call {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e.srv.Close()            // running requests end (503); the scheduler leaves every row
	_ = e.http.Shutdown(ctx) // the listener, idle connections, and handlers as they return
	_ = e.http.Close()       // whatever is still open after the timeout
	<-e.done
	return e.Calls()
}

// Calls are the calls recorded so far, in the order they finished.
func (e *Episode) Calls() []episode.Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]episode.Call(nil), e.calls...)
}

// Requests is the number of completion requests received (refused ones included).
func (e *Episode) Requests() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.requests
}
