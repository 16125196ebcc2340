package episode

import (
	"cmp"
	"context"
	"fmt"
	"sync"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/sample"
	"github.com/temperml/temper/algorithms/tokenize"
	"github.com/temperml/temper/algorithms/tools"
)

// Generator is batched generation (tpu.Runtime and model.Generator satisfy it).
type Generator interface {
	Generate(prompts [][]int, opts sample.Options) ([]model.Completion, error)
}

// Codec is the tokenizer in both directions.
type Codec interface {
	Encode(text string) []int
	Decode(ids []int) string
}

// Config bounds episodes and spells tool messages.
type Config struct {
	MaxTurns   int `json:"max_turns"`   // policy turns per episode, ≥ 1
	TurnTokens int `json:"turn_tokens"` // new tokens per policy turn, ≥ 1
	MaxTokens  int `json:"max_tokens"`  // policy and tool tokens after the prompt, ≥ TurnTokens
	// MaxContext is the model's context length (prompt and episode): an episode that has no room
	// left for a whole turn, or for its call's result, ends (EndTokens) instead of asking the model
	// for more than it holds; prompt and episode never exceed it. 0: unbounded.
	MaxContext int `json:"max_context,omitempty"`
	// ToolOpen and ToolClose wrap a tool result in the conversation; defaults DefaultToolOpen and
	// DefaultToolClose (the close hands the turn back to the assistant).
	ToolOpen  string `json:"tool_open,omitempty"`
	ToolClose string `json:"tool_close,omitempty"`
	// MaxToolChars truncates a tool result (default 512), so one call cannot flood the context.
	MaxToolChars int `json:"max_tool_chars,omitempty"`
	// Syntax is the model's own tool-call convention (chat.Format satisfies it): how a call is
	// parsed from a turn and the text that brings a result back. nil: Temper's
	// <tool>{json}</tool> with ToolOpen and ToolClose, for the byte-level models.
	Syntax Syntax `json:"-"`
}

// Syntax is a model's convention for tool calls in its own chat template.
type Syntax interface {
	// ParseCall finds the first call in a policy turn's text (found false: an answer).
	ParseCall(text string) (call tokenize.ToolCall, found bool, err error)
	// CallStop is text that ends a turn at a call besides the stop tokens ("" for none).
	CallStop() string
	// ToolText is the text after a turn that called a tool: the tool's turn with result, up to
	// the next turn's generation prompt.
	ToolText(result string) (string, error)
}

// Defaults of Config's tool message markers, in the style of tokenize.DefaultChat.
const (
	DefaultToolOpen  = "\n<|tool|>\n"
	DefaultToolClose = "\n<|assistant|>\n"
)

// Validate names a bad field with its allowed values.
func (c Config) Validate() error {
	switch {
	case c.MaxTurns < 1:
		return fmt.Errorf("episode: max_turns=%d: must be ≥ 1", c.MaxTurns)
	case c.TurnTokens < 1:
		return fmt.Errorf("episode: turn_tokens=%d: must be ≥ 1", c.TurnTokens)
	case c.MaxTokens < c.TurnTokens:
		return fmt.Errorf("episode: max_tokens=%d: must be ≥ turn_tokens (%d)", c.MaxTokens, c.TurnTokens)
	case c.MaxContext < 0:
		return fmt.Errorf("episode: max_context=%d: must be ≥ 0 (0: unbounded)", c.MaxContext)
	case c.MaxToolChars < 0:
		return fmt.Errorf("episode: max_tool_chars=%d: must be ≥ 0 (0: 512)", c.MaxToolChars)
	}
	return nil
}

func (c Config) withDefaults() Config {
	c.ToolOpen = cmp.Or(c.ToolOpen, DefaultToolOpen)
	c.ToolClose = cmp.Or(c.ToolClose, DefaultToolClose)
	c.MaxToolChars = cmp.Or(c.MaxToolChars, 512)
	return c
}

// End says why an episode ended.
type End string

