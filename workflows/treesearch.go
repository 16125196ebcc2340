package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/search"
	"github.com/temperml/temper/internal/config"
)

// SearchConfig configures the "search" phase kind: verifier-guided tree search (or its peer,
// rejection sampling) from the starting model over the training prompts of a task, writing data
// for a following sft (verified solutions) or preference phase (pairs) to read with from_data.
type SearchConfig struct {
	Data             trainapi.DataSpec `json:"data" help:"prompts and verifier: a built-in task (its training split; the held-out split is written for the next phase's evaluation) or JSONL files whose lines name their task"`
	Prompts          int               `json:"prompts" default:"64" help:"training prompts searched (the first N of the training examples)"`
	BatchPrompts     int               `json:"batch_prompts" default:"8" help:"prompts per rollout.Search activity: a worker killed mid-phase loses at most its batch"`
	Search           search.Params     `json:"search"`
	PRM              string            `json:"prm,omitempty" help:"with search.value prm: the process reward model that values new steps, an earlier prm phase's name or a checkpoint URI"`
	HeartbeatTimeout config.Duration   `json:"heartbeat_timeout" default:"60s" help:"a rollout worker silent this long is presumed dead; its batch is retried elsewhere"`
}

func defaultSearchConfig() *SearchConfig {
	return &SearchConfig{Data: trainapi.DataSpec{TrainExamples: 2000, HeldoutExamples: 200}, Prompts: 64, BatchPrompts: 8,
		Search: search.DefaultParams(), HeartbeatTimeout: config.Duration(60 * time.Second)}
}

// Validate names the bad field and its allowed values.
func (c *SearchConfig) Validate() error {
	if err := c.Data.Validate(); err != nil {
		return err
	}
	if c.Data.Text {
		return &config.FieldError{Path: "data.text", Msg: "search needs prompts and a verifier: prompt/completion data, not text"}
	}
	if err := c.Search.Validate(); err != nil {
		if fe, ok := err.(*config.FieldError); ok {
			return &config.FieldError{Path: "search." + fe.Path, Msg: fe.Msg}
		}
		return err
	}
	switch {
	case c.Prompts < 1:
		return &config.FieldError{Path: "prompts", Msg: fmt.Sprintf("%d: want >= 1", c.Prompts)}
	case c.Data.Task != "" && c.Prompts > c.Data.TrainExamples:
		return &config.FieldError{Path: "prompts", Msg: fmt.Sprintf("%d: more than data.train_examples (%d)", c.Prompts, c.Data.TrainExamples)}
	case c.BatchPrompts < 1 || c.BatchPrompts > 1024:
		return &config.FieldError{Path: "batch_prompts", Msg: fmt.Sprintf("%d: want 1..1024", c.BatchPrompts)}
	case c.HeartbeatTimeout.D() < time.Second:
		return &config.FieldError{Path: "heartbeat_timeout", Msg: "want at least 1s"}
	case c.Search.Value == search.ValuePRM && c.PRM == "":
		return &config.FieldError{Path: "prm", Msg: "search.value prm needs a process reward model: an earlier prm phase's name or a checkpoint URI"}
	case c.Search.Value != search.ValuePRM && c.PRM != "":
		return &config.FieldError{Path: "prm", Msg: "set only with search.value prm"}
	}
	return nil
}

// PhaseRefs: prm names an earlier phase or a URI.
func (c *SearchConfig) PhaseRefs() []PhaseRef { return []PhaseRef{{Path: "prm", Value: c.PRM}} }

// NeedsFrom: a search samples from a model.
func (c *SearchConfig) NeedsFrom() string {
	return "a search phase samples from a model (put a pretrain or sft phase before it, or set from)"
}

func init() {
	RegisterPhase(PhaseKind{Kind: "search", WorkflowName: "TreeSearch", Workflow: TreeSearch, MakesData: true,
		Doc: "verifier-guided MCTS over reasoning steps (or search.strategy: sample, best-of-N rejection sampling) from `from`; " +
			"writes the best verified solution per prompt (sft data), sibling-step preference pairs and step-labelled solutions (prm data) for a later phase's from_data; passes its starting checkpoint on",
		NewConfig: func() PhaseConfig { return defaultSearchConfig() }})
}

// TreeSearchState is a search phase's loop state; it travels in PhaseInput.Tree across continue-as-new.
type TreeSearchState struct {
	Next    int                     `json:"next"`    // the next batch
	Results []string                `json:"results"` // the batches' results objects, in order
	Sum     rolloutapi.SearchOutput `json:"sum"`     // the batches' sums (Results unused)
	Seconds float64                 `json:"seconds"` // wall time of the batches
}

