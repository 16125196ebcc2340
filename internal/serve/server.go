package serve

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/temperml/temper/algorithms/chat"
	"github.com/temperml/temper/algorithms/sample"
)

// Options configure a Server. Zero values take the defaults.
type Options struct {
	Scheduler SchedulerOptions
	// Metrics, when set, receives the server's series (serve it with Metrics.Handler).
	Metrics *Metrics
	// OnCall, when set, is called after each request that ended normally (not cancelled, no
	// error), from the request's goroutine.
	OnCall func(Call)
}

// Call is one finished request as the model saw it: token ids in, token ids and log-probabilities
// out (what an agent gateway records as a trajectory segment).
type Call struct {
	Endpoint string // "chat.completions" or "completions"
	Prompts  [][]int
	Choices  []CallChoice
}

// CallChoice is one choice of a Call: the tokens sampled (a final stop token included), their
// log-probabilities under the model, and why it ended ("stop", "length", "tool_calls").
type CallChoice struct {
	Prompt   int // index into Call.Prompts
	Tokens   []int
	LogProbs []float32
	Finish   string
}

// Server serves one model over HTTP.
type Server struct {
	m       *Model
	sched   *Scheduler
	opts    Options
	mux     *http.ServeMux
	closing atomic.Bool
	seq     atomic.Uint64
	created int64
}

// New starts serving m through eng (a continuous batch of m's cached decode).
func New(m *Model, eng Engine, opts Options) *Server {
	s := &Server{m: m, opts: opts, sched: NewScheduler(eng, m.Config, opts.Scheduler, opts.Metrics), created: time.Now().Unix()}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/models", s.route("models", http.MethodGet, s.models))
	mux.HandleFunc("/v1/models/{id}", s.route("models", http.MethodGet, s.model))
	mux.HandleFunc("/v1/completions", s.route("completions", http.MethodPost, s.completions))
	mux.HandleFunc("/v1/chat/completions", s.route("chat.completions", http.MethodPost, s.chat))
	mux.HandleFunc("/", s.route("unknown", "", func(w http.ResponseWriter, r *http.Request) *apiError {
		return errorf(http.StatusNotFound, "invalid_request_error", "", "unknown_url", "Unknown request URL: %s %s", r.Method, r.URL.Path)
	}))
	s.mux = mux
	return s
}

// Handler is the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

// Scheduler is the server's continuous batch.
func (s *Server) Scheduler() *Scheduler { return s.sched }

// Close refuses new requests (503) and ends the running ones.
func (s *Server) Close() {
	s.closing.Store(true)
	s.sched.Close()
}

// statusWriter remembers the status written, for the requests metric.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = cmp.Or(w.status, code)
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.status = cmp.Or(w.status, http.StatusOK)
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// route wraps a handler: method check, errors written in OpenAI's schema, the requests metric.
func (s *Server) route(endpoint, method string, h func(http.ResponseWriter, *http.Request) *apiError) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		var err *apiError
		switch {
		case method != "" && r.Method != method:
			sw.Header().Set("Allow", method)
			err = errorf(http.StatusMethodNotAllowed, "invalid_request_error", "", "method_not_allowed", "%s %s: allowed method %s", r.Method, r.URL.Path, method)
		case s.closing.Load():
			err = errorf(http.StatusServiceUnavailable, "server_error", "", "server_closing", "the server is shutting down")
		default:
			err = h(sw, r)
		}
		if err != nil {
			writeError(sw, err)
		}
		if s.opts.Metrics != nil {
			s.opts.Metrics.requests.WithLabelValues(endpoint, fmt.Sprint(sw.status)).Inc()
		}
	}
}

func writeError(w http.ResponseWriter, e *apiError) {
	if e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", "1")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.Status)
	_ = newEncoder(w).Encode(struct {
		Error *apiError `json:"error"`
	}{e})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = newEncoder(w).Encode(v)
}

// newEncoder writes JSON as OpenAI does: <, > and & as they are.
func newEncoder(w io.Writer) *json.Encoder {
	e := json.NewEncoder(w)
	e.SetEscapeHTML(false)
	return e
}

func (s *Server) card() modelCard {
	return modelCard{ID: s.m.Name, Object: "model", Created: s.created, OwnedBy: "temper", MaxModelLen: s.m.Config.MaxSeq}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) *apiError {
	writeJSON(w, modelList{Object: "list", Data: []modelCard{s.card()}})
	return nil
}

