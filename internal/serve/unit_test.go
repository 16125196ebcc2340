package serve

import (
	"context"
	"errors"
	"math/rand/v2"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/temperml/temper/algorithms/chat"
	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tokenize"
)

// TestChoiceTextStreaming: the streamed pieces add up to the final text; a stop string cuts the
// text and is never streamed, not even its first bytes; an incomplete character and the start of a
// tool call wait.
func TestChoiceTextStreaming(t *testing.T) {
	m := byteModel(t, 512)
	qm := qwen3Model(t)
	cases := []struct {
		name     string
		m        *Model
		text     string
		stops    []string
		tools    bool
		want     string
		stopped  bool
		neverHas string // no streamed piece before the end may contain this
	}{
		{"plain", m, "hello world", nil, false, "hello world", false, ""},
		{"stop string", m, "abc###def", []string{"###"}, false, "abc", true, "#"},
		{"second stop first", m, "xx END yy STOP", []string{"STOP", "END"}, false, "xx ", true, "EN"},
		{"unfinished stop", m, "abc##", []string{"###"}, false, "abc##", false, "#"},
		{"utf-8 waits for its last byte", m, "é€x", nil, false, "é€x", false, ""},
		{"long text, characters split over tokens", qm, strings.Repeat("naïve café 東京タワー 🚀🌍 ok; ", 12), nil, false,
			strings.Repeat("naïve café 東京タワー 🚀🌍 ok; ", 12), false, ""},
		{"stop string far in, over the kept head", qm, strings.Repeat("données 数据 ", 20) + "<END> more", []string{"<END>"}, false,
			strings.Repeat("données 数据 ", 20), true, "<E"},
		{"long byte-level text", m, strings.Repeat("añb€c", 30) + "STOP", []string{"STOP"}, false, strings.Repeat("añb€c", 30), true, "ST"},
		{"tool call after long content", qm, strings.Repeat("Thinking about it. ", 10) + "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", nil, true,
			strings.Repeat("Thinking about it. ", 10) + "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", false, "<tool"},
		{"tool call held back", qm, "Let me check.<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", nil, true,
			"Let me check.<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", false, "<tool"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var tools *chat.Format
			if c.tools {
				tools = c.m.ToolFormat
			}
			ct := newChoiceText(c.m, c.stops, tools)
			var streamed strings.Builder
			stopped := false
			ids := c.m.Tok.Encode(c.text)
			if _, isByte := c.m.Tok.(tokenize.Byte); !isByte {
				ids = c.m.Tok.Encode(c.text)
			}
			for k, id := range ids {
				if ct.add(id) {
					stopped = true
					break
				}
				// Incremental decoding gives the text of decoding every token at once.
				if whole := c.m.decode(ids[:k+1]); ct.text() != whole {
					t.Fatalf("after token %d: text %q, decoding all %q", k, ct.text(), whole)
				}
				piece := ct.pending(false)
				if c.neverHas != "" && strings.Contains(piece, c.neverHas) {
					t.Fatalf("streamed %q before the end", piece)
				}
				if strings.ContainsRune(piece, '\uFFFD') {
					t.Fatalf("streamed a partial character: %q", piece)
				}
				streamed.WriteString(piece)
			}
			streamed.WriteString(ct.pending(true))
			if streamed.String() != c.want || ct.text() != c.want || stopped != c.stopped {
				t.Fatalf("streamed %q, text %q, stopped %v; want %q, %v", streamed.String(), ct.text(), stopped, c.want, c.stopped)
			}
		})
	}
}

// TestParseCalls: calls written in each family's convention come back as name + arguments, the
// text before them as content; a malformed call stays content.
func TestParseCalls(t *testing.T) {
	qm := qwen3Model(t)
	cases := []struct {
		name    string
		text    string
		content string
		calls   []parsedCall
	}{
		{"no call", "The answer is 4.", "The answer is 4.", nil},
		{"one call", "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "",
			[]parsedCall{{"get_weather", `{"city":"Paris"}`}}},
		{"content then two calls", "Checking both.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {}}\n</tool_call>",
			"Checking both.\n", []parsedCall{{"a", `{"x":1}`}, {"b", `{}`}}},
		{"malformed stays content", "<tool_call>\n{\"name\": \"a\", \"arguments\": [1]}\n</tool_call>",
			"<tool_call>\n{\"name\": \"a\", \"arguments\": [1]}\n</tool_call>", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			content, calls := parseCalls(qm.ToolFormat, c.text)
			if content != c.content || len(calls) != len(c.calls) {
				t.Fatalf("content %q calls %v; want %q %v", content, calls, c.content, c.calls)
			}
			for i := range calls {
				if calls[i] != c.calls[i] {
					t.Fatalf("call %d: %+v, want %+v", i, calls[i], c.calls[i])
				}
			}
		})
	}
}

