package train

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/verify"
)

// verdictLine is what the trainer reads of a verdict line (reward.ItemVerdict): the reward role
// imports this package, so the format is read by field names, not by its type.
type verdictLine struct {
	ID    string  `json:"id"`
	Score float64 `json:"score"`
}

// ReadScoredShards returns an iteration's rollouts, the shards concatenated in order, and their
// scores from the verdicts object beside each. The shards are read one at a time, so the reader
// never holds more than the rollouts and one shard's verdict text.
func ReadScoredShards(ctx context.Context, cl *ckpt.Client, shards []trainapi.ScoredShard) ([]rollout.Rollout, []float64, error) {
	var rs []rollout.Rollout
	var scores []float64
	for _, sh := range shards {
		part, err := ReadRollouts(ctx, cl, sh.Rollouts)
		if err != nil {
			return nil, nil, err
		}
		s, err := ReadScores(ctx, cl, sh.Verdicts, part)
		if err != nil {
			return nil, nil, err
		}
		rs = append(rs, part...)
		scores = append(scores, s...)
	}
	return rs, scores, nil
}

// ReadScores reads a verdicts object and returns its scores, checking that it judged rs, in order.
func ReadScores(ctx context.Context, cl *ckpt.Client, uri string, rs []rollout.Rollout) ([]float64, error) {
	b, err := ReadObject(ctx, cl, uri)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var out []float64
	for line := 1; sc.Scan(); line++ {
		var v verdictLine
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			return nil, BadInput(fmt.Errorf("train: verdicts %s:%d: %w", uri, line, err))
		}
		if i := len(out); i >= len(rs) || rs[i].ID != v.ID {
			return nil, BadInput(fmt.Errorf("train: verdicts %s:%d: id %q does not match the rollouts (%d of them)", uri, line, v.ID, len(rs)))
		}
		out = append(out, v.Score)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("train: verdicts %s: %w", uri, err)
	}
	if len(out) != len(rs) {
		return nil, BadInput(fmt.Errorf("train: verdicts %s: %d verdicts for %d rollouts", uri, len(out), len(rs)))
	}
	return out, nil
}

// stepVerdictLine is what the step-rewards reader reads of a verdict line: the partial scores too.
type stepVerdictLine struct {
	ID      string             `json:"id"`
	Partial map[string]float64 `json:"partial"`
}

// ReadStepScores reads the step scores of the component labelled label (a "prm" verifier's, filed
// under label/step_000, …; verify.StepScores) from the verdicts objects of shards, for rs (the
// shards' rollouts, concatenated in order): [len(rs)][steps scored], nil for a sample with none
// (empty, too long for the model, or a verifier error). The per-sample scores travel by reference:
// the workflow carries the shards' URIs only.
func ReadStepScores(ctx context.Context, cl *ckpt.Client, shards []trainapi.ScoredShard, label string, rs []rollout.Rollout) ([][]float64, error) {
	var out [][]float64
	for _, sh := range shards {
		b, err := ReadObject(ctx, cl, sh.Verdicts)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(bytes.NewReader(b))
		sc.Buffer(make([]byte, 64<<10), 16<<20)
		for line := 1; sc.Scan(); line++ {
			var v stepVerdictLine
			if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
				return nil, BadInput(fmt.Errorf("train: verdicts %s:%d: %w", sh.Verdicts, line, err))
			}
			if i := len(out); i >= len(rs) || rs[i].ID != v.ID {
				return nil, BadInput(fmt.Errorf("train: verdicts %s:%d: id %q does not match the rollouts (%d of them)", sh.Verdicts, line, v.ID, len(rs)))
			}
			out = append(out, verify.StepScores(v.Partial, label))
		}
		if err := sc.Err(); err != nil {
			return nil, fmt.Errorf("train: verdicts %s: %w", sh.Verdicts, err)
		}
	}
	if len(out) != len(rs) {
		return nil, BadInput(fmt.Errorf("train: step scores of %d shards: %d verdicts for %d rollouts", len(shards), len(out), len(rs)))
	}
	return out, nil
}