func (s *Server) model(w http.ResponseWriter, r *http.Request) *apiError {
	if id := r.PathValue("id"); id != s.m.Name {
		return s.unknownModel(id)
	}
	writeJSON(w, s.card())
	return nil
}

func (s *Server) unknownModel(name string) *apiError {
	return errorf(http.StatusNotFound, "invalid_request_error", "model", "model_not_found",
		"The model `%s` does not exist: this server serves %q", name, s.m.Name)
}

// request is one accepted request on its way through the batch.
type request struct {
	s        *Server
	endpoint string
	id       string
	created  int64
	prompts  [][]int
	p        params
	chat     bool
	tools    bool // parse tool calls (chat with tools and tool_choice auto)
	parallel bool // several calls per choice allowed
	logprobs bool
	top      int
	choices  []*choiceState
	job      *Job
	frames   map[int][2][]byte // textFrame's, by choice
}

// head is the start of every response and chunk of req; object names the kind ("chat.completion" …).
func (req *request) head(object string) responseHead {
	return responseHead{ID: req.id, Object: object, Created: req.created, Model: req.s.m.Name, SystemFingerprint: fingerprint}
}

// choiceState is one choice's progress.
type choiceState struct {
	index   int
	prompt  int
	text    choiceText
	tokens  []Token // every sampled token (a final stop token included)
	counted int     // tokens of usage
	lpSent  int     // tokens whose logprobs were streamed
	finish  string
	done    bool
	started bool // the role delta was streamed
}

// prepare validates lengths, builds the choices and submits them.
func (s *Server) submit(req *request) *apiError {
	maxSeq := s.m.Config.MaxSeq
	specs := make([]RowSpec, 0, len(req.prompts)*req.p.n)
	var seed uint64
	if req.p.seed != nil {
		seed = *req.p.seed
	} else {
		seed = rand.Uint64()
	}
	seeds := sample.Options{Seed: seed}
	for k, prompt := range req.prompts {
		if len(prompt) == 0 {
			return badParam("prompt", "prompt %d is empty (0 tokens)", k)
		}
		for _, t := range prompt {
			if t < 0 || t >= s.m.Config.Vocab {
				return badParam("prompt", "prompt %d: token id %d outside the vocabulary [0, %d)", k, t, s.m.Config.Vocab)
			}
		}
		maxTokens := req.p.maxTokens
		if maxTokens == 0 {
			maxTokens = maxSeq - len(prompt)
			if !req.chat {
				maxTokens = min(16, maxTokens) // OpenAI's default for completions
			}
		}
		if len(prompt) >= maxSeq || len(prompt)+maxTokens > maxSeq {
			return errorf(http.StatusRequestEntityTooLarge, "invalid_request_error", "messages", "context_length_exceeded",
				"This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the prompt, %d for the completion). Please reduce the length of the prompt or the completion.",
				maxSeq, len(prompt)+maxTokens, len(prompt), maxTokens)
		}
		for i := range req.p.n {
			top := 0
			if req.logprobs {
				top = req.top
			}
			specs = append(specs, RowSpec{Prompt: prompt, MaxTokens: maxTokens, Temperature: req.p.temperature, TopP: req.p.topP,
				Seed: seeds.SeedFor(i), StopIDs: s.m.StopIDs, TopLogprobs: top})
			c := &choiceState{index: len(req.choices), prompt: k}
			var tools *chat.Format
			if req.tools {
				tools = s.m.ToolFormat
			}
			c.text = newChoiceText(s.m, req.p.stop, tools)
			req.choices = append(req.choices, c)
		}
	}
	job, err := s.sched.Submit(specs)
	switch {
	case errors.Is(err, ErrQueueFull):
		return errorf(http.StatusTooManyRequests, "rate_limit_exceeded", "", "queue_full", "%v: retry later", err)
	case errors.Is(err, ErrClosed):
		return errorf(http.StatusServiceUnavailable, "server_error", "", "server_closing", "the server is shutting down")
	case errors.Is(err, ErrTooLarge):
		if s.opts.Metrics != nil {
			s.opts.Metrics.rejected.WithLabelValues("kv_budget").Inc()
		}
		return errorf(http.StatusRequestEntityTooLarge, "invalid_request_error", "max_tokens", "kv_cache_budget_exceeded", "%v", err)
	case err != nil:
		return badParam("", "%v", err)
	}
	req.job = job
	return nil
}

