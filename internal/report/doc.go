// Package report reads what a Temper run did and is doing, from the Temporal server (its input,
// progress queries, histories, visibility) and from its store (metrics logs, checkpoints, rollouts),
// and renders it for people: the result and status of a run, the progress bar with its ETA, lists of
// runs, sample rollouts, the verdicts of `temper score`, and the report page (one self-contained HTML
// file with PNG plots beside it).
//
// It only reads: nothing here starts, changes or cancels a run. What is missing (a phase not started,
// a store without logs) becomes a note on the page rather than an error; a store that cannot be opened
// is a *StoreError. Text output is for people (metrics rounded to 4 significant digits); JSON output
// keeps every digit.
package report
