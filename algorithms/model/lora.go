package model

import (
	"encoding/json"
	"fmt"
	"github.com/temperml/temper/algorithms/model/modelcfg"
	"math"
	"math/rand/v2"
	"path"
	"slices"
	"strings"

	"github.com/gomlx/compute/dtypes"
	"github.com/gomlx/compute/shapes"
	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX graph code reads best unqualified.
	gm "github.com/gomlx/gomlx/ml/model"
)

// LoRA configures low-rank adapters (fields, defaults, validation: see modelcfg.LoRA). It is the
// same struct as a defined type, so the graph and PEFT methods below hang on it.
type LoRA modelcfg.LoRA

var (
	loraShortNames = modelcfg.LoRAShortNames()
	loraGroups     = modelcfg.LoRAGroups()
	// loraFused lists the internal variables adapters attach to, in the order forward.go uses them.
	loraFused = []string{VarQKV, VarAttnOut, VarGateUp, VarDown}
)

// WithDefaults fills the zero fields: rank 8, alpha 2·rank, targets all-linear.
func (l LoRA) WithDefaults() LoRA { return LoRA(modelcfg.LoRA(l).WithDefaults()) }

// Scale is alpha/rank (after defaults).
func (l LoRA) Scale() float64 { return modelcfg.LoRA(l).Scale() }

// Validate checks every field (after defaults); see modelcfg.LoRA.Validate.
func (l LoRA) Validate() error { return modelcfg.LoRA(l).Validate() }

// LoRAModule is one adaptable Hugging Face linear module and where it lives in the fused weights.
type LoRAModule struct {
	Name  string // Hugging Face module, e.g. "model.layers.0.self_attn.q_proj"
	Short string // "q_proj"
	Layer int
	Var   string // internal variable holding its weight, e.g. "layers/0/attn/qkv"
	Lo    int    // first output column of Var that belongs to the module
	Hi    int    // one past the last
	In    int    // input features
}

// Out is the module's output width.
func (m LoRAModule) Out() int { return m.Hi - m.Lo }

// PathA and PathB are the adapter variables, relative to the model scope: A [in, rank] and
// B [rank, out] (x·A·B, the transpose of PEFT's lora_A [rank, in] and lora_B [out, rank]).
func (m LoRAModule) PathA() string { return fmt.Sprintf("lora/layers/%d/%s/a", m.Layer, m.Short) }
func (m LoRAModule) PathB() string { return fmt.Sprintf("lora/layers/%d/%s/b", m.Layer, m.Short) }

// PEFTNames are the adapter tensors' names in a PEFT adapter_model.safetensors.
func (m LoRAModule) PEFTNames() (a, b string) {
	return "base_model.model." + m.Name + ".lora_A.weight", "base_model.model." + m.Name + ".lora_B.weight"
}

// LoRAModules lists every adaptable module of cfg: per layer q, k, v, o, gate, up, down.
func (c Config) LoRAModules() ([]LoRAModule, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	var out []LoRAModule
	for l := range c.Layers {
		for _, kind := range loraFused {
			v := layerPath(kind, l)
			parts, err := c.hfParts(v)
			if err != nil {
				return nil, err
			}
			in := c.DModel
			switch kind {
			case VarAttnOut:
				in = c.Heads * c.HeadDim
			case VarDown:
				in = c.FFN
			}
			for _, p := range parts {
				name := strings.TrimSuffix(p.name, ".weight")
				out = append(out, LoRAModule{Name: name, Short: name[strings.LastIndex(name, ".")+1:], Layer: l,
					Var: v, Lo: p.lo, Hi: p.hi, In: in})
			}
		}
	}
	return out, nil
}

// matches reports whether target selects module m.
func (m LoRAModule) matches(target string) bool {
	if g, ok := loraGroups[target]; ok {
		return slices.Contains(g, m.Short)
	}
	if strings.ContainsAny(target, "*?[") {
		full, _ := path.Match(target, m.Name)
		short, _ := path.Match(target, m.Short)
		return full || short
	}
	// PEFT's rule for a list of target_modules: the name itself or a dotted suffix of it.
	return m.Name == target || strings.HasSuffix(m.Name, "."+target)
}

