package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/algorithms/stats"
	"github.com/temperml/temper/internal/usage"
	"github.com/temperml/temper/workflows"
)

// rolloutConfig is the GRPO phase of `bench rl --rollout-workers`: sync, four shards of 512 samples
// (256 prompts × 8, a DAPO-sized batch; hot sampling so that every sample is long), so the generation
// of an iteration can spread over up to four rollout workers. Shards must be large enough that
// generating them outweighs scheduling them: at 32 prompts (0.24 s of generation on one core) two
// workers were 1.63× one, at 256 prompts (1.6 s) 1.79× and 2.06× (2-core AVX-512 machine, quiet).
const rolloutConfig = `{"data":{"task":"add2","heldout_examples":50},"iterations":%d,"prompts":256,"group":8,
	"max_new_tokens":48,"temperature":5,"rollout":{"shards":4},"loss":{"kl_beta":0},
	"reward":{"verifiers":[{"name":"format","params":{"regex":["^9"]}}]},
	"mode":"sync","eval_every":0,"eval":{"before":false,"examples":50,"max_new_tokens":4}}`

// RolloutOptions size `temper bench rl --rollout-workers`.
type RolloutOptions struct {
	Workers    []int  // rollout worker process counts to measure, each at most runtime.NumCPU()
	Iterations int    // GRPO iterations per count; the first is not counted
	RLConfig   string // JSON merged into the GRPO phase's config
	// Exe is the temper binary whose `worker` command runs the rollout workers (default: this process's
	// executable).
	Exe string
	Log io.Writer // progress
}

// RolloutReport is the median generation seconds per iteration, speed-up and shards of each worker
// count, keyed as the JSON output names them.
type RolloutReport struct {
	Iterations int
	Workers    []int
	Values     map[string]float64
}

// RolloutWorkers measures how rollout generation scales with rollout worker processes: one embedded
// server runs the workflow, trainer and reward roles; for each count n, n `temper worker --roles
// rollout` processes, each held to one core (GOMAXPROCS=1 and taskset on its own CPU, the
// highest-numbered ones), generate the shards of the same GRPO phase from the same SFT checkpoint.
// The figure is an iteration's generation wall time (first shard scheduled to last shard done, from
// the history), the median over the iterations after the first (which compiles the model in each new
// process); speed-ups are against the first count, in the same run.
func RolloutWorkers(ctx context.Context, o RolloutOptions) (*RolloutReport, error) {
	if _, err := exec.LookPath("taskset"); err != nil {
		return nil, fmt.Errorf("bench rl --rollout-workers: taskset (util-linux) pins each rollout worker to one CPU: %w", err)
	}
	if o.Iterations < 2 {
		return nil, usage.Errorf("bench rl --rollout-workers: --iterations %d: want at least 2 (the first compiles the model and is not counted)", o.Iterations)
	}
	if o.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		o.Exe = exe
	}
	st, err := newStack("bench-rollout", []string{workflows.QueueTemper, workflows.QueueTrainer, workflows.QueueReward})
	if err != nil {
		return nil, err
	}
	defer st.close()
	base, err := RLPipeline(1, "")
	if err != nil {
		return nil, err
	}
	base.Phases, base.Store = base.Phases[:1], st.store()
	stamp := time.Now().Unix()
	log := logTo(o.Log)
	fmt.Fprintln(log, "bench rl --rollout-workers: training the SFT checkpoint")
	sft, err := st.run(ctx, fmt.Sprintf("bench-rollout-%d-sft", stamp), base)
	if err != nil {
		return nil, err
	}
	cfg, err := mergeJSON(fmt.Sprintf(rolloutConfig, o.Iterations), o.RLConfig)
	if err != nil {
		return nil, usage.Errorf("--rl-config: %v", err)
	}
	rep := &RolloutReport{Iterations: o.Iterations, Workers: o.Workers, Values: map[string]float64{"iterations": float64(o.Iterations)}}
	var first float64
	for _, n := range o.Workers {
		in := workflows.PipelineInput{Name: "bench-rollout", Store: base.Store, Seed: 1, Phases: []workflows.PhaseSpec{
			{Name: "grpo", Kind: "grpo", From: sft.Phases[0].Checkpoint, Config: cfg}}}
		if err := in.Validate(); err != nil {
			return nil, err
		}
		if err := st.measureRollouts(ctx, o, n, fmt.Sprintf("bench-rollout-%d-w%d", stamp, n), in, rep, &first); err != nil {
			return nil, err
		}
	}
	return rep, nil
}

// measureRollouts runs in as workflow id with n pinned rollout workers and records its figures in rep;
// first is the first count's median, which speed-ups are against.
func (st *stack) measureRollouts(ctx context.Context, o RolloutOptions, n int, id string, in workflows.PipelineInput, rep *RolloutReport, first *float64) error {
	log := logTo(o.Log)
	stop, err := startPinnedRollouts(o.Exe, st.Address, st.home, n)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "bench rl --rollout-workers: %d rollout worker(s), %d iterations\n", n, o.Iterations)
	out, err := st.run(ctx, id, in)
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
	med := stats.Median(spans[1:])
	if *first == 0 {
		*first = med
	}
	k := fmt.Sprintf("workers_%d_", n)
	rep.Values[k+"generate_seconds"], rep.Values[k+"speedup"], rep.Values[k+"shards"] = med, *first/med, float64(shards)
	rep.Values[k+"reward_mean"] = out.Phases[0].Metrics["reward_mean"]
	if shards < n {
		fmt.Fprintf(log, "bench rl --rollout-workers: only %d shards per iteration for %d workers (raise rollout.shards, or prompts)\n", shards, n)
	}
	return nil
}

func (r *RolloutReport) JSON() ([]byte, error) { return json.Marshal(r.Values) }

func (r *RolloutReport) Text(w io.Writer) {
	fmt.Fprintf(w, "GRPO rollout generation per iteration (median of iterations 2..%d), each rollout worker on one core, measured in one run:\n", r.Iterations)
	for _, n := range r.Workers {
		k := fmt.Sprintf("workers_%d_", n)
		fmt.Fprintf(w, "  %d worker(s): %.3f s (%d shards)  speed-up %.2f× vs %d\n", n, r.Values[k+"generate_seconds"], int(r.Values[k+"shards"]), r.Values[k+"speedup"], r.Workers[0])
	}
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

// genSpan is one iteration's generation: first shard scheduled, last shard completed.
type genSpan struct {
	from, to time.Time
	shards   int
}

// generationSpans returns, per iteration in order, the wall time from its first rollout.Generate
// shard scheduled to its last completed (self-correction retries not counted), and the most shards
// an iteration had.
func generationSpans(ctx context.Context, c client.Client, wfID string) ([]float64, int, error) {
	byIter := map[int]*genSpan{}
	iterOf := map[int64]int{}
	it := c.GetWorkflowHistory(ctx, wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			return nil, 0, fmt.Errorf("history of %s: %w", wfID, err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.ActivityType.GetName() == rolloutapi.GenerateName {
			var in rolloutapi.GenerateInput
			if p := a.GetInput().GetPayloads(); len(p) == 1 && json.Unmarshal(p[0].GetData(), &in) == nil && !strings.HasPrefix(in.Tag, "retry") {
				s := byIter[in.Iteration]
				if s == nil {
					s = &genSpan{from: e.EventTime.AsTime()}
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
