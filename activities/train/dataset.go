package train

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train/trainapi"
	"github.com/temperml/temper/algorithms/chat"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/rollout"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tokenize"
)

// Encoder is the tokenizer and template every built-in model uses: bytes, BOS first, EOS last.
func Encoder() data.Encoder {
	return data.Encoder{Tok: tokenize.Byte{}, Chat: tokenize.DefaultChat(), BOS: true}
}

// ChatSpec says how conversations are written for a model that has its own chat template.
type ChatSpec struct {
	// Template names one of several named templates ("": default, or tool_use with tools).
	Template string `json:"template,omitempty"`
	// ToolStyle is the model's tool-call convention ("": detected from the template; allowed:
	// chat.ToolStyles()).
	ToolStyle string `json:"tool_style,omitempty"`
	// Kwargs are extra template variables, e.g. {"enable_thinking": false}.
	Kwargs map[string]json.RawMessage `json:"kwargs,omitempty"`
}

// ModelEncoder is the encoder of a Hugging Face model directory: its tokenizer.json (with
// tokenizer_config.json's special tokens), and its own chat template (chat_template.jinja, else
// tokenizer_config.json's chat_template) for conversations, with BOS before text and
// prompt/completion examples when the config's add_bos_token says so. Errors name the file.
func ModelEncoder(dir string, spec ChatSpec) (data.Encoder, error) {
	return modelEncoder(hf.FS(os.DirFS(dir)), dir, spec)
}

// modelEncoder is ModelEncoder reading the files of src (a directory, a checkpoint).
func modelEncoder(src hf.Source, where string, spec ChatSpec) (data.Encoder, error) {
	read := func(name string) ([]byte, error) {
		b, err := readFile(src, name)
		if err != nil {
			return nil, fmt.Errorf("train: model %s: %w", where, err)
		}
		return b, nil
	}
	tj, err := read("tokenizer.json")
	if err != nil {
		return data.Encoder{}, err
	}
	tok, err := tokenize.LoadHF(bytes.NewReader(tj))
	if err != nil {
		return data.Encoder{}, fmt.Errorf("train: model %s: tokenizer.json: %w", where, err)
	}
	cfgPath := strings.TrimSuffix(where, "/") + "/tokenizer_config.json"
	cfg, err := read("tokenizer_config.json")
	if err != nil {
		return data.Encoder{}, err
	}
	hc, err := tokenize.LoadHFConfig(bytes.NewReader(cfg))
	if err != nil {
		return data.Encoder{}, fmt.Errorf("train: %s: %w", cfgPath, err)
	}
	if tok, err = tok.WithConfig(hc); err != nil {
		return data.Encoder{}, fmt.Errorf("train: %s: %w", cfgPath, err)
	}
	var jinja []byte
	if ok, err := src.Has("chat_template.jinja"); err != nil {
		return data.Encoder{}, fmt.Errorf("train: model %s: %w", where, err)
	} else if ok {
		if jinja, err = read("chat_template.jinja"); err != nil {
			return data.Encoder{}, err
		}
	}
	format, err := chat.FromConfig(cfgPath, cfg, jinja, spec.Template, chat.ToolStyle(spec.ToolStyle), chat.Options{Kwargs: spec.Kwargs})
	if err != nil {
		return data.Encoder{}, fmt.Errorf("train: model %s: %w", where, err)
	}
	return data.Encoder{Tok: tok, Chat: tokenize.DefaultChat(), Model: &format, BOS: hc.AddBOS != nil && *hc.AddBOS}, nil
}

// EncoderOf is the encoder m trains, scores and samples with: its own tokenizer and chat template
// when it carries a tokenizer.json (a Hugging Face directory, and every checkpoint trained from
// one, which keeps the directory's side files), else Temper's byte-level Encoder (the presets).
func EncoderOf(m *Loaded, spec ChatSpec) (data.Encoder, error) {
	if m == nil || !slices.Contains(m.HF.Files, "tokenizer.json") || m.HF.From == nil {
		return Encoder(), nil
	}
	enc, err := modelEncoder(m.HF.From, m.URI, spec)
	if err != nil {
		return data.Encoder{}, BadInput(err)
	}
	if bpe, ok := enc.Tok.(*tokenize.BPE); ok {
		if err := bpe.CheckVocab(m.Config.Vocab); err != nil {
			return data.Encoder{}, BadInput(fmt.Errorf("train: model %s: tokenizer.json: %w", m.URI, err))
		}
	}
	return enc, nil
}

// Stops are the ids that end a completion of m: StopTokens(enc) and generation_config.json's
// eos_token_id (the byte-level models: ByteEOS alone, as always).
func Stops(enc data.Encoder, gen *hf.Generation) []int {
	stops := StopTokens(enc)
	if enc.Model == nil || gen == nil {
		return stops
	}
	for _, id := range gen.EOS {
		if !slices.Contains(stops, id) {
			stops = append(stops, id)
		}
	}
	return stops
}

