package train

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"

	"go.temporal.io/sdk/activity"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/tools/toolclient"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/verify"
)

// Activities holds the trainer's dependencies; workers build it.
type Activities struct {
	Ckpt      *ckpt.Client
	NewEngine NewEngine
	// Tools runs long-running tools' calls (python) of evaluation episodes on the tools queue;
	// nil: such calls get an error message back.
	Tools toolclient.Dispatcher
	// Verifiers score held-out completions of evaluations with eval.verifiers (workers wire the
	// reward role's registry, so that a critic scores as it does in rewards); nil: such an
	// evaluation fails as bad input.
	Verifiers *verify.Registry
}

func ConfigHash(cfg model.Config) string {
	b, _ := json.Marshal(cfg)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:8])
}

// Stream writes one checkpoint file from a save function without holding a second copy in memory.
func Stream(ctx context.Context, w *ckpt.Writer, name string, save func(io.Writer) error) error {
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

// ReadAll reads a whole checkpoint file.
func ReadAll(ctx context.Context, ck *ckpt.Checkpoint, name string) ([]byte, error) {
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

func BytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// Retain marks in.Best and deletes older checkpoints beyond in.KeepLast. Both steps are idempotent.
func (a *Activities) Retain(ctx context.Context, in trainapi.RetainInput) error {
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

// Registrar is the part of a Temporal worker that registers activities (worker.Worker satisfies
// it); declared here so that the families' Register functions need not import the worker package.
type Registrar interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

// Register registers the activities every training phase shares (Retain) on the trainer queue's
// worker; each family (lm, preference, rewardmodel, policy) registers its own.
func Register(r Registrar, deps *Activities) {
	r.RegisterActivityWithOptions(deps.Retain, activity.RegisterOptions{Name: trainapi.RetainName})
}
