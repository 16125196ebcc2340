package rollout

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/reward/sandbox"
	"github.com/temperml/temper/activities/rollout/gateway"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/episode"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/internal/serve"
)

// agentDir is where rollout.agent.dir appears inside the sandbox (the agent's working directory).
const agentDir = "/agent"

// agentPath is the sandbox's PATH, where a bare command name is looked up.
var agentPath = []string{"/usr/local/bin", "/usr/bin", "/bin"}

// AgentTask is what an agent reads on its standard input: one JSON object.
type AgentTask struct {
	ID     string `json:"id"`
	Prompt string `json:"prompt"`
	Task   string `json:"task,omitempty"`
	// Reference is the verifier's reference (the rollout's, else its answer as a JSON string): for
	// agents whose tools need it (a checker); the phase's verifiers score the answer regardless.
	Reference json.RawMessage `json:"reference,omitempty"`
	// Seed seeds the episode: an agent passes it (plus its call index) as each request's seed, so
	// that a replayed episode samples the same tokens. Below 2^53, exact in JavaScript.
	Seed        int64   `json:"seed"`
	Temperature float64 `json:"temperature"`
	MaxTokens   int     `json:"max_tokens"` // per model call (the phase's max_new_tokens)
	MaxCalls    int     `json:"max_calls"`
	Model       string  `json:"model"`
	Mode        string  `json:"mode"` // "train" (rollouts) or "eval" (held-out, greedy)
	// Attempt counts the episode's attempts from 1: a retried episode (its agent failed, or the
	// worker died) starts over in a fresh sandbox with the same seed.
	Attempt int `json:"attempt"`
}

// agentOutcome is one episode as the agent played it: its calls and answer, after how many
// attempts; failed names why the last attempt failed when every one did.
type agentOutcome struct {
	calls    []episode.Call
	answer   string
	attempts int
	failures int
	failed   string
}

// agentRunner plays agent episodes against one policy.
type agentRunner struct {
	sb      *sandbox.Sandbox
	decs    gateway.Decoders
	model   *serve.Model
	spec    rolloutapi.AgentSpec
	path    string
	args    []string
	mounts  []sandbox.Mount
	dir     string
	env     []string
	version int
	logf    func(msg string, kv ...any)
}

// newAgentRunner checks the spec against this worker (its sandbox, the policy engine, the command
// and directory) and fills in the defaults. A bad spec is a non-retryable error naming the field.
func (a *Activities) newAgentRunner(ctx context.Context, spec rolloutapi.AgentSpec, eng train.Engine, cfg model.Config, version int) (*agentRunner, error) {
	bad := func(format string, args ...any) error {
		msg := fmt.Sprintf("rollout: agent: "+format, args...)
		return temporal.NewNonRetryableApplicationError(msg, "InvalidInput", errors.New(msg))
	}
	var sb *sandbox.Sandbox
	if a.Sandbox != nil {
		sb = a.Sandbox()
	}
	if sb == nil {
		return nil, bad("agent episodes run in the code sandbox, which is unavailable on this rollout worker (it needs Linux and root; the worker's log says why)")
	}
	if sb.Mode() != sandbox.ModeIsolated {
		return nil, bad("agent episodes need the isolated sandbox (a network namespace of their own); this worker has %s: %s", sb.Mode(), sb.ModeReason())
	}
	decs, ok := eng.(gateway.Decoders)
	if !ok {
		return nil, bad("the policy engine of this worker (%T) cannot serve agents (no continuous batch)", eng)
	}
	m, err := serve.ByteModel(gateway.ModelName, cfg)
	if err != nil {
		return nil, bad("%v", err)
	}
	spec.Timeout = cmp.Or(spec.Timeout, rolloutapi.DefaultAgentTimeout)
	spec.MaxCalls = cmp.Or(spec.MaxCalls, rolloutapi.DefaultAgentMaxCalls)
	spec.MemoryMiB = cmp.Or(spec.MemoryMiB, rolloutapi.DefaultAgentMemoryMiB)
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return nil, bad("rollout.agent.command is empty: give the program and its arguments")
	}
	r := &agentRunner{sb: sb, decs: decs, model: m, spec: spec, args: spec.Command[1:], version: version,
		logf: func(string, ...any) {}}
	if activity.IsActivity(ctx) {
		r.logf = activity.GetLogger(ctx).Warn
	}
	if spec.Dir != "" {
		dir, err := filepath.Abs(spec.Dir)
		if err != nil {
			return nil, bad("rollout.agent.dir %q: %v", spec.Dir, err)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return nil, bad("rollout.agent.dir %q: not a directory on this rollout worker (%s)", spec.Dir, dir)
		}
		r.mounts, r.dir = []sandbox.Mount{{Src: dir, Dst: agentDir}}, agentDir
	}
	if r.path, err = agentCommand(spec.Command[0], r.dir); err != nil {
		return nil, bad("rollout.agent.command[0]: %v", err)
	}
	keys := make([]string, 0, len(spec.Env))
	for k := range spec.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		r.env = append(r.env, k+"="+spec.Env[k])
	}
	return r, nil
}

