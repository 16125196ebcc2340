package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/internal/modeldir"
	"github.com/temperml/temper/internal/serve"
	"github.com/temperml/temper/tpu"
	"github.com/temperml/temper/workers"
)

// copyDir copies a flat directory (a model directory of the testdata).
func copyDir(t *testing.T, from string) string {
	t.Helper()
	to := t.TempDir()
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return to
}

// addFields adds fields to a directory's config.json.
func addFields(t *testing.T, dir, fields string) {
	t.Helper()
	p := filepath.Join(dir, hf.ConfigFile)
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.TrimSpace(string(b))
	if err := os.WriteFile(p, []byte(s[:len(s)-1]+","+fields+"}"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestModelInspect: `temper model inspect` on the committed model directories: family, sizes,
// dtype, layer pattern and every config.json field's fate; a directory with fields Temper does not
// implement is reported field by field (each refusal with its error) and exits 2.
func TestModelInspect(t *testing.T) {
	refused := copyDir(t, "../../algorithms/hf/testdata/qwen3-bf16-sharded")
	addFields(t, refused, `"num_experts": 8, "rope_scaling": {"rope_type": "yarn", "factor": 4.0}`)
	for _, tc := range []struct {
		dir     string
		want    []string // in the text output
		refused bool
	}{
		{"../../algorithms/hf/testdata/qwen3-bf16-sharded", []string{"family      qwen3 (Qwen3ForCausalLM)",
			"3 layers, hidden 32, heads 4 / kv heads 2, head_dim 12, ffn 48, vocab 64", "parameters  32424",
			"dtype BF16", "model-00004-of-00004.safetensors", "its own lm_head", "full causal attention",
			"ignored  dtype=\"bfloat16\": the dtype the weights were saved in", "tokenizer   none"}, false},
		{"../../algorithms/model/testdata/families/gemma3-new", []string{"gemma3_text", "tied to the embeddings",
			"sliding window 6 on 2 layers, full on 1", "SFS (S sliding", "RoPE θ 10000 local"}, false},
		{"../../algorithms/model/testdata/families/mistral-old", []string{"family      mistral", "ignored  torch_dtype"}, false},
		{refused, []string{"refused  num_experts=8: model: hf config: field num_experts: not implemented for model_type \"qwen3\"",
			`refused  rope_scaling={"rope_type":"yarn","factor":4.0}:`, "yarn", "REFUSED"}, true},
	} {
		t.Run(filepath.Base(tc.dir), func(t *testing.T) {
			out, err := cli(t, "model", "inspect", tc.dir)
			var ee *exitError
			if tc.refused != (errors.As(err, &ee) && ee.code == 2) {
				t.Fatalf("refused %v, got error %v\n%s", tc.refused, err, out)
			}
			if !tc.refused && err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q:\n%s", w, out)
				}
			}
			js, _ := cli(t, "model", "inspect", tc.dir, "--json")
			var rep modeldir.Report
			if err := json.Unmarshal([]byte(js[:strings.LastIndex(js, "}")+1]), &rep); err != nil {
				t.Fatalf("--json: %v\n%s", err, js)
			}
			if len(rep.Fields) == 0 || (rep.Refused != "") != tc.refused {
				t.Errorf("--json: %d fields, refused %q", len(rep.Fields), rep.Refused)
			}
		})
	}
}

// TestModelInit: `temper model init --like SHAPE` with --set shrinking each known shape: the
// directory loads with the one loader, its tokenizer and chat template with serve's loader, and it
// generates; read and written back (what `temper ckpt export` does) it is byte-identical.
func TestModelInit(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and loads five models with their real vocabularies (~1 min)")
	}
	small := []string{"--set", "num_hidden_layers=2", "--set", "hidden_size=64", "--set", "intermediate_size=96",
		"--set", "num_attention_heads=4", "--set", "num_key_value_heads=2", "--set", "head_dim=16", "--set", "max_position_embeddings=256"}
	for _, tc := range []struct {
		like  string
		extra []string
		chat  bool // a tokenizer and chat template come along
		tools string
	}{
		{"qwen3-0.6b", nil, true, "hermes"},
		{"gemma3-1b", []string{"--set", "sliding_window=8", "--set", "query_pre_attn_scalar=16"}, true, "gemma_tool_code"},
		{"llama3.2-1b", nil, true, "llama3_json"},
		{"qwen2.5-0.5b", nil, true, "hermes"},
		{"mistral-7b", []string{"--set", "sliding_window=8"}, false, ""},
	} {
		t.Run(tc.like, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "m")
			args := append([]string{"model", "init", "--like", tc.like, "--out", dir, "--seed", "3"}, small...)
			out, err := cli(t, append(args, tc.extra...)...)
			if err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			ctx := context.Background()
			cl := ckpt.New(ckpt.Options{})
			defer cl.Close()
			m, err := train.Loader{Ckpt: cl, NewEngine: workers.NewTrainEngine(workers.EngineOptions{})}.Load(ctx, dir, train.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.HF.DType != "BF16" || m.Config.Layers != 2 || m.Generation == nil || len(m.Generation.EOS) == 0 {
				t.Errorf("loaded dtype %s, %d layers, generation %+v", m.HF.DType, m.Config.Layers, m.Generation)
			}
			enc, err := train.EncoderOf(m, train.ChatSpec{})
			if err != nil {
				t.Fatal(err)
			}
			if (enc.Model != nil) != tc.chat {
				t.Fatalf("encoder has the model's chat template: %v, want %v", enc.Model != nil, tc.chat)
			}
			ex := tasks.Example{Prompt: "What is 2+3?"}
			if tc.chat {
				ex = tasks.Example{Messages: []tokenize.Message{{Role: tokenize.RoleUser, Content: "What is 2+3?"}}}
			}
			prompt, err := enc.PromptIDs(ex)
			if err != nil {
				t.Fatal(err)
			}
			outs, err := m.Engine.Generate([][]int{prompt}, sample.Options{MaxNewTokens: 6, StopTokens: train.Stops(enc, m.Generation)})
			if err != nil || len(outs) != 1 || len(outs[0].Tokens) == 0 {
				t.Fatalf("generate: %v %+v", err, outs)
			}
			sm, err := serve.LoadModel(dir, tc.like, m.Config, serve.ChatSpec{})
			switch {
			case !tc.chat && (err == nil || !strings.Contains(err.Error(), "--tokenizer")):
				t.Fatalf("serve without a tokenizer: %v, want a refusal asking for --tokenizer", err)
			case tc.chat && err != nil:
				t.Fatal(err)
			}
			if tc.chat && (sm.Format == nil || string(sm.Format.Tools) != tc.tools) {
				t.Errorf("serve's model: format %+v, want the model's template with tool style %s", sm.Format, tc.tools)
			}
			if out, err := cli(t, "generate", dir, "--prompt", "2+3=", "--max-new-tokens", "3"); err != nil || !strings.HasPrefix(out, "2+3=") {
				t.Errorf("temper generate: %v\n%s", err, out)
			}
			w, err := train.Loader{Ckpt: cl}.Load(ctx, dir, train.LoadOptions{Want: train.WantWeights})
			if err != nil {
				t.Fatal(err)
			}
			back := t.TempDir()
			if err := train.WriteDir(tpu.DirSink(back), w, hf.WriteOptions{}); err != nil {
				t.Fatal(err)
			}
			sameFiles(t, dir, back)
		})
	}
}

