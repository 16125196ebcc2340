// Package control writes what people did to a running run into its phases' metrics logs: the
// "control" records (ckpt.RecordControl) of temper set, pause, resume, approve, reject and fork,
// which `temper report` draws as labelled markers on the curves. Workflows decide and number the
// records; this activity only appends them, idempotently (a retry replaces the same step, seq and
// event). It runs on the trainer queue.
package control