func (s *Server) newID(prefix string) string {
	return fmt.Sprintf("%s%x%04x", prefix, time.Now().UnixNano()&0xffffffffff, s.seq.Add(1)&0xffff)
}

// readRequest decodes r's body into in and checks what every endpoint shares: the sampling
// parameters, and that the model named is the one served.
func (s *Server) readRequest(r *http.Request, in interface{ shared() *sampling }) (params, *apiError) {
	if err := decodeStrict(r, in); err != nil {
		return params{}, err
	}
	p, err := in.shared().check(s.sched.Options().MaxBatch)
	if err != nil {
		return p, err
	}
	if m := in.shared().Model; m != s.m.Name {
		return p, s.unknownModel(m)
	}
	return p, nil
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) *apiError {
	var in chatRequest
	p, err := s.readRequest(r, &in)
	if err != nil {
		return err
	}
	if in.MaxCompletionTokens != nil {
		if *in.MaxCompletionTokens < 1 {
			return badParam("max_completion_tokens", "max_completion_tokens=%d: must be at least 1", *in.MaxCompletionTokens)
		}
		if in.MaxTokens != nil && *in.MaxTokens != *in.MaxCompletionTokens {
			return badParam("max_tokens", "max_tokens=%d and max_completion_tokens=%d: give one", *in.MaxTokens, *in.MaxCompletionTokens)
		}
		p.maxTokens = *in.MaxCompletionTokens
	}
	top := 0
	if in.TopLogprobs != nil {
		if *in.TopLogprobs < 0 || *in.TopLogprobs > 20 {
			return badParam("top_logprobs", "top_logprobs=%d: must be between 0 and 20", *in.TopLogprobs)
		}
		if !in.Logprobs {
			return badParam("top_logprobs", "top_logprobs: only with logprobs true")
		}
		top = *in.TopLogprobs
	}
	if len(in.ResponseFormat) > 0 && string(in.ResponseFormat) != "null" {
		var rf struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(in.ResponseFormat, &rf) != nil || rf.Type != "text" {
			return unsupported("response_format", "response_format %s: not supported (Temper does not constrain decoding); allowed: {\"type\": \"text\"}", in.ResponseFormat)
		}
	}
	auto, aerr := toolChoice(in.ToolChoice)
	if aerr != nil {
		return aerr
	}
	if len(in.Tools) == 0 && len(in.ToolChoice) > 0 && string(in.ToolChoice) != "null" && string(in.ToolChoice) != `"none"` {
		return badParam("tool_choice", "tool_choice: only with tools")
	}
	if err := checkTools(in.Tools); err != nil {
		return err
	}
	msgs, aerr := readMessages(in.Messages)
	if aerr != nil {
		return aerr
	}
	ids, aerr := s.m.chatPrompt(msgs, in.Tools, in.ChatTemplateKwargs)
	if aerr != nil {
		return aerr
	}
	req := &request{s: s, endpoint: "chat.completions", id: s.newID("chatcmpl-"), created: time.Now().Unix(), prompts: [][]int{ids}, p: p,
		chat: true, tools: len(in.Tools) > 0 && auto, parallel: in.ParallelToolCalls == nil || *in.ParallelToolCalls,
		logprobs: in.Logprobs, top: top}
	if err := s.submit(req); err != nil {
		return err
	}
	return req.run(w, r)
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) *apiError {
	var in completionRequest
	p, err := s.readRequest(r, &in)
	if err != nil {
		return err
	}
	if in.Prompt == nil || in.Prompt.len() == 0 {
		return badParam("prompt", "prompt is required")
	}
	if in.Echo {
		return unsupported("echo", "echo=true: not supported; allowed: false")
	}
	if in.Suffix != nil {
		return unsupported("suffix", "suffix: not supported (no fill-in-the-middle)")
	}
	if in.BestOf != nil && *in.BestOf != 1 && *in.BestOf != p.n {
		return unsupported("best_of", "best_of=%d: not supported; allowed: 1 or n", *in.BestOf)
	}
	logprobs, top := false, 0
	if in.Logprobs != nil {
		if *in.Logprobs < 0 || *in.Logprobs > 5 {
			return badParam("logprobs", "logprobs=%d: must be between 0 and 5", *in.Logprobs)
		}
		logprobs, top = true, *in.Logprobs
	}
	var prompts [][]int
	for _, t := range in.Prompt.texts {
		prompts = append(prompts, s.m.Encode(t))
	}
	prompts = append(prompts, in.Prompt.ids...)
	if len(prompts)*p.n > s.sched.Options().MaxBatch {
		return badParam("n", "%d prompts × n=%d choices: at most %d (the server's max batch)", len(prompts), p.n, s.sched.Options().MaxBatch)
	}
	req := &request{s: s, endpoint: "completions", id: s.newID("cmpl-"), created: time.Now().Unix(), prompts: prompts, p: p,
		logprobs: logprobs, top: top}
	if err := s.submit(req); err != nil {
		return err
	}
	return req.run(w, r)
}

