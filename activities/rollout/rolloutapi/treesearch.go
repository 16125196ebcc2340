package rolloutapi

import (
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/search"
)

// Activity names of the search phase (queue "rollout").
const (
	SearchName     = "rollout.Search"
	SearchDataName = "rollout.SearchData"
)

// SearchInput asks for the searches of one batch of prompts: prompts [PromptLo, PromptHi) of the
// training examples of Data, each searched from Checkpoint with its own seed (derived from Seed and
// the prompt's index), so a batch's result does not depend on the batching and a retried batch
// writes the same bytes.
type SearchInput struct {
	Store      string            `json:"store"`
	Run        string            `json:"run"`
	Phase      string            `json:"phase"`
	Checkpoint string            `json:"checkpoint"`
	Data       trainapi.DataSpec `json:"data"`
	Seed       uint64            `json:"seed"`
	Batch      int               `json:"batch"`
	PromptLo   int               `json:"prompt_lo"`
	PromptHi   int               `json:"prompt_hi"`
	Params     search.Params     `json:"params"`
	// PRM is the process reward model's checkpoint that values new steps when Params.Value is prm.
	PRM string `json:"prm,omitempty"`
}

// SearchOutput names the batch's results object (one JSON line per prompt: the best verified
// solution, the preference pairs, the tree's statistics) and sums them up.
type SearchOutput struct {
	Results  string `json:"results"`
	Prompts  int    `json:"prompts"`
	Solved   int    `json:"solved"`
	Pairs    int    `json:"pairs"`
	Nodes    int    `json:"nodes"`
	Verified int    `json:"verified"`
	DepthSum int    `json:"depth_sum"`
	DepthMax int    `json:"depth_max"`
	Tokens   int    `json:"tokens"` // forward tokens spent (prompt, path and generated, every request)
	// Seconds is the search time on the worker (0 when Resumed: an earlier attempt wrote the results).
	Seconds float64 `json:"seconds"`
	Resumed bool    `json:"resumed"`
}

// SearchDataInput asks for the phase's data from its batches' results, in order.
type SearchDataInput struct {
	Store   string            `json:"store"`
	Run     string            `json:"run"`
	Phase   string            `json:"phase"`
	Results []string          `json:"results"`
	Data    trainapi.DataSpec `json:"data"` // its held-out examples are written beside the SFT data
	Seed    uint64            `json:"seed"`
}

// SearchDataOutput names the data objects: SFT examples (the best verified solution of every
// solved prompt), preference pairs, the held-out examples a following phase evaluates on, and the
// trees' step-labelled solutions.
type SearchDataOutput struct {
	SFT     string `json:"sft"`
	Pairs   string `json:"pairs"`
	Heldout string `json:"heldout,omitempty"`
	// Steps holds the step-labelled solutions of the trees (tasks.StepExample; tasks with a per-line
	// checker only), for a prm phase's from_data.
	Steps    string `json:"steps,omitempty"`
	StepsN   int    `json:"steps_n,omitempty"`
	Examples int    `json:"examples"`
	PairsN   int    `json:"pairs_n"`
}
