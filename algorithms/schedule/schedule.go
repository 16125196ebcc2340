// Package schedule computes learning-rate schedules as pure functions of the step, so a resumed run
// gets exactly the rate an uninterrupted one would have.
package schedule

import "math"

// WarmupCosine is linear warmup from 0 to Peak over Warmup steps, then cosine decay to Peak*MinRatio
// at Total steps (and flat after). Step counts from 0; the rate for step s is used by the update that
// makes step s+1.
type WarmupCosine struct {
	Peak     float64
	Warmup   int
	Total    int
	MinRatio float64
}

// At returns the learning rate of step s.
func (w WarmupCosine) At(s int) float64 {
	if w.Warmup > 0 && s < w.Warmup {
		return w.Peak * float64(s+1) / float64(w.Warmup)
	}
	span := w.Total - w.Warmup
	if span <= 0 {
		return w.Peak
	}
	p := math.Min(1, float64(s-w.Warmup)/float64(span))
	lo := w.Peak * w.MinRatio
	return lo + (w.Peak-lo)*0.5*(1+math.Cos(math.Pi*p))
}