// run follows the job to its end, streaming or not.
func (req *request) run(w http.ResponseWriter, r *http.Request) *apiError {
	ctx := r.Context()
	var sse *sseWriter
	if req.p.stream {
		sse = newSSE(w)
	}
	var failure error
	for {
		evs, err := req.job.Next(ctx)
		if err != nil {
			req.job.Cancel() // the client went away: its rows leave the batch
			return nil
		}
		if evs == nil {
			break
		}
		for _, e := range evs {
			c := req.choices[e.Choice]
			if c.done {
				continue
			}
			if e.Err != nil {
				if failure == nil && !errors.Is(e.Err, context.Canceled) {
					failure = e.Err
				}
				c.done, c.finish = true, "error"
				continue
			}
			c.tokens = append(c.tokens, e.Token)
			c.counted++
			switch {
			case e.Finish == FinishStop:
				c.done, c.finish = true, FinishStop // a stop token: not part of the text
			case c.text.add(e.Token.ID):
				c.done, c.finish = true, FinishStop // a stop string
				req.job.CancelChoice(c.index)
			case e.Finish == FinishLength:
				c.done, c.finish = true, FinishLength
			}
			if sse != nil {
				if err := req.streamChoice(sse, c); err != nil {
					req.job.Cancel()
					return nil
				}
			}
		}
		// One write and flush for all the events that were waiting: a client that falls behind
		// costs fewer system calls, not more.
		if sse != nil {
			if err := sse.flush(); err != nil {
				req.job.Cancel()
				return nil
			}
		}
	}
	if failure != nil {
		if sse != nil {
			_ = sse.send(struct {
				Error *apiError `json:"error"`
			}{errorf(http.StatusServiceUnavailable, "server_error", "", "engine_error", "%v", failure)})
			_ = sse.flush()
			return nil
		}
		return errorf(http.StatusServiceUnavailable, "server_error", "", "engine_error", "%v", failure)
	}
	if req.s.opts.OnCall != nil {
		req.s.opts.OnCall(req.call())
	}
	if sse != nil {
		if req.p.usage {
			u := req.usage()
			if req.chat {
				_ = sse.send(chatChunk{responseHead: req.head("chat.completion.chunk"), Choices: []chunkChoice{}, Usage: &u})
			} else {
				_ = sse.send(completion{responseHead: req.head("text_completion"), Choices: []completionChoice{}, Usage: &u})
			}
		}
		sse.done()
		return nil
	}
	if req.chat {
		writeJSON(w, req.chatResponse())
	} else {
		writeJSON(w, req.completionResponse())
	}
	return nil
}

const fingerprint = "fp_temper"

func (req *request) usage() usage {
	u := usage{}
	for _, p := range req.prompts {
		u.PromptTokens += len(p)
	}
	for _, c := range req.choices {
		u.CompletionTokens += c.counted
	}
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	return u
}

func (req *request) call() Call {
	c := Call{Endpoint: req.endpoint, Prompts: req.prompts}
	for _, ch := range req.choices {
		cc := CallChoice{Prompt: ch.prompt, Finish: req.finishReason(ch)}
		for _, t := range ch.tokens {
			cc.Tokens = append(cc.Tokens, t.ID)
			cc.LogProbs = append(cc.LogProbs, t.LogProb)
		}
		c.Choices = append(c.Choices, cc)
	}
	return c
}

// textTokens are the choice's tokens that are part of its text (not a final stop token).
func (c *choiceState) textTokens() []Token {
	if c.finish == FinishStop && len(c.tokens) > len(c.text.tokens) {
		return c.tokens[:len(c.text.tokens)]
	}
	return c.tokens
}

// calls parses the choice's tool calls when the request has tools.
func (req *request) calls(c *choiceState) (string, []parsedCall) {
	if !req.tools || c.finish == FinishLength {
		return c.text.text(), nil
	}
	content, calls := parseCalls(req.s.m.ToolFormat, c.text.text())
	if len(calls) > 1 && !req.parallel {
		calls = calls[:1]
	}
	return content, calls
}