const (
	EndAnswer End = "answer" // a policy turn without a tool call
	EndTurns  End = "turns"  // MaxTurns policy turns
	EndTokens End = "tokens" // MaxTokens spent
)

// CallRecord is one tool call of an episode.
type CallRecord struct {
	Turn   int          `json:"turn"`
	Name   string       `json:"name"` // "" when the call could not be parsed
	Args   string       `json:"args,omitempty"`
	Result tools.Result `json:"result"`
}

// Episode is one finished episode. Tokens, Policy and LogProbs are parallel.
type Episode struct {
	Tokens     []int        `json:"tokens"`   // everything after the prompt
	Policy     []bool       `json:"policy"`   // true: written by the policy (trained on); false: tool message
	LogProbs   []float32    `json:"logprobs"` // behaviour log-probability of policy tokens; 0 elsewhere
	Turns      int          `json:"turns"`    // policy turns
	Calls      []CallRecord `json:"calls,omitempty"`
	ToolErrors int          `json:"tool_errors"` // calls that were malformed, refused, failed or timed out
	// Checked: the episode called the `check` tool; CheckPassed: its last check passed.
	Checked     bool   `json:"checked"`
	CheckPassed bool   `json:"check_passed"`
	End         End    `json:"end"`
	Final       string `json:"final"` // text of the last policy turn (the answer, if End is EndAnswer)
}

