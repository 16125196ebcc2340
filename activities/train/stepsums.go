package train

import "math"

// StepSums accumulates the metrics of a run of optimizer steps (policy and online-DPO steps share
// it): their sum per name, the step count, and whether any step's loss or gradient norm was not finite.
type StepSums struct {
	Sums      map[string]float64
	Steps     int
	NonFinite bool
}

// Add records one step's metrics.
func (s *StepSums) Add(m map[string]float32) {
	if s.Sums == nil {
		s.Sums = map[string]float64{}
	}
	if l, g := float64(m["loss"]), float64(m["grad_norm"]); math.IsNaN(l) || math.IsInf(l, 0) || math.IsNaN(g) || math.IsInf(g, 0) {
		s.NonFinite = true
	}
	for k, v := range m {
		s.Sums[k] += float64(v)
	}
	s.Steps++
}

// MeansInto writes each metric's mean over the steps into out.
func (s *StepSums) MeansInto(out map[string]float64) {
	for k, v := range s.Sums {
		out[k] = v / float64(s.Steps)
	}
}
