package policy

import (
	"fmt"
	"maps"
	"math"

	"github.com/temperml/temper/algorithms/loss"
	"github.com/temperml/temper/algorithms/rollout"
)

// Prefixes of the train–inference mismatch of fresh rollouts (sampled by the version the step
// trains: sync mode) and stale ones (an older version: async mode), beside loss.MismatchPrefix's
// figures over both.
const (
	MismatchFreshPrefix = "mismatch_fresh_"
	MismatchStalePrefix = "mismatch_stale_"
)

// countRows counts minibatch rows as fresh or stale by the version that sampled each.
func (p *plan) countRows(rows policyRows) {
	for _, v := range rows.versions {
		if v == p.in.Version {
			p.mismatch.freshRows++
		} else {
			p.mismatch.staleRows++
		}
	}
}

// measureMismatch adds minibatch rows' mismatch of π_old (old, what the pre-update pass read) against
// their behaviour log-probs, over their trained tokens, to the fresh or stale measurement by the
// version that sampled each row.
func (p *plan) measureMismatch(rows policyRows, old [][]float32) error {
	for r := range rows.mask {
		counted := make([]bool, len(rows.mask[r]))
		for t, m := range rows.mask[r] {
			counted[t] = m > 0
		}
		s, err := loss.MismatchOf(old[r], rows.behaviour[r], counted)
		if err != nil {
			return fmt.Errorf("%s: mismatch of row %d: %w", p.op, r, err)
		}
		if rows.versions[r] == p.in.Version {
			p.mismatch.fresh = p.mismatch.fresh.Merge(s)
		} else {
			p.mismatch.stale = p.mismatch.stale.Merge(s)
		}
	}
	return nil
}

// mismatchMetrics sets the step's mismatch figures: loss.MismatchPrefix's over every trained token,
// MismatchFreshPrefix's and MismatchStalePrefix's over the fresh and the stale rollouts' (each only
// when it has tokens). A step that read π_old measured them on the host (measureMismatch) and they
// replace the objective's, which averaged over the optimizer steps would be means of minibatch
// means and a mean of maxima. An on-policy step's one optimizer step measured them exactly in its
// graph; they are fresh or stale when all its rollouts are (an iteration's rollouts come from one
// version), and not split otherwise.
func (p *plan) mismatchMetrics(onPolicy bool) {
	if onPolicy {
		prefix := MismatchFreshPrefix
		switch m := p.mismatch; {
		case m.staleRows > 0 && m.freshRows > 0:
			return
		case m.staleRows > 0:
			prefix = MismatchStalePrefix
		}
		for _, k := range loss.MismatchNames("") {
			p.metrics[prefix+k] = p.metrics[loss.MismatchPrefix+k]
		}
		return
	}
	all := p.mismatch.fresh.Merge(p.mismatch.stale)
	maps.Copy(p.metrics, all.Metrics(loss.MismatchPrefix))
	if p.mismatch.fresh.Tokens > 0 {
		maps.Copy(p.metrics, p.mismatch.fresh.Metrics(MismatchFreshPrefix))
	}
	if p.mismatch.stale.Tokens > 0 {
		maps.Copy(p.metrics, p.mismatch.stale.Metrics(MismatchStalePrefix))
	}
}

// rewardStats sets reward_mean, reward_std (population) and response_length (mean completion
// tokens, lengths[i] those of rollout i) over all rollouts, and the episode metrics.
func rewardStats(metrics map[string]float64, rs []rollout.Rollout, lengths []int, rewards []float64) {
	var rsum, rsq, lsum float64
	for i, r := range rewards {
		rsum += r
		rsq += r * r
		lsum += float64(lengths[i])
	}
	n := float64(len(rs))
	metrics["reward_mean"] = rsum / n
	metrics["reward_std"] = math.Sqrt(math.Max(0, rsq/n-(rsum/n)*(rsum/n)))
	metrics["response_length"] = lsum / n
	episodeStats(metrics, rs)
}

// episodeStats sets, when rs are agentic episodes, the per-iteration episode metrics: turns per
// episode (episode_turns), tool calls and failed tool calls per episode (episode_tool_calls,
// episode_tool_errors), the share of episodes ending with an answer (episode_answered), the share
// that called check (episode_checked) and, of those, the share whose last check passed
// (episode_check_passed).
func episodeStats(metrics map[string]float64, rs []rollout.Rollout) {
	var n, turns, calls, errs, answered, checked, passed float64
	for _, r := range rs {
		if r.Ep == nil {
			continue
		}
		n++
		turns += float64(r.Ep.Turns)
		calls += float64(r.Ep.ToolCalls)
		errs += float64(r.Ep.ToolErrors)
		if r.Ep.End == "answer" {
			answered++
		}
		if r.Ep.Checked {
			checked++
			if r.Ep.CheckPass {
				passed++
			}
		}
	}
	if n == 0 {
		return
	}
	metrics["episode_turns"], metrics["episode_tool_calls"], metrics["episode_tool_errors"] = turns/n, calls/n, errs/n
	metrics["episode_answered"], metrics["episode_checked"] = answered/n, checked/n
	if checked > 0 {
		metrics["episode_check_passed"] = passed / checked
	}
}

// summary is an episode's counts without its transcript (what a streamed step keeps in memory).
func summary(ep *rollout.Episode) *rollout.Episode {
	if ep == nil {
		return nil
	}
	s := *ep
	s.Transcript = ""
	return &s
}
