package workflows

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
