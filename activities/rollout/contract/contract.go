// Package contract is the rollout role's side of the contract with workflows: activity names
// (rollout.*) and their input and output structs. It imports no GoMLX and no storage client, so
// workflows import it instead of package rollout; the JSON field names are part of the contract
// (histories of runs in flight hold them) and must not change.
package contract

import (
	"fmt"
	train "github.com/temperml/temper/activities/train/contract"
	"github.com/temperml/temper/algorithms/rollout"
)

// GenerateName is the activity's registered name (queue "rollout").
const GenerateName = "rollout.Generate"

// GenerateInput asks for Group samples of each of Prompts prompts of iteration Iteration.
type GenerateInput struct {
	Store         string         `json:"store"`
	Run           string         `json:"run"`
	Phase         string         `json:"phase"`
	Checkpoint    string         `json:"checkpoint"`
	PolicyVersion int            `json:"policy_version"`
	Iteration     int            `json:"iteration"`
	Data          train.DataSpec `json:"data"`
	Seed          uint64         `json:"seed"`
	Prompts       int            `json:"prompts"`
	Group         int            `json:"group"`
	MaxNewTokens  int            `json:"max_new_tokens"`
	Temperature   float64        `json:"temperature"`
	TopP          float64        `json:"top_p,omitempty"`
	// Retry, when set, regenerates these rollouts with the verifier's feedback appended to the prompt
	// (sample-level self-correction) instead of drawing new prompts.
	Retry []rollout.Rollout `json:"retry,omitempty"`
	// RetryOf names a rollouts object instead: its rollouts RetryIndex (file order) are retried, each
	// with RetryFeedback[i] as its feedback. Workflows use it so that no rollout text passes
	// through their history.
	RetryOf string `json:"retry_of,omitempty"`
	// RetryOfShards names several rollouts objects instead, read as one in order (an iteration's
	// shards): RetryIndex counts across them.
	RetryOfShards []string `json:"retry_of_shards,omitempty"`
	RetryIndex    []int    `json:"retry_index,omitempty"`
	RetryFeedback []string `json:"retry_feedback,omitempty"`
	// RetryResample retries with the original prompt (a fresh sample) instead of appending the
	// feedback: for models never trained to read feedback.
	RetryResample bool `json:"retry_resample,omitempty"`
	// Tag distinguishes several files of one iteration (e.g. "retry1", "s0002").
	Tag string `json:"tag,omitempty"`
	// PromptLo and PromptHi make this call one shard of the iteration: the iteration's Prompts
	// prompts are drawn as always and prompts [PromptLo, PromptHi) are sampled, each seeded by its
	// index in the iteration (ShardRanges splits an iteration). Both 0: every prompt.
	PromptLo int `json:"prompt_lo,omitempty"`
	PromptHi int `json:"prompt_hi,omitempty"`
	// Tools, when set, makes every sample an agentic episode (algorithms/episode): the prompt is
	// posed as the user's message, MaxNewTokens bounds each policy turn, a turn that calls one of
	// these tools gets its result and continues, up to MaxTurns turns and MaxTokens tokens after
	// the prompt. The rollouts carry the policy mask (tool results are not trained on).
	Tools     []string `json:"tools,omitempty"`
	MaxTurns  int      `json:"max_turns,omitempty"`
	MaxTokens int      `json:"max_tokens,omitempty"`
	// SegmentTokens > 0 makes this call one segment of a partial generation (async with
	// partial: true, segment.go): each row samples at most this many tokens and a row that reaches
	// the budget before its end is written unfinished (rollout.StopPartial), for a later call to
	// continue under a newer policy. Continue names the rollouts object of the segment before this
	// one: its unfinished rows are continued (the prompt and the tokens so far prefilled again
	// under Checkpoint), the others copied; SegmentTokens 0 then continues them to their end.
	// Every token records the PolicyVersion that sampled it (rollout.Rollout.Versions).
	SegmentTokens int    `json:"segment_tokens,omitempty"`
	Continue      string `json:"continue,omitempty"`
}

// GenerateOutput names the rollouts object.
type GenerateOutput struct {
	Rollouts   string  `json:"rollouts"`
	Samples    int     `json:"samples"`
	MeanLength float64 `json:"mean_length"`
	TokensPerS float64 `json:"tokens_per_s"`
	Truncated  float64 `json:"truncated"`         // fraction stopped by the length limit
	Tokens     int     `json:"tokens,omitempty"`  // completion tokens sampled
	Seconds    float64 `json:"seconds,omitempty"` // sampling time on the worker
	// Unfinished counts the rows a segment left for the next one (SegmentTokens); 0: every row ended.
	Unfinished int `json:"unfinished,omitempty"`
}

// KeepName is the activity that keeps passing self-corrections as data (queue "rollout").
const KeepName = "rollout.Keep"

// KeepInput names the rollouts (Rollouts, file order Index) to keep as prompt/completion examples.
type KeepInput struct {
	Store     string `json:"store"`
	Run       string `json:"run"`
	Phase     string `json:"phase"`
	Iteration int    `json:"iteration"`
	Round     int    `json:"round"` // self-correction round (1-based)
	Rollouts  string `json:"rollouts"`
	Index     []int  `json:"index"`
}

// KeepOutput is the JSONL object written (a data.train file for an SFT phase) and its line count.
type KeepOutput struct {
	Examples string `json:"examples"`
	Count    int    `json:"count"`
}

// BatchSamples is about how many samples one generation batch holds.
const BatchSamples = 64

// BatchPrompts is how many prompts one generation batch holds. Batches are windows of the
// iteration's prompts aligned to multiples of it, whatever the shard: a batch's padding and shapes,
// and so its floating-point results, depend only on which prompts it holds.
func BatchPrompts(group int) int { return max(1, BatchSamples/max(1, group)) }

// ShardRanges splits an iteration's prompts [0, prompts) into at most shards contiguous, non-empty
// ranges [lo, hi) that begin at multiples of BatchPrompts(group), as evenly as that allows. Every
// sample is seeded by its prompt's index in the iteration and batched by the aligned windows, so
// the concatenated shards are byte-identical to one shard whatever their number. Workflows call it
// (it is pure).
func ShardRanges(prompts, group, shards int) [][2]int {
	unit := BatchPrompts(group)
	units := (prompts + unit - 1) / unit
	shards = max(1, min(shards, units))
	out := make([][2]int, 0, shards)
	lo := 0
	for s := range shards {
		n := units / shards
		if s < units%shards {
			n++
		}
		hi := min(prompts, lo+n*unit)
		out = append(out, [2]int{lo, hi})
		lo = hi
	}
	return out
}

// ShardTag names shard s's rollouts object (iter-000003-s0001.jsonl).
func ShardTag(s int) string { return fmt.Sprintf("s%04d", s) }
