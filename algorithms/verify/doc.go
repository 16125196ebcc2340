// Package verify turns completions into objective rewards: a Verifier reads a Sample (prompt,
// completion, task reference) and returns a Verdict (Score in [0,1], Pass, Feedback a model can
// read, Partial sub-scores).
//
// Contract:
//   - Verify(ctx, s) returns an error only when the sample cannot be judged (reference missing or
//     malformed, context cancelled); anything wrong with the completion is a failing Verdict.
//   - Feedback never reveals the reference answer: it is safe to append to a retry prompt.
//   - Parsers are bounded: expressions are evaluated exactly with math/big.Rat under caps on
//     length (512 B), literal digits (400), exponents (400), bits per numerator/denominator
//     (4096) and nesting (64; lists, tuples and relations 6); regexps are RE2 (linear time); a
//     composed verifier fails completions over MaxCompletionBytes unread. Nothing panics on
//     model output (fuzzed). The math verifier is deterministic: no clock, no map order, sample
//     points derived from symbol names.
//   - Hedging fails: several different tagged, "####" or \boxed answers, a prose answer hedged
//     with "or maybe", or several different choice letters, score 0. An explicit self-correction
//     ("no, wait", "actually") or a "final answer is" phrase picks the last answer instead.
//   - A Reference is a JSON object; each verifier reads the keys it knows (the same names as its
//     params, which they override) and ignores the others, so one reference serves a composition.
//
// The math verifier parses both the reference and the completion's final answer into a typed
// value: a number or expression (fractions, mixed numbers, percent, thousands groups, scientific
// notation, symbols, \sqrt, \pi, e, i, powers, functions; compared exactly over rationals, with
// the relative tolerance for constants, and at seeded sample points when symbols appear), an
// equation or inequality (sides and relation kept; equal up to a nonzero factor, positive for
// inequalities; "x = 5" and "x ≥ 2" with a constant side read as the value 5 and the interval
// [2, ∞)), a tuple or interval (brackets must match), a union of intervals, a list (ordered), a
// set (\{…\} or ±: unordered), a matrix, or normalised text that is never reduced to a number it
// contains. Digits glued to letters are never a number; \pm is two answers. Deliberate
// differences from the established graders are listed with reasons in peers_cases_test.go.
//
// Built-in verifiers (Builtins): math, format (tags, sections, regexps), json (JSON Schema via
// santhosh-tekuri/jsonschema; external $refs and duplicate keys are refused), layout (boxes on a
// canvas: bounds, overlaps, margins, gaps, alignment, reading order; partial credit), countdown,
// sudoku, digits, exact, contains and choice. A Spec composes named verifiers with weights into a
// Composite whose score is the weighted mean.
//
// Pure: standard library and the JSON Schema library only; no os, net or exec.
package verify
