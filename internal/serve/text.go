package serve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/temperml/temper/algorithms/chat"
)

// choiceText turns one choice's tokens into text as they arrive: it cuts the text at the first stop
// string, and says how much of it is safe to stream (not the start of a stop string, not an
// incomplete character, not a tool call being written).
//
// Decoding is incremental: the text of tokens[:base] is kept and only the last tokens are decoded
// again for each new one (a tokenizer's decode is not always the concatenation of its pieces: a
// character split over tokens, a leading space a tokenizer strips), so a long completion costs
// O(length), not O(length²).
type choiceText struct {
	m        *Model
	stops    []string
	tools    *chat.Format // non-nil when calls are parsed
	tokens   []int        // completion tokens (a final stop token excluded)
	base     int          // tokens[:base] are decoded into buf[:stable], for good
	stable   int
	buf      []byte // the text so far: buf[:stable], then the decode of tokens[base:]; cut at a stop string
	seen     int    // bytes of buf searched for stop strings
	sent     int    // bytes of buf streamed
	stop     bool   // a stop string was found
	callAt   int    // where a tool call starts in buf (-1: none yet); callSeen bytes searched for it
	callSeen int
}

// tailKeep is how many of the last tokens are decoded again with each new token.
const tailKeep = 8

func newChoiceText(m *Model, stops []string, tools *chat.Format) choiceText {
	return choiceText{m: m, stops: stops, tools: tools, callAt: -1}
}

// text is the choice's text so far.
func (c *choiceText) text() string { return string(c.buf) }

// add appends a token (not a stop token) and reports whether a stop string now ends the text.
func (c *choiceText) add(id int) bool {
	c.tokens = append(c.tokens, id)
	tail := c.m.decode(c.tokens[c.base:])
	c.buf = append(c.buf[:c.stable], tail...)
	if len(c.tokens)-c.base >= 2*tailKeep {
		// Keep the head for good when decoding it apart changes nothing.
		mid := len(c.tokens) - tailKeep
		head := c.m.decode(c.tokens[c.base:mid])
		if strings.HasPrefix(tail, head) && c.m.decode(c.tokens[mid:]) == tail[len(head):] {
			c.base, c.stable = mid, c.stable+len(head)
		}
	}
	// Search the new text (the tail's bytes may have changed: it was decoded again) for a stop.
	longest := 0
	for _, s := range c.stops {
		longest = max(longest, len(s))
	}
	from := max(0, min(c.seen, c.stable)-longest+1)
	cut := -1
	for _, s := range c.stops {
		if i := bytes.Index(c.buf[from:], []byte(s)); i >= 0 && (cut < 0 || from+i < cut) {
			cut = from + i
		}
	}
	if cut >= 0 {
		c.buf, c.stop = c.buf[:cut], true
	}
	c.seen = len(c.buf)
	return c.stop
}

// pending returns the text that may be streamed now (all of it when final) and marks it sent.
func (c *choiceText) pending(final bool) string {
	end := len(c.buf)
	if !final {
		end = c.safeEnd()
	}
	if end <= c.sent {
		return ""
	}
	out := string(c.buf[c.sent:end])
	c.sent = end
	return out
}

// safeEnd is how far the text can be streamed before the end of the choice.
func (c *choiceText) safeEnd() int {
	t := c.buf
	end := len(t)
	// A character still being written: an incomplete UTF-8 sequence (byte-level tokens) or the
	// replacement character a tokenizer decodes a partial one to.
	for k := 1; k <= utf8.UTFMax && k <= len(t); k++ {
		if utf8.RuneStart(t[len(t)-k]) {
			if !utf8.FullRune(t[len(t)-k:]) {
				end = len(t) - k
			}
			break
		}
	}
	for bytes.HasSuffix(t[:end], []byte("\uFFFD")) {
		end -= len("\uFFFD")
	}
	// The start of a stop string.
	cut := end
	for _, s := range c.stops {
		cut = min(cut, end-partialSuffix(string(t[max(0, end-len(s)):end]), s))
	}
	end = cut
	if c.tools != nil {
		end = min(end, c.callStart(end))
	}
	return max(end, c.sent)
}

