package main

import (
	"context"
	"errors"
	"flag"
	"os"
	"time"

	"github.com/temperml/temper/activities/reward"
	"github.com/temperml/temper/activities/reward/rewardapi"
	"github.com/temperml/temper/algorithms/verify"
	"github.com/temperml/temper/internal/config"
	"github.com/temperml/temper/internal/report"
	"github.com/temperml/temper/workers"
)

func init() {
	register(&command{name: "score", summary: "score completions (JSONL) with a reward spec, as the reward activity would: per-line score, pass, feedback and a summary",
		usage: "--reward SPEC FILE.jsonl", flags: flagsOf[scoreCmd]()})
}

type scoreCmd struct {
	spec    string
	asJSON  bool
	timeout time.Duration
}

func (c *scoreCmd) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.spec, "reward", "task", "verifiers: names (\"math,format\"), a spec as YAML/JSON ({verifiers: [{name: exact, params: {tag: \"-\"}}]}) or a file holding one; the default \"task\" is a built-in task's checker")
	fs.BoolVar(&c.asJSON, "json", false, "print one JSON line per completion, then one with the summary")
	fs.DurationVar(&c.timeout, "item-timeout", reward.DefaultItemTimeout, "time limit per completion")
}

func (c *scoreCmd) run(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageErr("score wants one JSONL file, got %d arguments (usage: temper score --reward SPEC FILE.jsonl)", len(args))
	}
	s, err := reward.ParseSpec(c.spec)
	if err != nil {
		return usageErr("%v", err)
	}
	f, err := os.Open(args[0])
	if err != nil {
		return usageErr("%v", err)
	}
	defer f.Close()
	items, lines, err := reward.ReadItems(f, args[0])
	if err != nil {
		return usageErr("%v", err)
	}
	verdicts, m, err := c.score(ctx, s, items)
	if err != nil {
		return err
	}
	report.Scores(stdout, args[0], lines, verdicts, m, c.asJSON)
	return nil
}

// score runs the reward activity's scoring in-process, reward.MaxItems at a time.
func (c *scoreCmd) score(ctx context.Context, s verify.Spec, items []rewardapi.Item) ([]rewardapi.ItemVerdict, rewardapi.Metrics, error) {
	var m rewardapi.Metrics
	usesCode := false
	for _, v := range s.Verifiers {
		usesCode = usesCode || v.Name == "code"
	}
	ra, err := workers.NewRewardActivities(workers.Options{}, usesCode)
	if err != nil {
		return nil, m, err
	}
	var verdicts []rewardapi.ItemVerdict
	for lo := 0; lo < len(items); lo += rewardapi.MaxItems {
		out, err := ra.ScoreItems(ctx, rewardapi.ScoreInput{Items: items[lo:min(lo+rewardapi.MaxItems, len(items))], Spec: s,
			ItemTimeout: config.Duration(c.timeout)}, nil)
		if errors.Is(err, reward.ErrInvalidInput) {
			return nil, m, usageErr("--reward: %v", err)
		}
		if err != nil {
			return nil, m, err
		}
		verdicts = append(verdicts, out.Verdicts...)
		m = reward.MergeMetrics(m, out.Metrics)
	}
	return verdicts, m, nil
}
