package tokenize

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// ids of s under the Byte tokenizer, as a shorthand for expected outputs.
func bytesOf(s string) []int { return Byte{}.Encode(s) }

func concat(parts ...[]int) []int {
	var out []int
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func repeat(v bool, n int) []bool {
	out := make([]bool, n)
	for i := range out {
		out[i] = v
	}
	return out
}

func TestDefaultChatByte(t *testing.T) {
	msgs := []Message{
		{Role: RoleSystem, Content: "Be brief."},
		{Role: RoleUser, Content: "2+2?"},
		{Role: RoleAssistant, Content: "4"},
		{Role: RoleUser, Content: "3+3?"},
		{Role: RoleAssistant, Content: "6"},
	}
	ids, mask, err := DefaultChat().Render(Byte{}, msgs)
	if err != nil {
		t.Fatal(err)
	}
	wantIDs := concat(
		[]int{ByteBOS},
		bytesOf("<|system|>\nBe brief.\n"),
		bytesOf("<|user|>\n2+2?\n"),
		bytesOf("<|assistant|>\n"), bytesOf("4"), []int{ByteEOS},
		bytesOf("<|user|>\n3+3?\n"),
		bytesOf("<|assistant|>\n"), bytesOf("6"), []int{ByteEOS},
	)
	if !reflect.DeepEqual(ids, wantIDs) {
		t.Fatalf("ids = %v\nwant %v", ids, wantIDs)
	}
	var wantMask []bool
	wantMask = append(wantMask, repeat(false, 1+len("<|system|>\nBe brief.\n")+len("<|user|>\n2+2?\n")+len("<|assistant|>\n"))...)
	wantMask = append(wantMask, true, true) // "4", EOS
	wantMask = append(wantMask, repeat(false, len("<|user|>\n3+3?\n")+len("<|assistant|>\n"))...)
	wantMask = append(wantMask, true, true) // "6", EOS
	if !reflect.DeepEqual(mask, wantMask) {
		t.Fatalf("mask = %v\nwant %v", mask, wantMask)
	}
	if got := (Byte{}).Decode(ids); got != "<|system|>\nBe brief.\n<|user|>\n2+2?\n<|assistant|>\n4<|user|>\n3+3?\n<|assistant|>\n6" {
		t.Errorf("decoded %q", got)
	}

	prompt, err := DefaultChat().Prompt(Byte{}, msgs[:2])
	if err != nil {
		t.Fatal(err)
	}
	if want := concat([]int{ByteBOS}, bytesOf("<|system|>\nBe brief.\n<|user|>\n2+2?\n<|assistant|>\n")); !reflect.DeepEqual(prompt, want) {
		t.Errorf("prompt = %v, want %v", prompt, want)
	}
}

// The Llama-3 template's markers are added tokens of the fixture, so each
// encodes to one id.
func TestLlama3ChatMarkersAreSingleTokens(t *testing.T) {
	b := loadFixture(t, "llama3_tiny.json")
	ids, mask, err := Llama3Chat().Render(b, []Message{
		{Role: RoleUser, Content: "hi"},
		{Role: RoleAssistant, Content: "hello"},
	})
	if err != nil {
		t.Fatal(err)
	}
	// <|begin_of_text|> 262, <|start_header_id|> 264, <|end_header_id|> 265,
	// <|eot_id|> 263, "\n\n" is ĊĊ 261, "hello" is he ll o.
	want := concat(
		[]int{262},
		[]int{264}, bytesOf("user"), []int{265, 261}, []int{104, 105}, []int{263},
		[]int{264}, bytesOf("assistant"), []int{265, 261}, []int{256, 257, 111}, []int{263},
	)
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("ids = %v\nwant %v", ids, want)
	}
	n := len(want)
	wantMask := append(repeat(false, n-4), true, true, true, true) // he ll o <|eot_id|>
	if !reflect.DeepEqual(mask, wantMask) {
		t.Fatalf("mask = %v\nwant %v", mask, wantMask)
	}
}

