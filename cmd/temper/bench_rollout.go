package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/activities/rollout"
	"github.com/temperml/temper/workers"
	"github.com/temperml/temper/workflows"
)

// benchRolloutConfig is the GRPO phase of `bench rl --rollout-workers`: sync, four shards of 512
// samples (256 prompts × 8, a DAPO-sized batch; hot sampling so that every sample is long), so the
// generation of an iteration can spread over up to four rollout workers. Shards must be large
// enough that generating them outweighs scheduling them: at 32 prompts (0.24 s of generation on one
// core) two workers were 1.63× one, at 256 prompts (1.6 s) 1.79× and 2.06× (2-core AVX-512 machine,
// quiet). extra (JSON) overrides any field.
const benchRolloutConfig = `{"data":{"task":"add2","heldout_examples":50},"iterations":%d,"prompts":256,"group":8,
	"max_new_tokens":48,"temperature":5,"rollout":{"shards":4},"loss":{"kl_beta":0},
	"reward":{"verifiers":[{"name":"format","params":{"regex":["^9"]}}]},
	"mode":"sync","eval_every":0,"eval":{"before":false,"examples":50,"max_new_tokens":4}}`

// parseCounts reads "1,2" as worker counts.
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > runtime.NumCPU() {
			return nil, usageErr("--rollout-workers %q: want counts from 1 to %d (this machine's CPUs), e.g. 1,2", s, runtime.NumCPU())
		}
		out = append(out, n)
	}
	return out, nil
}

