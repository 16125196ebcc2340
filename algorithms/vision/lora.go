package vision

import (
	"fmt"
	"math"
	"math/rand/v2"

	. "github.com/gomlx/gomlx/core/graph" //nolint:revive // GoMLX graph code reads best unqualified.
	gm "github.com/gomlx/gomlx/ml/model"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/vision/visioncfg"
)

const loraParamKey = "temper_vision_lora"

// LoRAModule is one adapted linear module.
type LoRAModule struct {
	Layer   int
	Short   string // q_proj, k_proj, v_proj, out_proj, fc1, fc2
	In, Out int
}

// Name is the module's Hugging Face name under vision_model.
func (m LoRAModule) Name() string {
	part := "self_attn."
	if m.Short == "fc1" || m.Short == "fc2" {
		part = "mlp."
	}
	return fmt.Sprintf("encoder.layers.%d.%s%s", m.Layer, part, m.Short)
}

// PathA and PathB are the adapter variables: A [in, rank] and B [rank, out] (x·A·B, the
// transpose of PEFT's lora_A [rank, in] and lora_B [out, rank]).
func (m LoRAModule) PathA() string { return fmt.Sprintf("lora/layers/%d/%s/a", m.Layer, m.Short) }
func (m LoRAModule) PathB() string { return fmt.Sprintf("lora/layers/%d/%s/b", m.Layer, m.Short) }

// PEFTNames are the adapter tensors' names in a PEFT adapter_model.safetensors of a
// SiglipVisionModel.
func (m LoRAModule) PEFTNames() (a, b string) {
	base := "base_model.model." + PrefixVisionModel + m.Name()
	return base + ".lora_A.weight", base + ".lora_B.weight"
}

