package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"strings"

	"github.com/temperml/temper/algorithms/tokenize"
)

// apiError is an error in OpenAI's schema, with its HTTP status.
type apiError struct {
	Status  int     `json:"-"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

func errorf(status int, typ, param, code, format string, a ...any) *apiError {
	e := &apiError{Status: status, Type: typ, Message: fmt.Sprintf(format, a...)}
	if param != "" {
		e.Param = &param
	}
	if code != "" {
		e.Code = &code
	}
	return e
}

// badParam is a 400 naming the parameter.
func badParam(param, format string, a ...any) *apiError {
	return errorf(http.StatusBadRequest, "invalid_request_error", param, "invalid_value", format, a...)
}

// unsupported is a 400 for a parameter (or value) the server does not implement.
func unsupported(param, format string, a ...any) *apiError {
	return errorf(http.StatusBadRequest, "invalid_request_error", param, "unsupported_parameter", format, a...)
}

// maxBody bounds a request body.
const maxBody = 32 << 20

// decodeStrict reads one JSON object into v: an unknown field or a value of the wrong type is a 400
// naming it.
func decodeStrict(r *http.Request, v any) *apiError {
	body, err := io.ReadAll(http.MaxBytesReader(nil, r.Body, maxBody))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return errorf(http.StatusRequestEntityTooLarge, "invalid_request_error", "", "request_too_large", "request body over %d bytes", maxBody)
		}
		return errorf(http.StatusBadRequest, "invalid_request_error", "", "", "read request body: %v", err)
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var typeErr *json.UnmarshalTypeError
		var synErr *json.SyntaxError
		msg := err.Error()
		switch {
		case strings.HasPrefix(msg, "json: unknown field "):
			name := strings.Trim(strings.TrimPrefix(msg, "json: unknown field "), `"`)
			return errorf(http.StatusBadRequest, "invalid_request_error", name, "unknown_parameter", "Unrecognized request argument supplied: %s", name)
		case errors.As(err, &typeErr):
			field := strings.TrimPrefix(typeErr.Field, "sampling.") // the parameters both endpoints share
			return errorf(http.StatusBadRequest, "invalid_request_error", field, "invalid_type",
				"Invalid type for '%s': got a JSON %s, want %s", field, typeErr.Value, typeName(typeErr.Type.String()))
		case errors.As(err, &synErr):
			return errorf(http.StatusBadRequest, "invalid_request_error", "", "invalid_json", "We could not parse the JSON body of your request: %v (at byte %d)", err, synErr.Offset)
		case errors.Is(err, io.EOF):
			return errorf(http.StatusBadRequest, "invalid_request_error", "", "invalid_json", "empty request body: want a JSON object")
		}
		var fe *fieldError
		if errors.As(err, &fe) {
			return badParam(fe.field, "%s", fe.msg)
		}
		return errorf(http.StatusBadRequest, "invalid_request_error", "", "invalid_json", "%v", err)
	}
	if dec.More() {
		return errorf(http.StatusBadRequest, "invalid_request_error", "", "invalid_json", "request body holds more than one JSON value")
	}
	return nil
}

func typeName(goType string) string {
	switch {
	case strings.Contains(goType, "int"):
		return "an integer"
	case strings.Contains(goType, "float"):
		return "a number"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	}
	return "an object"
}

// fieldError is a decoding error of one field's content.
type fieldError struct{ field, msg string }

func (e *fieldError) Error() string { return e.field + ": " + e.msg }

// stopList is OpenAI's stop: a string or up to 4 strings.
type stopList []string

func (s *stopList) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*s = nil
		return nil
	}
	var one string
	if json.Unmarshal(b, &one) == nil {
		*s = stopList{one}
	} else {
		var many []string
		if err := json.Unmarshal(b, &many); err != nil {
			return &fieldError{"stop", "want a string or an array of strings"}
		}
		*s = many
	}
	if len(*s) > 4 {
		return &fieldError{"stop", fmt.Sprintf("%d stop sequences: at most 4", len(*s))}
	}
	for _, x := range *s {
		if x == "" {
			return &fieldError{"stop", "an empty stop sequence"}
		}
	}
	return nil
}

