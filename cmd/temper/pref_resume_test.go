package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/workflows"
)

// Sizes of the preference runs of TestPreferenceExactResumeAfterSIGKILL: prefChunks chunks of
// prefChunkSteps steps each.
const (
	prefChunkSteps = 8
	prefChunks     = 4
)

// prefSFT is the short SFT run that gives every preference run the same starting (and reference) model.
const prefSFT = `{"model":{"preset":"tiny"},"data":{"task":"add2","train_examples":300,"heldout_examples":16},
	"batch":{"rows":8,"seq":32},"steps":6,"chunk_steps":6,"heartbeat_timeout":"2s",
	"eval":{"examples":8,"max_new_tokens":4,"before":false}}`

// prefConfig is a preference phase's config: a few short chunks, evaluation only at the end and
// without exact match or sampled KL (they cost time and do not touch the weights); extra is appended
// inside the object. The batch keeps a chunk at a few hundred milliseconds: with 8×16 rows the faster
// engine finished a chunk in ~80 ms, and a kill aimed inside one could miss the whole remaining run.
func prefConfig(extra string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"data":{"task":"add2","train_examples":64,"heldout_examples":8},
	"batch":{"rows":32,"seq":32},"steps":%d,"chunk_steps":%d,"heartbeat_timeout":"2s",
	"eval":{"before":false,"exact_match":false,"examples":8,"kl_tokens":0}%s}`, prefChunkSteps*prefChunks, prefChunkSteps, extra))
}

// TestPreferenceExactResumeAfterSIGKILL runs each preference kind, and a distill phase whose teacher
// is the SFT model, twice from the same SFT checkpoint:
// once undisturbed, once with its trainer worker (a separate `temper worker --roles trainer` process)
// killed by SIGKILL at random moments inside random chunks and restarted. Each killed chunk is retried
// from its input checkpoint and cursor, so the final weights and optimizer state must be byte-identical
// to the undisturbed run's. dpo trains on precomputed reference log-probs (read back from the stored
// reference object on every retry), kto on unpaired examples with the reference model held on the fly
// (reloaded on every retry), orpo and simpo without a reference; distill samples half of each batch
// from the student (seeded by the data cursor, so a retry resamples the same tokens).
func TestPreferenceExactResumeAfterSIGKILL(t *testing.T) {
	env, dir := killTestEnv(t, workflows.QueueTemper)
	store := "file://" + dir

	p := startWorker(t, env, workflows.QueueTrainer, dir, "trainer-sft")
	sft := prefRun(t, env.Client, "pref-sft", workflows.PipelineInput{Name: "pref-sft", Store: store, Seed: 5,
		Phases: []workflows.PhaseSpec{{Name: "sft", Kind: "sft", Config: json.RawMessage(prefSFT)}}})
	p.kill()
	from := sft.Phases[0].Checkpoint

	for _, c := range []struct {
		kind  string
		extra string // config fields
		kills int
	}{
		{"dpo", "", 3}, // reference log-probs precomputed (the default)
		{"kto", `,"reference":"on_the_fly"`, 2},
		{"orpo", "", 2},
		{"simpo", "", 2},
		{"distill", "", 2}, // GKD: the SFT model as teacher on the fly, half of each batch the student's samples
	} {
		t.Run(c.kind, func(t *testing.T) {
			p := startWorker(t, env, workflows.QueueTrainer, dir, "trainer-"+c.kind)
			cfg, chunkName := prefConfig(c.extra), trainapi.PrefChunkName
			if c.kind == "distill" {
				cfg, chunkName = distillResumeConfig(from), trainapi.DistillChunkName
			}
			in := workflows.PipelineInput{Name: "pref-" + c.kind, Store: store, Seed: 5, Phases: []workflows.PhaseSpec{
				{Name: c.kind, Kind: c.kind, From: from, Config: cfg},
			}}
			cleanID, killedID := "pref-"+c.kind+"-clean", "pref-"+c.kind+"-killed"
			clean := prefRun(t, env.Client, cleanID, in)
			chunkDur := prefChunkDuration(t, env.Client, cleanID+"."+c.kind, chunkName)

			r, err := env.Client.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{ID: killedID, TaskQueue: workflows.QueueTemper},
				workflows.PipelineName, in)
			if err != nil {
				t.Fatal(err)
			}
			// Kill in random chunks at a random moment: wait until the chunk has reported its first step
			// (heartbeats reach the server in batches, so later steps may never show), wait a random part
			// of the first half of a chunk's undisturbed duration, then SIGKILL the worker and start a
			// new one.
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 2))
			chunks := rng.Perm(prefChunks)[:c.kills]
			slices.Sort(chunks)
			for i, ch := range chunks {
				target := prefChunkSteps*ch + 1
				deadline := time.Now().Add(2 * time.Minute)
				for prefChunkStep(env.Client, killedID+"."+c.kind, chunkName) < target {
					if time.Now().After(deadline) {
						t.Fatalf("the run never reached step %d", target)
					}
					time.Sleep(20 * time.Millisecond)
				}
				time.Sleep(time.Duration(rng.Int64N(int64(chunkDur/2) + 1)))
				seen := prefChunkStep(env.Client, killedID+"."+c.kind, chunkName)
				p.kill()
				t.Logf("SIGKILL %d of the trainer in chunk %d (steps %d-%d), last heartbeat at step %d", i+1, ch+1, target, target+prefChunkSteps-1, seen)
				p.start()
			}
			killed := waitRun(t, r)
			// A kill whose chunk finished during the random wait lands between activities and retries
			// nothing (the engine is fast enough for that now); the test still needs at least one kill
			// that interrupted a chunk, or the bit-identical ending below proves nothing.
			if n := retriedActivities(t, env.Client, killedID+"."+c.kind); n < 1 {
				t.Fatalf("no activity was retried after %d kills: none interrupted a chunk", c.kills)
			}
			a, b := clean.Phases[0].Checkpoint, killed.Phases[0].Checkpoint
			want := fmt.Sprintf("/%s/step-%06d/", c.kind, prefChunks*prefChunkSteps)
			if a == b || !strings.HasSuffix(a, want) || !strings.HasSuffix(b, want) {
				t.Fatalf("final checkpoints %s and %s: want two distinct ones ending in %s", a, b, want)
			}
			sameState(t, a, b, "after kills")
			if !t.Failed() {
				t.Logf("final checkpoints %s and %s match (undisturbed chunk %v)", a, b, chunkDur.Round(time.Millisecond))
			}
		})
	}
}

// prefRun runs a pipeline to the end.
func prefRun(t *testing.T, c client.Client, id string, in workflows.PipelineInput) workflows.PipelineOutput {
	t.Helper()
	return waitRun(t, mustStart(t, c, id, in))
}

// distillResumeConfig is a distill phase of the same shape as prefConfig's: a fresh student learns
// the SFT model (teacher) with GKD's on-policy mixture, so a retried chunk must resample the same
// student samples.
func distillResumeConfig(teacher string) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"teacher":%q,"data":{"task":"add2","train_examples":64,"heldout_examples":8},
	"batch":{"rows":32,"seq":32},"loss":{"divergence":"jsd","lambda":0.5,"sample_tokens":4},"steps":%d,"chunk_steps":%d,
	"heartbeat_timeout":"2s","eval":{"before":false,"examples":8,"max_new_tokens":4}}`, teacher, prefChunkSteps*prefChunks, prefChunkSteps))
}

// prefChunkStep is the heartbeat step of the phase's running chunk activity (chunk names it), or -1.
func prefChunkStep(c client.Client, wfID, chunk string) int {
	desc, err := c.DescribeWorkflowExecution(context.Background(), wfID, "")
	if err != nil {
		return -1
	}
	for _, pa := range desc.PendingActivities {
		if pa.ActivityType.GetName() != chunk || pa.State != enumspb.PENDING_ACTIVITY_STATE_STARTED ||
			pa.HeartbeatDetails == nil || len(pa.HeartbeatDetails.Payloads) == 0 {
			continue
		}
		var p trainapi.Progress
		if json.Unmarshal(pa.HeartbeatDetails.Payloads[0].Data, &p) == nil {
			return p.Step
		}
	}
	return -1
}

// prefChunkDuration is the shortest start-to-completion time of the chunk activities (chunk names
// them) of a finished workflow: how long a kill may wait after a chunk's first step and still land
// inside the chunk.
func prefChunkDuration(t *testing.T, c client.Client, wfID, chunk string) time.Duration {
	t.Helper()
	return activityDuration(t, c, wfID, chunk)
}
