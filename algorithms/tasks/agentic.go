package tasks

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/temperml/temper/algorithms/tokenize"
)

// Agentic is a task meant to be solved with tools inside an episode: the tools a policy needs, and a
// demonstration of using them (multi-turn messages an SFT phase trains on, loss on the assistant's
// turns only) that spells calls and results exactly as an episode does.
type Agentic interface {
	Task
	// Tools names the built-in tools (tools package) the task's episodes need.
	Tools() []string
	// Demonstration turns an example into a tool-use conversation ending with the answer.
	Demonstration(ex Example) Example
}

// AgenticNames lists the built-in agentic tasks, sorted.
func AgenticNames() []string {
	var out []string
	for _, n := range Names() {
		if _, ok := registry[n].(Agentic); ok {
			out = append(out, n)
		}
	}
	return out
}

// Demonstrations turns examples of an agentic task into its tool-use demonstrations.
func Demonstrations(t Task, exs []Example) ([]Example, error) {
	ag, ok := t.(Agentic)
	if !ok {
		return nil, fmt.Errorf("tasks: %s has no tool-use demonstrations (agentic tasks: %s)", t.Name(), strings.Join(AgenticNames(), ", "))
	}
	out := make([]Example, len(exs))
	for i, ex := range exs {
		out[i] = ag.Demonstration(ex)
	}
	return out, nil
}

// BigMul multiplies two 4–6 digit numbers: past what a small model computes (its products have 7–12
// digits), but a policy that copies the operands into a `calc` call and copies the result back
// answers exactly. Prompts and answers read like the arithmetic tasks' ("48213*9071=" → "437340123").
type BigMul struct{}

func init() { register(BigMul{}) }

// Name implements Task.
func (BigMul) Name() string { return "bigmul" }

// Doc implements Task.
func (BigMul) Doc() string {
	return "a*b with 4-6 digit operands: agentic (tools: calc); a small model wins only by calling calc and copying its result"
}

// Example implements Task.
func (BigMul) Example(rng *rand.Rand) Example {
	draw := func() int64 {
		d := 4 + rng.IntN(3)
		lo := int64(1)
		for range d - 1 {
			lo *= 10
		}
		return lo + rng.Int64N(9*lo)
	}
	x, y := draw(), draw()
	ans := strconv.FormatInt(x*y, 10) // ≤ 999999² < 2^40
	return Example{Prompt: fmt.Sprintf("%d*%d=", x, y), Completion: ans, Answer: ans}
}

// Check implements Task: as the arithmetic tasks, the first line must be the exact product.
func (BigMul) Check(ex Example, completion string) (bool, string) {
	return Arithmetic{}.Check(ex, completion)
}

// Tools implements Agentic.
func (BigMul) Tools() []string { return []string{"calc"} }

// Demonstration implements Agentic: the user asks, the assistant calls calc on the expression, the
// tool answers with the product, the assistant copies it.
func (BigMul) Demonstration(ex Example) Example {
	expr := strings.TrimSuffix(ex.Prompt, "=")
	args, _ := json.Marshal(map[string]string{"expr": expr}) // a map of strings always marshals
	return Example{ID: ex.ID, Task: ex.Task, Answer: ex.Answer, Messages: []tokenize.Message{
		{Role: tokenize.RoleUser, Content: ex.Prompt},
		{Role: tokenize.RoleAssistant, ToolCalls: []tokenize.ToolCall{{Name: "calc", Arguments: args}}},
		{Role: tokenize.RoleTool, Content: ex.Answer},
		{Role: tokenize.RoleAssistant, Content: ex.Answer},
	}}
}

// AsChat is how an agentic episode (and a tools evaluation) poses a prompt/completion example: its
// prompt as the user's message, so that episodes and Demonstration render the same tokens.
func AsChat(ex Example) Example {
	if len(ex.Messages) > 0 {
		return ex
	}
	return Example{ID: ex.ID, Task: ex.Task, Answer: ex.Answer, Messages: []tokenize.Message{{Role: tokenize.RoleUser, Content: ex.Prompt}}}
}

// checkMessages validates a conversation's roles and tool turns, naming the message at fault.
func checkMessages(msgs []tokenize.Message) error {
	for i, m := range msgs {
		switch m.Role {
		case tokenize.RoleSystem, tokenize.RoleUser, tokenize.RoleAssistant, tokenize.RoleTool:
		default:
			return fmt.Errorf("messages[%d].role %q: allowed values: %s, %s, %s, %s", i, m.Role,
				tokenize.RoleSystem, tokenize.RoleUser, tokenize.RoleAssistant, tokenize.RoleTool)
		}
		if len(m.ToolCalls) > 0 && m.Role != tokenize.RoleAssistant {
			return fmt.Errorf("messages[%d]: tool_calls on a %s message: only assistant messages call tools", i, m.Role)
		}
		if len(m.ToolCalls) > 1 {
			return fmt.Errorf("messages[%d].tool_calls: %d calls: one call per assistant message (an episode's turn ends at the first %s)", i, len(m.ToolCalls), tokenize.ToolCloseTag)
		}
		for j, c := range m.ToolCalls {
			if c.Name == "" {
				return fmt.Errorf("messages[%d].tool_calls[%d].name: missing", i, j)
			}
			if a := strings.TrimSpace(string(c.Arguments)); a != "" && a != "null" && a[0] != '{' {
				return fmt.Errorf("messages[%d].tool_calls[%d].arguments: must be a JSON object, got %s", i, j, truncate(a, 40))
			}
		}
		if m.Role == tokenize.RoleTool && (i == 0 || len(msgs[i-1].ToolCalls) == 0) {
			return fmt.Errorf("messages[%d]: a tool message must follow an assistant message with tool_calls", i)
		}
		if i > 0 && len(msgs[i-1].ToolCalls) > 0 && m.Role != tokenize.RoleTool {
			return fmt.Errorf("messages[%d].role %q: the call in messages[%d] needs its result: a tool message", i, m.Role, i-1)
		}
	}
	return nil
}