// promptList is the completions prompt: a string, strings, token ids, or arrays of token ids.
type promptList struct {
	texts []string
	ids   [][]int
}

func (p *promptList) UnmarshalJSON(b []byte) error {
	var one string
	if json.Unmarshal(b, &one) == nil {
		p.texts = []string{one}
		return nil
	}
	var texts []string
	if json.Unmarshal(b, &texts) == nil {
		p.texts = texts
		return nil
	}
	var ids []int
	if json.Unmarshal(b, &ids) == nil {
		p.ids = [][]int{ids}
		return nil
	}
	var many [][]int
	if json.Unmarshal(b, &many) == nil {
		p.ids = many
		return nil
	}
	return &fieldError{"prompt", "want a string, an array of strings, an array of token ids or an array of arrays of token ids"}
}

func (p promptList) len() int { return len(p.texts) + len(p.ids) }

type streamOptions struct {
	IncludeUsage       bool  `json:"include_usage"`
	IncludeObfuscation *bool `json:"include_obfuscation"`
}

// sampling holds the parameters both endpoints share.
type sampling struct {
	Model            string             `json:"model"`
	MaxTokens        *int               `json:"max_tokens"`
	Temperature      *float64           `json:"temperature"`
	TopP             *float64           `json:"top_p"`
	N                *int               `json:"n"`
	Stream           bool               `json:"stream"`
	StreamOptions    *streamOptions     `json:"stream_options"`
	Stop             stopList           `json:"stop"`
	Seed             *int64             `json:"seed"`
	FrequencyPenalty *float64           `json:"frequency_penalty"`
	PresencePenalty  *float64           `json:"presence_penalty"`
	LogitBias        map[string]float64 `json:"logit_bias"`
	User             string             `json:"user"` // accepted: it changes nothing about the output
}

// shared is the part of a request every endpoint reads alike (chatRequest and completionRequest embed it).
func (s *sampling) shared() *sampling { return s }

// chatRequest is POST /v1/chat/completions.
type chatRequest struct {
	sampling
	Messages            []json.RawMessage          `json:"messages"`
	MaxCompletionTokens *int                       `json:"max_completion_tokens"`
	Logprobs            bool                       `json:"logprobs"`
	TopLogprobs         *int                       `json:"top_logprobs"`
	Tools               []json.RawMessage          `json:"tools"`
	ToolChoice          json.RawMessage            `json:"tool_choice"`
	ParallelToolCalls   *bool                      `json:"parallel_tool_calls"`
	ResponseFormat      json.RawMessage            `json:"response_format"`
	ChatTemplateKwargs  map[string]json.RawMessage `json:"chat_template_kwargs"` // vLLM's extension
}

// completionRequest is POST /v1/completions.
type completionRequest struct {
	sampling
	Prompt   *promptList `json:"prompt"`
	Logprobs *int        `json:"logprobs"`
	Echo     bool        `json:"echo"`
	Suffix   *string     `json:"suffix"`
	BestOf   *int        `json:"best_of"`
}

// params are a request's validated sampling parameters.
type params struct {
	n           int
	maxTokens   int // 0: the rest of the context (chat) or 16 (completions)
	temperature float64
	topP        float64
	seed        *uint64
	stop        []string
	stream      bool
	usage       bool // stream_options.include_usage
}

// maxN bounds n (OpenAI's limit).
const maxN = 128