func (req *request) finishReason(c *choiceState) string {
	if _, calls := req.calls(c); len(calls) > 0 {
		return "tool_calls"
	}
	return c.finish
}

func (req *request) toolCalls(c *choiceState, calls []parsedCall, indexed bool) []toolCall {
	out := make([]toolCall, len(calls))
	for i, call := range calls {
		out[i] = toolCall{ID: callID(req.id, c.index, i), Type: "function", Function: toolCallFunction{Name: call.Name, Arguments: call.Arguments}}
		if indexed {
			out[i].Index = &i
		}
	}
	return out
}

func (req *request) chatLogprobs(toks []Token) *chatLogprobs {
	lp := &chatLogprobs{Content: make([]tokenLogprob, 0, len(toks))}
	for _, t := range toks {
		s, b := req.s.m.tokenText(t.ID)
		e := tokenLogprob{Token: s, Logprob: t.LogProb, Bytes: b, TopLogprobs: []topLogprob{}}
		for _, a := range t.Top {
			as, ab := req.s.m.tokenText(a.ID)
			e.TopLogprobs = append(e.TopLogprobs, topLogprob{Token: as, Logprob: a.LogProb, Bytes: ab})
		}
		lp.Content = append(lp.Content, e)
	}
	return lp
}

func (req *request) chatResponse() chatCompletion {
	u := req.usage()
	out := chatCompletion{responseHead: req.head("chat.completion"), Usage: &u}
	for _, c := range req.choices {
		content, calls := req.calls(c)
		msg := chatMessage{Role: "assistant", Content: &content}
		if len(calls) > 0 {
			msg.ToolCalls = req.toolCalls(c, calls, false)
			if strings.TrimSpace(content) == "" {
				msg.Content = nil
			}
		}
		ch := chatChoice{Index: c.index, Message: msg, FinishReason: req.finishReason(c)}
		if req.logprobs {
			ch.Logprobs = req.chatLogprobs(c.textTokens())
		}
		out.Choices = append(out.Choices, ch)
	}
	return out
}

func (req *request) completionLogprobs(toks []Token, offset int) *completionLogprobs {
	lp := &completionLogprobs{Tokens: []string{}, TokenLogprobs: []float32{}, TopLogprobs: []map[string]float32{}, TextOffset: []int{}}
	for _, t := range toks {
		s, _ := req.s.m.tokenText(t.ID)
		lp.Tokens = append(lp.Tokens, s)
		lp.TokenLogprobs = append(lp.TokenLogprobs, t.LogProb)
		lp.TextOffset = append(lp.TextOffset, offset)
		offset += len(s)
		top := map[string]float32{}
		for _, a := range t.Top {
			as, _ := req.s.m.tokenText(a.ID)
			if _, ok := top[as]; !ok {
				top[as] = a.LogProb
			}
		}
		lp.TopLogprobs = append(lp.TopLogprobs, top)
	}
	return lp
}

func (req *request) completionResponse() completion {
	u := req.usage()
	out := completion{responseHead: req.head("text_completion"), Usage: &u}
	for _, c := range req.choices {
		f := c.finish
		ch := completionChoice{Text: c.text.text(), Index: c.index, FinishReason: &f}
		if req.logprobs {
			ch.Logprobs = req.completionLogprobs(c.textTokens(), 0)
		}
		out.Choices = append(out.Choices, ch)
	}
	return out
}