// Modules lists the modules of cfg the targets select, in LoRAModules order. A target that selects
// nothing is an error (a typo or a layer the model does not have).
func (l LoRA) Modules(cfg Config) ([]LoRAModule, error) {
	l = l.WithDefaults()
	if err := l.Validate(); err != nil {
		return nil, err
	}
	all, err := cfg.LoRAModules()
	if err != nil {
		return nil, err
	}
	hit := make([]bool, len(l.Targets))
	var out []LoRAModule
	for _, m := range all {
		sel := false
		for i, t := range l.Targets {
			if m.matches(t) {
				hit[i], sel = true, true
			}
		}
		if sel {
			out = append(out, m)
		}
	}
	for i, t := range l.Targets {
		if !hit[i] {
			return nil, fmt.Errorf("model: lora targets[%d]=%q: matches no module of this %d-layer %s model (e.g. %s)",
				i, t, cfg.Layers, cfg.Family, all[0].Name)
		}
	}
	return out, nil
}

// Variables lists the adapter variables (A then B per module, in Modules order).
func (l LoRA) Variables(cfg Config) ([]VarSpec, error) {
	ms, err := l.Modules(cfg)
	if err != nil {
		return nil, err
	}
	r := l.WithDefaults().Rank
	out := make([]VarSpec, 0, 2*len(ms))
	for _, m := range ms {
		out = append(out, VarSpec{m.PathA(), []int{m.In, r}}, VarSpec{m.PathB(), []int{r, m.Out()}})
	}
	return out, nil
}

// InitLoRAWeights returns fresh adapter weights (internal paths → flat data): A ~ U(-1/√in, 1/√in)
// (PEFT's kaiming_uniform_(a=√5)) drawn from Seed in Variables order, B = 0.
func (l LoRA) InitLoRAWeights(cfg Config) (map[string][]float32, error) {
	ms, err := l.Modules(cfg)
	if err != nil {
		return nil, err
	}
	l = l.WithDefaults()
	rng := rand.New(rand.NewPCG(l.Seed, 0x10aa))
	w := make(map[string][]float32, 2*len(ms))
	for _, m := range ms {
		a := make([]float32, m.In*l.Rank)
		bound := 1 / math.Sqrt(float64(m.In))
		for i := range a {
			a[i] = float32((2*rng.Float64() - 1) * bound)
		}
		w[m.PathA()] = a
		w[m.PathB()] = make([]float32, l.Rank*m.Out())
	}
	return w, nil
}

// loraParamKey is the scope parameter holding the attached adapters (*loraAttachment).
const loraParamKey = "temper_lora"

// loraStepKey is the graph parameter marking a training graph: the optimizer step that seeds
// adapter dropout.
const loraStepKey = "temper_lora_step"

// loraAttachment is what Forward needs to apply the adapters: the config and the modules of each
// fused variable, in column order.
type loraAttachment struct {
	lora  LoRA
	byVar map[string][]LoRAModule
	index map[string]int // module name → position in Modules order (dropout stream)
}

// AttachLoRA creates the adapter variables of l under scope (A seeded, B zero: the model still
// computes exactly the base) and makes every graph built from scope afterwards (Forward, Hidden,
// Values, the Generator) apply them. Existing adapter variables are overwritten.
func AttachLoRA(scope *gm.Scope, cfg Config, l LoRA) error {
	l = l.WithDefaults()
	ms, err := l.Modules(cfg)
	if err != nil {
		return err
	}
	w, err := l.InitLoRAWeights(cfg)
	if err != nil {
		return err
	}
	at := &loraAttachment{lora: l, byVar: map[string][]LoRAModule{}, index: map[string]int{}}
	for i, m := range ms {
		at.byVar[m.Var] = append(at.byVar[m.Var], m)
		at.index[m.Name] = i
	}
	specs, err := l.Variables(cfg)
	if err != nil {
		return err
	}
	if err := SetVariables(scope, "model: attach lora", specs, w); err != nil {
		return err
	}
	scope.SetParam(loraParamKey, at)
	return nil
}

// AttachedLoRA returns the adapters attached under scope (after defaults), if any.
func AttachedLoRA(scope *gm.Scope) (LoRA, bool) {
	at := attachedLoRA(scope)
	if at == nil {
		return LoRA{}, false
	}
	l := at.lora
	l.Targets = slices.Clone(l.Targets)
	return l, true
}

