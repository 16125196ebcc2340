package control

import (
	"context"
	"fmt"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/control/controlapi"
)

// Activities holds the store client.
type Activities struct {
	Ckpt *ckpt.Client
}

// Log appends in's records, each to its run and phase's log, in the order given.
func (a *Activities) Log(ctx context.Context, in controlapi.LogInput) error {
	type log struct{ run, phase string }
	var order []log
	byLog := map[log][]ckpt.MetricsRecord{}
	for _, r := range in.Records {
		l := log{r.Run, r.Phase}
		if _, ok := byLog[l]; !ok {
			order = append(order, l)
		}
		m := map[string]float64{}
		for k, v := range r.Values {
			m[k] = v
		}
		byLog[l] = append(byLog[l], ckpt.MetricsRecord{Kind: ckpt.RecordControl, Step: r.Step, Time: r.Time, Metrics: m,
			Seq: r.Seq, Event: r.Event, Label: r.Label, Note: r.Note})
	}
	for _, l := range order {
		if err := a.Ckpt.AppendMetrics(ctx, in.Store, l.run, l.phase, byLog[l]); err != nil {
			return fmt.Errorf("control: log %s/%s: %w", l.run, l.phase, err)
		}
	}
	return nil
}
