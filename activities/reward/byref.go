package reward

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/temperml/temper/activities/reward/rewardapi"
)

// byReference writes out's verdicts as JSON lines (one ItemVerdict per rollout, file order) beside
// the rollouts object and returns the output without them: metrics, the object's URI and the first
// maxFailed failures. Writing the same verdicts again replaces the object, so a retried Score is
// idempotent.
func (a *Activities) byReference(ctx context.Context, rollouts string, out rewardapi.ScoreOutput, maxFailed int) (rewardapi.ScoreOutput, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	for i := range out.Verdicts {
		if err := enc.Encode(&out.Verdicts[i]); err != nil {
			return rewardapi.ScoreOutput{}, fmt.Errorf("reward: verdicts of %s: %w", rollouts, err)
		}
	}
	uri := rewardapi.VerdictsURI(rollouts)
	dir, name := path.Split(uri)
	got, err := a.Ckpt.PutObject(ctx, strings.TrimSuffix(dir, "/"), name, &buf)
	if err != nil {
		return rewardapi.ScoreOutput{}, fmt.Errorf("reward: verdicts of %s: %w", rollouts, err)
	}
	res := rewardapi.ScoreOutput{Metrics: out.Metrics, VerdictsURI: got}
	for i, v := range out.Verdicts {
		if len(res.Failed) >= maxFailed {
			break
		}
		if !v.Pass && v.Error == "" {
			res.Failed = append(res.Failed, rewardapi.Failed{Index: i, Feedback: v.Feedback})
		}
	}
	return res, nil
}