func attachedLoRA(scope *gm.Scope) *loraAttachment {
	return ScopeParam[loraAttachment](scope, loraParamKey)
}

// ScopeParam returns scope's parameter key as a *T, or nil when it is unset or holds another type
// (how a model package finds what it attached to a scope, e.g. its LoRA adapters).
func ScopeParam[T any](scope *gm.Scope, key string) *T {
	v, ok := scope.GetParam(key)
	if !ok || v == nil {
		return nil
	}
	p, _ := v.(*T)
	return p
}

// DetachLoRA stops graphs built from scope from applying adapters and deletes the adapter
// variables (after MergeLoRA folded them into the base, say). Executables compiled with the
// adapters still apply them: discard them.
func DetachLoRA(scope *gm.Scope) error {
	if attachedLoRA(scope) == nil {
		return nil
	}
	return DetachAdapters(scope, loraParamKey, "model: detach lora")
}

// DetachAdapters clears the scope parameter key that holds the attached adapters and deletes the
// adapter variables (under scope's "lora"), for every tower that keeps its adapters so (the vision
// tower too); op prefixes errors.
func DetachAdapters(scope *gm.Scope, key, op string) error {
	scope.SetParam(key, nil)
	if err := scope.At("lora").DeleteVariablesInScope(); err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	return nil
}

// ImportLoRA sets the attached adapters from w (internal adapter paths → flat data; every
// adapter variable exactly once).
func ImportLoRA(scope *gm.Scope, cfg Config, w map[string][]float32) error {
	at := attachedLoRA(scope)
	if at == nil {
		return fmt.Errorf("model: import lora: no adapters attached")
	}
	specs, err := at.lora.Variables(cfg)
	if err != nil {
		return err
	}
	return SetVariables(scope, "model: import lora", specs, w)
}

// ExportLoRA copies the attached adapters to host memory (internal adapter paths → flat data).
func ExportLoRA(scope *gm.Scope, cfg Config) (map[string][]float32, error) {
	at := attachedLoRA(scope)
	if at == nil {
		return nil, fmt.Errorf("model: export lora: no adapters attached")
	}
	specs, err := at.lora.Variables(cfg)
	if err != nil {
		return nil, err
	}
	return GetVariables(scope, "model: export lora", specs)
}

// SetLoRATrainingStep marks g as a training graph for the adapters under scope, at optimizer
// step step (an integer scalar node: the step count before this update). Adapter dropout (when
// LoRA.Dropout > 0) applies only in such graphs, its masks drawn from (Seed, step, module), and
// the adapters' formulation is chosen for a differentiated graph. Graphs without it (evaluation,
// generation) apply no dropout.
func SetLoRATrainingStep(scope *gm.Scope, g *Graph, step *Node) {
	scope.SetGraphParam(g, loraStepKey, step)
}

// LoRA formulations (see linear).
const (
	loraAuto     = ""
	loraExplicit = "explicit" // x·W + s·(x·A)·B
	loraMerged   = "merged"   // x·(W + s·A·B)
)

// loraForceMode overrides the cost model (tests and benchmarks).
var loraForceMode = loraAuto

// loraNarrowPenalty is how much slower per FLOP the adapters' narrow matmuls ([n, in]·[in, r] and
// the transposed products of their gradients) run than a full-width matmul on the pure-Go
// backend: ~10× measured for r = 8, rounded up so that the "small" preset trains merged (measured
// 0.415 s/step merged, 0.476 explicit, 0.419 full fine-tuning, 16×64 tokens) while "base" and
// anything larger train explicit (1.77 vs 1.82 s/step: a wash at that size, and explicit wins as
// matrices grow).
const loraNarrowPenalty = 16

