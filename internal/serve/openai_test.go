package serve

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go/v2"
	"github.com/openai/openai-go/v2/option"
	"github.com/openai/openai-go/v2/shared"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/tpu"
)

// tinyServer serves a randomly initialised tiny byte-level model through the real runtime and the
// official Go client.
type tinyServer struct {
	rt     *tpu.Runtime
	eng    *widestEngine
	srv    *Server
	http   *httptest.Server
	client openai.Client
	mu     sync.Mutex
	calls  []Call
}

func newTinyServer(t *testing.T, preset string) *tinyServer {
	t.Helper()
	cfg, err := model.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := tpu.New(tpu.Options{Model: cfg, Seed: 1, InitStd: 0.5})
	if err != nil {
		t.Fatal(err)
	}
	dec, err := rt.NewDecoder()
	if err != nil {
		t.Fatal(err)
	}
	m, err := ByteModel(preset, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := &tinyServer{rt: rt, eng: &widestEngine{Engine: dec}}
	ts.srv = New(m, ts.eng, Options{Metrics: NewMetrics(), OnCall: func(c Call) {
		ts.mu.Lock()
		ts.calls = append(ts.calls, c)
		ts.mu.Unlock()
	}})
	ts.http = httptest.NewServer(ts.srv.Handler())
	ts.client = openai.NewClient(option.WithBaseURL(ts.http.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	t.Cleanup(func() {
		ts.http.Close()
		ts.srv.Close()
		dec.Close()
		rt.Close()
	})
	return ts
}

// widestEngine records the widest step it ran, and sleeps delay (nanoseconds) before each step
// when set, so that requests started a few milliseconds apart overlap however fast or loaded the
// machine is.
type widestEngine struct {
	Engine
	widest atomic.Int64
	delay  atomic.Int64
}

func (e *widestEngine) Step(ids, tokens []int) ([]float32, error) {
	if n := int64(len(ids)); n > e.widest.Load() {
		e.widest.Store(n)
	}
	time.Sleep(time.Duration(e.delay.Load()))
	return e.Engine.Step(ids, tokens)
}

func (ts *tinyServer) lastCall() Call {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.calls[len(ts.calls)-1]
}

func chatParams(user string, seed int64, maxTokens int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "tiny", Messages: []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You are terse."), openai.UserMessage(user)},
		Seed: openai.Int(seed), MaxTokens: openai.Int(maxTokens), Temperature: openai.Float(1)}
}

// apiErr asserts err is an OpenAI error with the status, and returns it.
func apiErr(t *testing.T, err error, status int) *openai.Error {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("want an API error %d, got %v", status, err)
	}
	if e.StatusCode != status {
		t.Fatalf("status %d (%s), want %d", e.StatusCode, e.Message, status)
	}
	return e
}

// TestOpenAIGoClient runs the official Go client against an in-process server on a tiny random
// byte-level model: models, chat, streaming, logprobs, n, seed reproducibility alone and among
// concurrent requests, completions, and errors.
func TestOpenAIGoClient(t *testing.T) {
	ts := newTinyServer(t, "tiny")
	ctx := context.Background()
	cl := ts.client

	t.Run("models", func(t *testing.T) {
		page, err := cl.Models.List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Data) != 1 || page.Data[0].ID != "tiny" {
			t.Fatalf("models %+v", page.Data)
		}
		if _, err := cl.Models.Get(ctx, "gpt-4o"); err == nil {
			t.Fatal("an unknown model was found")
		} else {
			apiErr(t, err, 404)
		}
	})

	var base *openai.ChatCompletion
	t.Run("chat", func(t *testing.T) {
		var err error
		base, err = cl.Chat.Completions.New(ctx, chatParams("Say hi.", 7, 24))
		if err != nil {
			t.Fatal(err)
		}
		if len(base.Choices) != 1 || base.Choices[0].Message.Role != "assistant" {
			t.Fatalf("choices %+v", base.Choices)
		}
		c := base.Choices[0]
		if c.FinishReason != "stop" && c.FinishReason != "length" {
			t.Fatalf("finish_reason %q", c.FinishReason)
		}
		call := ts.lastCall()
		wantPrompt, err := tokenize.DefaultChat().Prompt(tokenize.Byte{}, []tokenize.Message{
			{Role: "system", Content: "You are terse."}, {Role: "user", Content: "Say hi."}})
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(call.Prompts[0], wantPrompt) {
			t.Fatalf("prompt ids %v, want DefaultChat's %v", call.Prompts[0], wantPrompt)
		}
		got := call.Choices[0].Tokens
		if c.FinishReason == "stop" {
			got = got[:len(got)-1]
		}
		// JSON carries the bytes of invalid UTF-8 as U+FFFD, as for any string.
		if text := jsonRoundTrip(tokenize.Byte{}.Decode(got)); c.Message.Content != text {
			t.Fatalf("content %q, tokens decode to %q", c.Message.Content, text)
		}
		if base.Usage.PromptTokens != int64(len(wantPrompt)) || base.Usage.CompletionTokens != int64(len(call.Choices[0].Tokens)) ||
			base.Usage.TotalTokens != base.Usage.PromptTokens+base.Usage.CompletionTokens {
			t.Fatalf("usage %+v, prompt %d tokens, completion %d", base.Usage, len(wantPrompt), len(call.Choices[0].Tokens))
		}
	})

	t.Run("streaming", func(t *testing.T) {
		p := chatParams("Say hi.", 7, 24)
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		stream := cl.Chat.Completions.NewStreaming(ctx, p)
		acc := openai.ChatCompletionAccumulator{}
		chunks := 0
		for stream.Next() {
			acc.AddChunk(stream.Current())
			chunks++
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if chunks < 3 {
			t.Fatalf("%d chunks: want the text in several", chunks)
		}
		got, want := acc.Choices[0], base.Choices[0]
		if got.Message.Content != want.Message.Content || got.FinishReason != want.FinishReason {
			t.Fatalf("streamed %q (%s), not streamed %q (%s)", got.Message.Content, got.FinishReason, want.Message.Content, want.FinishReason)
		}
		if acc.Usage.TotalTokens != base.Usage.TotalTokens {
			t.Fatalf("streamed usage %+v, not streamed %+v", acc.Usage, base.Usage)
		}
	})

	t.Run("logprobs", func(t *testing.T) {
		p := chatParams("Say hi.", 7, 24)
		p.Logprobs, p.TopLogprobs = openai.Bool(true), openai.Int(3)
		out, err := cl.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		c := out.Choices[0]
		if c.Message.Content != base.Choices[0].Message.Content {
			t.Fatalf("asking for logprobs changed the text: %q vs %q", c.Message.Content, base.Choices[0].Message.Content)
		}
		call := ts.lastCall()
		toks := call.Choices[0].Tokens
		lps := c.Logprobs.Content
		wantN := len(toks)
		if c.FinishReason == "stop" {
			wantN--
		}
		if len(lps) != wantN {
			t.Fatalf("%d logprobs for %d text tokens", len(lps), wantN)
		}
		// The served log-probabilities are the model's: the trainer's recomputation on
		// prompt + completion agrees.
		b, err := tpu.LMBatch([][]int{append(slices.Clone(call.Prompts[0]), toks...)}, nil)
		if err != nil {
			t.Fatal(err)
		}
		re, err := ts.rt.LogProbs(b)
		if err != nil {
			t.Fatal(err)
		}
		for i, e := range lps {
			want := re[0][len(call.Prompts[0])-1+i]
			if math.Abs(e.Logprob-float64(want)) > 1e-4 || float32(e.Logprob) != call.Choices[0].LogProbs[i] {
				t.Fatalf("token %d: served logprob %v, recomputed %v, recorded %v", i, e.Logprob, want, call.Choices[0].LogProbs[i])
			}
			if len(e.TopLogprobs) != 3 {
				t.Fatalf("token %d: %d top logprobs, want 3", i, len(e.TopLogprobs))
			}
			for k := 1; k < 3; k++ {
				if e.TopLogprobs[k].Logprob > e.TopLogprobs[k-1].Logprob {
					t.Fatalf("token %d: top logprobs not sorted: %+v", i, e.TopLogprobs)
				}
			}
			if e.Logprob > e.TopLogprobs[0].Logprob+1e-6 || e.Logprob > 0 {
				t.Fatalf("token %d: logprob %v above the best alternative %v", i, e.Logprob, e.TopLogprobs[0].Logprob)
			}
			if want := jsonRoundTrip(tokenize.Byte{}.Decode([]int{toks[i]})); e.Token != want || (toks[i] < 256 && (len(e.Bytes) != 1 || e.Bytes[0] != int64(toks[i]))) {
				t.Fatalf("token %d (id %d): %q, bytes %v", i, toks[i], e.Token, e.Bytes)
			}
		}
	})

	t.Run("n", func(t *testing.T) {
		p := chatParams("Say hi.", 7, 24)
		p.N = openai.Int(3)
		out, err := cl.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Choices) != 3 {
			t.Fatalf("%d choices", len(out.Choices))
		}
		for i, c := range out.Choices {
			if c.Index != int64(i) {
				t.Fatalf("choice %d has index %d", i, c.Index)
			}
		}
		// Choice i draws from seed.SeedFor(i): choice 0 is the n=1 answer; the others differ.
		if out.Choices[0].Message.Content != base.Choices[0].Message.Content {
			t.Fatalf("choice 0 %q, the n=1 answer %q", out.Choices[0].Message.Content, base.Choices[0].Message.Content)
		}
		if out.Choices[1].Message.Content == out.Choices[0].Message.Content && out.Choices[2].Message.Content == out.Choices[0].Message.Content {
			t.Fatal("three choices, one text")
		}
	})

	t.Run("seed reproducible among concurrent requests", func(t *testing.T) {
		p := chatParams("Count to five.", 11, 40)
		p.Logprobs = openai.Bool(true)
		alone, err := cl.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		ts.eng.widest.Store(0)
		ts.eng.delay.Store(int64(5 * time.Millisecond)) // 40 tokens: the first request decodes for 200 ms at least
		defer ts.eng.delay.Store(0)
		var wg sync.WaitGroup
		results := make([]*openai.ChatCompletion, 8)
		errs := make([]error, 8)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				q := p
				if i%2 == 1 { // companions: other prompts, lengths and seeds, joining at other steps
					q = chatParams(strings.Repeat("Another question. ", i), int64(100+i), int64(10+5*i))
				}
				time.Sleep(time.Duration(i) * 3 * time.Millisecond)
				results[i], errs[i] = cl.Chat.Completions.New(ctx, q)
			}()
		}
		wg.Wait()
		same := 0
		for i := 0; i < 8; i += 2 {
			if errs[i] != nil {
				t.Fatal(errs[i])
			}
			got := results[i].Choices[0]
			if got.Message.Content != alone.Choices[0].Message.Content {
				t.Fatalf("seed 11 among companions %q, alone %q", got.Message.Content, alone.Choices[0].Message.Content)
			}
			bits := len(got.Logprobs.Content) == len(alone.Choices[0].Logprobs.Content)
			for k := range got.Logprobs.Content {
				bits = bits && got.Logprobs.Content[k].Logprob == alone.Choices[0].Logprobs.Content[k].Logprob
			}
			if bits {
				same++
			}
		}
		if w := ts.eng.widest.Load(); w < 4 {
			t.Fatalf("the widest step had %d rows: the requests did not share the batch", w)
		}
		t.Logf("same tokens in 4 of 4 runs among companions (steps up to %d rows); logprobs bit-identical to the lone run in %d of 4", ts.eng.widest.Load(), same)
		other, err := cl.Chat.Completions.New(ctx, chatParams("Count to five.", 12, 40))
		if err != nil {
			t.Fatal(err)
		}
		if other.Choices[0].Message.Content == alone.Choices[0].Message.Content {
			t.Fatal("seeds 11 and 12 gave the same text")
		}
	})

	t.Run("completions", func(t *testing.T) {
		out, err := cl.Completions.New(ctx, openai.CompletionNewParams{Model: "tiny",
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("12+34=")}, MaxTokens: openai.Int(12),
			Seed: openai.Int(5), Logprobs: openai.Int(2), Stop: openai.CompletionNewParamsStopUnion{OfString: openai.String("\n")}})
		if err != nil {
			t.Fatal(err)
		}
		c := out.Choices[0]
		if strings.Contains(c.Text, "\n") {
			t.Fatalf("text %q runs past the stop string", c.Text)
		}
		if len(c.Logprobs.Tokens) == 0 || len(c.Logprobs.TopLogprobs[0]) == 0 || len(c.Logprobs.TopLogprobs[0]) > 2 {
			t.Fatalf("logprobs %+v", c.Logprobs)
		}
		call := ts.lastCall()
		if want := append([]int{tokenize.ByteBOS}, tokenize.Byte{}.Encode("12+34=")...); !slices.Equal(call.Prompts[0], want) {
			t.Fatalf("prompt ids %v, want BOS + bytes %v", call.Prompts[0], want)
		}
	})

	t.Run("errors", func(t *testing.T) {
		cases := []struct {
			name   string
			params openai.ChatCompletionNewParams
			opts   []option.RequestOption
			status int
			param  string
			code   string
		}{
			{"unknown parameter", chatParams("hi", 1, 4), []option.RequestOption{option.WithJSONSet("top_k", 5)}, 400, "top_k", "unknown_parameter"},
			{"unknown model", func() openai.ChatCompletionNewParams { p := chatParams("hi", 1, 4); p.Model = "gpt-4o"; return p }(), nil, 404, "model", "model_not_found"},
			{"prompt over the context", chatParams(strings.Repeat("x", 600), 1, 4), nil, 413, "messages", "context_length_exceeded"},
			{"max_tokens over the context", chatParams("hi", 1, 1000), nil, 413, "messages", "context_length_exceeded"},
			{"penalty", func() openai.ChatCompletionNewParams {
				p := chatParams("hi", 1, 4)
				p.PresencePenalty = openai.Float(0.5)
				return p
			}(), nil, 400, "presence_penalty", "unsupported_parameter"},
			{"tools on DefaultChat", func() openai.ChatCompletionNewParams {
				p := chatParams("hi", 1, 4)
				p.Tools = []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: "f"})}
				return p
			}(), nil, 400, "tools", "unsupported_parameter"},
			{"n over the batch", func() openai.ChatCompletionNewParams { p := chatParams("hi", 1, 4); p.N = openai.Int(1000); return p }(), nil, 400, "n", "invalid_value"},
		}
		for _, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				_, err := cl.Chat.Completions.New(ctx, c.params, c.opts...)
				e := apiErr(t, err, c.status)
				if e.Param != c.param || e.Code != c.code || e.Message == "" {
					t.Fatalf("error %+v: want param %q code %q", e, c.param, c.code)
				}
			})
		}
	})

}

