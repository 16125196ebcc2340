package data

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/temperml/temper/algorithms/chat"
	"github.com/temperml/temper/algorithms/tasks"
	"github.com/temperml/temper/algorithms/tokenize"
)

// Encoded is one example as token ids with a per-token loss mask (true: train on predicting this token).
type Encoded struct {
	IDs  []int
	Loss []bool
}

// Encoder encodes examples of any shape.
type Encoder struct {
	Tok  tokenize.Tokenizer
	Chat tokenize.ChatTemplate
	// Model, when set, writes conversations in the model's own chat template (its
	// tokenizer_config.json or chat_template.jinja) instead of Chat: the rendered text tokenised
	// at once, the loss on the assistant's turns (chat.Format.Encode). Tok must then report
	// offsets (tokenize.OffsetEncoder).
	Model *chat.Format
	// BOS prepends the tokenizer's BOS to text and prompt/completion examples (chat templates decide
	// for themselves).
	BOS bool
}

// Encode turns an example into ids: text → [BOS] text EOS, all trained; prompt/completion →
// [BOS] prompt completion EOS with only completion and EOS trained; messages → the chat template.
func (e Encoder) Encode(ex tasks.Example) (Encoded, error) {
	shape, err := ex.Shape()
	if err != nil {
		return Encoded{}, err
	}
	sp := e.Tok.Special()
	var out Encoded
	add := func(ids []int, train bool) {
		out.IDs = append(out.IDs, ids...)
		for range ids {
			out.Loss = append(out.Loss, train)
		}
	}
	if e.BOS && sp.BOS >= 0 && shape != "messages" {
		add([]int{sp.BOS}, false)
	}
	switch shape {
	case "text":
		add(e.Tok.Encode(ex.Text), true)
	case "prompt/completion":
		add(e.Tok.Encode(ex.Prompt), false)
		add(e.Tok.Encode(ex.Completion), true)
	case "messages":
		ids, mask, err := e.render(ex)
		if err != nil {
			return Encoded{}, err
		}
		out.IDs, out.Loss = ids, mask
		return out, nil
	}
	if sp.EOS < 0 {
		return Encoded{}, errors.New("data: tokenizer has no EOS token")
	}
	add([]int{sp.EOS}, true)
	return out, nil
}

// PromptIDs encodes only the prompt part of an example, as generation sees it.
func (e Encoder) PromptIDs(ex tasks.Example) ([]int, error) {
	sp := e.Tok.Special()
	var ids []int
	if e.BOS && sp.BOS >= 0 && len(ex.Messages) == 0 {
		ids = append(ids, sp.BOS)
	}
	if len(ex.Messages) > 0 {
		msgs := ex.Messages
		if msgs[len(msgs)-1].Role == tokenize.RoleAssistant {
			msgs = msgs[:len(msgs)-1]
		}
		if e.Model != nil {
			f, err := e.Model.WithTools(ex.Tools)
			if err != nil {
				return nil, err
			}
			return f.Prompt(e.Tok, msgs)
		}
		if len(ex.Tools) > 0 {
			return nil, errNoTools
		}
		return e.Chat.Prompt(e.Tok, msgs)
	}
	return append(ids, e.Tok.Encode(ex.Prompt)...), nil
}

var errNoTools = errors.New(`data: "tools": Temper's fixed chat formats do not render tool definitions; describe the tools in the system message, or use the model's own chat template`)

func (e Encoder) render(ex tasks.Example) ([]int, []bool, error) {
	if e.Model != nil {
		f, err := e.Model.WithTools(ex.Tools)
		if err != nil {
			return nil, nil, err
		}
		return f.Encode(e.Tok, ex.Messages)
	}
	if len(ex.Tools) > 0 {
		return nil, nil, errNoTools
	}
	return e.Chat.Render(e.Tok, ex.Messages)
}

// Batch is a packed training batch: host slices of [Rows][Seq].
//
// Tokens are the ids; Valid marks real tokens (false on padding); Loss marks tokens whose prediction
// counts (Loss[r][t] = true means logits at t-1 are trained to predict Tokens[r][t]); Positions are the
// RoPE positions.
type Batch struct {
	Tokens    [][]int32
	Valid     [][]bool
	Loss      [][]bool
	Positions [][]int32
	// Examples is how many examples started in this batch; Targets how many tokens are trained on.
	Examples, Targets int
}

// Cursor is a position in a dataset: the Index-th example of epoch Epoch, whose order is the seeded
// permutation perm(Seed, Epoch).
type Cursor struct {
	Epoch int    `json:"epoch"`
	Index int    `json:"index"`
	Seed  uint64 `json:"seed"`
}

