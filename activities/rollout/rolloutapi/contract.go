// Package rolloutapi is the rollout role's side of the contract with workflows: activity names
// (rollout.*) and their input and output structs. It imports no GoMLX and no storage client, so
// workflows import it instead of package rollout; the JSON field names are part of the contract
// (histories of runs in flight hold them) and must not change.
package rolloutapi

import (
	"fmt"
	"path"
	"time"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/internal/config"
)

// GenerateName is the activity's registered name (queue "rollout").
const GenerateName = "rollout.Generate"

// GenerateInput asks for Group samples of each of Prompts prompts of iteration Iteration.
type GenerateInput struct {
	Store         string            `json:"store"`
	Run           string            `json:"run"`
	Phase         string            `json:"phase"`
	Checkpoint    string            `json:"checkpoint"`
	PolicyVersion int               `json:"policy_version"`
	Iteration     int               `json:"iteration"`
	Data          trainapi.DataSpec `json:"data"`
	Seed          uint64            `json:"seed"`
	Prompts       int               `json:"prompts"`
	Group         int               `json:"group"`
	MaxNewTokens  int               `json:"max_new_tokens"`
	Temperature   float64           `json:"temperature"`
	TopP          float64           `json:"top_p,omitempty"`
	// Sampling, when set, are the sampling controls (its top_p replaces TopP); nil: temperature and
	// TopP only.
	Sampling *sample.Controls `json:"sampling,omitempty"`
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
	// Agent, when set, makes every sample an agent's episode: its command runs in the sandbox
	// against a model endpoint served from Checkpoint, its calls become the trajectory, its
	// standard output the completion the verifiers score (agent.go). A group one of whose samples
	// failed past Agent.Retries is dropped (GenerateOutput.AgentGroupsDropped).
	Agent *AgentSpec `json:"agent,omitempty"`
	// SegmentTokens > 0 makes this call one segment of a partial generation (async with
	// partial: true, activities/rollout/segment.go): each row samples at most this many tokens and
	// a row that reaches the budget before its end is written unfinished (rollout.StopPartial), for
	// a later call to continue under a newer policy. Continue names the rollouts object of the
	// segment before this one: its unfinished rows are continued (the prompt and the tokens so far
	// prefilled again under Checkpoint), the others copied; SegmentTokens 0 then continues them to
	// their end. Every token records the PolicyVersion that sampled it (rollout.Rollout.Versions).
	SegmentTokens int    `json:"segment_tokens,omitempty"`
	Continue      string `json:"continue,omitempty"`
}

// AgentSpec is an agent program that plays episodes against the policy (rollout.agent of an RL
// phase; workflows validate it and name its fields rollout.agent.*). Zero fields take the defaults
// the rollout role applies (DefaultAgentTimeout and the others below).
type AgentSpec struct {
	// Command is the argv; a first word without a slash is looked up in the sandbox's PATH
	// (/usr/local/bin, /usr/bin, /bin).
	Command []string `json:"command" help:"the agent program and its arguments, run once per episode in the code sandbox (a bare name is looked up in /usr/local/bin, /usr/bin, /bin; a relative path in dir)"`
	// Env adds variables to the sandbox's (OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL are
	// the gateway's).
	Env map[string]string `json:"env,omitempty" help:"variables added to the agent's environment (OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL are the gateway's)"`
	// Dir is a directory on the rollout worker (relative: to the worker's working directory),
	// visible read-only at /agent inside the sandbox and the command's working directory: the
	// agent's code and packages.
	Dir string `json:"dir,omitempty" help:"a directory on the rollout worker (relative: to its working directory) shown read-only at /agent in the sandbox, the agent's working directory: its code and packages"`
	// Timeout bounds one attempt of an episode (wall clock).
	Timeout config.Duration `json:"timeout,omitempty" default:"1m0s" help:"wall-clock limit of one attempt of an episode"`
	// Retries is how many times a failed or timed-out attempt is run again, each in a fresh
	// sandbox, before its whole group is dropped.
	Retries int `json:"retries,omitempty" default:"0" help:"attempts run again, each in a fresh sandbox, when the agent fails or times out; past them the episode's whole group is dropped (agent_groups_dropped)"`
	// MaxCalls bounds an episode's model calls.
	MaxCalls int `json:"max_calls,omitempty" default:"16" help:"model calls an episode may make; later ones are refused (400)"`
	// MemoryMiB bounds the agent's memory (its cgroup, and RLIMIT_AS unless AddressSpaceGiB is
	// larger).
	MemoryMiB int `json:"memory_mib,omitempty" default:"512" help:"memory of the agent's processes (their cgroup), and their address space unless address_space_gib is larger"`
	// AddressSpaceGiB raises RLIMIT_AS alone (Node's fetch reserves 16 GiB it never touches).
	AddressSpaceGiB int `json:"address_space_gib,omitempty" default:"0" help:"address space (RLIMIT_AS) alone, for runtimes that reserve more than they use: Node's fetch needs 16"`
}

// Defaults of AgentSpec's zero fields.
const (
	DefaultAgentTimeout   = config.Duration(60 * time.Second)
	DefaultAgentMaxCalls  = 16
	DefaultAgentMemoryMiB = 512
)

// AgentEvalName evaluates a checkpoint by running the agent on held-out prompts (queue "rollout").
const AgentEvalName = "rollout.AgentEval"

// AgentEvalInput asks for an agent's held-out evaluation: Eval as for train.Evaluate (its data,
// number of examples, seed, per-call max_new_tokens and metrics log), every example played greedily
// (temperature 0) by Agent against Eval.Checkpoint; exact match scores the agent's standard output.
type AgentEvalInput struct {
	Eval          trainapi.EvalInput `json:"eval"`
	Agent         AgentSpec          `json:"agent"`
	PolicyVersion int                `json:"policy_version"`
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
	// Agent episodes: groups dropped because one of their samples failed past its retries (their
	// rollouts are not in the file), and attempts that failed (retried or not).
	AgentGroupsDropped int `json:"agent_groups_dropped,omitempty"`
	AgentFailures      int `json:"agent_failures,omitempty"`
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

// RolloutsKey is where an iteration's rollouts live, relative to the store root (the
// reward role writes verdicts beside it; `temper samples` reads it).
func RolloutsKey(run, phase string, iteration int, tag string) string {
	name := fmt.Sprintf("iter-%06d", iteration)
	if tag != "" {
		name += "-" + tag
	}
	return path.Join("runs", run, phase, "rollouts", name+".jsonl")
}
