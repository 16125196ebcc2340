// Package workflows is Temper's deterministic orchestration. Workflows see only references (checkpoint
// URIs, dataset cursors) and scalar metrics, never tensors; they call activities by name on role queues.
//
// Replay safety: no time.Now, math/rand, I/O, goroutines or map iteration here; the architecture test in
// internal/arch enforces the import side, the replay tests enforce the rest.
//
// Pipeline runs an ordered list of phases, each a child workflow whose kind registered itself with
// RegisterPhase, so later kinds (pretrain, sft, dpo, grpo, ...) need no change to Pipeline.
//
// The chunked training kinds (pretrain, sft, the preference kinds, reward, distill) are one driver, runChunked
// (chunked.go), which owns start / evaluate / chunk / keep-best / retain / continue-as-new and the typed
// LoopState; a kind describes only its activities (start, chunk, evaluate) and its score.
//
// The RL kinds (grpo and its family, cispo, ppo) are one run object, rlRun (rl.go, rl_step.go,
// rl_source.go, rl_backtrack.go; deep async in rl_async.go), whose rollouts come from one rolloutSource
// (inline, sharded, pipelined, deep); paths kept only for stored histories live in rl_legacy.go. Search
// (treesearch.go) makes data for later phases.
//
// Every pipeline and phase sets Temper's search attributes (search.go) behind GetVersion, and only where
// the namespace has them registered (the pipeline asks its workers once; PhaseInput.Search carries the
// answer), so a run on a cluster without them behaves as before.
//
// Steering (steer.go, steer_run.go, gate.go, pipeline_run.go): the RL and chunked phases take the
// Updates set, pause and resume and answer the query steer; a validator refuses a request before
// anything reaches the history; the loop applies what it accepted only at a boundary (between two
// iterations or chunks), so the same requests at the same boundaries make the same activity inputs.
// Pipelines forward those Updates to their running phase, decide gates between phases (approve,
// reject, when: conditions) and record a fork's lineage. All of it is behind the version
// "temper-steer", recorded only when something is applied: a run nobody steers records nothing new.
//
// The replay tests replay the histories the tests just made and the stored histories under
// testdata/histories (runs recorded by an earlier version of this code).
package workflows
