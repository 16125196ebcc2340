package modelcfg

import (
	"fmt"
	"math"
	"path"
	"slices"
	"strings"
)

// LoRA configures low-rank adapters (Hu et al. 2021) on the decoder's linear projections. Each
// targeted Hugging Face module m (q_proj, k_proj, … of one layer) gets A_m [in, rank] and
// B_m [rank, out], and its output becomes x·W_m + (alpha/rank)·dropout(x)·A_m·B_m. B starts at zero,
// so a freshly attached model computes exactly what the base does. The model fuses q|k|v and
// gate|up into single matrices; adapters stay per module (a module's delta lands on its own
// output columns of the fused product), so they map one-to-one onto PEFT's lora_A/lora_B tensors.
//
// Dropout applies to the adapter input in training graphs only (see SetLoRATrainingStep): its
// mask is a pure function of (Seed, optimizer step, layer, module), so a recomputed step draws
// the same mask and training stays bit-reproducible.
type LoRA struct {
	Rank    int      `json:"rank,omitempty" default:"8" help:"adapter rank r"`
	Alpha   float64  `json:"alpha,omitempty" default:"2*rank" help:"scaling numerator: the adapter output is multiplied by alpha/rank"`
	Dropout float64  `json:"dropout,omitempty" default:"0" help:"dropout on the adapter input while training, in [0, 1)"`
	Targets []string `json:"targets,omitempty" default:"[all-linear]" help:"modules to adapt: q_proj k_proj v_proj o_proj gate_proj up_proj down_proj (Phi-3: qkv_proj gate_up_proj), groups attn.* mlp.* all-linear, a module-name suffix (self_attn.q_proj, model.layers.0.mlp.up_proj) or a glob on the full name (model.layers.1.*)"`
	Seed    uint64   `json:"seed,omitempty" help:"initialises A (Kaiming-uniform, as PEFT) and draws the dropout masks"`
}

// LoRA module short names, in the order modules are listed within a layer.
const (
	LoRAQ    = "q_proj"
	LoRAK    = "k_proj"
	LoRAV    = "v_proj"
	LoRAO    = "o_proj"
	LoRAGate = "gate_proj"
	LoRAUp   = "up_proj"
	LoRADown = "down_proj"
	// Phi-3 keeps q|k|v and gate|up fused in its checkpoints, so its adapters (and PEFT's) are on
	// the fused modules.
	LoRAQKV    = "qkv_proj"
	LoRAGateUp = "gate_up_proj"
)

var (
	loraShortNames = []string{LoRAQ, LoRAK, LoRAV, LoRAQKV, LoRAO, LoRAGate, LoRAUp, LoRAGateUp, LoRADown}
	loraGroups     = map[string][]string{
		"attn.*":     {LoRAQ, LoRAK, LoRAV, LoRAQKV, LoRAO},
		"mlp.*":      {LoRAGate, LoRAUp, LoRAGateUp, LoRADown},
		"all-linear": loraShortNames,
	}
)

// WithDefaults fills the zero fields: rank 8, alpha 2·rank, targets all-linear.
func (l LoRA) WithDefaults() LoRA {
	if l.Rank == 0 {
		l.Rank = 8
	}
	if l.Alpha == 0 {
		l.Alpha = 2 * float64(l.Rank)
	}
	if len(l.Targets) == 0 {
		l.Targets = []string{"all-linear"}
	}
	return l
}

// Scale is alpha/rank (after defaults).
func (l LoRA) Scale() float64 {
	l = l.WithDefaults()
	return l.Alpha / float64(l.Rank)
}

// Validate checks every field (after defaults) and names the first bad one with its allowed
// values. Whether each target matches a module of a given model is checked by Modules.
func (l LoRA) Validate() error {
	l = l.WithDefaults()
	switch {
	case l.Rank < 1 || l.Rank > 65536:
		return fmt.Errorf("model: lora rank=%d: want 1..65536", l.Rank)
	case !(l.Alpha > 0) || math.IsInf(l.Alpha, 0):
		return fmt.Errorf("model: lora alpha=%g: want a finite value > 0", l.Alpha)
	case !(l.Dropout >= 0 && l.Dropout < 1):
		return fmt.Errorf("model: lora dropout=%g: want 0 <= dropout < 1", l.Dropout)
	}
	for i, t := range l.Targets {
		if err := checkLoRATarget(t); err != nil {
			return fmt.Errorf("model: lora targets[%d]=%q: %w", i, t, err)
		}
	}
	return nil
}

func checkLoRATarget(t string) error {
	if _, ok := loraGroups[t]; ok {
		return nil
	}
	if t == "" {
		return fmt.Errorf("empty target")
	}
	if strings.ContainsAny(t, "*?[") {
		if _, err := path.Match(t, ""); err != nil {
			return fmt.Errorf("bad glob: %w", err)
		}
		return nil
	}
	last := t[strings.LastIndex(t, ".")+1:]
	if !slices.Contains(loraShortNames, last) {
		return fmt.Errorf("want a module name ending in one of %q, a group (attn.*, mlp.*, all-linear) or a glob on the full module name", loraShortNames)
	}
	return nil
}

// LoRAShortNames returns the module short names in layer order (a fresh slice).
func LoRAShortNames() []string { return slices.Clone(loraShortNames) }

// LoRAGroups returns the target groups (attn.*, mlp.*, all-linear) and their modules (a fresh map).
func LoRAGroups() map[string][]string {
	g := make(map[string][]string, len(loraGroups))
	for k, v := range loraGroups {
		g[k] = slices.Clone(v)
	}
	return g
}
