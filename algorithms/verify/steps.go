package verify

import "fmt"

// StepScoreKey is the Verdict.Partial key of step i's score (0-based) in a step-level verifier's
// own verdict (the "prm" verifier's; a Composite files it as "label/step_000"). Step i is line i of
// the completion (tasks.SolutionSteps). It lives here, below both the reward role that writes the
// key and the trainer that reads it back from the verdicts objects (PPO's step rewards), so that
// the two cannot drift apart.
func StepScoreKey(i int) string { return fmt.Sprintf("step_%03d", i) }

// StepScores returns the step scores a Composite's verdict partials hold for the component
// labelled label: Partial[label+"/"+StepScoreKey(i)] for i = 0, 1, … up to the first missing one
// (nil when there is none).
func StepScores(partial map[string]float64, label string) []float64 {
	var out []float64
	for i := 0; ; i++ {
		s, ok := partial[label+"/"+StepScoreKey(i)]
		if !ok {
			return out
		}
		out = append(out, s)
	}
}