// linear is x·w for the fused variable kind (VarQKV, VarAttnOut, VarGateUp, VarDown) of layer l,
// plus the LoRA adapters attached to its modules: each module's s·x·A·B lands on its own output
// columns (s = alpha/rank).
//
//	x: [n, in]; w: [in, width] → [n, width]
//
// Without adapters it is exactly Dot(x, w), the graph the model had before LoRA existed. With
// adapters it picks the cheaper of two equal formulations: explicit, x·W + s·(x·A)·B (required
// with dropout on the adapter input, and cheapest when few rows meet large matrices), or merged,
// x·(W + s·A·B) (one full-width matmul; its backward pays the weight gradient x^T·dy once instead of
// four narrow matmuls per module, which the pure-Go backend runs slowly).
func linear(scope *gm.Scope, kind string, l int, x, w *Node) *Node {
	merged, delta := loraTerm(scope, kind, l, x, w)
	switch {
	case merged != nil:
		return Dot(x, merged).Product()
	case delta != nil:
		return Add(Dot(x, w).Product(), delta)
	}
	return Dot(x, w).Product()
}

// loraTerm is what the adapters attached to the projection (kind, layer l) add to x·w: either a
// merged weight w + s·A·B to multiply x by instead (merged), or the explicit product s·(x·A)·B
// [n, width] to add (delta); both nil without adapters. x: [n, in], w: [in, width].
func loraTerm(scope *gm.Scope, kind string, l int, x, w *Node) (merged, delta *Node) {
	at := attachedLoRA(scope)
	if at == nil {
		return nil, nil
	}
	ms := at.byVar[layerPath(kind, l)]
	if len(ms) == 0 {
		return nil, nil
	}
	g := x.Graph()
	var step *Node
	if v, ok := scope.GetGraphParam(g, loraStepKey); ok && v != nil {
		step, _ = v.(*Node)
	}
	training := step != nil
	dropout := training && at.lora.Dropout > 0
	n, in, width := x.Shape().Dim(0), w.Shape().Dim(0), w.Shape().Dim(1)
	mode := loraForceMode
	if dropout {
		mode = loraExplicit
	} else if mode == loraAuto {
		mode = loraExplicit
		if loraMergedCheaper(n, in, width, len(ms), at.lora.Rank, training) {
			mode = loraMerged
		}
	}
	scale := at.lora.Scale()
	// columns builds [rows, width] from one block per module (its output columns) and zeros.
	columns := func(rows int, block func(m LoRAModule) *Node) *Node {
		parts := make([]*Node, 0, 2*len(ms)+1)
		col := 0
		for _, m := range ms {
			if m.Lo > col {
				parts = append(parts, Zeros(g, shapes.Make(dtypes.Float32, rows, m.Lo-col)))
			}
			parts = append(parts, block(m))
			col = m.Hi
		}
		if col < width {
			parts = append(parts, Zeros(g, shapes.Make(dtypes.Float32, rows, width-col)))
		}
		if len(parts) == 1 {
			return parts[0]
		}
		return Concatenate(parts, 1)
	}
	a := func(m LoRAModule) *Node { return param(scope, g, m.PathA(), m.In, at.lora.Rank) }
	b := func(m LoRAModule) *Node { return param(scope, g, m.PathB(), at.lora.Rank, m.Out()) }
	if mode == loraMerged {
		// W + s·A·B: scaling A (in×r values) is the cheapest place for s.
		delta := columns(in, func(m LoRAModule) *Node { return Dot(MulScalar(a(m), scale), b(m)).Product() })
		return Add(w, delta), nil
	}
	delta = columns(n, func(m LoRAModule) *Node {
		xin := x
		if dropout {
			xin = loraDropout(x, at.lora, at.index[m.Name], step)
		}
		xa := MulScalar(Dot(xin, a(m)).Product(), scale) // [n, rank]: scaling the narrow side is cheapest
		return Dot(xa, b(m)).Product()                   // [n, out]
	})
	return nil, delta
}

// loraMergedCheaper compares rough costs (multiply-adds, narrow matmuls weighted by
// loraNarrowPenalty) of the two formulations for k modules of rank r on an [in, width] weight
// and n rows; training adds the backward pass.
func loraMergedCheaper(n, in, width, k, r int, training bool) bool {
	N, I, W, K, R := float64(n), float64(in), float64(width), float64(k), float64(r)
	explicit := loraNarrowPenalty * N * R * (K*I + W) // x·A per module, xa·B over the width
	merged := I*W*R + 2*I*W                           // A·B and the add over W
	if training {
		explicit *= 3               // d(xa), dA, dB (and dx) are narrow too
		merged += 3*N*I*W + 2*I*W*R // x^T·dy at ~1/3 the speed of a forward matmul; dA, dB
	}
	return merged < explicit
}

