// Package visioncfg is the configuration of Temper's SigLIP vision tower (algorithms/vision): the
// Config struct with validation and presets, Hugging Face config.json in and out
// (siglip_vision_model, or the vision_config of a siglip config), and the LoRA settings of the
// tower. It imports no GoMLX, so that workflows can carry and validate it.
//
// Fields transformers' configuration has and Temper does not implement are refused by name;
// bookkeeping fields are accepted and not used (docs/vision.md lists both).
package visioncfg
