package ckpt

import (
	"context"
	"errors"
	"math"
	"reflect"
	"testing"
)

// TestMetricsLogIdempotent appends records as chunks and their retries do: a retried chunk's records
// replace the first attempt's, so the log keeps one record per kind and step, in step order.
func TestMetricsLogIdempotent(t *testing.T) {
	ctx := context.Background()
	c := New(Options{})
	root := "file://" + t.TempDir()
	if _, err := c.ReadMetrics(ctx, root, "r", "sft"); !errors.Is(err, ErrNotExist) {
		t.Fatalf("empty log: %v, want ErrNotExist", err)
	}
	rec := func(kind string, step int, loss float64) MetricsRecord {
		return MetricsRecord{Kind: kind, Step: step, Time: float64(step), Metrics: map[string]float64{"loss": loss}}
	}
	steps := []struct {
		name string
		recs []MetricsRecord
		want []MetricsRecord
	}{
		{"first chunk", []MetricsRecord{rec(RecordTrain, 1, 3), rec(RecordTrain, 2, 2.5)},
			[]MetricsRecord{rec(RecordTrain, 1, 3), rec(RecordTrain, 2, 2.5)}},
		{"its evaluation", []MetricsRecord{rec(RecordEval, 2, 2.7)},
			[]MetricsRecord{rec(RecordTrain, 1, 3), rec(RecordTrain, 2, 2.5), rec(RecordEval, 2, 2.7)}},
		{"retry of the first chunk", []MetricsRecord{rec(RecordTrain, 1, 3.1), rec(RecordTrain, 2, 2.4)},
			[]MetricsRecord{rec(RecordTrain, 1, 3.1), rec(RecordTrain, 2, 2.4), rec(RecordEval, 2, 2.7)}},
		{"non-finite step", []MetricsRecord{{Kind: RecordTrain, Step: 3, Time: 3, Metrics: map[string]float64{"loss": math.NaN(), "lr": 0.1}}},
			[]MetricsRecord{rec(RecordTrain, 1, 3.1), rec(RecordTrain, 2, 2.4), rec(RecordEval, 2, 2.7),
				{Kind: RecordTrain, Step: 3, Time: 3, Metrics: map[string]float64{"non_finite": 1, "lr": 0.1}}}},
	}
	for _, s := range steps {
		if err := c.AppendMetrics(ctx, root, "r", "sft", s.recs); err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		got, err := c.ReadMetrics(ctx, root, "r", "sft")
		if err != nil {
			t.Fatalf("%s: %v", s.name, err)
		}
		if !reflect.DeepEqual(got, s.want) {
			t.Fatalf("%s: log\n%+v\nwant\n%+v", s.name, got, s.want)
		}
	}
	if err := c.AppendMetrics(ctx, root, "r", "../x", []MetricsRecord{rec(RecordTrain, 1, 1)}); err == nil {
		t.Fatal("a phase name with a slash was accepted")
	}
}

// TestMetricsLogControl: control records (temper set, pause, gates) sit after their step's
// training and evaluation records in seq order; a retried write replaces the same seq and event,
// and a pipeline's record and a phase's with the same seq stay apart.
func TestMetricsLogControl(t *testing.T) {
	ctx := context.Background()
	c := New(Options{})
	root := "file://" + t.TempDir()
	ctl := func(step, seq int, event, label string) MetricsRecord {
		return MetricsRecord{Kind: RecordControl, Step: step, Time: float64(step), Seq: seq, Event: event, Label: label, Metrics: map[string]float64{}}
	}
	train := MetricsRecord{Kind: RecordTrain, Step: 2, Time: 2, Metrics: map[string]float64{"loss": 1}}
	writes := [][]MetricsRecord{
		{ctl(2, 2, "pause", "pause"), ctl(2, 1, "set", "set lr 1→2")},
		{train},
		{ctl(0, 1, "approve", "approve")},
		{ctl(2, 1, "set", "set lr 1→2 (retried)")},
	}
	for _, w := range writes {
		if err := c.AppendMetrics(ctx, root, "r", "grpo", w); err != nil {
			t.Fatal(err)
		}
	}
	got, err := c.ReadMetrics(ctx, root, "r", "grpo")
	if err != nil {
		t.Fatal(err)
	}
	want := []MetricsRecord{ctl(0, 1, "approve", "approve"), train, ctl(2, 1, "set", "set lr 1→2 (retried)"), ctl(2, 2, "pause", "pause")}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("log\n%+v\nwant\n%+v", got, want)
	}
}
