package train

import (
	"context"
	"time"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train/trainapi"
)

// Now is the wall time of a metrics record, in seconds since the epoch.
func Now() float64 { return float64(time.Now().UnixNano()) / 1e9 }

// stepRecord is one optimizer step's line of the metrics log.
func stepRecord(step int, lr float64, r StepResult, unit string) ckpt.MetricsRecord {
	m := map[string]float64{"loss": r.Loss, "grad_norm": r.GradNorm, "lr": lr, "seconds": r.Seconds}
	for k, v := range r.Metrics {
		m[k] = v
	}
	if unit != "" && r.Seconds > 0 {
		m[unit+"_per_s"] = float64(r.Units) / r.Seconds
	}
	return ckpt.MetricsRecord{Kind: ckpt.RecordTrain, Step: step, Time: Now(), Metrics: m}
}

// LogEval appends an evaluation's metrics to the log at (nil: nothing).
func (a *Activities) LogEval(ctx context.Context, store string, at *trainapi.LogAt, m map[string]float64) error {
	if at == nil {
		return nil
	}
	return a.Ckpt.AppendMetrics(ctx, store, at.Run, at.Phase, []ckpt.MetricsRecord{{Kind: ckpt.RecordEval, Step: at.Step, Time: Now(), Metrics: m}})
}