func TestChatMLMask(t *testing.T) {
	js := strings.Replace(minimalHF, `"added_tokens": []`,
		`"added_tokens": [{"id": 3, "content": "<|im_start|>", "special": true}, {"id": 4, "content": "<|im_end|>", "special": true}]`, 1)
	b, err := LoadHF(strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	ids, mask, err := ChatML().Render(b, []Message{{Role: RoleAssistant, Content: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	// This vocab has only a=0, Ġ=1, Ġa=2, so "assistant\n" keeps just its
	// two a's and the "\n" Sep vanishes: <|im_start|> a a | a <|im_end|>.
	if want := []int{3, 0, 0, 0, 4}; !reflect.DeepEqual(ids, want) {
		t.Errorf("ids = %v, want %v", ids, want)
	}
	if want := []bool{false, false, false, true, true}; !reflect.DeepEqual(mask, want) {
		t.Errorf("mask = %v, want %v", mask, want)
	}
}

func TestChatErrors(t *testing.T) {
	b := loadFixture(t, "gpt2_tiny.json") // has EOS but no BOS
	if _, _, err := DefaultChat().Render(b, nil); err == nil || !strings.Contains(err.Error(), "BOS") {
		t.Errorf("missing BOS: %v", err)
	}
	noEOS := ChatTemplate{EOS: true}
	l := loadFixture(t, "llama3_tiny.json") // has BOS but no EOS until WithSpecial
	if _, _, err := noEOS.Render(l, nil); err == nil || !strings.Contains(err.Error(), "EOS") {
		t.Errorf("missing EOS: %v", err)
	}
	if _, _, err := DefaultChat().Render(Byte{}, []Message{{Role: "bot", Content: "x"}}); err == nil || !strings.Contains(err.Error(), `"bot"`) {
		t.Errorf("unknown role: %v", err)
	}
	if _, err := DefaultChat().Prompt(Byte{}, []Message{{Role: "bot"}}); err == nil {
		t.Error("Prompt should propagate the role error")
	}
}

func TestChatMaskAlignedOnSentencePiece(t *testing.T) {
	sp, err := LoadSentencePiece(strings.NewReader(string(buildSPModel(tinySPPieces(), gemmaLike()))))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := ChatTemplate{
		BOS:       true,
		User:      Turn{Prefix: "<start_of_turn>user\n", Suffix: "<end_of_turn>", Sep: "\n"},
		Assistant: Turn{Prefix: "<start_of_turn>model\n", Suffix: "<end_of_turn>", Sep: "\n"},
	}
	ids, mask, err := tmpl.Render(sp, []Message{{Role: RoleUser, Content: "hi"}, {Role: RoleAssistant, Content: "hello world"}})
	if err != nil {
		t.Fatal(err)
	}
	var trained []int
	for i, m := range mask {
		if m {
			trained = append(trained, ids[i])
		}
	}
	if want := []int{273, 278, 5}; !reflect.DeepEqual(trained, want) { // hello ▁world <end_of_turn>
		t.Errorf("trained tokens %v, want %v", trained, want)
	}
	if ids[0] != 2 || ids[1] != 4 {
		t.Errorf("ids start %v, want <bos> <start_of_turn>", ids[:2])
	}
}

// TestToolTurns: a call ends the assistant's turn (no EOS), the tool's result is never trained on,
// and the result's surroundings are ToolMarkers (what an episode writes).
func TestToolTurns(t *testing.T) {
	call := ToolCall{Name: "calc", Arguments: []byte(`{"expr":"12*34"}`)}
	msgs := []Message{
		{Role: RoleUser, Content: "12*34="},
		{Role: RoleAssistant, ToolCalls: []ToolCall{call}},
		{Role: RoleTool, Content: "408"},
		{Role: RoleAssistant, Content: "408"},
	}
	tmpl := DefaultChat()
	ids, mask, err := tmpl.Render(Byte{}, msgs)
	if err != nil {
		t.Fatal(err)
	}
	open, close := tmpl.ToolMarkers()
	callText := `<tool>{"name":"calc","arguments":{"expr":"12*34"}}</tool>`
	head := "<|user|>\n12*34=\n<|assistant|>\n"
	want := concat([]int{ByteBOS}, bytesOf(head), bytesOf(callText), bytesOf(open+"408"+close), bytesOf("408"), []int{ByteEOS})
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("rendered %q", Byte{}.Decode(ids))
	}
	wantMask := concat2(repeat(false, 1+len(head)), repeat(true, len(callText)), repeat(false, len(open+"408"+close)), repeat(true, 4))
	if !reflect.DeepEqual(mask, wantMask) {
		t.Fatalf("mask = %v\nwant %v", mask, wantMask)
	}
	for _, c := range []struct {
		msgs []Message
		want string
	}{
		{[]Message{{Role: RoleUser, Content: "x"}, {Role: RoleTool, Content: "1"}}, "must follow an assistant message with tool_calls"},
		{[]Message{{Role: RoleUser, Content: "x", ToolCalls: []ToolCall{call}}}, "tool_calls on a user message"},
		{[]Message{{Role: RoleAssistant, ToolCalls: []ToolCall{call, call}}}, "one call per assistant turn"},
	} {
		if _, _, err := tmpl.Render(Byte{}, c.msgs); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want %q", c.msgs, err, c.want)
		}
	}
}

func concat2(parts ...[]bool) []bool {
	var out []bool
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestChatWeight: an assistant message of weight 0 (its text and its call) is context only: no
// token of it is trained on, the others' are; a weight elsewhere, or other than 0 or 1, is refused.
func TestChatWeight(t *testing.T) {
	zero, one, two := 0, 1, 2
	call := ToolCall{Name: "check", Arguments: []byte(`{"answer":"5"}`)}
	msgs := []Message{
		{Role: RoleUser, Content: "2+2="},
		{Role: RoleAssistant, ToolCalls: []ToolCall{call}, Weight: &zero},
		{Role: RoleTool, Content: "fail"},
		{Role: RoleAssistant, Content: "4", Weight: &one},
	}
	var b Byte
	ids, mask, err := DefaultChat().Render(b, msgs)
	if err != nil {
		t.Fatal(err)
	}
	var trained strings.Builder
	for i, id := range ids {
		if mask[i] {
			trained.WriteString(b.Decode([]int{id}))
		}
	}
	// The trained tokens: the last answer with its turn's end only, never the slipped call.
	if got := trained.String(); strings.Contains(got, "check") || !strings.HasPrefix(got, "4") {
		t.Fatalf("trained text %q: want the last answer only", got)
	}
	msgs[1].Weight = nil
	_, mask2, _ := DefaultChat().Render(b, msgs)
	n, n2 := 0, 0
	for i := range mask {
		if mask[i] {
			n++
		}
		if mask2[i] {
			n2++
		}
	}
	if n2 != n+len(FormatToolCall(call)) {
		t.Fatalf("weight unset: %d trained tokens, want %d (the call's too)", n2, n+len(FormatToolCall(call)))
	}
	for _, bad := range []Message{{Role: RoleUser, Content: "x", Weight: &zero}, {Role: RoleAssistant, Content: "x", Weight: &two}} {
		if _, _, err := DefaultChat().Render(b, []Message{bad}); err == nil || !strings.Contains(err.Error(), "weight") {
			t.Errorf("%+v: %v, want an error naming weight", bad, err)
		}
	}
}

// mergingTok is an OffsetEncoder over bytes that spells "\n\n" as one id (1000), as Llama 3's and
// Qwen's tokenizers do: encoding a conversation piece by piece gives other ids than the whole text.
type mergingTok struct{ Byte }

func (m mergingTok) EncodeOffsets(text string) ([]int, [][2]int) {
	var ids []int
	var offs [][2]int
	for i := 0; i < len(text); i++ {
		if strings.HasPrefix(text[i:], "\n\n") {
			ids, offs = append(ids, 1000), append(offs, [2]int{i, i + 2})
			i++
			continue
		}
		ids, offs = append(ids, int(text[i])), append(offs, [2]int{i, i + 1})
	}
	return ids, offs
}

func (m mergingTok) Encode(text string) []int { ids, _ := m.EncodeOffsets(text); return ids }

// TestChatRendersWholeText: the fixed formats tokenise the rendered text at once, so a merge
// across a marker ("\n" ending the content, "\n" of the Sep) is one id, and a token that straddles
// trained and untrained text is trained.
func TestChatRendersWholeText(t *testing.T) {
	tmpl := ChatTemplate{User: Turn{Prefix: "U:", Sep: "\n"}, Assistant: Turn{Prefix: "A:", Sep: "\n"}}
	msgs := []Message{{Role: RoleUser, Content: "hi\n"}, {Role: RoleAssistant, Content: "yo\n"}}
	ids, mask, err := tmpl.Render(mergingTok{}, msgs)
	if err != nil {
		t.Fatal(err)
	}
	// "U:hi\n\nA:yo\n\n": the two "\n\n" are single ids; the second straddles "yo\n" and the Sep.
	want := concat(bytesOf("U:hi"), []int{1000}, bytesOf("A:yo"), []int{1000})
	if !reflect.DeepEqual(ids, want) {
		t.Fatalf("ids = %v, want %v", ids, want)
	}
	wantMask := concat2(repeat(false, 4+1+2), repeat(true, 3))
	if !reflect.DeepEqual(mask, wantMask) {
		t.Fatalf("mask = %v, want %v", mask, wantMask)
	}
	prompt, err := tmpl.Prompt(mergingTok{}, msgs[:1])
	if err != nil {
		t.Fatal(err)
	}
	if want := concat(bytesOf("U:hi"), []int{1000}, bytesOf("A:")); !reflect.DeepEqual(prompt, want) {
		t.Fatalf("prompt = %v, want %v", prompt, want)
	}
}

func TestMask(t *testing.T) {
	for _, c := range []struct {
		name  string
		offs  [][2]int
		spans [][2]int
		want  []bool
	}{
		{"inside and outside", [][2]int{{0, 2}, {2, 4}, {4, 6}}, [][2]int{{2, 4}}, []bool{false, true, false}},
		{"straddling either edge", [][2]int{{0, 3}, {3, 5}, {5, 8}}, [][2]int{{2, 6}}, []bool{true, true, true}},
		{"touching is not overlapping", [][2]int{{0, 2}, {2, 4}}, [][2]int{{2, 2}, {4, 9}}, []bool{false, false}},
		{"two spans", [][2]int{{0, 1}, {1, 2}, {2, 3}, {3, 4}}, [][2]int{{0, 1}, {3, 4}}, []bool{true, false, false, true}},
		{"empty offset inside", [][2]int{{0, 0}, {3, 3}, {5, 5}}, [][2]int{{0, 4}}, []bool{true, true, false}},
		{"shared character", [][2]int{{0, 4}, {0, 4}, {4, 5}}, [][2]int{{3, 4}}, []bool{true, true, false}},
	} {
		if got := Mask(c.offs, c.spans); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: Mask = %v, want %v", c.name, got, c.want)
		}
	}
}

// TestToolCallForms: a message's call reads in Temper's form and in OpenAI's (arguments as an
// object or a string holding one), and a bad one is refused naming what is wrong; a call decoded
// on its own (a policy's) reads Temper's form only, as before.
func TestToolCallForms(t *testing.T) {
	for _, c := range []struct {
		in, name, args, str, id, err string
	}{
		{in: `{"name":"calc","arguments":{"expr":"1+1"}}`, name: "calc", args: `{"expr":"1+1"}`},
		{in: `{"id":"c1","type":"function","function":{"name":"calc","arguments":{"expr":"1"}}}`, name: "calc", args: `{"expr":"1"}`, id: "c1"},
		{in: `{"type":"function","function":{"name":"calc","arguments":"{\"expr\": \"2\"}"}}`, name: "calc", args: `{"expr": "2"}`, str: `{"expr": "2"}`},
		{in: `{"function":{"name":"calc","arguments":"[1]"}}`, name: "calc", args: `"[1]"`}, // refused by the data's check
		{in: `{"type":"code","name":"x"}`, err: `type "code": allowed values: function`},
		{in: `{"name":"x","argumnets":{}}`, err: `unknown field "argumnets"`},
		{in: `{"name":"x","function":{"name":"y"}}`, err: "use one form"},
	} {
		var m Message
		err := json.Unmarshal([]byte(`{"role":"assistant","content":null,"tool_calls":[`+c.in+`]}`), &m)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: err = %v, want %q", c.in, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		tc := m.ToolCalls[0]
		s, isStr := tc.ArgumentsString()
		if tc.Name != c.name || string(tc.Arguments) != c.args || tc.CallID() != c.id || isStr != (c.str != "") || s != c.str {
			t.Errorf("%s: got %+v (string %q %v)", c.in, tc, s, isStr)
		}
		if got := FormatToolCall(tc); got != "<tool>{\"name\":\""+c.name+"\",\"arguments\":"+compact(c.args)+"}</tool>" {
			t.Errorf("%s: FormatToolCall = %s", c.in, got)
		}
	}
	var tc ToolCall
	dec := json.NewDecoder(strings.NewReader(`{"name":"calc","function":{"name":"x"}}`))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&tc); err == nil {
		t.Error("a policy's call in OpenAI form decoded; Temper's form only")
	}
	var m Message
	if err := json.Unmarshal([]byte(`{"role":"tool","content":"4","tool_call_id":"c1","name":"calc","colour":1}`), &m); err == nil || !strings.Contains(err.Error(), `unknown field "colour"`) {
		t.Errorf("unknown message field: %v", err)
	}
}

func compact(s string) string {
	var b bytes.Buffer
	_ = json.Compact(&b, []byte(s))
	return b.String()
}
