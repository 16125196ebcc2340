package train_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
	"github.com/temperml/temper/tpu"
	"github.com/temperml/temper/workers/traintest"
)

const goldens = "../../algorithms/hf/testdata"

// copyDir copies a golden model directory (its golden.json aside) into a temporary one.
func copyDir(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	names, err := fs.Glob(os.DirFS(filepath.Join(goldens, name)), "*")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if n == "golden.json" || strings.HasPrefix(n, "to-") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(goldens, name, n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

func isBadInput(err error) bool {
	var ae *temporal.ApplicationError
	return errors.As(err, &ae) && ae.NonRetryable()
}

// TestLoadModelDirectory: a Hugging Face directory (BF16, one file or shards, with side files)
// loads into an engine; committed as a checkpoint it keeps float32 weights, config.json's
// bookkeeping fields and dtype, and the side files; that checkpoint exported is the original
// directory again, weights byte for byte in the dtype they came in.
func TestLoadModelDirectory(t *testing.T) {
	ctx := context.Background()
	cl := ckpt.New(ckpt.Options{})
	ld := train.Loader{Ckpt: cl, NewEngine: traintest.NewEngine}
	for _, tc := range []struct {
		name  string
		files []string
		shard int64
	}{
		{"llama-bf16", []string{"generation_config.json", "tokenizer_config.json", "chat_template.jinja"}, 0},
		{"qwen3-bf16-sharded", nil, 20_000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := copyDir(t, tc.name)
			m, err := ld.Load(ctx, dir, train.LoadOptions{Optimizer: true})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.Checkpoint != nil || m.OptimizerLoaded || m.HF.DType != safetensors.BF16 || !slices.Equal(m.HF.Files, tc.files) {
				t.Fatalf("loaded %+v", m)
			}
			store := "file://" + t.TempDir()
			ref, err := cl.Save(ctx, store, "r", "sft", 0, func(w *ckpt.Writer) error {
				return train.WriteModel(ctx, w, m, ckpt.State{Step: 0}, true)
			})
			if err != nil {
				t.Fatal(err)
			}
			ck, err := cl.Read(ctx, ref.URI)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range append([]string{hf.ConfigFile, hf.WeightsFile, "optimizer.safetensors", "state.json"}, tc.files...) {
				if _, ok := ck.Manifest.File(f); !ok {
					t.Errorf("checkpoint lacks %s", f)
				}
			}
			raw, err := train.ReadAll(ctx, ck, hf.ConfigFile)
			if err != nil {
				t.Fatal(err)
			}
			if hf.ConfigDType(raw) != safetensors.BF16 || !strings.Contains(string(raw), `"transformers_version"`) {
				t.Fatalf("checkpoint config.json lost the dtype or the bookkeeping:\n%s", raw)
			}

			// The checkpoint (float32 weights) exported: the original directory.
			back, err := ld.Load(ctx, ref.URI, train.LoadOptions{Want: train.WantWeights})
			if err != nil {
				t.Fatal(err)
			}
			if back.HF.DType != safetensors.BF16 || back.Merged {
				t.Fatalf("checkpoint loaded as dtype %s, merged %v", back.HF.DType, back.Merged)
			}
			out := filepath.Join(t.TempDir(), "export")
			if err := train.WriteDir(tpu.DirSink(out), back, hf.WriteOptions{MaxShardSize: tc.shard}); err != nil {
				t.Fatal(err)
			}
			names, _ := fs.Glob(os.DirFS(dir), "*")
			for _, n := range names {
				want, _ := os.ReadFile(filepath.Join(dir, n))
				got, err := os.ReadFile(filepath.Join(out, n))
				if n == hf.ConfigFile {
					var a, b map[string]any
					json.Unmarshal(want, &a)
					json.Unmarshal(got, &b)
					for _, k := range []string{"transformers_version", "torch_dtype", "dtype", "bos_token_id", "eos_token_id", "_name_or_path"} {
						if !reflectEqual(a[k], b[k]) {
							t.Errorf("exported config.json %s = %v, original %v", k, b[k], a[k])
						}
					}
					continue
				}
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("exported %s differs from the original (%v)", n, err)
				}
			}
		})
	}
}

func reflectEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return bytes.Equal(ja, jb)
}

// TestLoadOptions: value heads, LoRA on a directory base (the adapter checkpoint names the
// directory and merges back onto it), and what is refused and how.
func TestLoadOptions(t *testing.T) {
	ctx := context.Background()
	cl := ckpt.New(ckpt.Options{})
	ld := train.Loader{Ckpt: cl, NewEngine: traintest.NewEngine}
	dir := copyDir(t, "llama-bf16")

	if _, err := ld.Load(ctx, dir, train.LoadOptions{Head: train.HeadRequired}); err == nil || !isBadInput(err) || !strings.Contains(err.Error(), "not a reward model") {
		t.Fatalf("a causal LM as a reward model: %v", err)
	}
	withHead, err := ld.Load(ctx, dir, train.LoadOptions{Head: train.HeadAdded, HeadSeed: 3, HeadLogProb: true})
	if err != nil {
		t.Fatal(err)
	}
	withHead.Close()
	if !withHead.NewHead || !withHead.Config.ValueHead || !withHead.Config.RewardLogProb {
		t.Fatalf("head added: %+v", withHead.Config)
	}

	lora := &model.LoRA{Rank: 2, Alpha: 4, Targets: []string{"attn.*"}}
	m, err := ld.Load(ctx, dir, train.LoadOptions{LoRA: lora, Optimizer: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if m.Adapters == nil || m.Adapters.Base != dir+"/" || m.OptimizerLoaded {
		t.Fatalf("fresh adapters on a directory: %+v", m.Adapters)
	}
	store := "file://" + t.TempDir()
	ref, err := cl.Save(ctx, store, "r", "lora", 1, func(w *ckpt.Writer) error {
		return train.WriteModel(ctx, w, m, ckpt.State{Step: 1}, true)
	})
	if err != nil {
		t.Fatal(err)
	}
	merged, err := ld.Load(ctx, ref.URI, train.LoadOptions{Want: train.WantWeights})
	if err != nil {
		t.Fatal(err)
	}
	if !merged.Merged || merged.HF.DType != safetensors.BF16 || len(merged.Weights) == 0 {
		t.Fatalf("adapters on a directory merged: %+v", merged.HF)
	}
	again, err := ld.Load(ctx, ref.URI, train.LoadOptions{LoRA: lora, Optimizer: true})
	if err != nil {
		t.Fatal(err)
	}
	again.Close()
	if !again.OptimizerLoaded || again.Adapters.Base != dir+"/" {
		t.Fatalf("adapters resumed: %+v, optimizer %v", again.Adapters, again.OptimizerLoaded)
	}

	broken := copyDir(t, "qwen3-bf16-sharded")
	os.Remove(filepath.Join(broken, "model-00002-of-00004.safetensors"))
	for _, tc := range []struct {
		uri  string
		bad  bool
		want string
	}{
		{broken, true, "model-00002-of-00004.safetensors, which is missing"},
		{t.TempDir(), true, "nor a model directory (no config.json)"},
		{store + "/runs/r/sft/step-000007/", false, "not committed"},
	} {
		_, err := ld.Load(ctx, tc.uri, train.LoadOptions{})
		if err == nil || isBadInput(err) != tc.bad || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("load %s: %v (non-retryable %v), want %q non-retryable %v", tc.uri, err, isBadInput(err), tc.want, tc.bad)
		}
	}
}