// collect reads a job to its end and returns each choice's tokens and its end.
func collect(t *testing.T, j *Job) ([][]int, []string, error) {
	t.Helper()
	toks := make([][]int, len(j.rows))
	ends := make([]string, len(j.rows))
	var failure error
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		evs, err := j.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if evs == nil {
			return toks, ends, failure
		}
		for _, e := range evs {
			if e.Err != nil {
				failure = e.Err
				ends[e.Choice] = "error"
				continue
			}
			toks[e.Choice] = append(toks[e.Choice], e.Token.ID)
			ends[e.Choice] = e.Finish
		}
	}
}

// TestSchedulerAdmission: with a KV budget that holds two rows, eight requests all finish with
// their own text, never more than two decoding at once, and the newcomers of one boundary join in
// one prefill.
func TestSchedulerAdmission(t *testing.T) {
	m := byteModel(t, 256)
	eng := byteScript(func(p []int) string { return strings.Repeat(string(rune('a'+p[0]%26)), 5) })
	budget := model.CacheBytes(m.Config, 2, model.CacheCols(3+20)) // two rows of prompt 3 + max_tokens 20
	s := NewScheduler(eng, m.Config, SchedulerOptions{KVBudget: budget}, NewMetrics())
	defer s.Close()
	var jobs []*Job
	for i := range 8 {
		j, err := s.Submit([]RowSpec{{Prompt: []int{i, 1, 2}, MaxTokens: 20, StopIDs: []int{tokenize.ByteEOS}}})
		if err != nil {
			t.Fatal(err)
		}
		jobs = append(jobs, j)
	}
	for i, j := range jobs {
		toks, ends, err := collect(t, j)
		if err != nil {
			t.Fatal(err)
		}
		want := tokenize.Byte{}.Encode(strings.Repeat(string(rune('a'+i%26)), 5))
		if !equalInts(toks[0][:5], want) || ends[0] != FinishStop || len(toks[0]) != 6 {
			t.Fatalf("request %d: %v (%s)", i, toks[0], ends[0])
		}
	}
	if eng.maxLive > 2 {
		t.Fatalf("%d rows decoded at once under a budget of 2", eng.maxLive)
	}
	if _, err := s.Submit([]RowSpec{{Prompt: []int{1}, MaxTokens: 100}, {Prompt: []int{1}, MaxTokens: 100}, {Prompt: []int{1}, MaxTokens: 100}}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("three rows over the budget: %v, want ErrTooLarge", err)
	}
}

// TestSchedulerBatchesNewcomers: requests queued while a step runs join together in one prefill.
func TestSchedulerBatchesNewcomers(t *testing.T) {
	m := byteModel(t, 256)
	eng := byteScript(func(p []int) string { return "xyz" })
	eng.gate = make(chan struct{})
	s := NewScheduler(eng, m.Config, SchedulerOptions{}, nil)
	defer s.Close()
	first, err := s.Submit([]RowSpec{{Prompt: []int{1}, MaxTokens: 10, StopIDs: []int{tokenize.ByteEOS}}})
	if err != nil {
		t.Fatal(err)
	}
	for eng.live() == 0 {
		time.Sleep(time.Millisecond)
	}
	var later []*Job
	for range 5 {
		j, err := s.Submit([]RowSpec{{Prompt: []int{2, 3}, MaxTokens: 10, StopIDs: []int{tokenize.ByteEOS}}})
		if err != nil {
			t.Fatal(err)
		}
		later = append(later, j)
	}
	close(eng.gate) // the first step (already waiting) and every later one run
	for _, j := range append(later, first) {
		if _, _, err := collect(t, j); err != nil {
			t.Fatal(err)
		}
	}
	if len(eng.joins) != 2 || len(eng.joins[1]) != 5 {
		t.Fatalf("joins %v: want the first alone, then the five newcomers in one prefill", eng.joins)
	}
}

// TestSchedulerQueueAndFailure: a full queue refuses (ErrQueueFull), a failed step ends the running
// choices with its error and the batch goes on with later requests, Close ends the rest.
func TestSchedulerQueueAndFailure(t *testing.T) {
	m := byteModel(t, 256)
	eng := byteScript(func(p []int) string { return "abcdefgh" })
	eng.gate = make(chan struct{}, 100)
	eng.failAt = 2
	s := NewScheduler(eng, m.Config, SchedulerOptions{MaxQueue: 1, MaxBatch: 1}, nil)
	spec := []RowSpec{{Prompt: []int{1}, MaxTokens: 50, StopIDs: []int{tokenize.ByteEOS}}}
	running, err := s.Submit(spec)
	if err != nil {
		t.Fatal(err)
	}
	for eng.live() == 0 {
		time.Sleep(time.Millisecond)
	}
	queued, err := s.Submit(spec)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Submit(spec); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third request with a queue of 1: %v, want ErrQueueFull", err)
	}
	for range 100 {
		eng.gate <- struct{}{}
	}
	if _, _, err := collect(t, running); err == nil || !strings.Contains(err.Error(), "scripted failure") {
		t.Fatalf("running request: %v, want the step's error", err)
	}
	toks, ends, err := collect(t, queued)
	if err != nil || ends[0] != FinishStop || len(toks[0]) != 9 {
		t.Fatalf("the request after the failure: %v %v %v", toks, ends, err)
	}
	s.Close()
	if _, err := s.Submit(spec); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v, want ErrClosed", err)
	}
}

