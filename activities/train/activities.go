package train

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/tokenize"
)

// Activities holds the trainer's dependencies; workers build it.
type Activities struct {
	Ckpt      *ckpt.Client
	NewEngine NewEngine
}

// Init commits a seeded fresh model as step 0 of the phase (or returns the one already committed).
func (a *Activities) Init(ctx context.Context, in InitInput) (InitOutput, error) {
	cfg := model.Config(in.Model)
	if err := cfg.Validate(); err != nil {
		return InitOutput{}, badInput(fmt.Errorf("train: init %s/%s: %w", in.Run, in.Phase, err))
	}
	ref, err := a.Ckpt.Save(ctx, in.Store, in.Run, in.Phase, 0, func(w *ckpt.Writer) error {
		eng, err := a.NewEngine(EngineOptions{Model: cfg, Seed: in.Seed})
		if err != nil {
			return err
		}
		defer eng.Close()
		return writeModel(ctx, w, eng, cfg, ckpt.State{Step: 0, ConfigHash: configHash(cfg)}, false)
	})
	if err != nil {
		return InitOutput{}, fmt.Errorf("train: init %s/%s: %w", in.Run, in.Phase, err)
	}
	return InitOutput{Checkpoint: ref.URI}, nil
}

func configHash(cfg model.Config) string {
	b, _ := json.Marshal(cfg)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// writeModel adds config, weights, optionally optimizer state, and state.json to a checkpoint.
func writeModel(ctx context.Context, w *ckpt.Writer, eng Engine, cfg model.Config, st ckpt.State, withOptimizer bool) error {
	hf, err := cfg.ToHFConfig()
	if err != nil {
		return err
	}
	if err := w.Add(ctx, ConfigFile, bytesReader(hf)); err != nil {
		return err
	}
	if err := stream(ctx, w, ModelFile, eng.SaveWeights); err != nil {
		return err
	}
	if withOptimizer {
		if err := stream(ctx, w, OptimizerFile, eng.SaveOptimizer); err != nil {
			return err
		}
	}
	return w.AddState(ctx, st)
}

// stream writes one checkpoint file from a save function without holding a second copy in memory.
func stream(ctx context.Context, w *ckpt.Writer, name string, save func(io.Writer) error) error {
	f, err := w.Create(ctx, name)
	if err != nil {
		return err
	}
	if err := save(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", name, err)
	}
	return f.Close()
}

// loadEngine reads a checkpoint's config and weights (and optimizer state when asked and present).
func (a *Activities) loadEngine(ctx context.Context, uri string, optim Optim, withOptimizer bool) (Engine, model.Config, *ckpt.Checkpoint, error) {
	return LoadEngine(ctx, a.Ckpt, a.NewEngine, uri, optim, withOptimizer)
}

// LoadEngine builds an engine holding a checkpoint's model (and optimizer state when asked and
// present); other roles (rollout) use it too.
func LoadEngine(ctx context.Context, cl *ckpt.Client, newEngine NewEngine, uri string, optim Optim, withOptimizer bool) (Engine, model.Config, *ckpt.Checkpoint, error) {
	ck, err := cl.Read(ctx, uri)
	if err != nil {
		return nil, model.Config{}, nil, fmt.Errorf("train: read checkpoint %s: %w", uri, err)
	}
	if IsAdapterCheckpoint(ck) {
		return LoadAdapterEngine(ctx, cl, newEngine, ck, optim, withOptimizer)
	}
	raw, err := readAll(ctx, ck, ConfigFile)
	if err != nil {
		return nil, model.Config{}, nil, err
	}
	cfg, err := model.FromHFConfig(raw)
	if err != nil {
		return nil, model.Config{}, nil, badInput(fmt.Errorf("train: %s/%s: %w", uri, ConfigFile, err))
	}
	eng, err := loadInto(ctx, ck, newEngine, cfg, optim, withOptimizer)
	if err != nil {
		return nil, cfg, nil, err
	}
	return eng, cfg, ck, nil
}

func readAll(ctx context.Context, ck *ckpt.Checkpoint, name string) ([]byte, error) {
	rc, err := ck.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("train: read %s: %w", name, err)
	}
	return b, rc.Close()
}

// Chunk trains in.Steps next-token steps from in.From on packed examples (runChunk does the rest).
func (a *Activities) Chunk(ctx context.Context, in ChunkInput) (ChunkOutput, error) {
	op := fmt.Sprintf("train: chunk %s/%s", in.Run, in.Phase)
	if in.Batch.Rows <= 0 || in.Batch.Seq < 2 {
		return ChunkOutput{}, badInput(fmt.Errorf("%s: steps %d, batch %dx%d: want > 0", op, in.Steps, in.Batch.Rows, in.Batch.Seq))
	}
	return runChunk(ctx, a, in.ChunkHead, op, func() (*chunkObjective[data.Batch], error) {
		trainEx, _, err := examples(ctx, a.Ckpt, in.Data, in.Cursor.Seed)
		if err != nil {
			return nil, err
		}
		encoded, err := encoder().EncodeAll(trainEx)
		if err != nil {
			return nil, badInput(err)
		}
		eng, cfg, ad, err := LoadTrainEngine(ctx, a.Ckpt, a.NewEngine, in.From, in.Optim, (*model.LoRA)(in.LoRA), !in.FreshOptimizer)
		if err != nil {
			return nil, err
		}
		packer := &data.Packer{Data: encoded, Rows: in.Batch.Rows, Seq: in.Batch.Seq + 1, PAD: tokenize.BytePAD}
		return &chunkObjective[data.Batch]{eng: eng, cfg: cfg, unit: "tokens",
			next: func(cur Cursor) (data.Batch, Cursor, error) {
				b, next, err := packer.Next(cur)
				if err != nil {
					return b, next, badInput(err)
				}
				return b, next, nil
			},
			step: func(b data.Batch, lr float32) (stepResult, error) {
				m, err := eng.TrainStep(engineBatch(b), lr)
				return stepResult{Loss: float64(m.Loss), GradNorm: float64(m.GradNorm), Seconds: m.Seconds, Units: m.Tokens}, err
			},
			write: func(ctx context.Context, w *ckpt.Writer, st ckpt.State) error {
				return WriteTrained(ctx, w, eng, cfg, ad, st)
			},
		}, nil
	})
}

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// Retain marks in.Best and deletes older checkpoints beyond in.KeepLast. Both steps are idempotent.
func (a *Activities) Retain(ctx context.Context, in RetainInput) error {
	if in.Best != "" {
		if err := a.Ckpt.MarkBest(ctx, in.Best); err != nil {
			return fmt.Errorf("train: retain %s/%s: %w", in.Run, in.Phase, err)
		}
	}
	if _, err := a.Ckpt.Retain(ctx, in.Store, in.Run, in.Phase, in.KeepLast); err != nil {
		return fmt.Errorf("train: retain %s/%s: %w", in.Run, in.Phase, err)
	}
	return nil
}
