package serve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/temperml/temper/activities/ckpt"
)

// Source is a model to serve found on disk: a model directory (config.json, model.safetensors and
// the tokenizer files when there are any), the name /v1/models reports, and where it came from.
type Source struct {
	Dir  string
	Name string
	URI  string // the checkpoint, when Dir is an export of one
	// Cleanup removes what Resolve exported (a no-op for a directory given as is).
	Cleanup func()
}

// runPhase is RUN/PHASE: the names ckpt allows, no scheme.
var runPhase = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$`)

// Resolve finds the model arg names: a model directory on disk; a checkpoint URI (file:// or gs://),
// exported to a temporary directory; or RUN/PHASE, the phase's latest committed checkpoint under
// store (a store root URI). A LoRA checkpoint is refused with how to merge it.
func Resolve(ctx context.Context, arg, store string) (Source, error) {
	nothing := func() {}
	if st, err := os.Stat(arg); err == nil && st.IsDir() {
		abs, err := filepath.Abs(arg)
		if err != nil {
			return Source{}, fmt.Errorf("serve: model %s: %w", arg, err)
		}
		if _, err := os.Stat(filepath.Join(abs, "config.json")); err != nil {
			return Source{}, fmt.Errorf("serve: model directory %s: no config.json (a model directory holds config.json and model.safetensors, as `temper ckpt export` writes)", arg)
		}
		return Source{Dir: abs, Name: filepath.Base(abs), Cleanup: nothing}, nil
	}
	cl := ckpt.New(ckpt.Options{})
	defer cl.Close()
	uri := arg
	switch {
	case strings.Contains(arg, "://"):
	case runPhase.MatchString(arg):
		if store == "" {
			return Source{}, fmt.Errorf("serve: %s: RUN/PHASE needs the store (--store)", arg)
		}
		run, phase, _ := strings.Cut(arg, "/")
		ref, _, err := cl.Latest(ctx, store, run, phase)
		if err != nil {
			return Source{}, fmt.Errorf("serve: %s: the latest checkpoint of run %s phase %s in %s: %w", arg, run, phase, store, err)
		}
		uri = ref.URI
	default:
		return Source{}, fmt.Errorf("serve: %s: not a model directory, a checkpoint URI (file://…, gs://…) or RUN/PHASE", arg)
	}
	ck, err := cl.Read(ctx, uri)
	if err != nil {
		return Source{}, fmt.Errorf("serve: %w", err)
	}
	if _, ok := ck.Manifest.File("adapter_config.json"); ok {
		return Source{}, fmt.Errorf("serve: %s is a LoRA checkpoint (adapters only): merge it first with `temper lora merge %s DIR`, then serve DIR", uri, uri)
	}
	dir, err := os.MkdirTemp("", "temper-serve-")
	if err != nil {
		return Source{}, fmt.Errorf("serve: %w", err)
	}
	cleanup := func() { _ = os.RemoveAll(dir) }
	if _, err := cl.Export(ctx, uri, dir); err != nil {
		cleanup()
		return Source{}, fmt.Errorf("serve: %w", err)
	}
	return Source{Dir: dir, Name: checkpointName(uri), URI: uri, Cleanup: cleanup}, nil
}

// checkpointName is run/phase/step-N of a checkpoint URI (its last three path elements).
func checkpointName(uri string) string {
	parts := strings.Split(strings.Trim(uri, "/"), "/")
	if len(parts) >= 3 {
		parts = parts[len(parts)-3:]
	}
	return strings.Join(parts, "/")
}
