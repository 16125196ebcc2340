package train

import (
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/objective"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tokenize"
)

// ObjectiveStep reads a custom objective's step metrics (engine.StepObjective's map) as a StepResult.
func ObjectiveStep(obj objective.Objective, m map[string]float32, units int) StepResult {
	r := StepResult{Loss: float64(m["loss"]), GradNorm: float64(m["grad_norm"]), Seconds: float64(m["seconds"]), Units: units,
		Metrics: make(map[string]float64, len(obj.Metrics))}
	for _, name := range obj.Metrics {
		r.Metrics[name] = float64(m[name])
	}
	return r
}

// NextRows takes rows example indices from cur in the seeded per-epoch order (data.Order), crossing
// into the next epoch as needed, and returns the cursor after them.
func NextRows(n, rows int, cur data.Cursor) ([]int, data.Cursor) {
	idx := make([]int, rows)
	order := data.Order(n, cur.Seed, cur.Epoch)
	for r := range idx {
		if cur.Index >= n {
			cur.Epoch, cur.Index = cur.Epoch+1, 0
			order = data.Order(n, cur.Seed, cur.Epoch)
		}
		idx[r] = order[cur.Index]
		cur.Index++
	}
	if cur.Index >= n {
		cur.Epoch, cur.Index = cur.Epoch+1, 0
	}
	return idx, cur
}

func Zeros(rows, cols int) [][]float32 {
	out := make([][]float32, rows)
	for i := range out {
		out[i] = make([]float32, cols)
	}
	return out
}

// EvalRows is how many held-out examples go through the engine at once.
const EvalRows = 64

// Passes checks a generated completion against an example.
func Passes(ex tasks.Example, completion string) bool {
	if t, err := tasks.Lookup(ex.Task); err == nil && ex.Task != "" {
		ok, _ := t.Check(ex, completion)
		return ok
	}
	want := ex.Answer
	if want == "" {
		want = ex.Completion
	}
	if want == "" && len(ex.Messages) > 0 {
		want = ex.Messages[len(ex.Messages)-1].Content
	}
	return tasks.FirstLine(completion) == tasks.FirstLine(want)
}

func StripStop(toks []int) []int {
	if n := len(toks); n > 0 && toks[n-1] == tokenize.ByteEOS {
		return toks[:n-1]
	}
	return toks
}
