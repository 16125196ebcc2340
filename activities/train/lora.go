package train

import (
	"fmt"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/algorithms/hf"
	"github.com/temperml/temper/algorithms/model"
)

// LoRA checkpoints. A phase configured with a model.LoRA trains low-rank adapters on a frozen
// base; each of its checkpoints holds
//
//	adapter_config.json        PEFT's LoraConfig; base_model_name_or_path = the base checkpoint's URI
//	adapter_model.safetensors  the adapters alone, PEFT names (base_model.model.<module>.lora_A.weight)
//	optimizer.safetensors      AdamW state of the adapters
//	state.json                 as for any checkpoint
//
// and never a copy of the base weights (nor config.json: the base's is read). Loading one is "base
// checkpoint + adapters": Load with LoadOptions.LoRA keeps them apart to go on training the
// adapters alone; without, it folds them into one plain model (every other role).
// Every chunk of the phase names the same base, so the base must outlive the phase's checkpoints:
// it must be another phase's committed checkpoint (never the LoRA phase's own step 0, which its
// Retain would delete); `temper lora merge` turns adapters into a standalone model directory.

// Adapters says an engine trains LoRA adapters on top of the plain checkpoint Base. An engine built
// with EngineOptions.LoRA trains only the adapters; its Caps().Adapters saves/loads them alone (PEFT
// adapter_model.safetensors), asked for once when it is loaded and kept here for the commit, while
// SaveWeights/LoadWeights still move the base weights and SaveOptimizer/LoadOptimizer the adapters'
// optimizer state.
type Adapters struct {
	LoRA model.LoRA
	Base string
	io   AdapterIO
}

// adapterIO is the adapters' capability of an engine built with EngineOptions.LoRA; what names the
// checkpoint in the error.
func adapterIO(eng Engine, what string) (AdapterIO, error) {
	if a := eng.Caps().Adapters; a != nil {
		return a, nil
	}
	return nil, fmt.Errorf("train: %s: the engine (%T) cannot hold LoRA adapters", what, eng)
}

// IsAdapterCheckpoint reports whether ck holds LoRA adapters rather than full weights.
func IsAdapterCheckpoint(ck *ckpt.Checkpoint) bool {
	_, ok := ck.Manifest.File(hf.AdapterConfigFile)
	return ok
}
