// Package modelcfg is the model's configuration as data: the transformer's Config (families,
// presets, validation) and the LoRA adapter settings. It imports only the standard library so that
// workflows and activity contracts can carry and check a model config without linking GoMLX;
// package model defines its Config and LoRA on these structs and hangs the graph methods there.
package modelcfg
