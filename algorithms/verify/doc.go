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
//     (4096) and nesting (64); regexps are RE2 (linear time); a composed verifier fails
//     completions over MaxCompletionBytes unread. Nothing panics on model output (fuzzed).
//   - Hedging fails: several different tagged, "####" or \boxed answers, or several different
//     choice letters, score 0.
//   - A Reference is a JSON object; each verifier reads the keys it knows (the same names as its
//     params, which they override) and ignores the others, so one reference serves a composition.
//
// Built-in verifiers (Builtins): math (numeric answers: integers, decimals, 1,000 separators,
// fractions, \frac/\dfrac, percentages, + - * / ^ expressions, with a relative tolerance), format
// (tags, sections, regexps), json (JSON Schema via santhosh-tekuri/jsonschema; external $refs are
// refused), layout (boxes on a canvas: bounds, overlaps, margins, gaps, alignment, reading order;
// partial credit), countdown, sudoku, exact, contains and choice. A Spec composes named
// verifiers with weights into a Composite whose score is the weighted mean.
//
// Pure: standard library and the JSON Schema library only; no os, net or exec.
package verify