// Order returns the example order of one epoch: a Fisher–Yates permutation from PCG(seed, epoch).
func Order(n int, seed uint64, epoch int) []int {
	rng := rand.New(rand.NewPCG(seed, uint64(epoch)))
	p := make([]int, n)
	for i := range p {
		p[i] = i
	}
	for i := n - 1; i > 0; i-- {
		j := rng.IntN(i + 1)
		p[i], p[j] = p[j], p[i]
	}
	return p
}

// Packer packs a dataset into batches of Rows × Seq tokens.
type Packer struct {
	Data []Encoded
	Rows int
	Seq  int
	PAD  int

	order      []int
	orderEpoch int
	orderSeed  uint64
}

// Next fills one batch starting at cur and returns it with the cursor after it. An example longer
// than Seq is truncated to Seq tokens (its tail is lost: check with CutCompletions first where the
// tail is what trains). A row is closed when the next example does not fit; the example then starts
// the next row, whole.
func (p *Packer) Next(cur Cursor) (Batch, Cursor, error) {
	if len(p.Data) == 0 {
		return Batch{}, cur, errors.New("data: empty dataset")
	}
	if p.Rows <= 0 || p.Seq < 2 {
		return Batch{}, cur, fmt.Errorf("data: batch %dx%d: want rows ≥ 1 and seq ≥ 2", p.Rows, p.Seq)
	}
	b := Batch{}
	for r := 0; r < p.Rows; r++ {
		toks := make([]int32, 0, p.Seq)
		valid := make([]bool, 0, p.Seq)
		loss := make([]bool, 0, p.Seq)
		for {
			ex := p.example(&cur)
			if len(toks) > 0 && len(toks)+len(ex.IDs) > p.Seq {
				break // starts the next row
			}
			n := min(len(ex.IDs), p.Seq-len(toks))
			for i := 0; i < n; i++ {
				toks = append(toks, int32(ex.IDs[i]))
				valid = append(valid, true)
				// The first token of a row has no left context to be predicted from.
				l := ex.Loss[i] && len(toks) > 1
				loss = append(loss, l)
				if l {
					b.Targets++
				}
			}
			b.Examples++
			cur = advance(cur, len(p.Data))
			if len(toks) >= p.Seq {
				break
			}
		}
		pos := make([]int32, p.Seq)
		for i := range pos {
			pos[i] = int32(i)
		}
		for len(toks) < p.Seq {
			toks = append(toks, int32(p.PAD))
			valid = append(valid, false)
			loss = append(loss, false)
		}
		b.Tokens = append(b.Tokens, toks)
		b.Valid = append(b.Valid, valid)
		b.Loss = append(b.Loss, loss)
		b.Positions = append(b.Positions, pos)
	}
	return b, cur, nil
}

func (p *Packer) example(cur *Cursor) Encoded {
	if p.order == nil || p.orderEpoch != cur.Epoch || p.orderSeed != cur.Seed {
		p.order, p.orderEpoch, p.orderSeed = Order(len(p.Data), cur.Seed, cur.Epoch), cur.Epoch, cur.Seed
	}
	return p.Data[p.order[cur.Index]]
}

func advance(c Cursor, n int) Cursor {
	c.Index++
	if c.Index >= n {
		c.Epoch++
		c.Index = 0
	}
	return c
}

// CutCompletions checks that no example with a prompt (some untrained tokens: SFT and chat data)
// is longer than rows of seq tokens hold, since the Packer truncates a long example and its tail is
// where the completion, the only trained part, sits. Text examples (every token trained, as in
// pretraining) may be truncated. The error names the first such example, its length and the
// trained tokens it would lose, and counts the others.
func CutCompletions(enc []Encoded, exs []tasks.Example, seq int) error {
	first, n := -1, 0
	for i, e := range enc {
		if len(e.IDs) <= seq || !slices.Contains(e.Loss[1:], false) { // text: all trained but BOS
			continue
		}
		if first < 0 {
			first = i
		}
		n++
	}
	if first < 0 {
		return nil
	}
	e := enc[first]
	lost := 0
	for _, l := range e.Loss[seq:] {
		if l {
			lost++
		}
	}
	id := ""
	if first < len(exs) && exs[first].ID != "" {
		id = " (" + exs[first].ID + ")"
	}
	return fmt.Errorf("data: example %d%s is %d tokens but a row holds %d: %d of its trained tokens would be cut (%d of %d examples are too long); raise batch.seq to at least %d or shorten the data",
		first, id, len(e.IDs), seq, lost, n, len(enc), len(e.IDs)-1)
}

// EncodeAll encodes a dataset, naming the example of any failure.
func (e Encoder) EncodeAll(exs []tasks.Example) ([]Encoded, error) {
	out := make([]Encoded, len(exs))
	for i, ex := range exs {
		enc, err := e.Encode(ex)
		if err != nil {
			return nil, fmt.Errorf("data: encode example %d (%s): %w", i, ex.ID, err)
		}
		out[i] = enc
	}
	return out, nil
}
