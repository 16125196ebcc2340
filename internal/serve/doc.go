// Package serve is Temper's OpenAI-compatible inference server: `temper serve` and `temper bench
// serve`. It speaks GET /v1/models, POST /v1/completions and POST /v1/chat/completions (streaming
// as server-sent events) over one continuous batch of the model's cached decode.
//
// Contract:
//   - Requests: a field or value the server does not implement is refused by name in OpenAI's
//     error schema ({"error": {"message", "type", "param", "code"}}): 400 for bad input, 404 for an
//     unknown model or route, 413 when the prompt (plus max_tokens) is over the model's context or
//     the KV-cache budget, 429 when the queue is full, 503 when the server is closing or the engine
//     failed. Chat messages are written by the model's own chat template (algorithms/chat), or
//     Temper's DefaultChat for byte-level models; tool calls the model writes in its own format
//     come back as tool_calls.
//   - Batching: a Scheduler owns one Engine (a continuous batch: tpu.Decoder). Between two decode
//     steps it drops cancelled rows, admits queued requests while the KV cache of the batch at its
//     largest (every row at prompt + max_tokens) stays within the budget, prefills the newcomers in
//     one call, and samples every row on the host with its own sampler.
//   - Determinism: choice i of a request with seed s samples with its own RNG seeded
//     sample.Options{Seed: s}.SeedFor(i), one uniform per token, so its tokens depend on (model,
//     prompt, parameters, seed) and on the logits only. The logits of a row do not depend on its
//     companions up to float summation order (the kernels may sum in another order at another
//     batch size: docs/serve.md has what was measured); a request without a seed draws one.
//   - Log-probabilities are the model's own (temperature 1, no top-p truncation), as Temper's
//     rollouts record them; a client disconnect cancels the request and frees its rows.
//   - Observer (Options.OnCall) sees every finished choice's prompt ids, completion ids and
//     log-probabilities: what a gateway recording agent trajectories needs (token in, token out).
//
// Imports: algorithms/..., the standard library and Prometheus' client; the engine comes in as an
// interface, so any layer that may use net can serve a model (tpu is wired in by cmd/temper).
package serve