// TestSchedulerCancel: a cancelled choice leaves the batch at the next boundary; the others go on.
func TestSchedulerCancel(t *testing.T) {
	m := byteModel(t, 512)
	eng := byteScript(func(p []int) string { return strings.Repeat("z", 300) })
	eng.gate = make(chan struct{}, 1000)
	for range 10 {
		eng.gate <- struct{}{}
	}
	s := NewScheduler(eng, m.Config, SchedulerOptions{}, nil)
	defer s.Close()
	j, err := s.Submit([]RowSpec{{Prompt: []int{1}, MaxTokens: 400}, {Prompt: []int{1}, MaxTokens: 5}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	evs, err := j.Next(ctx) // the first tokens
	if err != nil || len(evs) == 0 {
		t.Fatalf("first events %v, %v", evs, err)
	}
	j.CancelChoice(0)
	for range 990 {
		eng.gate <- struct{}{}
	}
	toks, ends, err := collect(t, j)
	for _, e := range evs {
		if e.Err == nil {
			toks[e.Choice] = append(toks[e.Choice], e.Token.ID)
			if e.Finish != "" {
				ends[e.Choice] = e.Finish
			}
		}
	}
	if !errors.Is(err, context.Canceled) || ends[0] != "error" || ends[1] != FinishLength {
		t.Fatalf("ends %v err %v, want choice 0 cancelled and choice 1 at its length", ends, err)
	}
	if len(toks[0]) >= 300 {
		t.Fatalf("the cancelled choice ran to %d tokens", len(toks[0]))
	}
	deadline := time.Now().Add(5 * time.Second)
	for eng.live() > 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if eng.live() != 0 {
		t.Fatalf("%d rows still in the batch", eng.live())
	}
}

// TestPick: a served token's log-probability is bit for bit sample.LogProb's (what Temper's own
// rollouts record), and the alternatives are the k most likely tokens, most likely first.
func TestPick(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for trial := range 50 {
		vocab := 5 + rng.IntN(300)
		lg := make([]float32, vocab)
		for i := range lg {
			lg[i] = float32(rng.NormFloat64() * 3)
		}
		if trial%5 == 0 {
			lg[rng.IntN(vocab)] = lg[0] // a tie
		}
		if trial%3 == 0 {
			for i := range lg {
				lg[i] -= 1000 // every logit far below 0: exp(l) underflows unless shifted by the max
			}
		}
		k := 1 + rng.IntN(6)
		r := &row{spec: RowSpec{TopLogprobs: k}, sampler: sample.NewSampler(sample.Options{Temperature: 1}, uint64(trial))}
		tok := r.pick(lg)
		if want := float32(sample.LogProb(lg, tok.ID)); tok.LogProb != want {
			t.Fatalf("trial %d: logprob %v, sample.LogProb %v", trial, tok.LogProb, want)
		}
		order := make([]int, vocab)
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(a, b int) bool { return lg[order[a]] > lg[order[b]] })
		if len(tok.Top) != min(k, vocab) {
			t.Fatalf("trial %d: %d alternatives, want %d", trial, len(tok.Top), k)
		}
		for i, a := range tok.Top {
			if a.ID != order[i] || a.LogProb != float32(sample.LogProb(lg, a.ID)) {
				t.Fatalf("trial %d: alternative %d is %+v, want id %d", trial, i, a, order[i])
			}
		}
	}
}

// TestTextFrame: a text-only chunk written around the text is byte for byte the chunk the general
// path encodes, for texts JSON must escape.
func TestTextFrame(t *testing.T) {
	m := byteModel(t, 64)
	srv := &Server{m: m}
	texts := []string{"plain", "", `quo"te \ back`, "<b> & </b>", "tab\tnew\nline\r\x01", "\xff\xfe broken \xe2\x82", "é€🚀", "\u2028\u2029"}
	for _, chat := range []bool{false, true} {
		req := &request{s: srv, id: "cmpl-x", created: 42, chat: chat}
		for i, text := range texts {
			var fast, slow sseWriter
			if err := fast.sendText(req.textFrame(i%3), text); err != nil {
				t.Fatal(err)
			}
			var v any = completion{responseHead: req.head("text_completion"), Choices: []completionChoice{{Text: text, Index: i % 3}}}
			if chat {
				v = chatChunk{responseHead: req.head("chat.completion.chunk"), Choices: []chunkChoice{{Index: i % 3, Delta: chatDelta{Content: &text}}}}
			}
			if err := slow.send(v); err != nil {
				t.Fatal(err)
			}
			if fast.buf.String() != slow.buf.String() {
				t.Fatalf("chat=%v text %q:\nframed  %s\nencoded %s", chat, text, fast.buf.String(), slow.buf.String())
			}
		}
	}
}
