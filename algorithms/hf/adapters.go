package hf

import (
	"bufio"
	"fmt"
	"io"
	"slices"
	"sort"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/algorithms/safetensors"
)

// ReadAdapterConfig reads adapter_config.json: the adapters' config and the base model it names.
func ReadAdapterConfig(data []byte) (model.LoRA, string, error) {
	l, base, err := model.ParsePEFTConfig(data)
	if err != nil {
		return model.LoRA{}, "", badf("hf: %s: %w", AdapterConfigFile, err)
	}
	return l, base, nil
}

// AdapterConfigJSON is adapter_config.json for adapters l on cfg, naming base (a checkpoint URI or
// a model id) as base_model_name_or_path.
func AdapterConfigJSON(cfg model.Config, l model.LoRA, base string) ([]byte, error) {
	b, err := l.PEFTConfigJSON(cfg, base)
	if err != nil {
		return nil, badf("hf: %s: %w", AdapterConfigFile, err)
	}
	return append(b, '\n'), nil
}

// ReadAdapters reads a PEFT adapter_model.safetensors for adapters l on cfg into internal paths
// (model.LoRA.Variables): every tensor there with its shape and a float dtype, nothing else.
func ReadAdapters(r io.Reader, cfg model.Config, l model.LoRA) (map[string][]float32, error) {
	f, err := safetensors.Read(bufio.NewReader(r))
	if err != nil {
		return nil, badf("hf: %s: %w", AdapterWeightsFile, err)
	}
	want, err := l.PEFTShapes(cfg)
	if err != nil {
		return nil, fmt.Errorf("hf: %s: %w", AdapterWeightsFile, err)
	}
	peft := make(map[string][]float32, len(f.Tensors))
	for _, t := range f.Tensors {
		s, ok := want[t.Name]
		switch {
		case !ok:
			return nil, badf("hf: %s: tensor %q is not one of these adapters' (rank %d on %v)", AdapterWeightsFile, t.Name, l.Rank, l.Targets)
		case !slices.Equal(s, t.Shape):
			return nil, badf("hf: %s: tensor %q has shape %v, adapter_config.json implies %v", AdapterWeightsFile, t.Name, t.Shape, s)
		case !slices.Contains(FloatDTypes, t.DType):
			return nil, badf("hf: %s: tensor %q has dtype %s: supported %s", AdapterWeightsFile, t.Name, t.DType, dtypeList())
		}
		if peft[t.Name], err = t.ToFloat32(); err != nil {
			return nil, badf("hf: %s: %w", AdapterWeightsFile, err)
		}
	}
	internal, err := l.FromPEFT(cfg, peft)
	if err != nil {
		return nil, badf("hf: %s: %w", AdapterWeightsFile, err)
	}
	return internal, nil
}

// WriteAdapters writes adapters l on cfg (internal paths) as PEFT's adapter_model.safetensors
// (F32): "base_model.model.<module>.lora_A.weight" [rank, in] and "….lora_B.weight" [out, rank].
func WriteAdapters(w io.Writer, cfg model.Config, l model.LoRA, adapters map[string][]float32) error {
	peft, shapes, err := l.ToPEFT(cfg, adapters)
	if err != nil {
		return fmt.Errorf("hf: write %s: %w", AdapterWeightsFile, err)
	}
	specs := make([]safetensors.Spec, 0, len(peft))
	for n := range peft {
		specs = append(specs, safetensors.Spec{Name: n, DType: safetensors.F32, Shape: shapes[n]})
	}
	sort.Slice(specs, func(i, j int) bool { return specs[i].Name < specs[j].Name })
	return safetensors.WriteStream(w, specs, weightsMetadata, func(s safetensors.Spec, w io.Writer) error {
		return safetensors.EncodeFloat32(w, peft[s.Name], safetensors.F32)
	})
}
