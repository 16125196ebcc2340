package preference

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"

	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
)

// RefLogProbsKey is where a phase's precomputed reference object lives, relative to the store root; hash
// identifies the reference checkpoint and data.
func RefLogProbsKey(run, phase, hash string) string {
	return path.Join("runs", run, phase, "ref", "train-"+hash+".jsonl")
}

// RefLogProbs computes the reference model's log-probs of every training sequence once (they hold for
// every pass over the data), and writes them with the data as one JSONL object of RefLines in the store,
// so that training never holds the reference model. The object's key derives from run, phase, reference
// and data, so a retry finds the object an earlier attempt wrote.
func (a *Activities) RefLogProbs(ctx context.Context, in trainapi.RefLogProbsInput) (trainapi.RefLogProbsOutput, error) {
	op := fmt.Sprintf("train: reference log-probs %s/%s", in.Run, in.Phase)
	if in.Reference == "" {
		return trainapi.RefLogProbsOutput{}, train.BadInput(fmt.Errorf("%s: no reference checkpoint", op))
	}
	key := RefLogProbsKey(in.Run, in.Phase, train.InputHash(struct {
		Ref  string
		Data trainapi.PrefDataSpec
		Kind string
		Seed uint64
	}{in.Reference, in.Data, in.Kind, in.Seed}))
	if uri, ok, err := train.ExistingObject(ctx, a.Ckpt, in.Store, key); err != nil {
		return trainapi.RefLogProbsOutput{}, err
	} else if ok {
		items, err := readRefItems(ctx, a.Ckpt, uri)
		if err != nil {
			return trainapi.RefLogProbsOutput{}, err
		}
		return trainapi.RefLogProbsOutput{RefData: uri, Examples: len(items), Resumed: true}, nil
	}
	trainEx, _, err := PrefExamples(ctx, a.Ckpt, in.Data, in.Seed)
	if err != nil {
		return trainapi.RefLogProbsOutput{}, err
	}
	items, err := prefTrainItems(trainEx, in.Kind)
	if err != nil {
		return trainapi.RefLogProbsOutput{}, train.BadInput(fmt.Errorf("%s: %w", op, err))
	}
	enc, err := encodeItems(train.Encoder(), items, in.Seq)
	if err != nil {
		return trainapi.RefLogProbsOutput{}, train.BadInput(err)
	}
	m, err := a.Load(ctx, in.Reference, train.LoadOptions{})
	if err != nil {
		return trainapi.RefLogProbsOutput{}, err
	}
	eng := m.Engine
	defer eng.Close()
	done := 0
	lps, err := seqLogProbs(ctx, eng, enc, func(n int) {
		done += n
		if activity.IsActivity(ctx) { // also called outside activities (temper data gen --from)
			activity.RecordHeartbeat(ctx, trainapi.Progress{Step: done, Total: len(items)})
		}
	})
	if err != nil {
		return trainapi.RefLogProbsOutput{}, fmt.Errorf("%s: %w", op, err)
	}
	var buf bytes.Buffer
	je := json.NewEncoder(&buf)
	je.SetEscapeHTML(false)
	for i := range items {
		items[i].Ref = lps[i]
		if err := je.Encode(items[i].line()); err != nil {
			return trainapi.RefLogProbsOutput{}, fmt.Errorf("%s: %w", op, err)
		}
	}
	uri, err := train.PutObject(ctx, a.Ckpt, in.Store, key, buf.Bytes())
	if err != nil {
		return trainapi.RefLogProbsOutput{}, err
	}
	return trainapi.RefLogProbsOutput{RefData: uri, Examples: len(items)}, nil
}
