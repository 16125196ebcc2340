// Package pipeline reads, checks and starts pipelines for the temper binary: Load and Parse read a
// YAML or JSON pipeline with --set overrides, decode it strictly, validate it and parse every local
// dataset it names, so that every error names its file, field and line before anything starts; Start
// starts it; Fork builds a new pipeline from a run's input, its phases' results and its retained
// checkpoints (`temper fork`), with the lineage recorded; Steer sends a running one a steering Update.
//
// What the user got wrong, or what a run refused, is a *usage.Error naming the file, flag, field or
// reason. Nothing here but Start and Steer talks to a server: Fork is given the parent's input,
// results and a lister of its checkpoints.
package pipeline