// loraDropout zeroes each element of x with probability p and scales the rest by 1/(1-p). The
// mask's random stream is seeded by (Seed, module index) and the step, so it is a pure function
// of them. x: [n, in].
func loraDropout(x *Node, l LoRA, module int, step *Node) *Node {
	g := x.Graph()
	key := splitmix64(l.Seed ^ splitmix64(uint64(module)+0x5eed))
	s := Mul(Reshape(ConvertDType(step, dtypes.Uint64), 1), Const(g, []uint64{0x9e3779b97f4a7c15}))
	state := Concatenate([]*Node{Const(g, []uint64{key}), Add(s, Const(g, []uint64{splitmix64(key)})), Const(g, []uint64{0})}, 0)
	_, u := RandomUniform(state, x.Shape())
	keep := Where(GreaterOrEqual(u, Scalar(g, x.DType(), l.Dropout)),
		Scalar(g, x.DType(), 1/(1-l.Dropout)), ScalarZero(g, x.DType()))
	return Mul(x, StopGradient(keep))
}

func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// MergeLoRA folds adapters into base weights: W' = W + (alpha/rank)·A·B on each module's columns
// of its fused variable (internal layout, float64 accumulation). base is not modified; variables
// without adapters are shared with it.
func MergeLoRA(cfg Config, l LoRA, base, adapters map[string][]float32) (map[string][]float32, error) {
	l = l.WithDefaults()
	ms, err := l.Modules(cfg)
	if err != nil {
		return nil, err
	}
	out := make(map[string][]float32, len(base))
	for k, v := range base {
		out[k] = v
	}
	copied := map[string]bool{}
	scale := l.Scale()
	r := l.Rank
	for _, m := range ms {
		w, ok := base[m.Var]
		if !ok {
			return nil, fmt.Errorf("model: merge lora: base has no variable %q", m.Var)
		}
		a, b := adapters[m.PathA()], adapters[m.PathB()]
		if len(a) != m.In*r || len(b) != r*m.Out() {
			return nil, fmt.Errorf("model: merge lora: adapters of %s missing or not of shape [%d,%d]/[%d,%d]", m.Name, m.In, r, r, m.Out())
		}
		cols := len(w) / m.In
		if !copied[m.Var] {
			out[m.Var] = slices.Clone(w)
			copied[m.Var] = true
		}
		dst := out[m.Var]
		acc := make([]float64, m.Out())
		for i := range m.In {
			clear(acc)
			for k := range r {
				aik := float64(a[i*r+k])
				if aik == 0 {
					continue
				}
				row := b[k*m.Out() : (k+1)*m.Out()]
				for o, bv := range row {
					acc[o] += aik * float64(bv)
				}
			}
			for o := range acc {
				dst[i*cols+m.Lo+o] = float32(float64(dst[i*cols+m.Lo+o]) + scale*acc[o])
			}
		}
	}
	return out, nil
}

// ToPEFT converts internal adapter weights to PEFT tensors: lora_A [rank, in] and lora_B
// [out, rank] named "base_model.model.<module>.lora_{A,B}.weight". It returns the data and shapes.
func (l LoRA) ToPEFT(cfg Config, w map[string][]float32) (map[string][]float32, map[string][]int, error) {
	ms, err := l.Modules(cfg)
	if err != nil {
		return nil, nil, err
	}
	r := l.WithDefaults().Rank
	data := make(map[string][]float32, 2*len(ms))
	shp := make(map[string][]int, 2*len(ms))
	for _, m := range ms {
		a, b := w[m.PathA()], w[m.PathB()]
		if len(a) != m.In*r || len(b) != r*m.Out() {
			return nil, nil, fmt.Errorf("model: lora to peft: adapters of %s missing or not of shape [%d,%d]/[%d,%d]", m.Name, m.In, r, r, m.Out())
		}
		na, nb := m.PEFTNames()
		data[na], shp[na] = TransposeFlat(a, m.In, r), []int{r, m.In}
		data[nb], shp[nb] = TransposeFlat(b, r, m.Out()), []int{m.Out(), r}
	}
	return data, shp, nil
}

