// Package vision is Temper's image encoder in GoMLX: the vision tower of Hugging Face's SigLIP
// (transformers' SiglipVisionModel, modeling_siglip.py) — patch embedding, learned position
// embeddings, pre-norm encoder layers (LayerNorm, multi-head attention with biases, MLP),
// post_layernorm and the optional multi-head attention pooling head — with its configuration in
// visioncfg. Weights live in a GoMLX model.Store under a scope; Hugging Face tensor names map
// onto them (ToHF/FromHF, any prefix: vision_model. for SiglipVisionModel and SiglipModel
// checkpoints, vision_tower.vision_model. for PaliGemma-style ones), so a real checkpoint's tower
// loads. Outputs are checked against a PyTorch re-implementation of transformers (testdata,
// docs/vision.md).
//
// Graph functions (Encode, Patches, Pool) state shapes in their doc comments and panic on misuse,
// as GoMLX code does; host entry points (Encoder, the weight and name helpers, ReadHF) return
// errors and recover GoMLX panics at their boundary. Gradients flow through every op (training a
// critic on it); LoRA adapters attach to the encoder layers' linear modules.
//
// Loading goes through algorithms/safetensors and this package's own name mapping until the
// Hugging Face format is one package (docs/vision.md says what moves then).
//
// GoMLX, algorithms/imageproc (pixel shapes), algorithms/safetensors and the standard library only.
package vision
