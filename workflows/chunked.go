package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/internal/config"
)

// ChunkSpec is the shape every chunked training phase shares. Kinds embed it in their config, so
// its fields sit at the top level of the phase's config, as they always have.
type ChunkSpec struct {
	Steps            int             `json:"steps" default:"200" help:"optimizer steps in the phase"`
	ChunkSteps       int             `json:"chunk_steps" default:"50" help:"steps per trainer activity; a checkpoint is committed after each"`
	MaxSeconds       float64         `json:"max_seconds" default:"0" help:"also stop after the chunk that reaches this much training wall time (0: no limit; steps still shapes the LR schedule)"`
	KeepLast         int             `json:"keep_last" default:"3" help:"checkpoints kept besides the best"`
	HeartbeatTimeout config.Duration `json:"heartbeat_timeout" default:"30s" help:"a trainer silent this long is presumed dead; its chunk is retried elsewhere"`
	InjectNaNAt      int             `json:"inject_nan_at,omitempty" help:"testing: step N (1-based) is treated as non-finite, as the engine treats a NaN loss"`
	Optimizer        trainapi.Optim  `json:"optimizer"`
}

// Validate names the bad field.
func (c ChunkSpec) Validate() error {
	if err := c.Optimizer.Validate(); err != nil {
		return err
	}
	switch {
	case c.Steps < 1:
		return &config.FieldError{Path: "steps", Msg: "must be >= 1"}
	case c.ChunkSteps < 1:
		return &config.FieldError{Path: "chunk_steps", Msg: "must be >= 1"}
	case !(c.MaxSeconds >= 0):
		return &config.FieldError{Path: "max_seconds", Msg: "must be >= 0"}
	case c.KeepLast < 1:
		return &config.FieldError{Path: "keep_last", Msg: "must be >= 1"}
	case c.HeartbeatTimeout.D() < time.Second:
		return &config.FieldError{Path: "heartbeat_timeout", Msg: "want at least 1s"}
	case c.InjectNaNAt < 0:
		return &config.FieldError{Path: "inject_nan_at", Msg: "must be >= 0"}
	}
	return nil
}

// defaultChunkSpec is every kind's default but for the step counts and the optimizer.
func defaultChunkSpec(steps, chunk int, optim trainapi.Optim) ChunkSpec {
	return ChunkSpec{Steps: steps, ChunkSteps: chunk, KeepLast: 3, HeartbeatTimeout: config.Duration(30 * time.Second), Optimizer: optim}
}

// EvalCadence says when a chunked phase evaluates; kinds embed it in their eval section.
type EvalCadence struct {
	EveryChunks int  `json:"every_chunks" default:"0" help:"also evaluate every N chunks (0: only before and after)"`
	Before      bool `json:"before" default:"true" help:"evaluate the starting checkpoint first (reported as *_before)"`
}

// Validate names the bad field.
func (c EvalCadence) Validate() error {
	if c.EveryChunks < 0 {
		return &config.FieldError{Path: "eval.every_chunks", Msg: "must be >= 0"}
	}
	return nil
}

// LoopState is a chunked phase's loop state; it travels in PhaseInput.Loop across continue-as-new.
type LoopState struct {
	Step           int                `json:"step"`
	Chunks         int                `json:"chunks"`
	Checkpoint     string             `json:"checkpoint"`
	Cursor         data.Cursor        `json:"cursor"`
	FreshOptimizer bool               `json:"fresh_optimizer"`
	Setup          PhaseSetup         `json:"setup"`
	Before         map[string]float64 `json:"before,omitempty"`
	Last           map[string]float64 `json:"last,omitempty"`
	Train          map[string]float64 `json:"train,omitempty"` // the last chunk's objective metrics
	Best           string             `json:"best,omitempty"`
	BestScore      float64            `json:"best_score"`
	LossSum        float64            `json:"loss_sum"`
	LastLoss       float64            `json:"last_loss"`
	NonFinite      int                `json:"non_finite"`
	Seconds        float64            `json:"seconds"` // training wall time (chunks only)
	Curve          []CurvePoint       `json:"curve,omitempty"`
	// Steer is what people changed while the phase runs (steer.go); nil until someone does.
	Steer *SteerState `json:"steer,omitempty"`
}