// LoRAModules lists the modules l adapts, layer by layer in q, k, v, out, fc1, fc2 order.
func LoRAModules(cfg visioncfg.Config, l visioncfg.LoRA) ([]LoRAModule, error) {
	l = l.WithDefaults()
	if err := l.Validate(); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	d, f := cfg.DModel, cfg.FFN
	var out []LoRAModule
	for layer := range cfg.Layers {
		for _, m := range []LoRAModule{{Short: "q_proj", In: d, Out: d}, {Short: "k_proj", In: d, Out: d},
			{Short: "v_proj", In: d, Out: d}, {Short: "out_proj", In: d, Out: d}, {Short: "fc1", In: d, Out: f},
			{Short: "fc2", In: f, Out: d}} {
			if l.Selects(m.Short) {
				m.Layer = layer
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// LoRAVariables lists the adapter variables of l.
func LoRAVariables(cfg visioncfg.Config, l visioncfg.LoRA) ([]model.VarSpec, error) {
	ms, err := LoRAModules(cfg, l)
	if err != nil {
		return nil, err
	}
	l = l.WithDefaults()
	out := make([]model.VarSpec, 0, 2*len(ms))
	for _, m := range ms {
		out = append(out, model.VarSpec{Path: m.PathA(), Shape: []int{m.In, l.Rank}}, model.VarSpec{Path: m.PathB(), Shape: []int{l.Rank, m.Out}})
	}
	return out, nil
}

type loraAttachment struct {
	lora visioncfg.LoRA
	mods map[string]bool // PathA of each adapted module
}

// AttachLoRA creates the adapter variables of l under scope — A ~ U(−1/√in, 1/√in) from seed
// (PEFT's kaiming-uniform bound), B = 0, so the tower computes exactly what it did — and makes
// every graph built from scope afterwards apply them.
func AttachLoRA(scope *gm.Scope, cfg visioncfg.Config, l visioncfg.LoRA, seed uint64) error {
	l = l.WithDefaults()
	ms, err := LoRAModules(cfg, l)
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(seed, 0x10a))
	w := map[string][]float32{}
	at := &loraAttachment{lora: l, mods: map[string]bool{}}
	for _, m := range ms {
		a := make([]float32, m.In*l.Rank)
		bound := 1 / math.Sqrt(float64(m.In))
		for i := range a {
			a[i] = float32((2*rng.Float64() - 1) * bound)
		}
		w[m.PathA()], w[m.PathB()] = a, make([]float32, l.Rank*m.Out)
		at.mods[m.PathA()] = true
	}
	vs, _ := LoRAVariables(cfg, l)
	if err := model.SetVariables(scope, "vision: attach lora", vs, w); err != nil {
		return err
	}
	scope.SetParam(loraParamKey, at)
	return nil
}

func attachedLoRA(scope *gm.Scope) *loraAttachment {
	return model.ScopeParam[loraAttachment](scope, loraParamKey)
}

// AttachedLoRA returns the adapters attached under scope (after defaults), if any.
func AttachedLoRA(scope *gm.Scope) (visioncfg.LoRA, bool) {
	at := attachedLoRA(scope)
	if at == nil {
		return visioncfg.LoRA{}, false
	}
	return at.lora, true
}

// DetachLoRA stops graphs built from scope from applying adapters and deletes their variables.
func DetachLoRA(scope *gm.Scope) error {
	if attachedLoRA(scope) == nil {
		return nil
	}
	return model.DetachAdapters(scope, loraParamKey, "vision: detach lora")
}

// ImportLoRA sets the attached adapters from w (adapter paths → data, every one exactly once).
func ImportLoRA(scope *gm.Scope, cfg visioncfg.Config, w map[string][]float32) error {
	at := attachedLoRA(scope)
	if at == nil {
		return fmt.Errorf("vision: import lora: no adapters attached")
	}
	vs, err := LoRAVariables(cfg, at.lora)
	if err != nil {
		return err
	}
	return model.SetVariables(scope, "vision: import lora", vs, w)
}

// ExportLoRA copies the attached adapters to host memory.
func ExportLoRA(scope *gm.Scope, cfg visioncfg.Config) (map[string][]float32, error) {
	at := attachedLoRA(scope)
	if at == nil {
		return nil, fmt.Errorf("vision: export lora: no adapters attached")
	}
	vs, err := LoRAVariables(cfg, at.lora)
	if err != nil {
		return nil, err
	}
	return model.GetVariables(scope, "vision: export lora", vs)
}

// loraMerged is W + (alpha/rank)·A·B for the adapted module (short, layer) of w [in, out], or nil
// when it is not adapted. The merged form is one full-width matmul per module: every image
// contributes patches² rows, so the explicit x·A·B would cost more.
func loraMerged(scope *gm.Scope, g *Graph, w *Node, short string, layer, in, out int) *Node {
	at := attachedLoRA(scope)
	if at == nil || layer < 0 {
		return nil
	}
	m := LoRAModule{Layer: layer, Short: short, In: in, Out: out}
	if !at.mods[m.PathA()] {
		return nil
	}
	a := param(scope, g, m.PathA(), in, at.lora.Rank)
	b := param(scope, g, m.PathB(), at.lora.Rank, out)
	return Add(w, Dot(MulScalar(a, at.lora.Scale()), b).Product())
}

// MergeLoRA folds adapters into base weights: W + (alpha/rank)·A·B for every adapted module.
func MergeLoRA(cfg visioncfg.Config, l visioncfg.LoRA, base, adapters map[string][]float32) (map[string][]float32, error) {
	ms, err := LoRAModules(cfg, l)
	if err != nil {
		return nil, err
	}
	l = l.WithDefaults()
	out := make(map[string][]float32, len(base))
	for k, v := range base {
		out[k] = append([]float32(nil), v...)
	}
	for _, m := range ms {
		wPath := at(map[string]string{"q_proj": VarQ, "k_proj": VarK, "v_proj": VarV, "out_proj": VarO,
			"fc1": VarFC1, "fc2": VarFC2}[m.Short], m.Layer)
		w, a, b := out[wPath], adapters[m.PathA()], adapters[m.PathB()]
		if len(w) != m.In*m.Out || len(a) != m.In*l.Rank || len(b) != l.Rank*m.Out {
			return nil, fmt.Errorf("vision: merge lora: %s: weight or adapters missing or mis-sized", m.Name())
		}
		s := float32(l.Scale())
		for i := range m.In {
			for j := range m.Out {
				var acc float32
				for r := range l.Rank {
					acc += a[i*l.Rank+r] * b[r*m.Out+j]
				}
				w[i*m.Out+j] += s * acc
			}
		}
	}
	return out, nil
}

// ToPEFT converts adapter weights to PEFT's tensors: lora_A [rank, in], lora_B [out, rank].
func ToPEFT(cfg visioncfg.Config, l visioncfg.LoRA, w map[string][]float32) (map[string][]float32, error) {
	ms, err := LoRAModules(cfg, l)
	if err != nil {
		return nil, err
	}
	r := l.WithDefaults().Rank
	out := map[string][]float32{}
	for _, m := range ms {
		a, b := w[m.PathA()], w[m.PathB()]
		if len(a) != m.In*r || len(b) != r*m.Out {
			return nil, fmt.Errorf("vision: to peft: %s: adapters missing or mis-sized", m.Name())
		}
		na, nb := m.PEFTNames()
		out[na], out[nb] = model.TransposeFlat(a, m.In, r), model.TransposeFlat(b, r, m.Out)
	}
	return out, nil
}
