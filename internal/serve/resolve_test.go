package serve

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
)

// TestResolve: a model directory is served as it is; a checkpoint URI and RUN/PHASE (its latest
// step) are exported to a temporary model directory; a LoRA checkpoint and nonsense are refused,
// naming what to do.
func TestResolve(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	store := "file://" + root
	cl := ckpt.New(ckpt.Options{})
	defer cl.Close()
	commit := func(run, phase string, step int64, files map[string]string) string {
		w, err := cl.NewWriter(ctx, store, run, phase, step)
		if err != nil {
			t.Fatal(err)
		}
		for name, body := range files {
			if err := w.Add(ctx, name, strings.NewReader(body)); err != nil {
				t.Fatal(err)
			}
		}
		ref, err := w.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return ref.URI
	}
	first := commit("r1", "sft", 10, map[string]string{"config.json": `{"step": 10}`, "model.safetensors": "w10", "optimizer.safetensors": "o"})
	commit("r1", "sft", 20, map[string]string{"config.json": `{"step": 20}`, "model.safetensors": "w20"})
	lora := commit("r1", "lora", 5, map[string]string{"adapter_config.json": "{}", "adapter_model.safetensors": "a"})
	dir := filepath.Join(t.TempDir(), "my-model")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()

	cases := []struct {
		name, arg  string
		wantName   string
		wantConfig string // config.json of the resolved directory
		wantErr    string
	}{
		{"directory", dir, "my-model", "{}", ""},
		{"checkpoint URI", first, "r1/sft/step-000010", `{"step": 10}`, ""},
		{"run/phase: the latest step", "r1/sft", "r1/sft/step-000020", `{"step": 20}`, ""},
		{"directory without config.json", empty, "", "", "no config.json"},
		{"LoRA checkpoint", lora, "", "", "temper lora merge"},
		{"unknown run", "r2/sft", "", "", "latest checkpoint of run r2 phase sft"},
		{"nonsense", "no such thing", "", "", "not a model directory, a checkpoint URI"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			src, err := Resolve(ctx, c.arg, store)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer src.Cleanup()
			b, err := os.ReadFile(filepath.Join(src.Dir, "config.json"))
			if err != nil || string(b) != c.wantConfig || src.Name != c.wantName {
				t.Fatalf("resolved %+v: config %q (%v), want name %q config %q", src, b, err, c.wantName, c.wantConfig)
			}
			if _, err := os.Stat(filepath.Join(src.Dir, "optimizer.safetensors")); err == nil {
				t.Fatal("the optimizer state was exported")
			}
		})
	}
}