// PhaseSetup is what a kind's start made besides the first checkpoint.
type PhaseSetup struct {
	Reference string `json:"reference,omitempty"` // the reference model
	Train     string `json:"train,omitempty"`     // training data the phase made (pairs from the model's samples)
	Heldout   string `json:"heldout,omitempty"`   // held-out data the phase made
	RefData   string `json:"ref_data,omitempty"`  // precomputed reference log-probs
	// Metrics are reported with the phase's metrics (data statistics, new_head).
	Metrics map[string]float64 `json:"metrics,omitempty"`
}

// chunkedRun is one execution of a chunked phase: what a kind's hooks see.
type chunkedRun struct {
	ctx         workflow.Context
	long, short workflow.Context // trainerContexts
	in          PhaseInput
	seed        uint64
	st          LoopState
	steer       *steering
}

// exec runs an activity on the trainer queue (long: heartbeating chunks and evaluations) and waits.
func (r *chunkedRun) exec(long bool, name string, input, out any) error {
	ctx := r.short
	if long {
		ctx = r.long
	}
	return workflow.ExecuteActivity(ctx, name, input).Get(r.ctx, out)
}

// chunkedKind is what a kind tells the driver: its shape, its activities, and its score. The driver
// owns the loop: start, evaluate, chunk, keep-best, retain and continue-as-new.
type chunkedKind struct {
	spec     ChunkSpec
	cadence  EvalCadence
	dataSeed uint64 // the data seed the config sets (0: the pipeline seed)
	// start makes the first checkpoint (fresh: chunks must not load its optimizer state) and fills
	// r.st.Setup with whatever else the kind's chunks need.
	start func(r *chunkedRun) (checkpoint string, fresh bool, err error)
	// chunk names the chunk activity and its input for head.
	chunk func(r *chunkedRun, head trainapi.ChunkHead) (name string, input any)
	// evaluate measures a checkpoint on held-out data.
	evaluate func(r *chunkedRun, uri string) (map[string]float64, error)
	// headline is the evaluation metric the memo and the curve show; score (higher is better) picks
	// the best checkpoint.
	headline string
	score    func(m map[string]float64) float64
	// report adds the kind's own metrics (from the last chunk's objective metrics) to the result.
	report func(st *LoopState, metrics map[string]float64)
}

// decodeKindConfig decodes in.Config as the kind's config type; bad config is never retried.
func decodeKindConfig[C PhaseConfig](in PhaseInput) (C, error) {
	var zero C
	c, err := DecodePhaseConfig(in.Kind, in.Config, "config")
	if err != nil {
		return zero, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
	}
	return c.(C), nil
}

