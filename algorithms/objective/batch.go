package objective

import (
	"fmt"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive
	"github.com/gomlx/gomlx/core/tensors"
)

// Batch is one step's inputs of an objective. Each objective owns its batch type, and that type
// alone knows the order in which its fields become the host tensors the objective's Build reads:
// the layout is written once here (a batch's Tensors beside the Build's unpacking), so the trainers
// and the engine never index an objective's inputs by position.
type Batch interface {
	// Tensors returns the batch's host tensors in its objective's input order.
	Tensors() []*tensors.Tensor
}

// The objectives' batch types.
var (
	_ Batch = PolicyBatch{}
	_ Batch = PPOBatch{}
	_ Batch = PrefBatch{}
	_ Batch = KTOBatch{}
	_ Batch = BTBatch{}
	_ Batch = Sequences{}
	_ Batch = DistillBatch{}
	_ Batch = StepBatch{}
)

// PolicyRows are the sequence inputs the policy objectives (Policy, PPO) share, every one [rows, seq]
// and aligned for next-token prediction (Targets[r][t] follows Tokens[r][t]).
type PolicyRows struct {
	Tokens    [][]int     // model input
	Targets   [][]int     // the sampled tokens whose log-probs are trained
	Positions [][]int     // RoPE positions
	Valid     [][]bool    // keys attention may see
	Mask      [][]float32 // 1 on trained completion targets, 0 on prompt, tool results and padding
	Old       [][]float32 // log π_old(target): the trainer's log-probs before the iteration's updates
	Behaviour [][]float32 // log π_behaviour(target) recorded by the rollout engine (TIS)
	Ref       [][]float32 // log π_ref(target) (read only with a KL term)
}

func (p PolicyRows) tensors() []*tensors.Tensor {
	return []*tensors.Tensor{i32(p.Tokens), i32(p.Targets), i32(p.Positions), bools(p.Valid), f32(p.Mask), f32(p.Old), f32(p.Behaviour), f32(p.Ref)}
}

// policyRowNodes are PolicyRows in the graph.
type policyRowNodes struct{ tokens, targets, positions, valid, mask, old, behaviour, ref *Node }

const policyRowInputs = 8

func policyRowsIn(in []*Node) policyRowNodes {
	return policyRowNodes{tokens: in[0], targets: in[1], positions: in[2], valid: in[3], mask: in[4], old: in[5], behaviour: in[6], ref: in[7]}
}

// PolicyBatch is the input of Policy (objective.PolicyWith): the rows, each row's sequence-level
// advantage and, for a completion window (PolicyOptions.Window = Window > 0), each row's completion
// columns.
type PolicyBatch struct {
	PolicyRows
	Adv []float32 // [rows]
	// Cols[r] are the columns t of row r whose target is a completion token, ascending; the batch
	// pads them with −1 to Window columns. Window 0 sends no columns (the objective reads whole rows).
	Cols   [][]int
	Window int
}

// Tensors: the rows, adv [rows] and, with a window, cols [rows, Window] int32.
func (b PolicyBatch) Tensors() []*tensors.Tensor {
	out := append(b.PolicyRows.tensors(), vec1D(b.Adv))
	if b.Window == 0 {
		return out
	}
	flat := make([]int32, 0, len(b.Cols)*b.Window)
	for _, row := range b.Cols {
		for j := range b.Window {
			c := -1
			if j < len(row) {
				c = row[j]
			}
			flat = append(flat, int32(c))
		}
	}
	return append(out, tensors.FromFlatDataAndDimensions(flat, len(b.Cols), b.Window))
}

type policyNodes struct {
	policyRowNodes
	adv, cols *Node // cols nil without a window
}

func policyIn(name string, in []*Node, window bool) policyNodes {
	want := policyRowInputs + 1
	if window {
		want++
	}
	if len(in) != want {
		panic(fmt.Sprintf("objective %s: %d inputs, want %d (a PolicyBatch whose Window matches the objective's)", name, len(in), want))
	}
	n := policyNodes{policyRowNodes: policyRowsIn(in), adv: in[policyRowInputs]}
	if window {
		n.cols = in[policyRowInputs+1]
	}
	return n
}

// PPOBatch is the input of PPO: the rows with token-level advantages, the critic's values before the
// iteration's updates and its regression targets, every one [rows, seq].
type PPOBatch struct {
	PolicyRows
	Adv       [][]float32 // Â_t
	OldValues [][]float32 // V^old_t
	Returns   [][]float32 // R_t
}

// Tensors: the rows, then adv, old values and returns.
func (b PPOBatch) Tensors() []*tensors.Tensor {
	return append(b.PolicyRows.tensors(), f32(b.Adv), f32(b.OldValues), f32(b.Returns))
}

