// Package objectivecfg holds the reward-model (BTConfig) and distillation (DistillConfig) objectives' configuration with their defaults
// and validation. It imports no GoMLX, so workflows can carry it; package objective builds the graph
// from the same type (an alias).
package objectivecfg
