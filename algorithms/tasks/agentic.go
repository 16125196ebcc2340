package tasks

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"

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
func (BigMul) Example(rng *rand.Rand) Example { return mulExample(rng, 4, 6) }

// mulExample draws a product of two operands of minD to maxD digits (each length uniform, then the
// number uniform among those of its length), maxD ≤ 9.
func mulExample(rng *rand.Rand, minD, maxD int) Example {
	draw := func() int64 {
		d := minD + rng.IntN(maxD-minD+1)
		lo := int64(1)
		for range d - 1 {
			lo *= 10
		}
		return lo + rng.Int64N(9*lo)
	}
	x, y := draw(), draw()
	ans := strconv.FormatInt(x*y, 10) // < 10^18 < 2^63
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
	return oneCallDemo(ex, "calc", map[string]any{"expr": strings.TrimSuffix(ex.Prompt, "=")})
}

// SmallMul is bigmul with 2–3 digit operands (products of 3–6 digits): the same calculator use
// with fewer digits to copy into the call and back, so that `small` learns it part-way in a short
// SFT (between 600 and 800 steps; `tiny` not in 3,000) and an RL phase has right and wrong episodes
// to tell apart (the agent gateway's held-out curve, docs/agent-gateway.md).
type SmallMul struct{}

func init() { register(SmallMul{}) }

// Name implements Task.
func (SmallMul) Name() string { return "smallmul" }

// Doc implements Task.
func (SmallMul) Doc() string {
	return "a*b with 2-3 digit operands: bigmul with fewer digits to copy; agentic (tools: calc)"
}

// Example implements Task.
func (SmallMul) Example(rng *rand.Rand) Example { return mulExample(rng, 2, 3) }

// Check implements Task: the first line must be the exact product.
func (SmallMul) Check(ex Example, completion string) (bool, string) {
	return Arithmetic{}.Check(ex, completion)
}

// Tools implements Agentic.
func (SmallMul) Tools() []string { return []string{"calc"} }

// Demonstration implements Agentic: bigmul's.
func (SmallMul) Demonstration(ex Example) Example { return BigMul{}.Demonstration(ex) }

