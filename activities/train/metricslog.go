package train

import (
	"context"
	"time"

	"github.com/temperml/temper/activities/ckpt"
)

// LogAt says where an evaluation records its metrics: the metrics log of Run/Phase (ckpt.MetricsLogKey)
// at Step, the phase's step or RL iteration whose checkpoint was evaluated. Nil records nothing.
type LogAt struct {
	Run   string `json:"run"`
	Phase string `json:"phase"`
	Step  int    `json:"step"`
}

func now() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// stepRecord is one optimizer step's line of the metrics log.
func stepRecord(step int, lr float64, r stepResult, unit string) ckpt.MetricsRecord {
	m := map[string]float64{"loss": r.Loss, "grad_norm": r.GradNorm, "lr": lr, "seconds": r.Seconds}
	for k, v := range r.Metrics {
		m[k] = v
	}
	if unit != "" && r.Seconds > 0 {
		m[unit+"_per_s"] = float64(r.Units) / r.Seconds
	}
	return ckpt.MetricsRecord{Kind: ckpt.RecordTrain, Step: step, Time: now(), Metrics: m}
}

// logEval appends an evaluation's metrics to the log at.
func (a *Activities) logEval(ctx context.Context, store string, at *LogAt, m map[string]float64) error {
	if at == nil {
		return nil
	}
	return a.Ckpt.AppendMetrics(ctx, store, at.Run, at.Phase, []ckpt.MetricsRecord{{Kind: ckpt.RecordEval, Step: at.Step, Time: now(), Metrics: m}})
}
