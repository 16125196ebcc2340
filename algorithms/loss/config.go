package loss

import "github.com/temperml/temper/algorithms/loss/losscfg"

// The configuration types live in losscfg (no GoMLX, so workflows can import them); these aliases
// keep the names the graph code and its callers use.
type (
	Preference   = losscfg.Preference
	PolicyConfig = losscfg.PolicyConfig
	AggMode      = losscfg.AggMode
	KLEstimator  = losscfg.KLEstimator
	Correction   = losscfg.Correction
)

// Preference-loss kinds, policy algorithms, aggregation modes and KL estimators: see losscfg.
const (
	PrefDPO   = losscfg.PrefDPO
	PrefIPO   = losscfg.PrefIPO
	PrefORPO  = losscfg.PrefORPO
	PrefSimPO = losscfg.PrefSimPO
	PrefKTO   = losscfg.PrefKTO

	AlgoGRPO        = losscfg.AlgoGRPO
	AlgoDrGRPO      = losscfg.AlgoDrGRPO
	AlgoDAPO        = losscfg.AlgoDAPO
	AlgoGSPO        = losscfg.AlgoGSPO
	AlgoRLOO        = losscfg.AlgoRLOO
	AlgoReinforcePP = losscfg.AlgoReinforcePP
	AlgoPPO         = losscfg.AlgoPPO
	AlgoCISPO       = losscfg.AlgoCISPO

	CorrectionNone    = losscfg.CorrectionNone
	CorrectionTIS     = losscfg.CorrectionTIS
	CorrectionMIS     = losscfg.CorrectionMIS
	CorrectionGeoMask = losscfg.CorrectionGeoMask
	CorrectionIcePop  = losscfg.CorrectionIcePop

	AggTokenMean           = losscfg.AggTokenMean
	AggSeqMeanTokenMean    = losscfg.AggSeqMeanTokenMean
	AggSeqMeanTokenSum     = losscfg.AggSeqMeanTokenSum
	AggSeqMeanTokenSumNorm = losscfg.AggSeqMeanTokenSumNorm

	KLK1 = losscfg.KLK1
	KLK2 = losscfg.KLK2
	KLK3 = losscfg.KLK3
)

var (
	PrefKinds    = losscfg.PrefKinds
	Algorithms   = losscfg.Algorithms
	AggModes     = losscfg.AggModes
	KLEstimators = losscfg.KLEstimators

	CorrectionModes = losscfg.CorrectionModes
)

// DefaultBeta, DefaultPreference and DefaultPolicyConfig: see losscfg.
var (
	DefaultBeta         = losscfg.DefaultBeta
	DefaultPreference   = losscfg.DefaultPreference
	DefaultPolicyConfig = losscfg.DefaultPolicyConfig

	DefaultCorrectionBounds = losscfg.DefaultCorrectionBounds
)