// oneCallDemo is the demonstration of a task solved by one call: the user asks, the assistant calls
// tool with args, the tool answers with the answer, the assistant copies it.
func oneCallDemo(ex Example, tool string, args map[string]any) Example {
	b, _ := json.Marshal(args) // strings and numbers always marshal
	return Example{ID: ex.ID, Task: ex.Task, Answer: ex.Answer, Messages: []tokenize.Message{
		{Role: tokenize.RoleUser, Content: ex.Prompt},
		{Role: tokenize.RoleAssistant, ToolCalls: []tokenize.ToolCall{{Name: tool, Arguments: b}}},
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
	pending, caller := 0, 0 // calls of messages[caller] still waiting for their tool message
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
		for j, c := range m.ToolCalls {
			if c.Name == "" {
				return fmt.Errorf("messages[%d].tool_calls[%d].name: missing", i, j)
			}
			if a := strings.TrimSpace(string(c.Arguments)); a != "" && a != "null" && a[0] != '{' {
				return fmt.Errorf("messages[%d].tool_calls[%d].arguments: must be a JSON object, got %s", i, j, truncate(a, 40))
			}
		}
		if m.Weight != nil && (m.Role != tokenize.RoleAssistant || (*m.Weight != 0 && *m.Weight != 1)) {
			return fmt.Errorf("messages[%d].weight %d: allowed values: 0 (context only, no loss), 1; on assistant messages only", i, *m.Weight)
		}
		// Parallel calls (several in one assistant message) are answered by as many tool messages,
		// in order. Temper's fixed formats refuse them when rendering; models whose own template
		// writes them (Qwen3's <tool_call> blocks, Llama 3.1's JSON lines) train on them.
		switch {
		case m.Role == tokenize.RoleTool && pending == 0 && i > 0 && msgs[i-1].Role == tokenize.RoleTool:
			return fmt.Errorf("messages[%d]: a tool message beyond the %d call(s) of messages[%d]", i, len(msgs[caller].ToolCalls), caller)
		case m.Role == tokenize.RoleTool && pending == 0:
			return fmt.Errorf("messages[%d]: a tool message must follow an assistant message with tool_calls", i)
		case m.Role == tokenize.RoleTool:
			pending--
		case pending > 0:
			return fmt.Errorf("messages[%d].role %q: the call in messages[%d] needs its result: a tool message (%d of its %d calls unanswered)", i, m.Role, caller, pending, len(msgs[caller].ToolCalls))
		}
		if len(m.ToolCalls) > 0 {
			pending, caller = len(m.ToolCalls), i
		}
	}
	return nil
}

// SelfCheck is an arithmetic task posed for self-correction inside an episode: the policy proposes
// an answer to the `check` tool (the task's own verifier), reads "pass" or "fail: <feedback>", and
// on a failure proposes another, answering once a check passes. Its demonstrations check a first
// answer that is one of the base task's plausible slips half the time (then the correct one after
// the failure) and the correct one otherwise, so a model learns to test its answer and to answer
// differently after a failure; the slip is context only (weight 0: no loss on it), so the model's
// first answers are its best guesses, not learnt slips; the first and the final answers of an episode can then be compared
// (evaluations report both).
type SelfCheck struct {
	base Arithmetic
	name string
}

func init() {
	register(SelfCheck{base: Arithmetic{name: "add2", ops: "+", maxDigits: 2, terms: 2}, name: "add2check"})
	register(SelfCheck{base: Arithmetic{name: "add", ops: "+", maxDigits: 3, terms: 2}, name: "addcheck"})
}

// Name implements Task.
func (s SelfCheck) Name() string { return s.name }

// Doc implements Task.
func (s SelfCheck) Doc() string {
	return fmt.Sprintf("%s answered through the check tool: agentic (tools: check); demonstrations check a first answer (a plausible slip half the time), read the failure and answer again", s.base.name)
}

// Example implements Task: the base task's.
func (s SelfCheck) Example(rng *rand.Rand) Example { return s.base.Example(rng) }

// Check implements Task: the base task's.
func (s SelfCheck) Check(ex Example, completion string) (bool, string) {
	return s.base.Check(ex, completion)
}

// Tools implements Agentic.
func (SelfCheck) Tools() []string { return []string{"check"} }

// Demonstration implements Agentic. Whether the first answer is a slip, and which slip, is drawn
// from a generator seeded by the prompt, so the same example always gives the same conversation.
func (s SelfCheck) Demonstration(ex Example) Example {
	h := fnv.New64a()
	h.Write([]byte(ex.Prompt))
	rng := rand.New(rand.NewPCG(h.Sum64(), 0x5e1fc8ec))
	// Each attempt (checkAttempt) is the answer written out, then checked: the answer follows the
	// prompt (or the feedback that repeats the question) as in plain arithmetic text.
	msgs := []tokenize.Message{{Role: tokenize.RoleUser, Content: ex.Prompt}}
	if rng.IntN(2) == 0 {
		wrong := s.base.Mistake(ex, rng)
		_, fb := s.base.Check(ex, wrong)
		slip := checkAttempt(wrong)
		noLoss := 0 // the slip is context: the model learns to recover from it, not to make it
		slip.Weight = &noLoss
		msgs = append(msgs, slip, tokenize.Message{Role: tokenize.RoleTool, Content: "fail: " + fb})
	}
	msgs = append(msgs, checkAttempt(ex.Answer),
		tokenize.Message{Role: tokenize.RoleTool, Content: "pass"},
		tokenize.Message{Role: tokenize.RoleAssistant, Content: ex.Answer})
	return Example{ID: ex.ID, Task: ex.Task, Answer: ex.Answer, Messages: msgs}
}

// MulCheck mixes products a model can learn to write at once, a 4–6 digit number times 1, 10 or 100
// (copy it, append zeros), with bigmul's products of two 4–6 digit numbers (which it cannot
// compute), posed for self-correction with a second tool: the policy writes an answer and checks
// it; after a failure it calls `calc` and answers with the result. Its demonstrations check the
// right product of an easy prompt, and check a guess at a hard one (the operands side by side),
// read the failure, call calc and copy its result. A policy's first answers are
// then right about as often as it knows the answer, and its final answers as often as it recovers:
// what evaluations with `check` compare (heldout_first_answer_exact_match against
// heldout_exact_match).
type MulCheck struct{}

func init() { register(MulCheck{}) }

// Name implements Task.
func (MulCheck) Name() string { return "mulcheck" }

// Doc implements Task.
func (MulCheck) Doc() string {
	return "a*b: half a 4-6 digit number times 1, 10 or 100, half two 4-6 digit operands: agentic (tools: check, calc); demonstrations check an answer and, after a failure, call calc and copy its result"
}

// Example implements Task: an easy product or a bigmul one, with equal probability.
func (MulCheck) Example(rng *rand.Rand) Example {
	ex := BigMul{}.Example(rng)
	if rng.IntN(2) == 0 {
		return ex
	}
	x, _, _ := strings.Cut(ex.Prompt, "*")
	zeros := strings.Repeat("0", rng.IntN(3))
	return Example{Prompt: x + "*1" + zeros + "=", Completion: x + zeros, Answer: x + zeros}
}

// mulCheckEasy reports whether a mulcheck prompt multiplies by 1, 10 or 100.
func mulCheckEasy(prompt string) bool {
	_, y, _ := strings.Cut(strings.TrimSuffix(prompt, "="), "*")
	return y == "1" || y == "10" || y == "100"
}

// Check implements Task: the first line must be the exact product (feedback names the expression).
func (MulCheck) Check(ex Example, completion string) (bool, string) {
	return Arithmetic{}.Check(ex, completion)
}

// Tools implements Agentic.
func (MulCheck) Tools() []string { return []string{"check", "calc"} }

// Demonstration implements Agentic. The answer to check is written in the call only (a 12-digit
// answer copied a second time into the call was the first thing a model got wrong). An easy
// prompt: check the product, read "pass", answer. A hard one: check a guess, read the failure,
// call calc on the expression, answer with its result.
func (MulCheck) Demonstration(ex Example) Example {
	msgs := []tokenize.Message{{Role: tokenize.RoleUser, Content: ex.Prompt}}
	if mulCheckEasy(ex.Prompt) {
		msgs = append(msgs, checkCall(ex.Answer), tokenize.Message{Role: tokenize.RoleTool, Content: "pass"})
	} else {
		// The guess writes the operands side by side, the easy prompts' rule (copy, append the
		// multiplier's zeros) misapplied, which is what a model taught on them writes here anyway. It
		// is trained: left untrained (weight 0), a quarter of a fine-tuned model's first calls on
		// hard prompts were malformed. A slip derived from the answer (a digit off) would leak it:
		// a model fine-tuned on such slips read the final answer partly from them and, after its
		// own unrelated guesses, copied calc's result wrongly.
		x, y, _ := strings.Cut(strings.TrimSuffix(ex.Prompt, "="), "*")
		wrong := x + y
		if wrong == ex.Answer {
			wrong = x + y + "0"
		}
		_, fb := Arithmetic{}.Check(ex, wrong)
		slip := checkCall(wrong)
		expr, _ := json.Marshal(map[string]string{"expr": strings.TrimSuffix(ex.Prompt, "=")})
		msgs = append(msgs, slip, tokenize.Message{Role: tokenize.RoleTool, Content: "fail: " + fb},
			tokenize.Message{Role: tokenize.RoleAssistant, ToolCalls: []tokenize.ToolCall{{Name: "calc", Arguments: expr}}},
			tokenize.Message{Role: tokenize.RoleTool, Content: ex.Answer})
	}
	msgs = append(msgs, tokenize.Message{Role: tokenize.RoleAssistant, Content: ex.Answer})
	return Example{ID: ex.ID, Task: ex.Task, Answer: ex.Answer, Messages: msgs}
}

// checkAttempt is an answer written out and then checked (the call copies it).
func checkAttempt(answer string) tokenize.Message {
	m := checkCall(answer)
	m.Content = answer
	return m
}

// checkCall proposes an answer to check in the call alone: written once, where the answer is long.
func checkCall(answer string) tokenize.Message {
	args, _ := json.Marshal(map[string]string{"answer": answer}) // a map of strings always marshals
	return tokenize.Message{Role: tokenize.RoleAssistant, ToolCalls: []tokenize.ToolCall{{Name: "check", Arguments: args}}}
}

// Corpus is a task whose facts live in a corpus the `lookup` tool reads (key → value), not in the
// model: only an episode that looks them up can answer.
type Corpus interface {
	Task
	Corpus() map[string]string
}

// Facts asks for facts about made-up places ("What is the capital of Zorbia?" → "Quell"): the
// answers are random words, so a model cannot know them and wins only by calling `lookup` with the
// right key and copying the value. The corpus (factsEntities places × 4 relations) is fixed: the
// same for every seed, so train and held-out prompts ask about the same corpus.
type Facts struct{}

func init() { register(Facts{}) }

const factsEntities = 400

var factsRelations = []string{"capital", "river", "mountain", "poet"}

// Name implements Task.
func (Facts) Name() string { return "facts" }

// Doc implements Task.
func (Facts) Doc() string {
	return "facts about made-up places from a fixed corpus: agentic (tools: lookup); only a lookup of the right key answers"
}

var factsCorpus = sync.OnceValues(func() ([]string, map[string]string) {
	rng := rand.New(rand.NewPCG(0xfac75, 1))
	word := func(syllables int) string {
		const cons, vows = "bdfgklmnprstvz", "aeiou"
		var b strings.Builder
		for range syllables {
			b.WriteByte(cons[rng.IntN(len(cons))])
			b.WriteByte(vows[rng.IntN(len(vows))])
			if rng.IntN(3) == 0 {
				b.WriteByte(cons[rng.IntN(len(cons))])
			}
		}
		s := b.String()
		return strings.ToUpper(s[:1]) + s[1:]
	}
	var places []string
	seen := map[string]bool{}
	corpus := map[string]string{}
	for len(places) < factsEntities {
		p := word(2 + rng.IntN(2))
		if seen[p] {
			continue
		}
		seen[p] = true
		places = append(places, p)
		for _, r := range factsRelations {
			corpus[r+" of "+p] = word(1 + rng.IntN(2))
		}
	}
	return places, corpus
})

// Corpus implements Corpus.
func (Facts) Corpus() map[string]string {
	_, c := factsCorpus()
	return c
}

// Example implements Task.
func (Facts) Example(rng *rand.Rand) Example {
	places, corpus := factsCorpus()
	p, r := places[rng.IntN(len(places))], factsRelations[rng.IntN(len(factsRelations))]
	ans := corpus[r+" of "+p]
	return Example{Prompt: fmt.Sprintf("What is the %s of %s?", r, p), Completion: ans, Answer: ans}
}

// Check implements Task: the first line must be the value, exactly.
func (Facts) Check(ex Example, completion string) (bool, string) {
	got := FirstLine(completion)
	switch {
	case got == ex.Answer:
		return true, ""
	case got == "":
		return false, "the answer is missing: write the name only"
	}
	return false, fmt.Sprintf("%s is wrong; look it up", truncate(got, 40))
}

// Tools implements Agentic.
func (Facts) Tools() []string { return []string{"lookup"} }

// Demonstration implements Agentic: look up "<relation> of <place>", answer with the value.
func (Facts) Demonstration(ex Example) Example {
	return oneCallDemo(ex, "lookup", map[string]any{"key": strings.TrimSuffix(strings.TrimPrefix(ex.Prompt, "What is the "), "?")})
}