type ppoNodes struct {
	policyRowNodes
	adv, oldValues, returns *Node
}

func ppoIn(in []*Node) ppoNodes {
	if len(in) != policyRowInputs+3 {
		panic(fmt.Sprintf("objective ppo: %d inputs, want %d (a PPOBatch)", len(in), policyRowInputs+3))
	}
	return ppoNodes{policyRowNodes: policyRowsIn(in), adv: in[8], oldValues: in[9], returns: in[10]}
}

// PrefSide is one side of a preference batch, one example per row, prompt+completion right-padded,
// every field [rows, seq].
type PrefSide struct {
	Tokens    [][]int  // the sequence; padding any id (PAD)
	Positions [][]int  // RoPE positions (0..seq-1 for right padding)
	Valid     [][]bool // true on real tokens (keys attention may see)
	// Mask is aligned with next-token log-probs: Mask[r][t] = 1 when Tokens[r][t+1] is a trained
	// completion token (completion and EOS), 0 on the prompt, padding and the last column.
	Mask [][]float32
}

func (s PrefSide) tensors() []*tensors.Tensor {
	return []*tensors.Tensor{i32(s.Tokens), i32(s.Positions), bools(s.Valid), f32(s.Mask)}
}

type sideNodes struct{ tokens, positions, valid, mask *Node }

const sideInputs = 4

func sideIn(in []*Node) sideNodes {
	return sideNodes{tokens: in[0], positions: in[1], valid: in[2], mask: in[3]}
}

// PrefBatch is the input of the paired preference objective (dpo, ipo, orpo, simpo). The chosen and
// rejected sides may have different seq. The reference log-probs are aligned as the masks:
// RefChosen[r][t] = log πref(tokens[r][t+1] | tokens[r][≤t]), read only where the mask is 1 (zeros
// for the reference-free orpo and simpo, which ignore them).
type PrefBatch struct {
	Chosen, Rejected       PrefSide
	RefChosen, RefRejected [][]float32
}

// Tensors: the chosen side, the rejected side, then the two reference log-probs.
func (b PrefBatch) Tensors() []*tensors.Tensor {
	return append(append(b.Chosen.tensors(), b.Rejected.tensors()...), f32(b.RefChosen), f32(b.RefRejected))
}

type prefNodes struct {
	chosen, rejected       sideNodes
	refChosen, refRejected *Node
}

func prefIn(kind string, in []*Node) prefNodes {
	checkInputs(kind, in, 2*sideInputs+2)
	return prefNodes{chosen: sideIn(in), rejected: sideIn(in[sideInputs:]), refChosen: in[2*sideInputs], refRejected: in[2*sideInputs+1]}
}

// KTOBatch is the input of the KTO objective: the labelled completions (Rows and their reference
// log-probs Ref, [rows, seq]), Desirable [rows] (1 desirable, 0 undesirable), and the mismatched pairs
// (x_i, y_j≠i) that estimate KTO's reference point in the same forms ([rowsKL, seqKL]).
type KTOBatch struct {
	Rows      PrefSide
	Ref       [][]float32
	Desirable []float32
	KL        PrefSide
	KLRef     [][]float32
}

// Tensors: the rows, their reference, desirable, the KL rows, their reference.
func (b KTOBatch) Tensors() []*tensors.Tensor {
	out := append(b.Rows.tensors(), f32(b.Ref), vec1D(b.Desirable))
	return append(append(out, b.KL.tensors()...), f32(b.KLRef))
}

type ktoNodes struct {
	rows, kl   sideNodes
	ref, klRef *Node
	desirable  *Node
}

func ktoIn(in []*Node) ktoNodes {
	checkInputs("kto", in, 2*sideInputs+3)
	return ktoNodes{rows: sideIn(in), ref: in[sideInputs], desirable: in[sideInputs+1], kl: sideIn(in[sideInputs+2:]), klRef: in[2*sideInputs+2]}
}

// Sequences are sequences as a reward model scores them (SequenceRewards, RewardScores), every
// field [rows, seq] unless stated, right-padded with positions 0.. from the first token.
type Sequences struct {
	Tokens    [][]int
	Positions [][]int
	Valid     [][]bool // true on real tokens
	Last      []int    // [rows]: index of the row's last real token (the EOS)
	// Completion is 1 on the completion's tokens (and EOS), 0 on BOS, prompt and padding.
	Completion [][]float32
}

// Tensors: tokens, positions, valid, last, completion (RewardScores' inputs).
func (s Sequences) Tensors() []*tensors.Tensor {
	return []*tensors.Tensor{i32(s.Tokens), i32(s.Positions), bools(s.Valid), vec1D(ints32(s.Last)), f32(s.Completion)}
}

type seqNodes struct{ tokens, positions, valid, last, completion *Node }

