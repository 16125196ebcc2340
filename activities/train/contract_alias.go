package train

import "github.com/temperml/temper/activities/train/contract"

// The trainer's names and I/O types live in contract (imported by workflows without GoMLX); these
// aliases keep this package's code and its importers (rollout, reward) reading as before.
type (
	BatchSpec           = contract.BatchSpec
	Cursor              = contract.Cursor
	ChunkHead           = contract.ChunkHead
	ChunkInput          = contract.ChunkInput
	ChunkOutput         = contract.ChunkOutput
	DataSpec            = contract.DataSpec
	EvalInput           = contract.EvalInput
	EvalOutput          = contract.EvalOutput
	InitInput           = contract.InitInput
	InitOutput          = contract.InitOutput
	Optim               = contract.Optim
	PPOConfig           = contract.PPOConfig
	PolicyStepInput     = contract.PolicyStepInput
	PolicyStepOutput    = contract.PolicyStepOutput
	PrefChunkInput      = contract.PrefChunkInput
	PrefDataSpec        = contract.PrefDataSpec
	PrefEvalInput       = contract.PrefEvalInput
	PrefFromModelInput  = contract.PrefFromModelInput
	PrefFromModelOutput = contract.PrefFromModelOutput
	PrefSampling        = contract.PrefSampling
	Progress            = contract.Progress
	RefLogProbsInput    = contract.RefLogProbsInput
	RefLogProbsOutput   = contract.RefLogProbsOutput
	RetainInput         = contract.RetainInput
	RewardBatch         = contract.RewardBatch
	RewardChunkInput    = contract.RewardChunkInput
	RewardData          = contract.RewardData
	RewardEvalInput     = contract.RewardEvalInput
	RewardEvalOutput    = contract.RewardEvalOutput
	RewardInitInput     = contract.RewardInitInput
	RewardInitOutput    = contract.RewardInitOutput
)

const (
	ChunkName                = contract.ChunkName
	ConfigFile               = contract.ConfigFile
	CriticFile               = contract.CriticFile
	EvaluateName             = contract.EvaluateName
	InitName                 = contract.InitName
	ModelFile                = contract.ModelFile
	OptimizerFile            = contract.OptimizerFile
	PolicyStepName           = contract.PolicyStepName
	PrefChunkName            = contract.PrefChunkName
	PrefEvaluateName         = contract.PrefEvaluateName
	PreferencesFromModelName = contract.PreferencesFromModelName
	RefLogProbsName          = contract.RefLogProbsName
	RefOnTheFly              = contract.RefOnTheFly
	RefPrecomputed           = contract.RefPrecomputed
	RetainName               = contract.RetainName
	RewardChunkName          = contract.RewardChunkName
	RewardEvaluateName       = contract.RewardEvaluateName
	RewardInitName           = contract.RewardInitName
)

// DefaultPPOConfig: see contract.
var (
	DefaultPPOConfig = contract.DefaultPPOConfig
)
