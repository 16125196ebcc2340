package workflows

// Task queues are named after roles (DESIGN.md "Roles and queues").
const (
	QueueTemper  = "temper"  // workflows
	QueueTrainer = "trainer" // train.* (one activity at a time per accelerator)
	QueueRollout = "rollout" // rollout.*
	QueueReward  = "reward"  // reward.*, sandboxes
	// QueueTools ("tools": tools.Run, long-running tools' calls) is declared in toolcall.go.
)

// Roles lists every worker role; a role's name is its task queue's name.
var Roles = []string{QueueTemper, QueueTrainer, QueueRollout, QueueReward, QueueTools}