// PadID is the id padding positions hold (they are masked; the byte models' PAD as always).
func PadID(enc data.Encoder) int {
	if _, ok := enc.Tok.(tokenize.Byte); ok {
		return tokenize.BytePAD
	}
	if sp := enc.Tok.Special(); sp.PAD >= 0 {
		return sp.PAD
	} else if sp.EOS >= 0 {
		return sp.EOS
	}
	return 0
}

// StripStops drops a completion's final stop token (one of stops).
func StripStops(toks, stops []int) []int {
	if n := len(toks); n > 0 && slices.Contains(stops, toks[n-1]) {
		return toks[:n-1]
	}
	return toks
}

// Examples returns the train and held-out examples of spec; seed is used when spec.Seed is 0.
func Examples(ctx context.Context, cl *ckpt.Client, spec trainapi.DataSpec, seed uint64) (train, heldout []tasks.Example, err error) {
	if spec.Seed != 0 {
		seed = spec.Seed
	}
	if spec.Task != "" {
		task, err := tasks.Lookup(spec.Task)
		if err != nil {
			return nil, nil, BadInput(err)
		}
		train, heldout = tasks.Split(task, spec.TrainExamples, spec.HeldoutExamples, seed)
		if spec.ToolDemos {
			if train, err = tasks.Demonstrations(task, train); err != nil {
				return nil, nil, BadInput(err)
			}
		}
	} else {
		if train, err = readJSONL(ctx, cl, spec.Train); err != nil {
			return nil, nil, err
		}
		if spec.Heldout != "" {
			if heldout, err = readJSONL(ctx, cl, spec.Heldout); err != nil {
				return nil, nil, err
			}
		}
	}
	if spec.Text {
		for i := range train {
			if train[i].Prompt != "" {
				train[i] = tasks.AsText(train[i])
			}
		}
	}
	return train, heldout, nil
}

// readJSONL reads a dataset from a store URI. A malformed line is a non-retryable error naming the
// file and line: retrying cannot fix data.
func readJSONL(ctx context.Context, cl *ckpt.Client, uri string) ([]tasks.Example, error) {
	return ReadLines(ctx, cl, uri, tasks.ReadAll)
}

// ReadLines is the one JSONL reader of the trainer's data (examples, preference examples, pairs):
// it reads the object through the worker's client and parses it with read; a malformed line and an
// empty file are non-retryable errors naming the file (and line).
func ReadLines[T any](ctx context.Context, cl *ckpt.Client, uri string, read func(io.Reader, string) ([]T, error)) ([]T, error) {
	b, err := ReadObject(ctx, cl, uri)
	if err != nil {
		return nil, err
	}
	exs, err := read(bytes.NewReader(b), uri)
	if err != nil {
		return nil, BadInput(err)
	}
	if len(exs) == 0 {
		return nil, BadInput(fmt.Errorf("train: %s has no examples", uri))
	}
	return exs, nil
}

// EngineBatch turns a packed batch of Seq+1 tokens per row into the engine's aligned form.
func EngineBatch(b data.Batch) data.TokenBatch {
	var out data.TokenBatch
	for r := range b.Tokens {
		n := len(b.Tokens[r]) - 1
		tok, tgt := make([]int, n), make([]int, n)
		mask, pos, valid := make([]float32, n), make([]int, n), make([]bool, n)
		for t := 0; t < n; t++ {
			tok[t], tgt[t] = int(b.Tokens[r][t]), int(b.Tokens[r][t+1])
			if b.Loss[r][t+1] && b.Valid[r][t+1] {
				mask[t] = 1
			}
			pos[t], valid[t] = int(b.Positions[r][t]), b.Valid[r][t]
		}
		out.Tokens, out.Targets = append(out.Tokens, tok), append(out.Targets, tgt)
		out.LossMask, out.Positions, out.Valid = append(out.LossMask, mask), append(out.Positions, pos), append(out.Valid, valid)
	}
	return out
}

func BadInput(err error) error {
	return temporal.NewNonRetryableApplicationError(err.Error(), "InvalidInput", err)
}

// Permanent makes err non-retryable when a retry would fail the same way: a request longer than
// the model's context (model.ErrTooLong) is the configuration's fault, and retrying it forever
// holds up the run without saying why.
func Permanent(err error) error {
	if err != nil && errors.Is(err, model.ErrTooLong) {
		return BadInput(err)
	}
	return err
}

// ReadRollouts loads a rollouts object by URI (the rollout and reward roles use it too).
func ReadRollouts(ctx context.Context, cl *ckpt.Client, uri string) ([]rollout.Rollout, error) {
	b, err := ReadObject(ctx, cl, uri)
	if err != nil {
		return nil, err
	}
	return rollout.Read(bytes.NewReader(b), uri)
}

// ReadObject reads a whole object of a store by its URI (file:///dir/name or gs://bucket/dir/name).
func ReadObject(ctx context.Context, cl *ckpt.Client, uri string) ([]byte, error) {
	b, err := cl.ReadObject(ctx, uri)
	if err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	return b, nil
}
