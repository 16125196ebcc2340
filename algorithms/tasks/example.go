package tasks

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"

	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/internal/config"
)

// Example is one JSONL line. Exactly one shape is used per line:
//   - pretraining text: {"text": "..."}
//   - prompt/completion: {"prompt": "...", "completion": "...", "answer": "..."}
//   - chat: {"messages": [{"role": "user", "content": "..."}, {"role": "assistant", "content": "..."}]}
//     with roles system, user, assistant and tool; an assistant message may end with one call
//     {"tool_calls": [{"name": "calc", "arguments": {"expr": "12*34"}}]}, answered by the tool message
//     that follows it (its result), also in OpenAI's form ({"type": "function", "function":
//     {"name": ..., "arguments": ...}}, tool messages with tool_call_id and name), and the line
//     may carry the tool definitions, {"tools": [...]}, for models with their own chat template.
//     SFT trains on the assistant's messages and calls only.
//
// Answer is the reference a verifier checks a generated completion against; Task names the built-in task
// whose checker applies.
type Example struct {
	ID         string             `json:"id,omitempty"`
	Task       string             `json:"task,omitempty"`
	Text       string             `json:"text,omitempty"`
	Prompt     string             `json:"prompt,omitempty"`
	Completion string             `json:"completion,omitempty"`
	Messages   []tokenize.Message `json:"messages,omitempty"`
	Answer     string             `json:"answer,omitempty"`
	// Tools are the tool definitions of a conversation (OpenAI form), rendered by a model's own
	// chat template; only with messages.
	Tools []json.RawMessage `json:"tools,omitempty"`
}

// Shape names which of the three forms an example has, or returns an error for none or several.
func (e Example) Shape() (string, error) {
	var shapes []string
	if e.Text != "" {
		shapes = append(shapes, "text")
	}
	if e.Prompt != "" || e.Completion != "" {
		shapes = append(shapes, "prompt/completion")
	}
	if len(e.Messages) > 0 {
		shapes = append(shapes, "messages")
	}
	if len(e.Tools) > 0 && len(e.Messages) == 0 {
		return "", errors.New(`"tools" without "messages": tool definitions belong to a conversation`)
	}
	switch len(shapes) {
	case 0:
		return "", errors.New(`no "text", "prompt"/"completion" or "messages" field`)
	case 1:
		if shapes[0] == "prompt/completion" && e.Prompt == "" {
			return "", errors.New(`"completion" without "prompt"`)
		}
		return shapes[0], nil
	}
	return "", fmt.Errorf("mixes %s; use one form per line", strings.Join(shapes, " and "))
}

// LineError locates a malformed line.
type LineError struct {
	File string
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// MaxLineBytes bounds one JSONL line (a longer line is an error, not a silent truncation).
const MaxLineBytes = 16 << 20

// exampleFields are the names an unknown field is compared with: an example's and a message's.
var exampleFields = append(fieldNames(reflect.TypeOf(Example{})), append(fieldNames(reflect.TypeOf(tokenize.Message{})),
	fieldNames(reflect.TypeOf(tokenize.ToolCall{}))...)...)

// fieldNames lists a record type's JSON field names (for "did you mean" hints).
func fieldNames(t reflect.Type) []string {
	var names []string
	for _, f := range config.Fields(t) {
		names = append(names, f.Name)
	}
	return names
}

// ReadJSONL calls fn for every example of r in order. name labels errors ("data/train.jsonl"). Blank lines
// are skipped; any malformed line stops the read with a *LineError naming file and line.
func ReadJSONL(r io.Reader, name string, fn func(line int, ex Example) error) error {
	return readLines(r, name, parseLine, fn)
}

// readLines calls fn for every record of r that parse accepts, in order; blank lines are skipped and
// the first malformed line (or fn error) stops the read with a *LineError naming file and line.
func readLines[T any](r io.Reader, name string, parse func([]byte) (T, error), fn func(line int, rec T) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLineBytes)
	line := 0
	for sc.Scan() {
		line++
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		rec, err := parse(b)
		if err != nil {
			return &LineError{File: name, Line: line, Err: err}
		}
		if err := fn(line, rec); err != nil {
			return &LineError{File: name, Line: line, Err: err}
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			err = fmt.Errorf("line longer than %d bytes", MaxLineBytes)
		}
		return &LineError{File: name, Line: line + 1, Err: err}
	}
	return nil
}

// decodeLine decodes one JSON value into T strictly: an unknown field is named with the closest of
// fields, and a second value on the line is an error.
func decodeLine[T any](b []byte, fields []string) (T, error) {
	var rec T
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil {
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			f = strings.Trim(f, `"`)
			msg = fmt.Sprintf("unknown field %q", f)
			if s := config.Closest(f, fields); s != "" {
				msg += fmt.Sprintf("; did you mean %q?", s)
			}
			return rec, errors.New(msg)
		}
		return rec, fmt.Errorf("invalid JSON: %v", err)
	}
	if dec.More() {
		return rec, errors.New("more than one JSON value on the line")
	}
	return rec, nil
}

func parseLine(b []byte) (Example, error) {
	ex, err := decodeLine[Example](b, exampleFields)
	if err != nil {
		return ex, err
	}
	if _, err := ex.Shape(); err != nil {
		return ex, err
	}
	return ex, checkMessages(ex.Messages)
}

// ReadAll reads every example of r.
func ReadAll(r io.Reader, name string) ([]Example, error) { return readAll(r, name, parseLine) }

// WriteJSONL writes one example per line.
func WriteJSONL(w io.Writer, exs []Example) error { return writeLines(w, "example", exs) }

// checkedLine is the parser of a record type that checks itself: decodeLine, then the record's Check.
func checkedLine[T interface{ Check() error }](fields []string) func([]byte) (T, error) {
	return func(b []byte) (T, error) {
		rec, err := decodeLine[T](b, fields)
		if err != nil {
			return rec, err
		}
		return rec, rec.Check()
	}
}

// readAll collects the records readLines yields (those read before an error, with it).
func readAll[T any](r io.Reader, name string, parse func([]byte) (T, error)) ([]T, error) {
	var out []T
	err := readLines(r, name, parse, func(_ int, rec T) error { out = append(out, rec); return nil })
	return out, err
}

// writeLines writes one record per line, HTML characters as they are (prompts hold "<" and "&");
// what names a record in errors ("preference example").
func writeLines[T any](w io.Writer, what string, recs []T) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	for i, rec := range recs {
		if err := enc.Encode(rec); err != nil {
			return fmt.Errorf("tasks: write %s %d: %w", what, i, err)
		}
	}
	return bw.Flush()
}