// runBenchRolloutWorkers measures how rollout generation scales with rollout worker processes: one
// embedded server runs the workflow, trainer and reward roles; for each count n, n `temper worker
// --roles rollout` processes, each held to one core (GOMAXPROCS=1 and taskset on its own CPU, the
// highest-numbered ones), generate the shards of the same GRPO phase from the same SFT checkpoint.
// The figure is an iteration's generation wall time (first shard scheduled to last shard done, from
// the history), the median over the iterations after the first (which compiles the model in each new
// process); speed-ups are against the first count, in the same run.
func runBenchRolloutWorkers(ctx context.Context, counts []int, iterations int, extra string, asJSON bool) error {
	if _, err := exec.LookPath("taskset"); err != nil {
		return fmt.Errorf("bench rl --rollout-workers: taskset (util-linux) pins each rollout worker to one CPU: %w", err)
	}
	if iterations < 2 {
		return usageErr("bench rl --rollout-workers: --iterations %d: want at least 2 (the first compiles the model and is not counted)", iterations)
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	home, err := os.MkdirTemp("", "temper-bench-rollout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(home)
	st, err := workers.StartStack(workers.StackOptions{Home: home, Ephemeral: true, UIPort: -1,
		Roles: []string{workflows.QueueTemper, workflows.QueueTrainer, workflows.QueueReward}})
	if err != nil {
		return err
	}
	defer st.Close()
	base, err := benchRLPipeline(1, "")
	if err != nil {
		return err
	}
	base.Phases, base.Store = base.Phases[:1], defaultStore(home)
	stamp := time.Now().Unix()
	fmt.Fprintln(os.Stderr, "bench rl --rollout-workers: training the SFT checkpoint")
	sft, err := benchWait(ctx, st.Client, fmt.Sprintf("bench-rollout-%d-sft", stamp), base)
	if err != nil {
		return err
	}
	cfg, err := mergeJSONConfig(fmt.Sprintf(benchRolloutConfig, iterations), extra)
	if err != nil {
		return usageErr("--rl-config: %v", err)
	}
	rep := map[string]float64{"iterations": float64(iterations)}
	var first float64
	for _, n := range counts {
		in := workflows.PipelineInput{Name: "bench-rollout", Store: base.Store, Seed: 1, Phases: []workflows.PhaseSpec{
			{Name: "grpo", Kind: "grpo", From: sft.Phases[0].Checkpoint, Config: cfg}}}
		if err := in.Validate(); err != nil {
			return err
		}
		stop, err := startPinnedRollouts(exe, st.Address, home, n)
		if err != nil {
			return err
		}
		id := fmt.Sprintf("bench-rollout-%d-w%d", stamp, n)
		fmt.Fprintf(os.Stderr, "bench rl --rollout-workers: %d rollout worker(s), %d iterations\n", n, iterations)
		out, err := benchWait(ctx, st.Client, id, in)
		stop()
		if err != nil {
			return err
		}
		spans, shards, err := generationSpans(ctx, st.Client, id+".grpo")
		if err != nil {
			return err
		}
		if len(spans) < 2 {
			return fmt.Errorf("bench rl --rollout-workers: %d iterations with generation found in %s.grpo", len(spans), id)
		}
		med := median(spans[1:])
		if first == 0 {
			first = med
		}
		k := fmt.Sprintf("workers_%d_", n)
		rep[k+"generate_seconds"], rep[k+"speedup"], rep[k+"shards"] = med, first/med, float64(shards)
		rep[k+"reward_mean"] = out.Phases[0].Metrics["reward_mean"]
		if shards < n {
			fmt.Fprintf(os.Stderr, "bench rl --rollout-workers: only %d shards per iteration for %d workers (raise rollout.shards, or prompts)\n", shards, n)
		}
	}
	if asJSON {
		b, _ := json.Marshal(rep)
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	fmt.Fprintf(stdout, "GRPO rollout generation per iteration (median of iterations 2..%d), each rollout worker on one core, measured in one run:\n", iterations)
	for _, n := range counts {
		k := fmt.Sprintf("workers_%d_", n)
		fmt.Fprintf(stdout, "  %d worker(s): %.3f s (%d shards)  speed-up %.2f× vs %d\n", n, rep[k+"generate_seconds"], int(rep[k+"shards"]), rep[k+"speedup"], counts[0])
	}
	return nil
}

// benchWait runs a pipeline to its end.
func benchWait(ctx context.Context, c client.Client, id string, in workflows.PipelineInput) (workflows.PipelineOutput, error) {
	var out workflows.PipelineOutput
	run, err := startPipeline(ctx, c, id, in)
	if err != nil {
		return out, err
	}
	err = run.Get(ctx, &out)
	return out, err
}

// startPinnedRollouts starts n rollout worker processes, worker i on CPU NumCPU-1-i with GOMAXPROCS=1;
// stop ends them (SIGTERM, then waits).
func startPinnedRollouts(exe, addr, home string, n int) (stop func(), err error) {
	var procs []*exec.Cmd
	stop = func() {
		for _, p := range procs {
			_ = p.Process.Signal(syscall.SIGTERM)
		}
		for _, p := range procs {
			_ = p.Wait()
		}
	}
	for i := range n {
		cpu := runtime.NumCPU() - 1 - i
		cmd := exec.Command("taskset", "-c", strconv.Itoa(cpu), exe, "worker", "--roles", workflows.QueueRollout, "--temporal", addr, "--rollout-slots", "1")
		cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
		f, err := os.Create(filepath.Join(home, fmt.Sprintf("rollout-%d-of-%d.log", i+1, n)))
		if err != nil {
			stop()
			return nil, err
		}
		cmd.Stdout, cmd.Stderr = f, f
		err = cmd.Start()
		f.Close()
		if err != nil {
			stop()
			return nil, fmt.Errorf("bench rl: start rollout worker on CPU %d: %w", cpu, err)
		}
		procs = append(procs, cmd)
	}
	return stop, nil
}

// generationSpans returns, per iteration in order, the wall time from its first rollout.Generate
// shard scheduled to its last completed (self-correction retries not counted), and the most shards
// an iteration had.
func generationSpans(ctx context.Context, c client.Client, wfID string) ([]float64, int, error) {
	type span struct {
		from, to time.Time
		shards   int
	}
	byIter := map[int]*span{}
	iterOf := map[int64]int{}
	it := c.GetWorkflowHistory(ctx, wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, 0, fmt.Errorf("history of %s: %w", wfID, err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.ActivityType.GetName() == rollout.GenerateName {
			var in rollout.GenerateInput
			if p := a.GetInput().GetPayloads(); len(p) == 1 && json.Unmarshal(p[0].GetData(), &in) == nil && !strings.HasPrefix(in.Tag, "retry") {
				s := byIter[in.Iteration]
				if s == nil {
					s = &span{from: e.EventTime.AsTime()}
					byIter[in.Iteration] = s
				}
				s.shards++
				iterOf[e.EventId] = in.Iteration
			}
		}
		if a := e.GetActivityTaskCompletedEventAttributes(); a != nil {
			if i, ok := iterOf[a.ScheduledEventId]; ok && e.EventTime.AsTime().After(byIter[i].to) {
				byIter[i].to = e.EventTime.AsTime()
			}
		}
	}
	var iters []int
	most := 0
	for i, s := range byIter {
		if !s.to.IsZero() {
			iters = append(iters, i)
			most = max(most, s.shards)
		}
	}
	sort.Ints(iters)
	out := make([]float64, len(iters))
	for k, i := range iters {
		out[k] = byIter[i].to.Sub(byIter[i].from).Seconds()
	}
	return out, most, nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
