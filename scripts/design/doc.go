// Package design generates synthetic design preferences for vision critics (issue 43): layouts
// built from a few hidden design principles, pairs of a layout that follows them against one
// that breaks one, rendered by algorithms/layoutrender, and the rule-based score the principles
// define (never shown to a critic or a policy at train time; the held-out yardstick).
//
// Principles (Principles):
//   - alignment: the boxes of a column share their left edge, on a grid of GridStep units;
//   - overlap: boxes do not overlap, and keep a gap between them.
//
// A good layout is a column of 3–5 filled boxes (distinct colours) on the grid with gaps; its
// rejected twin breaks one principle: ragged left edges (each box shifted 10–18 units off the
// column, left or right), or one box moved up over its predecessor by 40–70% of its height.
// Label noise swaps chosen and rejected with a given probability (training data only).
//
// Everything is deterministic in the seed: the same call writes the same files.
//
// Imports: the standard library and algorithms (the renderer); os for writing the files.
package design