// agentCommand is the program's path inside the sandbox: a bare name is looked up in the
// sandbox's PATH (on this host, whose /usr and /bin the sandbox shows), a relative path is taken
// from the agent's directory.
func agentCommand(name, dir string) (string, error) {
	switch {
	case filepath.IsAbs(name):
		return name, nil
	case strings.Contains(name, "/"):
		if dir == "" {
			return "", fmt.Errorf("%q is relative: set rollout.agent.dir (it is the working directory, %s inside)", name, agentDir)
		}
		return filepath.Join(dir, name), nil
	}
	for _, d := range agentPath {
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%q: not found in the sandbox's PATH (%s)", name, strings.Join(agentPath, ":"))
}

// play runs one episode: an attempt is a fresh sandbox with a fresh endpoint (its own network
// namespace and continuous batch); a failed one (non-zero exit, a limit, the timeout, or no model
// call) is run again, up to spec.Retries times, with the same task and seed. The error is for
// the worker's failures (the sandbox, the engine, the activity's end), not the agent's.
func (r *agentRunner) play(ctx context.Context, task AgentTask, seed uint64) (agentOutcome, error) {
	var out agentOutcome
	for attempt := 0; attempt <= r.spec.Retries; attempt++ {
		out.attempts++
		task.Attempt = attempt + 1
		stdin, err := json.Marshal(task)
		if err != nil {
			return agentOutcome{}, fmt.Errorf("rollout: agent %s: %w", task.ID, err)
		}
		calls, answer, failed, err := r.attempt(ctx, stdin, seed)
		if err != nil {
			return agentOutcome{}, fmt.Errorf("rollout: agent %s attempt %d: %w", task.ID, attempt+1, err)
		}
		if failed == "" {
			out.calls, out.answer, out.failed = calls, answer, ""
			return out, nil
		}
		out.failures++
		out.failed = failed
		r.logf("rollout: agent attempt failed", "episode", task.ID, "attempt", attempt+1, "of", r.spec.Retries+1, "why", failed)
	}
	return out, nil
}

// attempt runs the agent once; failed says why the agent's attempt does not count ("" when it
// does).
func (r *agentRunner) attempt(ctx context.Context, stdin []byte, seed uint64) (calls []episode.Call, answer, failed string, err error) {
	lb, err := sandbox.NewLoopback()
	if err != nil {
		return nil, "", "", err
	}
	defer lb.Close()
	dec, err := r.decs.NewDecoder()
	if err != nil {
		return nil, "", "", err
	}
	defer dec.Close()
	ep, err := gateway.Serve(lb.Listener(), dec, gateway.Options{Model: r.model, Version: r.version, Seed: seed, MaxCalls: r.spec.MaxCalls})
	if err != nil {
		return nil, "", "", err
	}
	env := append([]string{"OPENAI_BASE_URL=http://" + lb.Addr() + "/v1", "OPENAI_API_KEY=temper", "OPENAI_MODEL=" + gateway.ModelName}, r.env...)
	mem := int64(r.spec.MemoryMiB) << 20
	res, runErr := r.sb.Run(ctx, sandbox.Command{Path: r.path, Args: r.args, Env: env, Stdin: stdin, Net: lb, Mounts: r.mounts, Dir: r.dir,
		Limits:       sandbox.Limits{Timeout: r.spec.Timeout.D(), Memory: mem, Procs: 64, OpenFiles: 256},
		AddressSpace: int64(r.spec.AddressSpaceGiB) << 30})
	calls = ep.Close() // before the decoder closes (deferred): the batch is empty now
	if runErr != nil {
		return nil, "", "", runErr
	}
	if f := res.Failure(); f != "" {
		return nil, "", fmt.Sprintf("%s: %s", f, tail(res.Stderr, 400)), nil
	}
	if len(calls) == 0 {
		return nil, "", "the agent made no model call: " + tail(res.Stderr, 400), nil
	}
	return calls, strings.TrimSpace(string(res.Stdout)), "", nil
}

// tail is the end of b, at most n bytes, on one line.
func tail(b []byte, n int) string {
	b = bytes.TrimSpace(b)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.ReplaceAll(string(b), "\n", " | ")
}

// playAll plays tasks concurrently (as many at once as the sandbox has slots), calling done after
// each; outcomes are in tasks' order whatever finishes first.
func (r *agentRunner) playAll(ctx context.Context, tasks []AgentTask, seeds []uint64, done func()) ([]agentOutcome, error) {
	out := make([]agentOutcome, len(tasks))
	errs := make([]error, len(tasks))
	sem := make(chan struct{}, max(1, r.sb.Config().Slots))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range tasks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				errs[i] = ctx.Err()
				return
			}
			defer func() { <-sem }()
			if out[i], errs[i] = r.play(ctx, tasks[i], seeds[i]); errs[i] != nil {
				cancel() // the worker failed: the activity is retried, the rest is moot
				return
			}
			mu.Lock()
			done()
			mu.Unlock()
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// agentReference is what an agent gets as the verifier's reference: the rollout's, else its
// answer as a JSON string.
func agentReference(ref json.RawMessage, answer string) json.RawMessage {
	if len(ref) > 0 {
		return ref
	}
	if answer == "" {
		return nil
	}
	b, _ := json.Marshal(answer) // a string always marshals
	return b
}

// episodeSeed is the seed an agent gets for sample seed s (JavaScript-exact).
func episodeSeed(s uint64) int64 { return int64(s & (1<<53 - 1)) }

// runAgents plays rs as agent episodes and fills each rollout from its trajectory: the first
// segment in PromptTokens, Tokens, LogProbs and Policy, any further one in Segments, the agent's
// standard output as the completion. A group with a sample that failed past its retries is
// dropped whole (never a partial group). It returns the rollouts kept, their tokens, and the
// groups dropped and attempts failed.
func (a *Activities) runAgents(ctx context.Context, shared *sharedEngine, in rolloutapi.GenerateInput, rs []rollout.Rollout, seeds []uint64,
	beat func(done int)) (kept []rollout.Rollout, tokens, dropped, failures int, err error) {
	r, err := a.newAgentRunner(ctx, *in.Agent, shared.eng, shared.cfg, in.PolicyVersion)
	if err != nil {
		return nil, 0, 0, 0, err
	}
	tasks := make([]AgentTask, len(rs))
	for i, ro := range rs {
		tasks[i] = AgentTask{ID: ro.ID, Prompt: ro.Prompt, Task: ro.Task, Reference: agentReference(ro.Reference, ro.Answer),
			Seed: episodeSeed(seeds[i]), Temperature: in.Temperature, MaxTokens: in.MaxNewTokens, MaxCalls: r.spec.MaxCalls,
			Model: gateway.ModelName, Mode: "train"}
	}
	n := 0
	outs, err := r.playAll(ctx, tasks, seeds, func() { n++; beat(n) })
	if err != nil {
		return nil, 0, 0, 0, err
	}
	failedGroup := map[int]bool{}
	for i, o := range outs {
		failures += o.failures
		if o.failed != "" {
			failedGroup[rs[i].Group] = true
		}
	}
	for i, o := range outs {
		if failedGroup[rs[i].Group] {
			continue
		}
		ro := rs[i]
		segs, err := episode.Assemble(o.calls)
		if err != nil { // the gateway recorded it: a bug here, not the agent's
			return nil, 0, 0, 0, fmt.Errorf("rollout: agent %s: %w", ro.ID, err)
		}
		fillAgent(&ro, segs, o, r.model.Tok.Decode)
		ro.PolicyVersion = in.PolicyVersion
		tokens += len(ro.Tokens)
		for _, s := range ro.Segments {
			tokens += len(s.Tokens)
		}
		kept = append(kept, ro)
	}
	return kept, tokens, len(failedGroup), failures, nil
}

// fillAgent writes an agent's episode into its rollout.
func fillAgent(r *rollout.Rollout, segs []episode.Segment, o agentOutcome, decode func([]int) string) {
	first := segs[0]
	r.PromptTokens, r.Tokens, r.LogProbs, r.Policy = first.Prompt, first.Tokens, first.LogProbs, first.Policy
	r.Segments = nil
	for _, s := range segs[1:] {
		r.Segments = append(r.Segments, rollout.Segment{PromptTokens: s.Prompt, Tokens: s.Tokens, LogProbs: s.LogProbs, Policy: s.Policy})
	}
	r.Completion = o.answer
	r.StopReason = "agent"
	var transcript strings.Builder
	for i, s := range segs {
		if i > 0 {
			transcript.WriteString("\n[segment " + fmt.Sprint(i+1) + "] " + decode(s.Prompt))
		}
		transcript.WriteString(decode(s.Tokens))
	}
	r.Ep = &rollout.Episode{Turns: len(o.calls), End: "agent", Transcript: transcript.String(), Calls: len(o.calls), Attempts: o.attempts}
}

// AgentEval measures a checkpoint by its agent: every held-out example (the first Eval.Examples)
// is played greedily (temperature 0) and the agent's standard output checked by the example's task
// (exact match); an episode that fails past its retries counts as wrong. Metrics: heldout_n,
// heldout_exact_match, heldout_agent_failed (share of episodes that failed), heldout_agent_calls
// (model calls per episode), heldout_agent_segments (segments per episode).
func (a *Activities) AgentEval(ctx context.Context, in rolloutapi.AgentEvalInput) (trainapi.EvalOutput, error) {
	out, err := a.agentEval(ctx, in)
	return out, train.Permanent(err)
}

func (a *Activities) agentEval(ctx context.Context, in rolloutapi.AgentEvalInput) (trainapi.EvalOutput, error) {
	ev := in.Eval
	_, heldout, err := train.Examples(ctx, a.Ckpt, ev.Data, ev.Seed)
	if err != nil {
		return trainapi.EvalOutput{}, err
	}
	if ev.Examples > 0 && ev.Examples < len(heldout) {
		heldout = heldout[:ev.Examples]
	}
	if len(heldout) == 0 {
		return trainapi.EvalOutput{}, train.BadInput(fmt.Errorf("rollout: agent eval %s: no held-out examples (set data.heldout_examples or data.heldout)", ev.Checkpoint))
	}
	if ev.MaxNewTokens <= 0 {
		ev.MaxNewTokens = 32
	}
	shared, err := a.engines.acquire(ctx, ev.Checkpoint, a.loadPolicy)
	if err != nil {
		return trainapi.EvalOutput{}, err
	}
	defer a.engines.release(shared)
	r, err := a.newAgentRunner(ctx, in.Agent, shared.eng, shared.cfg, in.PolicyVersion)
	if err != nil {
		return trainapi.EvalOutput{}, err
	}
	tasks := make([]AgentTask, len(heldout))
	seeds := make([]uint64, len(heldout))
	for i, ex := range heldout {
		seeds[i] = seedFor(ev.Seed, -1, i, 0)
		tasks[i] = AgentTask{ID: fmt.Sprintf("heldout-%d", i), Prompt: ex.Prompt, Task: ex.Task, Reference: agentReference(nil, ex.Answer),
			Seed: episodeSeed(seeds[i]), Temperature: 0, MaxTokens: ev.MaxNewTokens, MaxCalls: r.spec.MaxCalls, Model: gateway.ModelName, Mode: "eval"}
	}
	n := 0
	outs, err := r.playAll(ctx, tasks, seeds, func() {
		n++
		activity.RecordHeartbeat(ctx, trainapi.Progress{Step: n, Total: len(tasks)})
	})
	if err != nil {
		return trainapi.EvalOutput{}, err
	}
	var correct, failed, calls, segments float64
	for i, o := range outs {
		if o.failed != "" {
			failed++
			continue
		}
		calls += float64(len(o.calls))
		if segs, err := episode.Assemble(o.calls); err == nil {
			segments += float64(len(segs))
		}
		if train.Passes(heldout[i], o.answer) {
			correct++
		}
	}
	total := float64(len(outs))
	metrics := map[string]float64{"heldout_n": total, "heldout_exact_match": correct / total, "heldout_agent_failed": failed / total}
	if played := total - failed; played > 0 {
		metrics["heldout_agent_calls"], metrics["heldout_agent_segments"] = calls/played, segments/played
	}
	if ev.Log != nil {
		if err := a.Ckpt.AppendMetrics(ctx, ev.Store, ev.Log.Run, ev.Log.Phase, []ckpt.MetricsRecord{{Kind: ckpt.RecordEval, Step: ev.Log.Step, Time: train.Now(), Metrics: metrics}}); err != nil {
			return trainapi.EvalOutput{}, fmt.Errorf("rollout: agent eval %s: %w", ev.Checkpoint, err)
		}
	}
	return trainapi.EvalOutput{Metrics: metrics}, nil
}
