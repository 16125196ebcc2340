package policy

import (
	"math"

	"github.com/temperml/temper/algorithms/rollout"
)

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