// PEFTShapes maps each PEFT adapter tensor name of l on cfg to its shape (lora_A [rank, in],
// lora_B [out, rank]).
func (l LoRA) PEFTShapes(cfg Config) (map[string][]int, error) {
	ms, err := l.Modules(cfg)
	if err != nil {
		return nil, err
	}
	r := l.WithDefaults().Rank
	out := make(map[string][]int, 2*len(ms))
	for _, m := range ms {
		a, b := m.PEFTNames()
		out[a], out[b] = []int{r, m.In}, []int{m.Out(), r}
	}
	return out, nil
}

// FromPEFT is the inverse of ToPEFT: every adapter tensor must be present with its size, and
// nothing else.
func (l LoRA) FromPEFT(cfg Config, peft map[string][]float32) (map[string][]float32, error) {
	ms, err := l.Modules(cfg)
	if err != nil {
		return nil, err
	}
	r := l.WithDefaults().Rank
	out := make(map[string][]float32, 2*len(ms))
	seen := 0
	for _, m := range ms {
		na, nb := m.PEFTNames()
		a, okA := peft[na]
		b, okB := peft[nb]
		switch {
		case !okA || len(a) != r*m.In:
			return nil, fmt.Errorf("model: lora from peft: tensor %q missing or not of shape [%d %d]", na, r, m.In)
		case !okB || len(b) != m.Out()*r:
			return nil, fmt.Errorf("model: lora from peft: tensor %q missing or not of shape [%d %d]", nb, m.Out(), r)
		}
		out[m.PathA()] = TransposeFlat(a, r, m.In)
		out[m.PathB()] = TransposeFlat(b, m.Out(), r)
		seen += 2
	}
	if seen != len(peft) {
		want := map[string]bool{}
		for _, m := range ms {
			na, nb := m.PEFTNames()
			want[na], want[nb] = true, true
		}
		for n := range peft {
			if !want[n] {
				return nil, fmt.Errorf("model: lora from peft: unexpected tensor %q (targets %q)", n, l.WithDefaults().Targets)
			}
		}
	}
	return out, nil
}

// TransposeFlat returns the [cols, rows] transpose of a row-major [rows, cols] matrix.
func TransposeFlat(x []float32, rows, cols int) []float32 {
	t := make([]float32, len(x))
	for i := range rows {
		for j := range cols {
			t[j*rows+i] = x[i*cols+j]
		}
	}
	return t
}

// PEFTConfig is the subset of PEFT's adapter_config.json (LoraConfig) that Temper writes and reads.
type PEFTConfig struct {
	PeftType      string          `json:"peft_type"`
	TaskType      string          `json:"task_type"`
	BaseModel     string          `json:"base_model_name_or_path"`
	R             int             `json:"r"`
	LoraAlpha     float64         `json:"lora_alpha"`
	LoraDropout   float64         `json:"lora_dropout"`
	TargetModules json.RawMessage `json:"target_modules"`
	Bias          string          `json:"bias"`
	FanInFanOut   bool            `json:"fan_in_fan_out"`
	InferenceMode bool            `json:"inference_mode"`
	UseRSLoRA     bool            `json:"use_rslora"`
	UseDoRA       bool            `json:"use_dora"`
	ModulesToSave json.RawMessage `json:"modules_to_save"`
	LayersToTrans json.RawMessage `json:"layers_to_transform,omitempty"`
	RankPattern   json.RawMessage `json:"rank_pattern,omitempty"`
	AlphaPattern  json.RawMessage `json:"alpha_pattern,omitempty"`
}