// TestClientDisconnect: when the client goes away, streaming (the server notices at its next write or
// through the request's context) or not (only the context tells), the request's rows leave the
// batch long before their max_tokens.
func TestClientDisconnect(t *testing.T) {
	m := byteModel(t, 512)
	eng := byteScript(func(p []int) string { return strings.Repeat("z", 480) })
	eng.delay = 2 * time.Millisecond
	srv := New(m, eng, Options{})
	hs := httptest.NewServer(srv.Handler())
	defer func() { hs.Close(); srv.Close() }()
	cl := openai.NewClient(option.WithBaseURL(hs.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	p := openai.ChatCompletionNewParams{Model: "bytes", MaxTokens: openai.Int(400),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Go on forever.")}}
	for _, stream := range []bool{true, false} {
		ctx, cancel := context.WithCancel(context.Background())
		steps0 := eng.stepCount()
		if stream {
			st := cl.Chat.Completions.NewStreaming(ctx, p)
			got := false
			for !got && st.Next() {
				ch := st.Current()
				got = len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != ""
			}
			if !got {
				t.Fatalf("no text streamed: %v", st.Err())
			}
			cancel()
			_ = st.Close()
		} else {
			done := make(chan error, 1)
			go func() { _, err := cl.Chat.Completions.New(ctx, p); done <- err }()
			for eng.stepCount() < steps0+5 {
				select {
				case err := <-done:
					t.Fatalf("the request ended before it was cancelled: %v", err)
				case <-time.After(time.Millisecond):
				}
			}
			cancel()
			<-done
		}
		deadline := time.Now().Add(10 * time.Second)
		for srv.Scheduler().Running() > 0 && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		if n := srv.Scheduler().Running(); n != 0 {
			t.Fatalf("stream=%v: %d rows still decoding after the client left", stream, n)
		}
		if steps := eng.stepCount() - steps0; steps > 200 {
			t.Fatalf("stream=%v: %d decode steps: the request ran on after its client left", stream, steps)
		}
	}
}

// jsonRoundTrip is s as a JSON string decodes: invalid UTF-8 bytes become U+FFFD.
func jsonRoundTrip(s string) string {
	b, _ := json.Marshal(s)
	var out string
	_ = json.Unmarshal(b, &out)
	return out
}

// toolServer serves the real Qwen3 tokenizer and chat template with a scripted engine that answers
// every prompt with some text and a call in Qwen's format.
type toolServer struct {
	m       *Model
	http    *httptest.Server
	mu      sync.Mutex
	prompts [][]int
}

func newToolServer(t *testing.T) *toolServer {
	t.Helper()
	ts := &toolServer{m: qwen3Model(t)}
	bpe := ts.m.Tok
	imEnd, ok := bpe.Special().ID("<|im_end|>")
	if !ok {
		t.Fatal("no <|im_end|>")
	}
	call := "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"celsius\"}}\n</tool_call>"
	eng := &scriptEngine{vocab: ts.m.Config.Vocab, stop: imEnd, script: func(p []int) []int {
		ts.mu.Lock()
		ts.prompts = append(ts.prompts, p)
		ts.mu.Unlock()
		return bpe.Encode("Let me check." + call)
	}}
	srv := New(ts.m, eng, Options{})
	ts.http = httptest.NewServer(srv.Handler())
	t.Cleanup(func() { ts.http.Close(); srv.Close() })
	return ts
}

func (ts *toolServer) lastPrompt() []int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.prompts[len(ts.prompts)-1]
}

// TestOpenAIGoToolCalls: a model writing a call in its own format (Qwen3's <tool_call>, through
// the real Qwen3 tokenizer and chat template; the engine is scripted) reaches the official client as
// tool_calls, whole or streamed; the tool definitions reach the template.
func TestOpenAIGoToolCalls(t *testing.T) {
	tsrv := newToolServer(t)
	bpe := tsrv.m.Tok
	cl := openai.NewClient(option.WithBaseURL(tsrv.http.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	lastPrompt := tsrv.lastPrompt
	params := openai.ChatCompletionNewParams{Model: "qwen3-script", Seed: openai.Int(1),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_weather", Description: openai.String("Current weather"),
			Parameters: shared.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}}})}}
	ctx := context.Background()
	check := func(t *testing.T, content string, calls []openai.ChatCompletionMessageToolCallUnion, finish string) {
		t.Helper()
		if finish != "tool_calls" || len(calls) != 1 {
			t.Fatalf("finish %q, calls %+v", finish, calls)
		}
		fn := calls[0].Function
		var args map[string]string
		if err := json.Unmarshal([]byte(fn.Arguments), &args); err != nil || fn.Name != "get_weather" || args["city"] != "Paris" || args["unit"] != "celsius" {
			t.Fatalf("call %+v (%v)", fn, err)
		}
		if calls[0].ID == "" {
			t.Fatal("a call without an id")
		}
		if content != "Let me check." {
			t.Fatalf("content %q, want the text before the call", content)
		}
	}
	t.Run("whole", func(t *testing.T) {
		out, err := cl.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		c := out.Choices[0]
		check(t, c.Message.Content, c.Message.ToolCalls, string(c.FinishReason))
		text := bpe.Decode(lastPrompt())
		if !strings.Contains(text, "<tools>") || !strings.Contains(text, `"name": "get_weather"`) || !strings.HasSuffix(text, "<|im_start|>assistant\n") {
			t.Fatalf("the prompt does not carry the tools in Qwen3's template:\n%s", text)
		}
	})
	t.Run("streamed", func(t *testing.T) {
		stream := cl.Chat.Completions.NewStreaming(ctx, params)
		acc := openai.ChatCompletionAccumulator{}
		for stream.Next() {
			ch := stream.Current()
			if len(ch.Choices) > 0 && strings.Contains(ch.Choices[0].Delta.Content, "<tool") {
				t.Fatalf("the call was streamed as content: %q", ch.Choices[0].Delta.Content)
			}
			acc.AddChunk(ch)
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		c := acc.Choices[0]
		check(t, c.Message.Content, c.Message.ToolCalls, string(c.FinishReason))
	})
	t.Run("tool result round trip", func(t *testing.T) {
		out, err := cl.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		p := params
		p.Messages = append(slices.Clone(params.Messages), out.Choices[0].Message.ToParam(),
			openai.ToolMessage(`{"temp": 21}`, out.Choices[0].Message.ToolCalls[0].ID))
		if _, err := cl.Chat.Completions.New(ctx, p); err != nil {
			t.Fatal(err)
		}
		text := bpe.Decode(lastPrompt())
		if !strings.Contains(text, "<tool_response>\n{\"temp\": 21}\n</tool_response>") || !strings.Contains(text, `{"city":"Paris","unit":"celsius"}`) {
			t.Fatalf("the call and its result are not in the next prompt:\n%s", text)
		}
	})
	t.Run("tool_choice required refused", func(t *testing.T) {
		p := params
		p.ToolChoice = openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}
		_, err := cl.Chat.Completions.New(ctx, p)
		if e := apiErr(t, err, 400); e.Param != "tool_choice" {
			t.Fatalf("error %+v", e)
		}
	})
}

