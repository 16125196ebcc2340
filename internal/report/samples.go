package report

import (
	"context"
	"fmt"
	"io"
	"path"
	"regexp"
	"sort"
	"strconv"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/algorithms/rollout"
)

// rolloutName matches the objects activities/rollout writes (rolloutapi.RolloutsKey): iter-NNNNNN.jsonl, or with a
// tag (shards, self-correction rounds) iter-NNNNNN-TAG.jsonl; not the verdicts beside them (TAG.verdicts).
var rolloutName = regexp.MustCompile(`^iter-(\d+)(?:-[^/.]+)?\.jsonl$`)

// IterationObjects lists the rollouts objects of a phase by iteration: the keys of each iteration
// (its own rollouts first, then its tagged rounds) and the iterations in order. No rollouts is an error
// that asks whether the phase is an RL phase of the run and the store its store.
func IterationObjects(ctx context.Context, st ckpt.Store, run, phase string) (map[int][]string, []int, error) {
	dir := path.Dir(rolloutapi.RolloutsKey(run, phase, 0, "")) + "/"
	objs, err := st.List(ctx, dir)
	if err != nil {
		return nil, nil, fmt.Errorf("list %s: %w", st.URI(dir), err)
	}
	byIter := map[int][]string{}
	for _, o := range objs {
		m := rolloutName.FindStringSubmatch(path.Base(o.Key))
		if m == nil || path.Dir(o.Key)+"/" != dir {
			continue
		}
		n, _ := strconv.Atoi(m[1])
		byIter[n] = append(byIter[n], o.Key)
	}
	iters := make([]int, 0, len(byIter))
	for n, keys := range byIter {
		iters = append(iters, n)
		sort.Slice(keys, func(i, j int) bool { // the iteration's own rollouts first, then its tagged rounds
			if li, lj := len(keys[i]), len(keys[j]); li != lj {
				return li < lj
			}
			return keys[i] < keys[j]
		})
	}
	sort.Ints(iters)
	if len(iters) == 0 {
		return nil, nil, fmt.Errorf("no rollouts under %s: is %s an RL phase of run %s, and is this its store (--store)?", st.URI(dir), phase, run)
	}
	return byIter, iters, nil
}

// lastSamples reads up to n rollouts of the newest iteration that dir has rollouts for: the first two
// of each prompt's group, so that the page shows several prompts and how a group's samples differ.
func lastSamples(ctx context.Context, st ckpt.Store, run, dir string, n int) ([]rollout.Rollout, string) {
	byIter, iters, err := IterationObjects(ctx, st, run, dir)
	if err != nil || len(iters) == 0 {
		return nil, ""
	}
	key := byIter[iters[len(iters)-1]][0]
	rs, err := ReadRollouts(ctx, st, key)
	if err != nil {
		return nil, ""
	}
	var out []rollout.Rollout
	perGroup := map[int]int{}
	for _, r := range rs {
		if perGroup[r.Group] < 2 && len(out) < n {
			perGroup[r.Group]++
			out = append(out, r)
		}
	}
	return out, st.URI(key)
}

// ReadRollouts reads the rollouts object at key (one of IterationObjects' keys).
func ReadRollouts(ctx context.Context, st ckpt.Store, key string) ([]rollout.Rollout, error) {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", st.URI(key), err)
	}
	defer rc.Close()
	return rollout.Read(rc, st.URI(key))
}

func quoted(s string, max int) string {
	if len(s) > max {
		s = s[:max] + "…"
	}
	return strconv.Quote(s)
}

// WriteRollouts prints the rollouts of object uri grouped by prompt, at most limit of them (0: all);
// an agentic episode comes with its counts and transcript, a self-correction round with its feedback.
func WriteRollouts(w io.Writer, uri string, rs []rollout.Rollout, limit int) {
	fmt.Fprintf(w, "%s: %d rollouts\n", uri, len(rs))
	group := -1
	for i, r := range rs {
		if limit > 0 && i >= limit {
			fmt.Fprintf(w, "  … %d more (-n 0 prints all)\n", len(rs)-limit)
			return
		}
		if r.Group != group {
			group = r.Group
			line := fmt.Sprintf("  group %d  prompt %s", r.Group, quoted(r.Prompt, 200))
			if r.Answer != "" {
				line += "  answer " + quoted(r.Answer, 80)
			}
			fmt.Fprintln(w, line)
		}
		line := fmt.Sprintf("    %-10s policy v%d  %-6s %3d tokens  %s", r.ID, r.PolicyVersion, r.StopReason, len(r.Tokens), quoted(r.Completion, 400))
		if r.Attempt > 0 {
			line += fmt.Sprintf("  (retry %d after: %s)", r.Attempt, quoted(r.Feedback, 200))
		}
		fmt.Fprintln(w, line)
		if ep := r.Ep; ep != nil { // an agentic episode: its counts and the whole transcript
			check := ""
			if ep.Checked {
				check = fmt.Sprintf("  checked (last check passed: %v)", ep.CheckPass)
			}
			fmt.Fprintf(w, "               episode: %d turns, %d tool calls, %d tool errors, ended by %s%s\n", ep.Turns, ep.ToolCalls, ep.ToolErrors, ep.End, check)
			fmt.Fprintf(w, "               transcript %s\n", quoted(ep.Transcript, 1200))
		}
	}
}
