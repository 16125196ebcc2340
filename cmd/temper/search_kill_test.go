package main

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/rollout/rolloutapi"
	"github.com/temperml/temper/workers/testenv"
	"github.com/temperml/temper/workflows"
)

// searchKillBase nearly memorises a few expr examples, so that the search below finds solutions
// and pairs (what it writes must be compared, so it must write something).
const searchKillBase = `{"model":{"preset":"tiny"},"data":{"task":"expr","train_examples":8,"heldout_examples":8},
	"batch":{"rows":8,"seq":48},"steps":80,"chunk_steps":80,"optimizer":{"lr":0.01,"warmup_steps":5},
	"eval":{"examples":8,"max_new_tokens":40,"before":false}}`

// searchKillConfig: 4 batches of 2 prompts (the base's training prompts), long enough each to be
// killed inside.
const searchKillConfig = `{"data":{"task":"expr","train_examples":8,"heldout_examples":8},"prompts":8,"batch_prompts":2,
	"heartbeat_timeout":"2s","search":{"expand":4,"simulations":16,"max_new_tokens":40,"margin":0.2}}`

// TestSearchExactResumeAfterSIGKILL runs the same search phase twice from one base model: once
// undisturbed, once with its rollout worker (a separate `temper worker --roles rollout` process)
// killed by SIGKILL inside random batches and restarted. Each killed batch is retried from its
// input, so the phase's data objects (SFT examples, pairs, held-out examples) must be
// byte-identical to the undisturbed run's.
func TestSearchExactResumeAfterSIGKILL(t *testing.T) {
	if testing.Short() && os.Getenv("CI") == "" {
		t.Skip("subprocess test; runs in CI and without -short")
	}
	env := testenv.Get(t)
	env.Roles(t, workflows.QueueTemper, workflows.QueueTrainer)
	dir := t.TempDir()
	store := "file://" + dir
	base := prefRun(t, env.Client, "search-base", workflows.PipelineInput{Name: "search-base", Store: store, Seed: 4,
		Phases: []workflows.PhaseSpec{{Name: "base", Kind: "sft", Config: json.RawMessage(searchKillBase)}}})
	in := workflows.PipelineInput{Name: "search", Store: store, Seed: 4, Phases: []workflows.PhaseSpec{
		{Name: "search", Kind: "search", From: base.Phases[0].Checkpoint, Config: json.RawMessage(searchKillConfig)},
	}}
	p := &workerProcess{t: t, role: workflows.QueueRollout, addr: env.Server.FrontendAddr(), logs: filepath.Join(dir, "rollout.log")}
	p.start()
	t.Cleanup(p.kill)
	clean := prefRun(t, env.Client, "search-clean", in)
	batchDur := activityDuration(t, env.Client, "search-clean.search", rolloutapi.SearchName)

	r := mustStart(t, env.Client, "search-killed", in)
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 3))
	last := ""
	for i := 0; i < 3; i++ {
		deadline := time.Now().Add(2 * time.Minute)
		var id string
		for id = startedActivity(env.Client, "search-killed.search", rolloutapi.SearchName); id == "" || id == last; id = startedActivity(env.Client, "search-killed.search", rolloutapi.SearchName) {
			if time.Now().After(deadline) {
				t.Fatalf("kill %d: no new search batch started", i+1)
			}
			time.Sleep(10 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.Int64N(int64(batchDur/2) + 1)))
		p.kill()
		t.Logf("SIGKILL %d of the rollout worker in search activity %s", i+1, id)
		last = id
		p.start()
	}
	killed := waitRun(t, r)
	n := retriedActivities(t, env.Client, "search-killed.search")
	if n < 1 {
		t.Fatalf("no activity was retried after 3 kills: none interrupted a batch")
	}
	a, b := clean.Phases[0], killed.Phases[0]
	t.Logf("clean: %v", a.Metrics)
	if a.Data == nil || b.Data == nil || a.Metrics["data_examples"] < 1 || a.Metrics["data_pairs"] < 1 {
		t.Fatalf("the undisturbed search wrote %+v (metrics %v): the comparison needs solutions and pairs", a.Data, a.Metrics)
	}
	for _, uris := range [][2]string{{a.Data.SFT, b.Data.SFT}, {a.Data.Pairs, b.Data.Pairs}, {a.Data.Heldout, b.Data.Heldout}} {
		if uris[0] == uris[1] {
			t.Fatalf("both runs wrote %s", uris[0])
		}
		x, y := readObject(t, uris[0]), readObject(t, uris[1])
		if string(x) != string(y) {
			t.Errorf("%s and %s differ after kills (%d vs %d bytes)", uris[0], uris[1], len(x), len(y))
		}
	}
	if !t.Failed() {
		t.Logf("data objects match byte for byte after %d retried activities (undisturbed batch %v)", n, batchDur.Round(time.Millisecond))
	}
}

func readObject(t *testing.T, uri string) []byte {
	t.Helper()
	b, err := ckpt.New(ckpt.Options{}).ReadObject(context.Background(), uri)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// startedActivity returns the ID of a started, pending activity of the given type, or "".
func startedActivity(c client.Client, wfID, name string) string {
	desc, err := c.DescribeWorkflowExecution(context.Background(), wfID, "")
	if err != nil {
		return ""
	}
	for _, pa := range desc.PendingActivities {
		if pa.ActivityType.GetName() == name && pa.State == enumspb.PENDING_ACTIVITY_STATE_STARTED {
			return pa.ActivityId
		}
	}
	return ""
}

// activityDuration is the shortest start-to-completion time of the activities of one type in a
// finished workflow: how long a kill may wait after one starts and still land inside it.
func activityDuration(t *testing.T, c client.Client, wfID, name string) time.Duration {
	t.Helper()
	mine := map[int64]bool{}
	started := map[int64]time.Time{}
	best := time.Duration(0)
	it := c.GetWorkflowHistory(context.Background(), wfID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		e, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		if a := e.GetActivityTaskScheduledEventAttributes(); a != nil && a.ActivityType.GetName() == name {
			mine[e.EventId] = true
		}
		if a := e.GetActivityTaskStartedEventAttributes(); a != nil && mine[a.ScheduledEventId] {
			started[e.EventId] = e.EventTime.AsTime()
		}
		if a := e.GetActivityTaskCompletedEventAttributes(); a != nil && mine[a.ScheduledEventId] {
			if s, ok := started[a.StartedEventId]; ok {
				if d := e.EventTime.AsTime().Sub(s); best == 0 || d < best {
					best = d
				}
			}
		}
	}
	if best <= 0 {
		t.Fatalf("%s: no completed %s activity in the history", wfID, name)
	}
	return best
}
