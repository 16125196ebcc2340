package train

import "github.com/temperml/temper/activities/train/trainapi"

// The trainer's names and I/O types live in contract (what workflows and the families import);
// these aliases remain only for rollout and reward, which other changes are reworking: move them
// to contract and delete this file.
type (
	DataSpec         = trainapi.DataSpec
	InitInput        = trainapi.InitInput
	InitOutput       = trainapi.InitOutput
	Optim            = trainapi.Optim
	Progress         = trainapi.Progress
	RewardInitInput  = trainapi.RewardInitInput
	RewardInitOutput = trainapi.RewardInitOutput
)

const (
	CriticFile     = trainapi.CriticFile
	InitName       = trainapi.InitName
	ModelFile      = trainapi.ModelFile
	RewardInitName = trainapi.RewardInitName
)