// runChunked is the one chunked-phase driver. On first start it runs the kind's start and, with
// eval.before, evaluates the starting checkpoint; then it trains chunk after chunk until steps (or
// max_seconds of training wall time) is reached, evaluating every eval.every_chunks chunks and after
// the last, keeping the best-scoring checkpoint marked and pruning the others beyond keep_last, and
// continues as new with its LoopState when the history grows. Non-finite steps are the chunk
// runner's to skip; the driver counts them (non_finite_steps) and shows them in the memo. Between
// two chunks it applies what people changed (steer.go): the shape (steps, max_seconds, optimizer,
// eval.every_chunks) is the kind's config with those changes set over it.
func runChunked(ctx workflow.Context, in PhaseInput, k chunkedKind) (PhaseOutput, error) {
	r := &chunkedRun{ctx: ctx, in: in, seed: uint64(in.Seed)}
	if in.Loop != nil {
		r.st = *in.Loop
	}
	r.long, r.short = trainerContexts(ctx, k.spec.HeartbeatTimeout.D())
	st := &r.st
	if err := r.startSteering(&k); err != nil {
		return PhaseOutput{}, err
	}
	if st.Checkpoint == "" {
		if err := r.begin(k); err != nil {
			return PhaseOutput{}, err
		}
	}
	latest := st.Last
	if latest == nil {
		latest = st.Before
	}
	if err := upsertSearch(ctx, in.Search, evalUpdates(latest, phaseIdentity(in, st.Step)...)...); err != nil {
		return PhaseOutput{}, err
	}
	for {
		if err := r.atBoundary(&k); err != nil {
			return PhaseOutput{}, err
		}
		if st.Step >= k.spec.Steps || r.outOfTime(k) {
			break
		}
		last, err := r.chunk(k)
		if err != nil {
			return PhaseOutput{}, err
		}
		if !last && workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			next := in
			next.Loop = st
			return PhaseOutput{}, workflow.NewContinueAsNewError(ctx, workflow.GetInfo(ctx).WorkflowType.Name, next)
		}
	}
	r.steer.finishing = true
	return PhaseOutput{Checkpoint: st.Checkpoint, Metrics: r.metrics(k), Curve: st.Curve}, nil
}

func (r *chunkedRun) outOfTime(k chunkedKind) bool {
	return k.spec.MaxSeconds > 0 && r.st.Seconds >= k.spec.MaxSeconds
}

// chunk trains the next chunk and does what follows it: evaluate (every eval.every_chunks chunks
// and after the last), keep the best, retain, memo and search attributes. last says it was the last.
func (r *chunkedRun) chunk(k chunkedKind) (last bool, err error) {
	ctx, in, st := r.ctx, r.in, &r.st
	fail := func(what string, err error) error {
		return fmt.Errorf("%s %s: %s: %w", in.Kind, in.Phase, what, err)
	}
	n := min(k.spec.ChunkSteps, k.spec.Steps-st.Step)
	r.steer.next = st.Step + n
	name, input := k.chunk(r, trainapi.ChunkHead{Store: in.Store, Run: in.RunID, Phase: in.Phase, From: st.Checkpoint,
		Step: st.Step, Steps: n, TotalSteps: k.spec.Steps, Cursor: st.Cursor, Optim: k.spec.Optimizer, FreshOptimizer: st.FreshOptimizer,
		InjectNaNAt: k.spec.InjectNaNAt})
	chunkStart := workflow.Now(ctx)
	var out trainapi.ChunkOutput
	if err := r.exec(true, name, input, &out); err != nil {
		return false, fail(fmt.Sprintf("chunk at step %d", st.Step), err)
	}
	st.Step, st.Checkpoint, st.Cursor, st.FreshOptimizer = out.Step, out.Checkpoint, out.Cursor, false
	st.Seconds += workflow.Now(ctx).Sub(chunkStart).Seconds()
	st.Chunks++
	st.LossSum += out.Loss * float64(n)
	st.LastLoss, st.NonFinite, st.Train = out.LastLoss, st.NonFinite+out.NonFinite, out.Metrics
	memo := map[string]any{"step": st.Step, "steps": k.spec.Steps, "loss": out.Loss, "non_finite_steps": st.NonFinite}
	last = st.Step >= k.spec.Steps || r.outOfTime(k)
	var evaluated map[string]float64
	if last || (k.cadence.EveryChunks > 0 && st.Chunks%k.cadence.EveryChunks == 0) {
		m, err := k.evaluate(r, st.Checkpoint)
		if err != nil {
			return false, fail(fmt.Sprintf("evaluate step %d", st.Step), err)
		}
		st.Last, evaluated = m, m
		st.Curve = append(st.Curve, r.point(k, m))
		memo[k.headline] = m[k.headline]
		if score := k.score(m); st.Best == "" || score > st.BestScore {
			st.Best, st.BestScore = st.Checkpoint, score
		}
	}
	if err := retainAndMemo(ctx, r.short, in, k.spec.KeepLast, st.Best, memo); err != nil {
		return false, err
	}
	return last, upsertSearch(ctx, in.Search, evalUpdates(evaluated, SAStep.ValueSet(int64(st.Step)))...)
}

