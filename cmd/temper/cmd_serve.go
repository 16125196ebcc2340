package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/internal/serve"
	"github.com/temperml/temper/tpu"
	"github.com/temperml/temper/workers"
)

func init() {
	register(&command{name: "serve",
		summary: "serve a model over OpenAI's HTTP API (/v1/chat/completions, /v1/completions, /v1/models) with continuous batching",
		usage:   "MODEL_DIR | CHECKPOINT_URI | RUN/PHASE",
		flags:   flagsOf[serveCmd]()})
}

// serveCmd holds the flags of `temper serve`.
type serveCmd struct {
	addr, metrics, store   string
	name, tokenizer        string
	chatTemplate, toolStyl string
	kwargs                 string
	maxBatch, maxQueue     int
	kvMiB                  int
	engine                 engineFlags
}

func (c *serveCmd) bind(fs *flag.FlagSet) {
	fs.StringVar(&c.addr, "addr", "127.0.0.1:8000", "listen address; clients use http://ADDR/v1 as their base URL (OPENAI_BASE_URL)")
	fs.StringVar(&c.metrics, "metrics", "", "serve Prometheus metrics on this address, e.g. :9090 (path /metrics): queue depth, running rows, tokens/s, time to first token, request latency, KV cache")
	fs.StringVar(&c.store, "store", "", "the store RUN/PHASE is looked up in (default $TEMPER_HOME/store)")
	fs.StringVar(&c.name, "model-name", "", "the model's name in the API (default: the directory's name, or run/phase/step-N of a checkpoint)")
	fs.StringVar(&c.tokenizer, "tokenizer", "", "read tokenizer.json, tokenizer_config.json, chat_template.jinja and generation_config.json from this directory instead of the model's (a checkpoint trained from a Hugging Face model keeps only its weights)")
	fs.StringVar(&c.chatTemplate, "chat-template", "", "the named chat template of tokenizer_config.json's list (default: the default one, or tool_use for requests with tools)")
	fs.StringVar(&c.toolStyl, "tool-style", "", "the model's tool-call convention (default: detected from the template): hermes, llama3_json, gemma_tool_code")
	fs.StringVar(&c.kwargs, "chat-template-kwargs", "", `template variables every chat render gets, as a JSON object, e.g. '{"enable_thinking": false}' (a request's chat_template_kwargs override them)`)
	fs.IntVar(&c.maxBatch, "max-batch", serve.DefaultMaxBatch, "rows (choices) decoding at once")
	fs.IntVar(&c.maxQueue, "max-queue", serve.DefaultMaxQueue, "requests waiting for admission before new ones get 429")
	fs.IntVar(&c.kvMiB, "kv-cache-mib", serve.DefaultKVBudget>>20, "KV-cache budget in MiB: requests wait until the batch's cache (every row at prompt + max_tokens) fits")
	c.engine.bind(fs)
}

func (c *serveCmd) run(ctx context.Context, args []string) error {
	if len(args) != 1 {
		return usageErr("usage: temper serve MODEL_DIR | CHECKPOINT_URI | RUN/PHASE [--addr 127.0.0.1:8000]")
	}
	if c.maxBatch < 1 || c.maxQueue < 1 || c.kvMiB < 1 {
		return usageErr("serve: --max-batch, --max-queue and --kv-cache-mib must be at least 1")
	}
	var spec serve.ChatSpec
	spec.Template, spec.ToolStyle = c.chatTemplate, c.toolStyl
	if c.kwargs != "" {
		if err := json.Unmarshal([]byte(c.kwargs), &spec.Kwargs); err != nil {
			return usageErr("serve: --chat-template-kwargs %s: want a JSON object: %v", c.kwargs, err)
		}
	}
	store := c.store
	if store == "" {
		store = workers.DefaultStoreURI()
	}
	src, err := serve.Resolve(ctx, args[0], store)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	defer src.Cleanup()
	cl := ckpt.New(ckpt.Options{})
	defer cl.Close()
	loaded, err := train.Loader{Ckpt: cl}.Load(ctx, src.Dir, train.LoadOptions{Want: train.WantWeights})
	if err != nil {
		return err
	}
	eo := c.engine.options()
	rt, err := tpu.New(tpu.Options{Model: loaded.Config, Executor: eo.Executor, Backend: eo.Backend, Plugin: eo.Plugin})
	if err != nil {
		return err
	}
	if err := rt.ImportWeights(loaded.Weights); err != nil {
		rt.Close()
		return err
	}
	defer rt.Close()
	name := src.Name
	if c.name != "" {
		name = c.name
	}
	tokDir := src.Dir
	if c.tokenizer != "" {
		tokDir = c.tokenizer
	}
	m, err := serve.LoadModel(tokDir, name, rt.Config(), spec)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	dec, err := rt.NewDecoder()
	if err != nil {
		return err
	}
	defer dec.Close()
	from := src.Dir
	if src.URI != "" {
		from = src.URI
	}
	o := serve.RunOptions{Scheduler: serve.SchedulerOptions{MaxBatch: c.maxBatch, MaxQueue: c.maxQueue, KVBudget: int64(c.kvMiB) << 20}}
	if c.metrics != "" {
		if o.Metrics, err = net.Listen("tcp", c.metrics); err != nil {
			return usageErr("serve: --metrics %s: %v", c.metrics, err)
		}
	}
	if o.API, err = net.Listen("tcp", c.addr); err != nil {
		if o.Metrics != nil {
			o.Metrics.Close()
		}
		return usageErr("serve: --addr %s: %v", c.addr, err)
	}
	return serve.Run(ctx, m, dec, o, stdout, func(addr net.Addr) {
		fmt.Fprintf(stdout, "serving   %s (%s, %d layers, context %d) from %s\nchat      %s\nendpoint  http://%s/v1  (OPENAI_BASE_URL=http://%s/v1)\n",
			name, rt.Config().Family, rt.Config().Layers, rt.Config().MaxSeq, from, m.ChatWith(), addr, addr)
	})
}
