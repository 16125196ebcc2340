// Package tasks holds Temper's built-in synthetic tasks and the JSONL example format every dataset uses.
//
// A Task generates examples from a seeded RNG (same seed, same data) and checks a completion exactly, so
// evaluation and RL rewards need no labels. Built in: arithmetic (add/sub, mul, multi-step expressions;
// answers in a fixed format), split (n as any sum of two positive numbers: many valid answers, random
// demonstrations, with optional partial credit for RL) and an intent router (creator requests → engine and
// parameters as JSON) that mirrors a creative studio's router. A task may give partial credit
// (PartialCredit) that RL rewards use; exact match never does.
//
// Examples are JSON lines; ReadJSONL names file and line for every malformed line. The package is pure:
// callers open files.
package tasks
