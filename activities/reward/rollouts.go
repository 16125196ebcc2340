package reward

import (
	"context"
	"encoding/json"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/reward/rewardapi"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/verify"
)

// TaskVerifier is the verifier name that checks a completion with a built-in task's exact checker; its
// reference is {"task": "add", "prompt": "...", "answer": "..."}. A spec with no verifiers uses it.
// With params {"partial": true}, a failing completion scores the task's partial credit when it
// defines one (tasks.PartialCredit); by default the score is 1 or 0.
const TaskVerifier = "task"

type taskRef struct {
	Task    string `json:"task"`
	Prompt  string `json:"prompt"`
	Answer  string `json:"answer"`
	Partial bool   `json:"partial,omitempty"` // score the task's partial credit on failures
}

func newTaskVerifier(params json.RawMessage) (verify.Verifier, error) {
	var p taskRef
	if err := verify.DecodeParams(TaskVerifier, params, &p); err != nil {
		return nil, err
	}
	return verify.Func(func(ctx context.Context, s verify.Sample) (verify.Verdict, error) {
		ref := p
		if err := verify.ApplyReference(TaskVerifier, &ref, s.Reference); err != nil {
			return verify.Verdict{}, err
		}
		t, err := tasks.Lookup(ref.Task)
		if err != nil {
			return verify.Verdict{}, err
		}
		prompt := ref.Prompt
		if prompt == "" {
			prompt = s.Prompt
		}
		ex := tasks.Example{Prompt: prompt, Answer: ref.Answer}
		ok, fb := t.Check(ex, s.Completion)
		if ok {
			return verify.Verdict{Score: 1, Pass: true}, nil
		}
		v := verify.Verdict{Score: 0, Feedback: fb}
		if pc, ok := t.(tasks.PartialCredit); ok && ref.Partial {
			v.Score = min(max(pc.Partial(ex, s.Completion), 0), 0.99) // partly right is never right
		}
		return v, nil
	}), nil
}

// rolloutItems reads a rollouts object into items whose reference is the rollout's own (or, for a
// built-in task, its task and answer).
func rolloutItems(ctx context.Context, cl *ckpt.Client, uri string) ([]rewardapi.Item, error) {
	rs, err := train.ReadRollouts(ctx, cl, uri)
	if err != nil {
		return nil, err
	}
	items := make([]rewardapi.Item, len(rs))
	for i, r := range rs {
		ref := r.Reference
		if len(ref) == 0 && r.Task != "" {
			ref, _ = json.Marshal(taskRef{Task: r.Task, Prompt: r.Prompt, Answer: r.Answer})
		}
		items[i] = rewardapi.Item{ID: r.ID, Prompt: r.Prompt, Completion: r.Completion, Reference: ref}
	}
	return items, nil
}