// callStart is callStart over buf[:end], searching only what it has not searched yet.
func (c *choiceText) callStart(end int) int {
	marker := callMarker(c.tools)
	if marker == "" {
		return callStart(c.tools, string(c.buf[:end]))
	}
	if c.callAt < 0 {
		from := max(0, min(c.callSeen, c.stable)-len(marker)+1)
		if i := bytes.Index(c.buf[from:end], []byte(marker)); i >= 0 {
			c.callAt = from + i
		}
		c.callSeen = end
	}
	if c.callAt >= 0 {
		return min(c.callAt, end)
	}
	return end - partialSuffix(string(c.buf[max(0, end-len(marker)):end]), marker)
}

// callMarker is the text that opens a call in the style ("" for Llama 3.1's, whose whole turn is
// the call).
func callMarker(f *chat.Format) string {
	switch f.Tools {
	case chat.ToolsLlama3JSON:
		return ""
	case chat.ToolsGemmaToolCode:
		return "```tool_code"
	}
	return "<tool_call>"
}

// partialSuffix is the length of the longest suffix of t that is a proper prefix of s.
func partialSuffix(t, s string) int {
	for k := min(len(s)-1, len(t)); k > 0; k-- {
		if strings.HasSuffix(t, s[:k]) {
			return k
		}
	}
	return 0
}

// callStart is where a tool call may begin in t (len(t) when none can): streaming stops there, so
// that a call is sent as tool_calls and never as content.
func callStart(f *chat.Format, t string) int {
	marker := callMarker(f)
	if marker == "" {
		// The whole turn is the call: hold back while it could start with one.
		s := strings.TrimLeftFunc(t, unicode.IsSpace)
		if s == "" || strings.HasPrefix(s, "{") || strings.HasPrefix(s, "<|python_tag|>") || strings.HasPrefix("<|python_tag|>", s) {
			return 0
		}
		return len(t)
	}
	return markerStart(t, marker)
}

// markerStart is the index of marker in t, or of a suffix of t that begins it, else len(t).
func markerStart(t, marker string) int {
	if i := strings.Index(t, marker); i >= 0 {
		return i
	}
	return len(t) - partialSuffix(t, marker)
}

// parsedCall is one tool call read from the model's text.
type parsedCall struct {
	Name      string
	Arguments string // a JSON object, as OpenAI sends arguments
}

// parseCalls reads the tool calls at the end of a choice's text in the model's own convention:
// the content before the first call, and the calls (Qwen's <tool_call> blocks may follow one
// another). A call the model got wrong leaves the whole text as content.
func parseCalls(f *chat.Format, text string) (content string, calls []parsedCall) {
	start := callStart(f, text)
	if start >= len(text) {
		return text, nil
	}
	rest := text[start:]
	for {
		c, found, err := f.ParseCall(rest)
		if !found || err != nil {
			if len(calls) == 0 {
				return text, nil
			}
			break
		}
		args := "{}"
		if len(c.Arguments) > 0 {
			if b, err := json.Marshal(c.Arguments); err == nil { // compact, as OpenAI sends arguments
				args = string(b)
			}
		}
		calls = append(calls, parsedCall{Name: c.Name, Arguments: args})
		if f.Tools != chat.ToolsHermes {
			break
		}
		j := strings.Index(rest, "</tool_call>")
		if j < 0 {
			break
		}
		rest = rest[j+len("</tool_call>"):]
		if strings.TrimSpace(rest) == "" || !strings.Contains(rest, "<tool_call>") {
			break
		}
	}
	return text[:start], calls
}

// callID names the i-th call of a response.
func callID(resp string, choice, i int) string {
	return fmt.Sprintf("call_%s_%d_%d", strings.TrimPrefix(strings.TrimPrefix(resp, "chatcmpl-"), "cmpl-"), choice, i)
}
