package ckpt

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path"
	"sort"
)

// The metrics log of a phase is runs/<run>/<phase>/metrics.jsonl: one JSON record per optimizer step
// (or RL iteration) and per evaluation, written by the activities that measure them, so that curves
// over a whole phase never pass through workflow history. A back-tracking branch has its own phase
// directory ("grpo.b1") and so its own log.
//
// Writes are idempotent under activity retries: a write replaces the records of the same kind and
// step (control records: and seq and event) and rewrites the whole object (atomically, like every
// Put), so a retried chunk leaves one record per step. Writers of one phase are sequential (the workflow waits on each trainer activity),
// which the read-modify-write relies on.

// MetricsLogName is the log's object name in its phase directory.
const MetricsLogName = "metrics.jsonl"

// Kinds of metrics records.
const (
	RecordTrain = "train" // an optimizer step, or an RL iteration's policy update
	RecordEval  = "eval"  // a held-out evaluation of the checkpoint of Step
	// RecordControl is a change someone made to the running phase (temper set, pause, resume, a gate's
	// decision, a fork), applied at the boundary after Step; Seq (with Event: a phase and its
	// pipeline number theirs apart) keeps several at one step apart, and Metrics holds the new
	// values of the fields it set.
	RecordControl = "control"
)

// MetricsRecord is one line of a metrics log. Metrics holds finite values only (JSON has no NaN);
// a step whose loss was not finite says so with non_finite: 1.
type MetricsRecord struct {
	Kind    string             `json:"kind"`
	Step    int                `json:"step"`
	Time    float64            `json:"time"` // wall clock when measured, Unix seconds
	Metrics map[string]float64 `json:"metrics"`
	// Control records only (RecordControl): their number, what happened (set, pause, resume,
	// approve, reject, gate, fork), a label for people (the marker on the curves) and a note.
	Seq   int    `json:"seq,omitempty"`
	Event string `json:"event,omitempty"`
	Label string `json:"label,omitempty"`
	Note  string `json:"note,omitempty"`
}

// MetricsLogKey is the log's key under a store root.
func MetricsLogKey(run, phase string) string { return path.Join("runs", run, phase, MetricsLogName) }

// AppendMetrics merges recs into run/phase's log: records of the same kind, step, seq and event are replaced.
func (c *Client) AppendMetrics(ctx context.Context, root, run, phase string, recs []MetricsRecord) error {
	if len(recs) == 0 {
		return nil
	}
	if err := validName("run", run); err != nil {
		return fmt.Errorf("ckpt: metrics log: %w", err)
	}
	if err := validName("phase", phase); err != nil {
		return fmt.Errorf("ckpt: metrics log: %w", err)
	}
	st, err := c.Store(ctx, root)
	if err != nil {
		return err
	}
	key := MetricsLogKey(run, phase)
	old, err := readMetrics(ctx, st, key)
	if err != nil && !errors.Is(err, ErrNotExist) {
		return err
	}
	type id struct {
		kind, event string
		step, seq   int
	}
	replaced := map[id]bool{}
	for _, r := range recs {
		replaced[id{r.Kind, r.Event, r.Step, r.Seq}] = true
	}
	var all []MetricsRecord
	for _, r := range old {
		if !replaced[id{r.Kind, r.Event, r.Step, r.Seq}] {
			all = append(all, r)
		}
	}
	for _, r := range recs {
		m := make(map[string]float64, len(r.Metrics))
		for k, v := range r.Metrics {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				m["non_finite"] = 1
				continue
			}
			m[k] = v
		}
		r.Metrics = m
		all = append(all, r)
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].Step != all[j].Step {
			return all[i].Step < all[j].Step
		}
		if all[i].Kind != all[j].Kind {
			return all[i].Kind > all[j].Kind // a step's training record, its evaluation, then what changed after it
		}
		return all[i].Seq < all[j].Seq
	})
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	for _, r := range all {
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("ckpt: metrics log %s: %w", st.URI(key), err)
		}
	}
	if _, err := st.Put(ctx, key, &buf); err != nil {
		return fmt.Errorf("ckpt: write %s: %w", st.URI(key), err)
	}
	return nil
}

// ReadMetrics returns run/phase's log in step order; the error wraps ErrNotExist when the phase has
// none (yet).
func (c *Client) ReadMetrics(ctx context.Context, root, run, phase string) ([]MetricsRecord, error) {
	st, err := c.Store(ctx, root)
	if err != nil {
		return nil, err
	}
	return readMetrics(ctx, st, MetricsLogKey(run, phase))
}

func readMetrics(ctx context.Context, st Store, key string) ([]MetricsRecord, error) {
	rc, err := st.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("ckpt: read %s: %w", st.URI(key), err)
	}
	defer rc.Close()
	var out []MetricsRecord
	sc := bufio.NewScanner(rc)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		var r MetricsRecord
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			return nil, fmt.Errorf("ckpt: %s line %d: %w", st.URI(key), line, err)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("ckpt: read %s: %w", st.URI(key), err)
	}
	return out, nil
}
