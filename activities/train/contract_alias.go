package train

import "github.com/temperml/temper/activities/train/contract"

// The trainer's names and I/O types live in contract (what workflows and the families import);
// these aliases remain only for rollout and reward, which other changes are reworking: move them
// to contract and delete this file.
type (
	DataSpec         = contract.DataSpec
	InitInput        = contract.InitInput
	InitOutput       = contract.InitOutput
	Optim            = contract.Optim
	Progress         = contract.Progress
	RewardInitInput  = contract.RewardInitInput
	RewardInitOutput = contract.RewardInitOutput
)

const (
	CriticFile     = contract.CriticFile
	InitName       = contract.InitName
	ModelFile      = contract.ModelFile
	RewardInitName = contract.RewardInitName
)
