package workflows

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/temperml/temper/algorithms/verify"
)

// startsFromCheckpoint is implemented by phase configs that cannot start from scratch: Validate
// rejects such a phase in first position without from, so `temper run --dry-run` says so before anything
// starts instead of the phase failing once running.
type startsFromCheckpoint interface {
	// NeedsFrom returns why the phase needs a starting checkpoint, or "" when it can start from scratch.
	NeedsFrom() string
}

// NeedsFrom: an RL phase samples from and is regularised towards its starting policy.
func (c *RLConfig) NeedsFrom() string {
	return "an RL phase starts from a checkpoint (put an sft phase before it, or set from)"
}

// NeedsFrom: a preference phase starts from an SFT model, which is also its reference by default.
func (c *PrefConfig) NeedsFrom() string {
	return "a preference phase starts from a checkpoint, also its reference model (put an sft phase before it, or set from)"
}

// NeedsFrom: LoRA trains adapters on a base model.
func (c *TrainConfig) NeedsFrom() string {
	if c.LoRA != nil {
		return "LoRA trains adapters on a starting model (put a phase before this one, or set from)"
	}
	return ""
}

// refersToPhases is implemented by phase configs with fields that name a checkpoint URI or an
// earlier phase (a distill phase's teacher): Validate checks the names, and the phase resolves them
// from PhaseInput.Earlier (resolvePhaseRef).
type refersToPhases interface {
	PhaseRefs() []PhaseRef
}

// PhaseRef is a config field (its path within the phase's config) naming a URI or a phase.
type PhaseRef struct {
	Path, Value string
}

// resolvePhaseRef turns a URI-or-phase value into a checkpoint URI: a URI as given, else the output
// of the earlier phase it names ("" when there is none: Validate has already said so).
func resolvePhaseRef(value string, earlier []PhaseCheckpoint) string {
	if strings.Contains(value, "://") {
		return value
	}
	for _, e := range earlier {
		if e.Name == value {
			return e.Checkpoint
		}
	}
	return ""
}

// criticVerifier is the worker-side verifier whose params name a checkpoint (activities/reward's
// CriticVerifier; this layer cannot import it).
const criticVerifier = "critic"

// criticCheckpoint reads a critic component's params.checkpoint ("" for other verifiers or
// unreadable params: the verifier's own validation names those).
func criticCheckpoint(c verify.Component) string {
	if c.Name != criticVerifier {
		return ""
	}
	var p struct {
		Checkpoint string `json:"checkpoint"`
	}
	if json.Unmarshal(c.Params, &p) != nil {
		return ""
	}
	return p.Checkpoint
}

// verifierRefs are the critic checkpoints of comps (at path) that a phase resolves: a URI, or the
// name of an earlier phase (a reward phase trained in the same pipeline).
func verifierRefs(path string, comps []verify.Component) []PhaseRef {
	var out []PhaseRef
	for i, c := range comps {
		if ck := criticCheckpoint(c); ck != "" {
			out = append(out, PhaseRef{Path: fmt.Sprintf("%s[%d].params.checkpoint", path, i), Value: ck})
		}
	}
	return out
}

// resolveVerifierRefs returns comps with each critic checkpoint that names an earlier phase
// replaced by that phase's checkpoint URI; comps themselves are left alone, and a spec without
// such names comes back as it was (so that runs recorded before phase names were allowed replay).
func resolveVerifierRefs(comps []verify.Component, earlier []PhaseCheckpoint) []verify.Component {
	var out []verify.Component
	for i, c := range comps {
		ck := criticCheckpoint(c)
		if ck == "" || strings.Contains(ck, "://") {
			continue
		}
		var params map[string]json.RawMessage
		if json.Unmarshal(c.Params, &params) != nil {
			continue
		}
		params["checkpoint"], _ = json.Marshal(resolvePhaseRef(ck, earlier)) // a string always marshals
		if out == nil {
			out = slices.Clone(comps)
		}
		out[i].Params, _ = json.Marshal(params) // keys sorted: the same bytes on every replay
	}
	if out == nil {
		return comps
	}
	return out
}

// PhaseRefs: critic checkpoints of eval.verifiers may name earlier phases.
func (c *TrainConfig) PhaseRefs() []PhaseRef { return verifierRefs("eval.verifiers", c.Eval.Verifiers) }

// PhaseRefs: critic checkpoints of reward.verifiers and eval.verifiers may name earlier phases.
func (c *RLConfig) PhaseRefs() []PhaseRef {
	return append(verifierRefs("reward.verifiers", c.Reward.Verifiers), verifierRefs("eval.verifiers", c.Eval.Verifiers)...)
}

// resolveRefs replaces the phase names among the critic checkpoints of the reward and of the
// evaluations by those phases' checkpoints, once per decoded config.
func (c *RLConfig) resolveRefs(earlier []PhaseCheckpoint) {
	c.Reward.Verifiers = resolveVerifierRefs(c.Reward.Verifiers, earlier)
	c.Eval.Verifiers = resolveVerifierRefs(c.Eval.Verifiers, earlier)
}
