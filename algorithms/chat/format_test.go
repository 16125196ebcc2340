package chat

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/temperml/temper/algorithms/tokenize"
)

func format(t *testing.T, family string, opts Options) Format {
	t.Helper()
	f, err := NewFormat(loadFamily(t, family), "", opts)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

var (
	realToks   = map[string]*tokenize.BPE{}
	realToksMu sync.Mutex
)

// realTokenizer loads the family's real tokenizer.json, committed (gzipped) by the tokenizer
// goldens beside algorithms/tokenize.
func realTokenizer(t *testing.T, family string) *tokenize.BPE {
	t.Helper()
	realToksMu.Lock()
	defer realToksMu.Unlock()
	if tok, ok := realToks[family]; ok {
		return tok
	}
	f, err := os.Open(filepath.Join("..", "tokenize", "testdata", "hf", family+".tokenizer.json.gz"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenize.LoadHF(zr)
	if err != nil {
		t.Fatalf("%s: %v", family, err)
	}
	realToks[family] = tok
	return tok
}

// messagesOf reads a golden conversation as Temper's messages; ok is false for one Temper's
// messages cannot hold (content parts, a mapping as content, the ipython role).
func messagesOf(raw json.RawMessage) ([]tokenize.Message, bool) {
	var msgs []tokenize.Message
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&msgs); err != nil {
		return nil, false
	}
	for _, m := range msgs {
		if m.Role == "ipython" {
			return nil, false
		}
	}
	return msgs, true
}

// TestSFTIdsAreTheRenderedTextsIds: for every golden conversation Temper's messages can hold,
// Format renders the same text as Hugging Face, and the ids SFT trains on (Encode, or Prompt with
// a generation prompt) are exactly Hugging Face's ids of that whole text; the mask trains on some
// ids of every trained conversation and only on ids inside assistant turns.
func TestSFTIdsAreTheRenderedTextsIds(t *testing.T) {
	tools, cases, goldens := loadConversations(t)
	for _, fam := range families {
		tok := realTokenizer(t, fam)
		n := 0
		for _, c := range cases {
			g, ok := goldens[fam][c.Name]
			if !ok || g.Text == nil {
				continue
			}
			msgs, ok := messagesOf(c.Messages)
			if !ok {
				continue
			}
			n++
			t.Run(fam+"/"+c.Name, func(t *testing.T) {
				if fam == "gemma3" && len(c.Tools) > 0 {
					t.Skip("gemma3's template renders no tool definitions; NewFormat refuses them (TestFormatRefusals)")
				}
				o := c.options(tools)
				o.AddGenerationPrompt = false
				f := format(t, fam, o)
				text, err := f.Text(msgs, c.AddGenerationPrompt)
				if err != nil {
					t.Fatal(err)
				}
				if text != *g.Text {
					t.Fatalf("Temper's messages render other text than the golden:\n got  %q\n want %q", text, *g.Text)
				}
				if !reflect.DeepEqual(tok.Encode(text), g.IDs) {
					t.Fatalf("the tokenizer's ids of the rendered text differ from Hugging Face's")
				}
				if c.AddGenerationPrompt {
					ids, err := f.Prompt(tok, msgs)
					if err != nil {
						t.Fatal(err)
					}
					if !reflect.DeepEqual(ids, g.IDs) {
						t.Fatalf("Prompt ids differ from the rendered text's:\n got  %v\n want %v", ids, g.IDs)
					}
					return
				}
				ids, mask, err := f.Encode(tok, msgs)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(ids, g.IDs) {
					t.Fatalf("SFT ids differ from the rendered text's:\n got  %v\n want %v", ids, g.IDs)
				}
				_, spans, _ := f.Spans(msgs)
				_, offs := tok.EncodeOffsets(text)
				trained := 0
				for i, m := range mask {
					if !m {
						continue
					}
					trained++
					in := false
					for _, s := range spans {
						in = in || offs[i][0] < s[1] && s[0] < offs[i][1]
					}
					if !in {
						t.Errorf("id %d (%q) trained outside every assistant span", i, text[offs[i][0]:offs[i][1]])
					}
				}
				if hasTrained(msgs) && trained == 0 {
					t.Errorf("no id trained")
				}
			})
		}
		if n < 8 {
			t.Errorf("%s: %d conversations checked, want ≥ 8", fam, n)
		}
	}
}

func hasTrained(msgs []tokenize.Message) bool {
	for _, m := range msgs {
		if m.Trained() {
			return true
		}
	}
	return false
}

// TestTrainedText: what the loss covers is what the model writes after the generation prompt,
// through its end-of-turn marker, in each family's own spelling (Qwen3's empty think block of the
// last turn, Llama 3.1's JSON call, Gemma's tool_code block), and nothing of a weight-0 turn.
func TestTrainedText(t *testing.T) {
	zero := 0
	call := func(args string) []tokenize.ToolCall {
		return []tokenize.ToolCall{{Name: "calc", Arguments: json.RawMessage(args)}}
	}
	conv := []tokenize.Message{
		{Role: tokenize.RoleSystem, Content: "Be exact."},
		{Role: tokenize.RoleUser, Content: "12*34?"},
		{Role: tokenize.RoleAssistant, ToolCalls: call(`{"expr": "12*34"}`)},
		{Role: tokenize.RoleTool, Content: "408"},
		{Role: tokenize.RoleAssistant, Content: "408"},
	}
	slipped := append([]tokenize.Message(nil), conv...)
	slipped[2].Weight = &zero
	for _, c := range []struct {
		family string
		msgs   []tokenize.Message
		kwargs map[string]json.RawMessage
		want   []string
	}{
		{"qwen3", conv, nil, []string{
			"<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \"12*34\"}}\n</tool_call><|im_end|>",
			"<think>\n\n</think>\n\n408<|im_end|>"}},
		{"qwen3", slipped, nil, []string{"<think>\n\n</think>\n\n408<|im_end|>"}},
		// enable_thinking false: the generation prompt holds the empty think block, so the model
		// writes only the answer.
		{"qwen3", conv, map[string]json.RawMessage{"enable_thinking": json.RawMessage("false")}, []string{
			"<tool_call>\n{\"name\": \"calc\", \"arguments\": {\"expr\": \"12*34\"}}\n</tool_call><|im_end|>",
			"408<|im_end|>"}},
		{"qwen3", []tokenize.Message{
			{Role: tokenize.RoleUser, Content: "2+3?"},
			{Role: tokenize.RoleAssistant, Content: "5"},
			{Role: tokenize.RoleUser, Content: "times 4?"},
			{Role: tokenize.RoleAssistant, ReasoningContent: "5*4", Content: "20"},
		}, nil, []string{"5<|im_end|>", "<think>\n5*4\n</think>\n\n20<|im_end|>"}},
		{"llama3_1", conv, nil, []string{
			"{\"name\": \"calc\", \"parameters\": {\"expr\": \"12*34\"}}<|eot_id|>",
			"408<|eot_id|>"}},
		{"gemma3", conv, nil, []string{
			"```tool_code\ncalc(expr=\"12*34\")\n```<end_of_turn>",
			"408<end_of_turn>"}},
	} {
		f := format(t, c.family, Options{Kwargs: c.kwargs})
		text, spans, err := f.Spans(c.msgs)
		if err != nil {
			t.Fatalf("%s: %v", c.family, err)
		}
		var got []string
		for _, s := range spans {
			got = append(got, text[s[0]:s[1]])
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s %v: trained text\n got  %q\n want %q", c.family, c.kwargs, got, c.want)
		}
	}
}

// TestGemmaToolCodeIsTheGolden: a conversation with an OpenAI-form call and result renders for
// Gemma 3 as the golden conversation that spells them in Gemma's tool_code convention.
func TestGemmaToolCodeIsTheGolden(t *testing.T) {
	_, _, goldens := loadConversations(t)
	f := format(t, "gemma3", Options{})
	text, err := f.Text([]tokenize.Message{
		{Role: tokenize.RoleUser, Content: "12*34?"},
		{Role: tokenize.RoleAssistant, ToolCalls: []tokenize.ToolCall{{Name: "calc", Arguments: json.RawMessage(`{"expr":"12*34"}`)}}},
		{Role: tokenize.RoleTool, ToolCallID: "c1", Content: "408"},
		{Role: tokenize.RoleAssistant, Content: "408"},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if want := *goldens["gemma3"]["tool_code_convention"].Text; text != want {
		t.Fatalf("got  %q\nwant %q", text, want)
	}
}

// TestToolCallRoundTrip: a call the model writes in its own format (the trained text of an
// assistant turn that calls a tool, exactly what the policy generates) parses back into the same
// call, for each family.
func TestToolCallRoundTrip(t *testing.T) {
	args := []string{
		`{}`,
		`{"expr": "12*34"}`,
		`{"city": "Zürich", "days": 3, "metric": true, "note": null}`,
		`{"q": "say \"hi\"\n\tnow", "tags": ["a", "b"], "opts": {"deep": [1, 2.5, -3e-07]}}`,
	}
	for _, fam := range families {
		f := format(t, fam, Options{})
		for _, a := range args {
			want := tokenize.ToolCall{Name: "look_up", Arguments: json.RawMessage(a)}
			text, spans, err := f.Spans([]tokenize.Message{
				{Role: tokenize.RoleUser, Content: "go"},
				{Role: tokenize.RoleAssistant, ToolCalls: []tokenize.ToolCall{want}},
			})
			if err != nil {
				t.Fatalf("%s %s: %v", fam, a, err)
			}
			turn := text[spans[0][0]:spans[0][1]]
			got, found, err := f.ParseCall(turn)
			if err != nil || !found {
				t.Fatalf("%s: ParseCall(%q) = %v, %v", fam, turn, found, err)
			}
			if got.Name != want.Name || !jsonEqual(t, got.Arguments, want.Arguments) {
				t.Errorf("%s: %q parsed as %s %s, want %s %s", fam, turn, got.Name, got.Arguments, want.Name, want.Arguments)
			}
		}
		if _, found, err := f.ParseCall("The answer is 408."); found || err != nil {
			t.Errorf("%s: a plain answer parsed as a call (%v, %v)", fam, found, err)
		}
	}
}

func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	var x, y any
	if len(bytes.TrimSpace(a)) == 0 {
		a = json.RawMessage("{}")
	}
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return reflect.DeepEqual(x, y)
}

// TestParseCallErrors: a call that is there but malformed is found with an error the policy can
// read; text without a call is not a call.
func TestParseCallErrors(t *testing.T) {
	for _, c := range []struct {
		family, text string
		found        bool
		err          string
	}{
		{"qwen3", "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}", true, "without </tool_call>"},
		{"qwen3", "<tool_call>{\"arguments\": {}}</tool_call>", true, "without a name"},
		{"qwen3", "<tool_call>{\"name\": \"f\", \"arguments\": [1]}</tool_call>", true, "must be a JSON object"},
		{"qwen3", "<tool_call>{\"name\": \"f\"} {}</tool_call>", true, "more than one JSON value"},
		{"qwen3", "no call here<|im_end|>", false, ""},
		{"llama3_1", "{\"name\": \"f\", \"parameters\": {\"a\": 1}}<|eot_id|>", true, ""},
		{"llama3_1", "<|python_tag|>{\"name\": \"f\", \"parameters\": {}}<|eom_id|>", true, ""},
		{"llama3_1", "{\"name\": \"f\", \"parameters\": {}, \"arguments\": {}}", true, "both arguments and parameters"},
		{"llama3_1", "{\"name\": \"f\", \"params\": {}}", true, `unknown field "params"`},
		{"gemma3", "```tool_code\nf(1)\n```", true, "must be keywords"},
		{"gemma3", "```tool_code\nf(a=x)\n```", true, "not a literal"},
		{"gemma3", "```tool_code\nf(a=1\n", true, "closing ```"},
		{"gemma3", "```tool_code\n[f(a='x', b=[1, None], c={'k': False})]\n```", true, ""},
	} {
		f := format(t, c.family, Options{})
		_, found, err := f.ParseCall(c.text)
		if found != c.found || (c.err == "") != (err == nil) || err != nil && !strings.Contains(err.Error(), c.err) {
			t.Errorf("%s %q: found %v err %v, want %v %q", c.family, c.text, found, err, c.found, c.err)
		}
	}
}

// TestToolText: what an episode writes after a policy turn that called a tool is the template's
// own text: the turn's text, then ToolText, is the rendering of the conversation with the tool's
// result and the next generation prompt (Llama 3.1 quotes a string result as JSON).
func TestToolText(t *testing.T) {
	for _, c := range []struct {
		family, result, want string
	}{
		{"qwen3", "4", "\n<|im_start|>user\n<tool_response>\n4\n</tool_response><|im_end|>\n<|im_start|>assistant\n"},
		{"llama3_1", "4", "<|start_header_id|>ipython<|end_header_id|>\n\n\"4\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"llama3_1", "{\"x\": \"é\"}", "<|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"x\\\": \\\"é\\\"}\"<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
		{"gemma3", "4", "\n<start_of_turn>user\n```tool_output\n4\n```<end_of_turn>\n<start_of_turn>model\n"},
	} {
		f := format(t, c.family, Options{})
		got, err := f.ToolText(c.result)
		if err != nil {
			t.Fatal(err)
		}
		if got != c.want {
			t.Errorf("%s: ToolText(%q) = %q, want %q", c.family, c.result, got, c.want)
		}
		msgs := []tokenize.Message{
			{Role: tokenize.RoleSystem, Content: "Be exact."},
			{Role: tokenize.RoleUser, Content: "2+2?"},
			{Role: tokenize.RoleAssistant, ToolCalls: []tokenize.ToolCall{{Name: "calc", Arguments: json.RawMessage(`{"expr": "2+2"}`)}}},
		}
		msgs = append(msgs, tokenize.Message{Role: tokenize.RoleTool, Content: c.result})
		text, spans, err := f.Spans(msgs)
		if err != nil {
			t.Fatal(err)
		}
		withResult, err := f.Text(msgs, true)
		if err != nil {
			t.Fatal(err)
		}
		if text[:spans[0][1]]+got != withResult {
			t.Errorf("%s: episode text %q\nwant the rendering %q", c.family, text[:spans[0][1]]+got, withResult)
		}
	}
}

// TestFormatRefusals: what a template cannot render is refused by name, never dropped.
func TestFormatRefusals(t *testing.T) {
	if _, err := NewFormat(loadFamily(t, "gemma3"), "", Options{Tools: []json.RawMessage{json.RawMessage(`{}`)}}); err == nil || !strings.Contains(err.Error(), "does not render tool definitions") {
		t.Errorf("gemma3 with tools: %v", err)
	}
	if _, err := NewFormat(loadFamily(t, "qwen3"), "xml", Options{}); err == nil || !strings.Contains(err.Error(), "allowed values: gemma_tool_code, hermes, llama3_json") {
		t.Errorf("unknown style: %v", err)
	}
	f := format(t, "llama3_1", Options{})
	one := 1
	for _, c := range []struct {
		msgs []tokenize.Message
		want string
	}{
		{[]tokenize.Message{{Role: tokenize.RoleUser, Content: "x"}, {Role: tokenize.RoleAssistant, ReasoningContent: "r", Content: "y"}}, "message 1: reasoning_content: template default does not render it"},
		{[]tokenize.Message{{Role: "bot", Content: "x"}}, `role "bot": allowed values`},
		{[]tokenize.Message{{Role: tokenize.RoleUser, Content: "x", Weight: &one}}, "only assistant messages take a weight"},
		{[]tokenize.Message{{Role: tokenize.RoleUser, Content: "x"}, {Role: tokenize.RoleAssistant, ToolCalls: []tokenize.ToolCall{{Name: "a"}, {Name: "b"}}}}, "message 1: This model only supports single tool-calls at once!"},
	} {
		if _, _, err := f.Encode(realTokenizer(t, "llama3_1"), c.msgs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.msgs, err, c.want)
		}
	}
	if _, _, err := f.Encode(noOffsets{}, nil); err == nil || !strings.Contains(err.Error(), "cannot report offsets") {
		t.Errorf("a tokenizer without offsets: %v", err)
	}
}

// noOffsets is a tokenizer that cannot say where its ids come from.
type noOffsets struct{ tokenize.Tokenizer }