// TreeSearch runs a search phase: one rollout.Search activity per batch of prompts, in order (each
// writes its results to the store; a retried batch reads them back), then rollout.SearchData
// writes the phase's data. History grows with the number of batches, never with the trees; the
// workflow continues as new when the server suggests it. The output checkpoint is the starting one,
// so a following phase starts from the model that was searched unless it sets from.
func TreeSearch(ctx workflow.Context, in PhaseInput) (PhaseOutput, error) {
	cfg, err := decodeKindConfig[*SearchConfig](in)
	if err != nil {
		return PhaseOutput{}, err
	}
	if in.From == "" {
		err := &config.FieldError{Path: "from", Msg: cfg.NeedsFrom()}
		return PhaseOutput{}, temporal.NewNonRetryableApplicationError(err.Error(), "InvalidConfig", err)
	}
	long, short := queueContexts(ctx, QueueRollout, cfg.HeartbeatTimeout.D())
	var st TreeSearchState
	if in.Tree != nil {
		st = *in.Tree
	}
	if err := upsertSearch(ctx, in.Search, phaseIdentity(in, st.Next)...); err != nil {
		return PhaseOutput{}, err
	}
	seed := uint64(in.Seed)
	batches := (cfg.Prompts + cfg.BatchPrompts - 1) / cfg.BatchPrompts
	for st.Next < batches {
		lo := st.Next * cfg.BatchPrompts
		started := workflow.Now(ctx)
		var out rolloutapi.SearchOutput
		if err := workflow.ExecuteActivity(long, rolloutapi.SearchName, rolloutapi.SearchInput{
			Store: in.Store, Run: in.RunID, Phase: in.Phase, Checkpoint: in.From, Data: cfg.Data, Seed: seed,
			Batch: st.Next, PromptLo: lo, PromptHi: min(lo+cfg.BatchPrompts, cfg.Prompts), Params: cfg.Search,
			PRM: resolvePhaseRef(cfg.PRM, in.Earlier), // "" unless value prm: the input of a rollout-valued search is unchanged
		}).Get(ctx, &out); err != nil {
			return PhaseOutput{}, fmt.Errorf("%s %s: batch %d of %d: %w", in.Kind, in.Phase, st.Next, batches, err)
		}
		st.Seconds += workflow.Now(ctx).Sub(started).Seconds()
		st.Results = append(st.Results, out.Results)
		s := &st.Sum
		s.Prompts, s.Solved, s.Pairs, s.Nodes = s.Prompts+out.Prompts, s.Solved+out.Solved, s.Pairs+out.Pairs, s.Nodes+out.Nodes
		s.Verified, s.DepthSum, s.DepthMax, s.Tokens = s.Verified+out.Verified, s.DepthSum+out.DepthSum, max(s.DepthMax, out.DepthMax), s.Tokens+out.Tokens
		st.Next++
		if err := workflow.UpsertMemo(ctx, map[string]any{"batch": st.Next, "batches": batches, "solved": s.Solved, "prompts": s.Prompts}); err != nil {
			return PhaseOutput{}, err
		}
		if err := upsertSearch(ctx, in.Search, SAStep.ValueSet(int64(st.Next))); err != nil {
			return PhaseOutput{}, err
		}
		if st.Next < batches && workflow.GetInfo(ctx).GetContinueAsNewSuggested() {
			next := in
			next.Tree = &st
			return PhaseOutput{}, workflow.NewContinueAsNewError(ctx, workflow.GetInfo(ctx).WorkflowType.Name, next)
		}
	}
	var data rolloutapi.SearchDataOutput
	if err := workflow.ExecuteActivity(short, rolloutapi.SearchDataName, rolloutapi.SearchDataInput{
		Store: in.Store, Run: in.RunID, Phase: in.Phase, Results: st.Results, Data: cfg.Data, Seed: seed,
	}).Get(ctx, &data); err != nil {
		return PhaseOutput{}, fmt.Errorf("%s %s: data: %w", in.Kind, in.Phase, err)
	}
	s, n := st.Sum, float64(max(1, st.Sum.Prompts))
	metrics := map[string]float64{
		"search_prompts": float64(s.Prompts), "search_solved_rate": float64(s.Solved) / n,
		"search_nodes_mean": float64(s.Nodes) / n, "search_depth_mean": float64(s.DepthSum) / n, "search_depth_max": float64(s.DepthMax),
		"search_verified_mean": float64(s.Verified) / n, "search_seconds": st.Seconds,
		"data_examples": float64(data.Examples), "data_pairs": float64(data.PairsN), "data_step_solutions": float64(data.StepsN),
		"data_forward_tokens": float64(s.Tokens), "data_forward_tokens_per_prompt": float64(s.Tokens) / n,
	}
	return PhaseOutput{Checkpoint: in.From, Metrics: metrics, Data: &PhaseData{SFT: data.SFT, Pairs: data.Pairs, Heldout: data.Heldout, Steps: data.Steps}}, nil
}