// check validates the shared parameters.
func (s sampling) check(maxBatch int) (params, *apiError) {
	p := params{n: 1, temperature: 1, topP: 1, stop: s.Stop, stream: s.Stream}
	if s.Model == "" {
		return p, badParam("model", "model is required")
	}
	if s.N != nil {
		if *s.N < 1 || *s.N > min(maxN, maxBatch) {
			return p, badParam("n", "n=%d: must be between 1 and %d (the server's max batch)", *s.N, min(maxN, maxBatch))
		}
		p.n = *s.N
	}
	if s.MaxTokens != nil {
		if *s.MaxTokens < 1 {
			return p, badParam("max_tokens", "max_tokens=%d: must be at least 1", *s.MaxTokens)
		}
		p.maxTokens = *s.MaxTokens
	}
	if t := s.Temperature; t != nil {
		if *t < 0 || *t > 2 || math.IsNaN(*t) {
			return p, badParam("temperature", "temperature=%g: must be between 0 and 2", *t)
		}
		p.temperature = *t
	}
	if t := s.TopP; t != nil {
		if *t < 0 || *t > 1 || math.IsNaN(*t) {
			return p, badParam("top_p", "top_p=%g: must be between 0 and 1", *t)
		}
		p.topP = *t
		if *t == 0 {
			// The smallest nucleus: the most likely token alone (the sampler reads 0 as "off").
			p.topP = math.SmallestNonzeroFloat64
		}
	}
	if s.StreamOptions != nil && !s.Stream {
		return p, badParam("stream_options", "stream_options: only with stream true")
	}
	if s.StreamOptions != nil {
		p.usage = s.StreamOptions.IncludeUsage
		if o := s.StreamOptions.IncludeObfuscation; o != nil && *o {
			return p, unsupported("stream_options.include_obfuscation", "stream_options.include_obfuscation=true: not supported; allowed: false")
		}
	}
	if s.Seed != nil {
		v := uint64(*s.Seed)
		p.seed = &v
	}
	for _, pen := range []struct {
		name string
		v    *float64
	}{{"frequency_penalty", s.FrequencyPenalty}, {"presence_penalty", s.PresencePenalty}} {
		if pen.v != nil && *pen.v != 0 {
			return p, unsupported(pen.name, "%s=%g: not supported (Temper samples without penalties); allowed: 0", pen.name, *pen.v)
		}
	}
	if len(s.LogitBias) > 0 {
		return p, unsupported("logit_bias", "logit_bias: not supported; allowed: {} or null")
	}
	return p, nil
}

// message is one chat message as clients send it, checked and turned into a tokenize.Message.
type message struct {
	Role             string            `json:"role"`
	Content          json.RawMessage   `json:"content"`
	Name             string            `json:"name"`
	ToolCalls        []json.RawMessage `json:"tool_calls"`
	ToolCallID       string            `json:"tool_call_id"`
	ReasoningContent string            `json:"reasoning_content"`
	Refusal          *string           `json:"refusal"`
}

// messages decodes the chat messages: content as a string, null, or an array of text parts;
// "developer" is read as "system" (OpenAI's newer name for it).
func readMessages(raw []json.RawMessage) ([]tokenize.Message, *apiError) {
	if len(raw) == 0 {
		return nil, badParam("messages", "messages: at least one message is required")
	}
	out := make([]tokenize.Message, len(raw))
	for i, b := range raw {
		field := fmt.Sprintf("messages[%d]", i)
		var m message
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&m); err != nil {
			if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
				name = strings.Trim(name, `"`)
				return nil, unsupported(field+"."+name, "%s.%s: not supported", field, name)
			}
			return nil, badParam(field, "%s: %v", field, err)
		}
		switch m.Role {
		case "developer":
			m.Role = tokenize.RoleSystem
		case tokenize.RoleSystem, tokenize.RoleUser, tokenize.RoleAssistant, tokenize.RoleTool:
		case "function":
			return nil, unsupported(field+".role", "%s.role %q: deprecated function messages are not supported; use tool messages", field, m.Role)
		default:
			return nil, badParam(field+".role", "%s.role %q: allowed values: system, developer, user, assistant, tool", field, m.Role)
		}
		if m.Refusal != nil && *m.Refusal != "" {
			return nil, unsupported(field+".refusal", "%s.refusal: not supported (chat templates do not render refusals); put it in content", field)
		}
		text, err := contentText(m.Content)
		if err != nil {
			return nil, badParam(field+".content", "%s.content: %v", field, err)
		}
		// Through tokenize.Message's own reader, so tool calls keep their ids and string arguments.
		type wire struct {
			Role             string            `json:"role"`
			Content          string            `json:"content"`
			ReasoningContent string            `json:"reasoning_content,omitempty"`
			ToolCalls        []json.RawMessage `json:"tool_calls,omitempty"`
			ToolCallID       string            `json:"tool_call_id,omitempty"`
			Name             string            `json:"name,omitempty"`
		}
		wb, _ := json.Marshal(wire{m.Role, text, m.ReasoningContent, m.ToolCalls, m.ToolCallID, m.Name})
		if err := json.Unmarshal(wb, &out[i]); err != nil {
			return nil, badParam(field, "%s: %v", field, err)
		}
	}
	return out, nil
}