// startSteering registers the phase's steering and, when an earlier run of it applied changes,
// sets them over the kind's shape.
func (r *chunkedRun) startSteering(k *chunkedKind) error {
	var err error
	r.steer, err = newSteering(r.ctx, r.in, r.st.Steer, "step", func() int { return r.st.Step }, r.short,
		func() string { return r.in.Phase }, func(s *SteerState) { r.st.Steer = s })
	if err != nil {
		return err
	}
	r.steer.grid = func(at int) int {
		b := r.steer.next
		for b < at && b < k.spec.Steps {
			b = min(b+k.spec.ChunkSteps, k.spec.Steps)
		}
		return b
	}
	if len(r.steer.st.Applied) == 0 {
		return nil
	}
	return r.reshape(k)
}

// atBoundary applies what people asked for at the boundary after st.Step (steer.go).
func (r *chunkedRun) atBoundary(k *chunkedKind) error {
	changed, err := r.steer.boundary(r.st.Step, func() error { return nil }) // nothing runs between chunks
	if err != nil || !changed {
		return err
	}
	return r.reshape(k)
}

// reshape sets the kind's shape from its config with the applied changes set over it.
func (r *chunkedRun) reshape(k *chunkedKind) error {
	c, err := decodeEffective("config", r.in.Kind, r.in.Config, r.steer.st.Applied)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
	}
	shaped, ok := c.(chunkShaped)
	if !ok {
		err := fmt.Errorf("%s %s: the kind's config has no chunk shape to steer", r.in.Kind, r.in.Phase)
		return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
	}
	k.spec, k.cadence = shaped.chunkShape()
	return nil
}

// begin starts the phase on its first run: the kind's start makes the first checkpoint and, with
// eval.before, the driver evaluates it.
func (r *chunkedRun) begin(k chunkedKind) error {
	st := &r.st
	st.Cursor = data.Cursor{Seed: r.seed}
	if k.dataSeed != 0 {
		st.Cursor.Seed = k.dataSeed
	}
	uri, fresh, err := k.start(r)
	if err != nil {
		return err
	}
	st.Checkpoint, st.FreshOptimizer = uri, fresh
	if k.cadence.Before {
		if st.Before, err = k.evaluate(r, st.Checkpoint); err != nil {
			return fmt.Errorf("%s %s: evaluate start: %w", r.in.Kind, r.in.Phase, err)
		}
		st.Curve = append(st.Curve, r.point(k, st.Before))
	}
	return nil
}

// point is the curve point of an evaluation m at the current step.
func (r *chunkedRun) point(k chunkedKind, m map[string]float64) CurvePoint {
	p := CurvePoint{Seconds: r.st.Seconds, Step: r.st.Step, ExactMatch: m["heldout_exact_match"]}
	if k.headline != "heldout_exact_match" {
		p.Score = m[k.headline]
	}
	return p
}

// metrics are the phase's result: the loop's sums, the kind's own, its setup's and the evaluations.
func (r *chunkedRun) metrics(k chunkedKind) map[string]float64 {
	st := &r.st
	metrics := map[string]float64{
		"steps": float64(st.Step), "loss": st.LossSum / float64(max(1, st.Step)), "last_loss": st.LastLoss,
		"non_finite_steps": float64(st.NonFinite), "train_seconds": st.Seconds,
	}
	if k.report != nil {
		k.report(st, metrics)
	}
	copyMetrics(metrics, st.Setup.Metrics, "")
	copyMetrics(metrics, st.Last, "")
	copyMetrics(metrics, st.Before, "_before")
	return metrics
}
