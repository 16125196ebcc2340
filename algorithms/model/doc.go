// Package model is Temper's decoder-only transformer in GoMLX, for the Hugging Face families llama,
// gemma, gemma2, gemma3_text, qwen2, qwen3, mistral and phi3: config and presets, weights in a
// GoMLX model.Store (v0.28's replacement for context.Context) under a scope, Hugging Face names
// and config.json (both forms transformers writes; unimplemented fields refused by name),
// forward/hidden/value graphs, log-probs and losses, LoRA, and batched generation with a
// static-shape KV cache (sliding-window layers mask it). Each family's logits are checked against
// a PyTorch re-implementation of transformers (testdata/families, docs/model-families.md).
//
// Config.Attention and Config.Remat choose how graphs compute, not what: blocked attention (the
// compute fork's flash-style kernel, Go backend, used from BlockedAttentionMinSeq tokens by
// default) keeps self-attention's memory linear in the sequence and agrees with the [seq × seq]
// path to float32 rounding; remat recomputes each layer (or attention sub-block) in the backward
// pass with bit-identical results. The defaults leave the short sequences' graphs as they were.
//
// Graph functions (Forward, Hidden, Values, TokenLogProbs, …) state shapes in their doc comments
// and panic on misuse, as GoMLX code does; the host-side entry points (Generator, Generate, the
// weight and config helpers) return errors and recover GoMLX panics at their boundary.
// GoMLX and the standard library only.
package model