// streamChoice sends what choice c has new: its role first (chat), text that is safe to send, the
// new tokens' logprobs, and at its end the rest of the text, its tool calls and its finish reason.
func (req *request) streamChoice(sse *sseWriter, c *choiceState) error {
	toks := c.textTokens()
	newToks := toks[min(c.lpSent, len(toks)):]
	c.lpSent = len(toks)
	if !req.chat {
		text := c.text.pending(c.done)
		if text == "" && (len(newToks) == 0 || !req.logprobs) && !c.done {
			return nil
		}
		if !req.logprobs && !c.done {
			return sse.sendText(req.textFrame(c.index), text)
		}
		ch := completionChoice{Text: text, Index: c.index}
		if req.logprobs {
			ch.Logprobs = req.completionLogprobs(newToks, c.text.sent-len(text))
		}
		if c.done {
			f := c.finish
			ch.FinishReason = &f
		}
		return sse.send(completion{responseHead: req.head("text_completion"), Choices: []completionChoice{ch}})
	}
	chunk := func(d chatDelta, lp *chatLogprobs, finish *string) error {
		return sse.send(chatChunk{responseHead: req.head("chat.completion.chunk"), Choices: []chunkChoice{{Index: c.index, Delta: d, Logprobs: lp, FinishReason: finish}}})
	}
	if !c.started {
		c.started = true
		empty := ""
		if err := chunk(chatDelta{Role: "assistant", Content: &empty}, nil, nil); err != nil {
			return err
		}
	}
	var lp *chatLogprobs
	if req.logprobs && len(newToks) > 0 {
		lp = req.chatLogprobs(newToks)
	}
	if !c.done {
		text := c.text.pending(false)
		if text == "" && lp == nil {
			return nil
		}
		if lp == nil {
			return sse.sendText(req.textFrame(c.index), text)
		}
		return chunk(chatDelta{Content: &text}, lp, nil)
	}
	content, calls := req.calls(c)
	rest := ""
	if c.text.sent < len(content) {
		rest = content[c.text.sent:]
	}
	c.text.sent = len(c.text.buf)
	if rest != "" || lp != nil {
		if err := chunk(chatDelta{Content: &rest}, lp, nil); err != nil {
			return err
		}
	}
	if len(calls) > 0 {
		if err := chunk(chatDelta{ToolCalls: req.toolCalls(c, calls, true)}, nil, nil); err != nil {
			return err
		}
	}
	finish := req.finishReason(c)
	return chunk(chatDelta{}, nil, &finish)
}

// textMark stands for the text in a chunk's encoding (textFrame).
const textMark = "\x00text\x00"

// textFrame is the encoding of a chunk that carries only text for one choice, cut around the
// text: most chunks are that, and writing them around the text costs a fraction of encoding the
// whole chunk every time. The halves come from encoding the same structs, so the bytes are those of
// the general path.
func (req *request) textFrame(choice int) [2][]byte {
	if f, ok := req.frames[choice]; ok {
		return f
	}
	mark := textMark
	var v any
	if req.chat {
		v = chatChunk{responseHead: req.head("chat.completion.chunk"), Choices: []chunkChoice{{Index: choice, Delta: chatDelta{Content: &mark}}}}
	} else {
		v = completion{responseHead: req.head("text_completion"), Choices: []completionChoice{{Text: mark, Index: choice}}}
	}
	var b bytes.Buffer
	_ = newEncoder(&b).Encode(v)
	enc := strings.TrimSuffix(b.String(), "\n")
	quoted := `"\u0000text\u0000"`
	i := strings.Index(enc, quoted)
	f := [2][]byte{[]byte(enc[:i]), []byte(enc[i+len(quoted):])}
	if req.frames == nil {
		req.frames = map[int][2][]byte{}
	}
	req.frames[choice] = f
	return f
}

// sseWriter buffers server-sent events; flush writes them out.
type sseWriter struct {
	w   http.ResponseWriter
	rc  *http.ResponseController
	buf bytes.Buffer
}

func newSSE(w http.ResponseWriter) *sseWriter {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	w.WriteHeader(http.StatusOK)
	return &sseWriter{w: w, rc: http.NewResponseController(w)}
}

// send queues one event.
func (s *sseWriter) send(v any) error {
	s.buf.WriteString("data: ")
	if err := newEncoder(&s.buf).Encode(v); err != nil { // the line ends with the encoder's newline
		return err
	}
	s.buf.WriteString("\n")
	return nil
}

// sendText queues one event: frame[0], text as a JSON string, frame[1].
func (s *sseWriter) sendText(frame [2][]byte, text string) error {
	s.buf.WriteString("data: ")
	s.buf.Write(frame[0])
	if err := newEncoder(&s.buf).Encode(text); err != nil {
		return err
	}
	s.buf.Truncate(s.buf.Len() - 1) // the encoder's newline
	s.buf.Write(frame[1])
	s.buf.WriteString("\n\n")
	return nil
}

// flush writes the queued events and flushes them to the client.
func (s *sseWriter) flush() error {
	if s.buf.Len() == 0 {
		return nil
	}
	_, err := s.w.Write(s.buf.Bytes())
	s.buf.Reset()
	if err != nil {
		return err
	}
	return s.rc.Flush()
}

func (s *sseWriter) done() {
	s.buf.WriteString("data: [DONE]\n\n")
	_ = s.flush()
}