// PEFTConfigJSON writes adapter_config.json for these adapters on cfg, naming base (a checkpoint
// URI or a Hugging Face model id) as base_model_name_or_path. target_modules lists the selected
// modules' short names when they are the same in every layer, else their full names (both mean
// the same modules to PEFT and to ParsePEFTConfig).
func (l LoRA) PEFTConfigJSON(cfg Config, base string) ([]byte, error) {
	l = l.WithDefaults()
	ms, err := l.Modules(cfg)
	if err != nil {
		return nil, err
	}
	perLayer := make([]map[string]bool, cfg.Layers)
	for i := range perLayer {
		perLayer[i] = map[string]bool{}
	}
	for _, m := range ms {
		perLayer[m.Layer][m.Short] = true
	}
	var targets []string
	uniform := true
	for _, s := range loraShortNames {
		in := perLayer[0][s]
		for _, pl := range perLayer[1:] {
			if pl[s] != in {
				uniform = false
			}
		}
		if in {
			targets = append(targets, s)
		}
	}
	if !uniform {
		targets = targets[:0]
		for _, m := range ms {
			targets = append(targets, m.Name)
		}
	}
	tm, err := json.Marshal(targets)
	if err != nil {
		return nil, err
	}
	pc := PEFTConfig{PeftType: "LORA", TaskType: "CAUSAL_LM", BaseModel: base, R: l.Rank, LoraAlpha: l.Alpha,
		LoraDropout: l.Dropout, TargetModules: tm, Bias: "none", InferenceMode: true,
		ModulesToSave: json.RawMessage("null")}
	return json.MarshalIndent(pc, "", "  ")
}

// ParsePEFTConfig reads an adapter_config.json: the LoRA config (Seed 0) and the base model it
// names. Variants this package does not compute (DoRA, rsLoRA, biases, per-layer rank or alpha
// patterns, regex target_modules, modules_to_save) are errors, not silently ignored.
func ParsePEFTConfig(data []byte) (LoRA, string, error) {
	var pc PEFTConfig
	if err := json.Unmarshal(data, &pc); err != nil {
		return LoRA{}, "", fmt.Errorf("model: adapter config: %w", err)
	}
	null := func(r json.RawMessage) bool {
		s := strings.TrimSpace(string(r))
		return s == "" || s == "null" || s == "{}" || s == "[]"
	}
	switch {
	case pc.PeftType != "LORA":
		return LoRA{}, "", fmt.Errorf("model: adapter config: peft_type=%q: only LORA is supported", pc.PeftType)
	case pc.UseDoRA || pc.UseRSLoRA:
		return LoRA{}, "", fmt.Errorf("model: adapter config: use_dora/use_rslora=true is not supported")
	case pc.Bias != "" && pc.Bias != "none":
		return LoRA{}, "", fmt.Errorf("model: adapter config: bias=%q: only \"none\" is supported", pc.Bias)
	case pc.FanInFanOut:
		return LoRA{}, "", fmt.Errorf("model: adapter config: fan_in_fan_out=true is not supported")
	case !null(pc.ModulesToSave) || !null(pc.LayersToTrans) || !null(pc.RankPattern) || !null(pc.AlphaPattern):
		return LoRA{}, "", fmt.Errorf("model: adapter config: modules_to_save, layers_to_transform, rank_pattern and alpha_pattern are not supported")
	case pc.R < 1 || !(pc.LoraAlpha > 0):
		return LoRA{}, "", fmt.Errorf("model: adapter config: r=%d lora_alpha=%g: want r >= 1 and lora_alpha > 0", pc.R, pc.LoraAlpha)
	}
	var targets []string
	if err := json.Unmarshal(pc.TargetModules, &targets); err != nil {
		return LoRA{}, "", fmt.Errorf("model: adapter config: target_modules must be a list of module names (a regex string is not supported): %w", err)
	}
	l := LoRA{Rank: pc.R, Alpha: pc.LoraAlpha, Dropout: pc.LoraDropout, Targets: targets}
	if len(targets) == 0 {
		return LoRA{}, "", fmt.Errorf("model: adapter config: target_modules is empty")
	}
	if err := l.Validate(); err != nil {
		return LoRA{}, "", fmt.Errorf("model: adapter config: %w", err)
	}
	return l, pc.BaseModel, nil
}

// SameAdapters reports whether a and b give adapters of the same shapes on the same modules of
// cfg with the same scale (dropout and seed may differ: they do not change a trained adapter's
// meaning).
func SameAdapters(cfg Config, a, b LoRA) bool {
	a, b = a.WithDefaults(), b.WithDefaults()
	if a.Rank != b.Rank || a.Scale() != b.Scale() {
		return false
	}
	ma, err1 := a.Modules(cfg)
	mb, err2 := b.Modules(cfg)
	return err1 == nil && err2 == nil && slices.Equal(ma, mb)
}