// contentText reads a message's content: a string, null, or text parts joined.
func contentText(raw json.RawMessage) (string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", fmt.Errorf("want a string, null or an array of {\"type\": \"text\", \"text\": ...} parts")
	}
	var b strings.Builder
	for k, p := range parts {
		if p.Type != "text" {
			return "", fmt.Errorf("part %d has type %q: only text parts are supported", k, p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// toolChoice reads tool_choice: "auto" (the default with tools) or "none".
func toolChoice(raw json.RawMessage) (auto bool, err *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return true, nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return false, unsupported("tool_choice", "tool_choice: naming a function is not supported (Temper does not constrain decoding); allowed: \"auto\", \"none\"")
	}
	switch s {
	case "auto":
		return true, nil
	case "none":
		return false, nil
	case "required":
		return false, unsupported("tool_choice", "tool_choice \"required\": not supported (Temper does not constrain decoding); allowed: \"auto\", \"none\"")
	}
	return false, badParam("tool_choice", "tool_choice %q: allowed values: \"auto\", \"none\"", s)
}

// checkTools validates tool definitions: {"type": "function", "function": {"name", ...}}.
func checkTools(tools []json.RawMessage) *apiError {
	for i, raw := range tools {
		var t struct {
			Type     string `json:"type"`
			Function *struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil || t.Type != "function" || t.Function == nil || t.Function.Name == "" {
			return badParam(fmt.Sprintf("tools[%d]", i), "tools[%d]: want {\"type\": \"function\", \"function\": {\"name\": ..., \"parameters\": {...}}}", i)
		}
	}
	return nil
}

// ---- responses ----

type usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type topLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type tokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float32      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []topLogprob `json:"top_logprobs"`
}

type chatLogprobs struct {
	Content []tokenLogprob `json:"content"`
	Refusal []tokenLogprob `json:"refusal"`
}

type toolCallFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type toolCall struct {
	Index    *int             `json:"index,omitempty"` // streaming deltas only
	ID       string           `json:"id"`
	Type     string           `json:"type"`
	Function toolCallFunction `json:"function"`
}

type chatMessage struct {
	Role      string     `json:"role"`
	Content   *string    `json:"content"`
	Refusal   *string    `json:"refusal"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      chatMessage   `json:"message"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
}

// responseHead is what every response and stream chunk begins with (OpenAI's field order).
type responseHead struct {
	ID                string `json:"id"`
	Object            string `json:"object"`
	Created           int64  `json:"created"`
	Model             string `json:"model"`
	SystemFingerprint string `json:"system_fingerprint"`
}

type chatCompletion struct {
	responseHead
	Choices []chatChoice `json:"choices"`
	Usage   *usage       `json:"usage,omitempty"`
}

type chatDelta struct {
	Role      string     `json:"role,omitempty"`
	Content   *string    `json:"content,omitempty"`
	ToolCalls []toolCall `json:"tool_calls,omitempty"`
}

type chunkChoice struct {
	Index        int           `json:"index"`
	Delta        chatDelta     `json:"delta"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type chatChunk struct {
	responseHead
	Choices []chunkChoice `json:"choices"`
	Usage   *usage        `json:"usage"`
}

type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []float32            `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

type completionChoice struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

type completion struct {
	responseHead
	Choices []completionChoice `json:"choices"`
	Usage   *usage             `json:"usage,omitempty"`
}

type modelCard struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// MaxModelLen is the context in tokens (vLLM's field).
	MaxModelLen int `json:"max_model_len"`
}

type modelList struct {
	Object string      `json:"object"`
	Data   []modelCard `json:"data"`
}
