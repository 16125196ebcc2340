package workflows

import "strings"

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