// TestHTTPErrorsAndMetrics: raw HTTP for what the clients do not send: a malformed body, a wrong
// method, an unknown route, a full queue (429) and the metrics the scheduler keeps.
func TestHTTPErrorsAndMetrics(t *testing.T) {
	m := byteModel(t, 256)
	eng := byteScript(func(p []int) string { return "abc" })
	eng.gate = make(chan struct{})
	metrics := NewMetrics()
	srv := New(m, eng, Options{Metrics: metrics, Scheduler: SchedulerOptions{MaxQueue: 1, MaxBatch: 1}})
	hs := httptest.NewServer(srv.Handler())
	quit := make(chan struct{})
	defer func() { close(quit); hs.Close(); srv.Close() }()
	post := func(path, body string) (int, map[string]any) {
		resp, err := http.Post(hs.URL+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		b, _ := io.ReadAll(resp.Body)
		_ = json.Unmarshal(b, &out)
		return resp.StatusCode, out
	}
	chat := `{"model": "bytes", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 5}`
	cases := []struct {
		name, path, body string
		status           int
		param            string
	}{
		{"malformed JSON", "/v1/chat/completions", `{"model": `, 400, ""},
		{"wrong type", "/v1/chat/completions", `{"model": "bytes", "messages": [], "temperature": "hot"}`, 400, "temperature"},
		{"unknown message field", "/v1/chat/completions", `{"model": "bytes", "messages": [{"role": "user", "content": "hi", "audio": {}}]}`, 400, "messages[0].audio"},
		{"image part", "/v1/chat/completions", `{"model": "bytes", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]}`, 400, "messages[0].content"},
		{"bad role", "/v1/chat/completions", `{"model": "bytes", "messages": [{"role": "robot", "content": "hi"}]}`, 400, "messages[0].role"},
		{"five stops", "/v1/completions", `{"model": "bytes", "prompt": "a", "stop": ["a","b","c","d","e"]}`, 400, "stop"},
		{"echo", "/v1/completions", `{"model": "bytes", "prompt": "a", "echo": true}`, 400, "echo"},
		{"token id outside vocab", "/v1/completions", `{"model": "bytes", "prompt": [1, 999]}`, 400, "prompt"},
		{"unknown route", "/v1/embeddings", `{}`, 404, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			status, out := post(c.path, c.body)
			e, _ := out["error"].(map[string]any)
			if status != c.status || e == nil || e["message"] == "" {
				t.Fatalf("status %d body %v, want %d with an error", status, out, c.status)
			}
			if p, _ := e["param"].(string); p != c.param {
				t.Fatalf("param %q, want %q (%v)", p, c.param, e["message"])
			}
		})
	}
	t.Run("wrong method", func(t *testing.T) {
		resp, err := http.Get(hs.URL + "/v1/chat/completions")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 405 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	})
	t.Run("queue full", func(t *testing.T) {
		// One request decodes (its step waits on the gate), one waits in the queue, the third is refused.
		done := make(chan int, 2)
		go func() { s, _ := post("/v1/chat/completions", chat); done <- s }()
		for eng.live() == 0 {
			time.Sleep(time.Millisecond)
		}
		go func() { s, _ := post("/v1/chat/completions", chat); done <- s }()
		deadline := time.Now().Add(5 * time.Second)
		for {
			srv.sched.mu.Lock()
			q := len(srv.sched.queue)
			srv.sched.mu.Unlock()
			if q == 1 || time.Now().After(deadline) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		status, out := post("/v1/chat/completions", chat)
		if status != 429 {
			t.Fatalf("status %d %v, want 429", status, out)
		}
		go func() { // let every step run from now on
			for {
				select {
				case eng.gate <- struct{}{}:
				case <-quit:
					return
				}
			}
		}()
		for range 2 {
			if s := <-done; s != 200 {
				t.Fatalf("a queued request ended with %d", s)
			}
		}
	})
	t.Run("metrics", func(t *testing.T) {
		rec := httptest.NewRecorder()
		metrics.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		body := rec.Body.String()
		for _, want := range []string{"temper_serve_queue_depth", "temper_serve_running_rows", "temper_serve_tokens_per_second",
			"temper_serve_time_to_first_token_seconds_count 2", "temper_serve_request_latency_seconds_count{outcome=\"ok\"} 2",
			"temper_serve_generated_tokens_total 8", `temper_serve_requests_total{endpoint="chat.completions",status="429"} 1`,
			"temper_serve_kv_cache_budget_bytes", "temper_serve_decode_step_seconds_count"} {
			if !strings.Contains(body, want) {
				t.Errorf("metrics lack %q:\n%s", want, body)
			}
		}
	})
}
