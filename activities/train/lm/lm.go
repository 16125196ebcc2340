package lm

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/model"
)

// Activities are the language-model activities; they share the trainer's dependencies (store client,
// engine factory) and kernel (chunk runner, engine loaders, data readers) with the other families.
type Activities struct{ *train.Activities }

// Register registers the language-model activities under their contract names on the trainer queue's worker.
func Register(r train.Registrar, deps *train.Activities) {
	a := &Activities{deps}
	r.RegisterActivityWithOptions(a.Init, activity.RegisterOptions{Name: trainapi.InitName})
	r.RegisterActivityWithOptions(a.Chunk, activity.RegisterOptions{Name: trainapi.ChunkName})
	r.RegisterActivityWithOptions(a.Evaluate, activity.RegisterOptions{Name: trainapi.EvaluateName})
}

// Init commits a seeded fresh model as step 0 of the phase (or returns the one already committed).
func (a *Activities) Init(ctx context.Context, in trainapi.InitInput) (trainapi.InitOutput, error) {
	cfg := model.Config(in.Model)
	if err := cfg.Validate(); err != nil {
		return trainapi.InitOutput{}, train.BadInput(fmt.Errorf("train: init %s/%s: %w", in.Run, in.Phase, err))
	}
	ref, err := a.Ckpt.Save(ctx, in.Store, in.Run, in.Phase, 0, func(w *ckpt.Writer) error {
		eng, err := a.NewEngine(train.EngineOptions{Model: cfg, Seed: in.Seed})
		if err != nil {
			return err
		}
		defer eng.Close()
		return train.WriteModel(ctx, w, &train.Loaded{Engine: eng, Config: cfg}, ckpt.State{Step: 0, ConfigHash: train.ConfigHash(cfg)}, false)
	})
	if err != nil {
		return trainapi.InitOutput{}, fmt.Errorf("train: init %s/%s: %w", in.Run, in.Phase, err)
	}
	return trainapi.InitOutput{Checkpoint: ref.URI}, nil
}

// Chunk trains in.Steps next-token steps from in.From on packed examples (train.RunChunk does the rest).
func (a *Activities) Chunk(ctx context.Context, in trainapi.ChunkInput) (trainapi.ChunkOutput, error) {
	op := fmt.Sprintf("train: chunk %s/%s", in.Run, in.Phase)
	if in.Batch.Rows <= 0 || in.Batch.Seq < 2 {
		return trainapi.ChunkOutput{}, train.BadInput(fmt.Errorf("%s: steps %d, batch %dx%d: want > 0", op, in.Steps, in.Batch.Rows, in.Batch.Seq))
	}
	return train.RunChunk(ctx, a.Activities, in.ChunkHead, op, func() (*train.ChunkObjective[data.Batch], error) {
		trainEx, _, err := train.Examples(ctx, a.Ckpt, in.Data, in.Cursor.Seed)
		if err != nil {
			return nil, err
		}
		m, err := a.Load(ctx, in.From, train.LoadOptions{Optim: in.Optim, Optimizer: !in.FreshOptimizer, LoRA: (*model.LoRA)(in.LoRA)})
		if err != nil {
			return nil, err
		}
		// The model's own tokenizer and chat template when it carries them (a Hugging Face
		// directory, or a checkpoint trained from one), else the byte-level encoder.
		enc, err := train.EncoderOf(m, train.ChatSpec{})
		if err != nil {
			m.Close()
			return nil, err
		}
		encoded, err := enc.EncodeAll(trainEx)
		if err != nil {
			m.Close()
			return nil, train.BadInput(err)
		}
		// A row holds batch.seq+1 tokens (inputs and the shifted targets).
		if err := data.CutCompletions(encoded, trainEx, in.Batch.Seq+1); err != nil {
			m.Close()
			return nil, train.BadInput(fmt.Errorf("%s: %w", op, err))
		}
		eng, cfg := m.Engine, m.Config
		packer := &data.Packer{Data: encoded, Rows: in.Batch.Rows, Seq: in.Batch.Seq + 1, PAD: train.PadID(enc)}
		return &train.ChunkObjective[data.Batch]{Eng: eng, Cfg: cfg, Unit: "tokens",
			Next: func(cur data.Cursor) (data.Batch, data.Cursor, error) {
				b, next, err := packer.Next(cur)
				if err != nil {
					return b, next, train.BadInput(err)
				}
				return b, next, nil
			},
			Step: func(b data.Batch, lr float32) (train.StepResult, error) {
				m, err := eng.TrainStep(train.EngineBatch(b), lr)
				return train.StepResult{Loss: float64(m.Loss), GradNorm: float64(m.GradNorm), Seconds: m.Seconds, Units: m.Tokens}, err
			},
			Write: func(ctx context.Context, w *ckpt.Writer, st ckpt.State) error {
				return train.WriteModel(ctx, w, m, st, true)
			},
		}, nil
	})
}