// sameFiles fails unless directories a and b hold the same files with the same bytes.
func sameFiles(t *testing.T, a, b string) {
	t.Helper()
	ea, _ := os.ReadDir(a)
	eb, _ := os.ReadDir(b)
	if len(ea) != len(eb) {
		t.Fatalf("%s has %d files, %s %d", a, len(ea), b, len(eb))
	}
	for _, e := range ea {
		x, _ := os.ReadFile(filepath.Join(a, e.Name()))
		y, err := os.ReadFile(filepath.Join(b, e.Name()))
		if err != nil || !bytes.Equal(x, y) {
			t.Errorf("%s differs after a read and write (%v)", e.Name(), err)
		}
	}
}

// TestModelInitRefuses: bad --like, --set and --dtype are errors naming them.
func TestModelInitRefuses(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--like", "gpt5"}, "not a known shape: known gemma3-1b"},
		{[]string{"--like", "qwen3-0.6b", "--set", "num_experts=8"}, "field num_experts: not implemented"},
		{[]string{"--like", "qwen3-0.6b", "--set", `rope_scaling={"rope_type":"yarn","factor":2}`}, "yarn"},
		{[]string{"--like", "qwen3-0.6b", "--set", "vocab_size=1000"}, "vocab_size 1000"},
		{[]string{"--like", "qwen3-0.6b", "--dtype", "int8"}, "--dtype int8: allowed bf16, f16, f32"},
		{[]string{"--like", "qwen3-0.6b", "--set", "novalue"}, `--set "novalue": want key=value`},
	} {
		t.Run(tc.want, func(t *testing.T) {
			out, err := cli(t, append([]string{"model", "init", "--out", filepath.Join(t.TempDir(), "m")}, tc.args...)...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to say %q\n%s", err, tc.want, out)
			}
		})
	}
}
