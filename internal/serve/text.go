package serve

import (
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
type choiceText struct {
	m      *Model
	stops  []string
	tools  *chat.Format // non-nil when calls are parsed
	tokens []int        // completion tokens (a final stop token excluded)
	text   string       // decoded, cut at a stop string
	sent   int          // bytes of text streamed
	stop   bool         // a stop string was found
}

// add appends a token (not a stop token) and reports whether a stop string now ends the text.
func (c *choiceText) add(id int) bool {
	c.tokens = append(c.tokens, id)
	c.text = c.m.decode(c.tokens)
	for _, s := range c.stops {
		if i := strings.Index(c.text, s); i >= 0 {
			c.text, c.stop = c.text[:i], true
		}
	}
	return c.stop
}

// pending returns the text that may be streamed now (all of it when final) and marks it sent.
func (c *choiceText) pending(final bool) string {
	end := len(c.text)
	if !final {
		end = c.safeEnd()
	}
	if end <= c.sent {
		return ""
	}
	out := c.text[c.sent:end]
	c.sent = end
	return out
}

// safeEnd is how far the text can be streamed before the end of the choice.
func (c *choiceText) safeEnd() int {
	t := c.text
	end := len(t)
	// A character still being written: an incomplete UTF-8 sequence (byte-level tokens) or the
	// replacement character a tokenizer decodes a partial one to.
	for k := 1; k <= utf8.UTFMax && k <= len(t); k++ {
		if utf8.RuneStart(t[len(t)-k]) {
			if !utf8.FullRuneInString(t[len(t)-k:]) {
				end = len(t) - k
			}
			break
		}
	}
	for strings.HasSuffix(t[:end], "\uFFFD") {
		end -= len("\uFFFD")
	}
	// The start of a stop string.
	cut := end
	for _, s := range c.stops {
		cut = min(cut, end-partialSuffix(t[:end], s))
	}
	end = cut
	if c.tools != nil {
		end = min(end, callStart(c.tools, t[:end]))
	}
	return max(end, c.sent)
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
	switch f.Tools {
	case chat.ToolsLlama3JSON:
		// The whole turn is the call: hold back while it could start with one.
		s := strings.TrimLeftFunc(t, unicode.IsSpace)
		if s == "" || strings.HasPrefix(s, "{") || strings.HasPrefix(s, "<|python_tag|>") || strings.HasPrefix("<|python_tag|>", s) {
			return 0
		}
		return len(t)
	case chat.ToolsGemmaToolCode:
		return markerStart(t, "```tool_code")
	default:
		return markerStart(t, "<tool_call>")
	}
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