// Run plays one episode per prompt. opts gives sampling (temperature, top-k/p, stop tokens, seed);
// its MaxNewTokens is replaced per turn. The calls of one turn run concurrently under ctx (at most
// maxConcurrentCalls at once) and their results land in episode order. An error is returned only for generation failures and bad configuration; tool
// failures are part of the episode.
func Run(ctx context.Context, gen Generator, codec Codec, reg *tools.Registry, prompts [][]int, opts sample.Options, cfg Config) ([]Episode, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if reg == nil {
		return nil, fmt.Errorf("episode: no tool registry")
	}
	cfg = cfg.withDefaults()
	parse, stop := tools.ParseCall, tools.CloseTag
	if cfg.Syntax != nil {
		parse, stop = cfg.Syntax.ParseCall, cfg.Syntax.CallStop()
	}
	var closeSeq []int
	if stop != "" {
		closeSeq = codec.Encode(stop)
	}
	eps := make([]Episode, len(prompts))
	live := make([]int, len(prompts))
	for i := range live {
		live[i] = i
	}
	for turn := 0; len(live) > 0; turn++ {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("episode: turn %d: %w", turn, err)
		}
		if cfg.MaxContext > 0 { // no room for a whole turn: the context is spent
			fits := live[:0:0]
			for _, i := range live {
				if len(prompts[i])+len(eps[i].Tokens)+cfg.TurnTokens > cfg.MaxContext {
					eps[i].End = EndTokens
					continue
				}
				fits = append(fits, i)
			}
			if live = fits; len(live) == 0 {
				break
			}
		}
		ctxs := make([][]int, len(live))
		seeds := make([]uint64, len(live))
		budget := cfg.TurnTokens
		for j, i := range live {
			ctxs[j] = append(append([]int(nil), prompts[i]...), eps[i].Tokens...)
			seeds[j] = mix(opts.SeedFor(i), uint64(turn))
			budget = min(budget, cfg.MaxTokens-len(eps[i].Tokens))
		}
		// Episodes of a batch share one budget per turn (the smallest left); an episode whose own
		// budget is larger simply gets another turn later.
		o := opts
		o.MaxNewTokens = max(1, budget)
		o.Seeds = seeds
		o.StopSequences = append([][]int(nil), opts.StopSequences...)
		if len(closeSeq) > 0 {
			o.StopSequences = append(o.StopSequences, closeSeq)
		}
		outs, err := gen.Generate(ctxs, o)
		if err != nil {
			return nil, fmt.Errorf("episode: turn %d: %w", turn, err)
		}
		// The turn's calls run concurrently (a long-running tool, sent to its own activity, would
		// otherwise hold up every episode behind it) and land in episode order, so an episode's
		// tokens do not depend on which call finished first.
		texts := make([]string, len(live))
		recs := make([]*CallRecord, len(live))
		parseFailed := make([]bool, len(live))
		var wg sync.WaitGroup
		sem := make(chan struct{}, maxConcurrentCalls)
		for j, i := range live {
			texts[j] = codec.Decode(outs[j].Tokens)
			call, found, perr := parse(texts[j])
			if !found {
				continue
			}
			rec := &CallRecord{Turn: turn, Name: call.Name, Args: string(call.Arguments)}
			recs[j] = rec
			if perr != nil {
				rec.Result = tools.Result{Err: perr.Error(), Kind: tools.ErrArguments}
				parseFailed[j] = true
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				sem <- struct{}{}
				defer func() { <-sem }()
				rec.Result = reg.Call(context.WithValue(ctx, indexKey{}, callSite{index: i, turn: turn}), call)
			}()
		}
		wg.Wait()
		var next []int
		for j, i := range live {
			ep := &eps[i]
			c := outs[j]
			ep.Turns++
			ep.Tokens = append(ep.Tokens, c.Tokens...)
			ep.LogProbs = append(ep.LogProbs, c.LogProbs...)
			for range c.Tokens {
				ep.Policy = append(ep.Policy, true)
			}
			ep.Final = texts[j]
			rec := recs[j]
			if rec == nil {
				ep.End = EndAnswer
				continue
			}
			if rec.Result.Err != "" {
				ep.ToolErrors++
			}
			if rec.Name == "check" && !parseFailed[j] {
				ep.Checked = true
				ep.CheckPassed = rec.Result.Err == "" && rec.Result.Output == "pass"
			}
			ep.Calls = append(ep.Calls, *rec)
			msg := rec.Result.Message()
			if len(msg) > cfg.MaxToolChars {
				msg = msg[:cfg.MaxToolChars] + "…"
			}
			// Tokenised as one text, as a chat template's rendering is, so that demonstrations and
			// episodes are the same tokens after the policy's own.
			toolText := cfg.ToolOpen + msg + cfg.ToolClose
			if cfg.Syntax != nil {
				var err error
				if toolText, err = cfg.Syntax.ToolText(msg); err != nil {
					return nil, fmt.Errorf("episode: turn %d: %w", turn, err)
				}
			}
			toolToks := codec.Encode(toolText)
			if cfg.MaxContext > 0 && len(prompts[i])+len(ep.Tokens)+len(toolToks) > cfg.MaxContext {
				ep.End = EndTokens // the result does not fit the context: the episode ends on its call
				continue
			}
			ep.Tokens = append(ep.Tokens, toolToks...)
			for range toolToks {
				ep.Policy = append(ep.Policy, false)
				ep.LogProbs = append(ep.LogProbs, 0)
			}
			switch {
			case ep.Turns >= cfg.MaxTurns:
				ep.End = EndTurns
			case len(ep.Tokens) >= cfg.MaxTokens:
				ep.End = EndTokens
			default:
				next = append(next, i)
			}
		}
		live = next
	}
	return eps, nil
}

// maxConcurrentCalls bounds the tool calls of one turn that run at once.
const maxConcurrentCalls = 16

type indexKey struct{}

type callSite struct{ index, turn int }

// Index is, inside a tool called by Run, the index of the episode (its prompt) that called it: a
// tool that depends on the prompt (the task's `check`) reads it.
func Index(ctx context.Context) (int, bool) {
	c, ok := ctx.Value(indexKey{}).(callSite)
	return c.index, ok
}

// Turn is, inside a tool called by Run, the policy turn (from 0) whose call it is: with Index it
// names the call within the batch, so a tool run elsewhere can be found again after a retry.
func Turn(ctx context.Context) (int, bool) {
	c, ok := ctx.Value(indexKey{}).(callSite)
	return c.turn, ok
}

// mix derives a turn's seed from an episode's, so each turn samples from its own stream whatever
// else is in the batch.
func mix(seed, turn uint64) uint64 { return sample.SplitMix64(seed ^ (turn+1)*0x9e3779b97f4a7c15) }