func seqIn(name string, in []*Node) seqNodes {
	if len(in) != 5 {
		panic(fmt.Sprintf("objective %s: %d inputs, want 5 (Sequences)", name, len(in)))
	}
	return seqNodes{tokens: in[0], positions: in[1], valid: in[2], last: in[3], completion: in[4]}
}

// BTBatch is the input of BradleyTerry: chosen and rejected completions of the same prompts, of one
// [rows, seq] shape (pad both to the same length; they run through the model as one [2·rows, seq]
// batch), and Weight [rows]: 1 for a real pair, 0 for a padding row.
type BTBatch struct {
	Chosen, Rejected Sequences
	Weight           []float32
}

// Tensors: the chosen tokens, positions, valid and last, the rejected ones, the weights, then the
// chosen and rejected completion masks.
func (b BTBatch) Tensors() []*tensors.Tensor {
	c, r := b.Chosen.Tensors(), b.Rejected.Tensors()
	return []*tensors.Tensor{c[0], c[1], c[2], c[3], r[0], r[1], r[2], r[3], vec1D(b.Weight), c[4], r[4]}
}

type btNodes struct {
	chosen, rejected seqNodes
	weight           *Node
}

func btIn(in []*Node) btNodes {
	if len(in) != 11 {
		panic(fmt.Sprintf("objective bradley-terry: %d inputs, want 11 (a BTBatch)", len(in)))
	}
	return btNodes{chosen: seqNodes{in[0], in[1], in[2], in[3], in[9]}, rejected: seqNodes{in[4], in[5], in[6], in[7], in[10]}, weight: in[8]}
}

// DistillBatch is the input of Distill for rows R of S tokens (the logits at position t predict token
// t+1): the student's rows and the teacher's distribution at every position, full (top_k 0: Logits,
// [R, S, Width = vocabulary]) or its top k (IDs and LogProbs at the temperature, [R, S, Width = k]).
type DistillBatch struct {
	Tokens, Positions [][]int
	Valid             [][]bool
	// Mask is 1 where position t's next-token distribution counts (token t+1 is a completion token).
	Mask     [][]float32
	Logits   []float32 // top_k 0, flat
	IDs      []int32   // top_k k, flat
	LogProbs []float32 // top_k k, flat
	Width    int
}

// Tensors: tokens, positions, valid, mask, then the teacher's logits, or its ids and log-probs.
func (b DistillBatch) Tensors() []*tensors.Tensor {
	out := []*tensors.Tensor{i32(b.Tokens), i32(b.Positions), bools(b.Valid), f32(b.Mask)}
	rows, seq := len(b.Tokens), len(b.Tokens[0])
	if b.IDs == nil {
		return append(out, tensors.FromFlatDataAndDimensions(b.Logits, rows, seq, b.Width))
	}
	return append(out, tensors.FromFlatDataAndDimensions(b.IDs, rows, seq, b.Width), tensors.FromFlatDataAndDimensions(b.LogProbs, rows, seq, b.Width))
}

type distillNodes struct{ tokens, positions, valid, mask, logits, ids, logProbs *Node }

func distillIn(in []*Node, topK bool) distillNodes {
	want := 5
	if topK {
		want = 6
	}
	if len(in) != want {
		panic(fmt.Sprintf("objective: distill: %d inputs, want %d (a DistillBatch)", len(in), want))
	}
	n := distillNodes{tokens: in[0], positions: in[1], valid: in[2], mask: in[3]}
	if topK {
		n.ids, n.logProbs = in[4], in[5]
	} else {
		n.logits = in[4]
	}
	return n
}

// i32 packs [rows][cols] host ints as an int32 tensor.
func i32(x [][]int) *tensors.Tensor {
	flat := make([]int32, 0, len(x)*len(x[0]))
	for _, row := range x {
		for _, v := range row {
			flat = append(flat, int32(v))
		}
	}
	return tensors.FromFlatDataAndDimensions(flat, len(x), len(x[0]))
}

func f32(x [][]float32) *tensors.Tensor { return pack2D(x) }

func bools(x [][]bool) *tensors.Tensor { return pack2D(x) }

func pack2D[T float32 | bool](x [][]T) *tensors.Tensor {
	flat := make([]T, 0, len(x)*len(x[0]))
	for _, row := range x {
		flat = append(flat, row...)
	}
	return tensors.FromFlatDataAndDimensions(flat, len(x), len(x[0]))
}

func vec1D[T int32 | float32](x []T) *tensors.Tensor {
	return tensors.FromFlatDataAndDimensions(x, len(x))
}

func ints32(x []int) []int32 {
	out := make([]int32, len(x))
	for i, v := range x {
		out[i] = int32(v)
	}
	return out
}
