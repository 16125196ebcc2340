// Package model is Temper's decoder-only transformer (Llama / Gemma / Qwen2 families) in GoMLX:
// config and presets, weights in a GoMLX model.Store (v0.28's replacement for context.Context)
// under a scope, Hugging Face names and config.json, forward/hidden/value graphs, log-probs and
// losses, and batched generation with a static-shape KV cache.
//
// Graph functions (Forward, Hidden, Values, TokenLogProbs, …) state shapes in their doc comments
// and panic on misuse, as GoMLX code does; the host-side entry points (Generator, Generate, the
// weight and config helpers) return errors and recover GoMLX panics at their boundary.
// GoMLX and the standard library only.
package model
