package distill

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/temperml/temper/activities/ckpt"
	"github.com/temperml/temper/activities/train"
)

// writeTargets stores one JSONL line per example at key of the store root.
func writeTargets(ctx context.Context, cl *ckpt.Client, root, key string, lines []target) (string, error) {
	var buf bytes.Buffer
	je := json.NewEncoder(&buf)
	for i := range lines {
		if err := je.Encode(lines[i]); err != nil {
			return "", err
		}
	}
	return train.PutObject(ctx, cl, root, key, buf.Bytes())
}

// readTargets reads a targets object; a malformed line is a non-retryable error naming the line.
func readTargets(ctx context.Context, cl *ckpt.Client, uri string) ([]target, error) {
	b, err := train.ReadObject(ctx, cl, uri)
	if err != nil {
		return nil, err
	}
	var out []target
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 1<<20), 1<<30)
	for n := 1; sc.Scan(); n++ {
		var t target
		if err := json.Unmarshal(sc.Bytes(), &t); err != nil {
			return nil, train.BadInput(fmt.Errorf("train: distill targets %s:%d: %w", uri, n, err))
		}
		if len(t.IDs) != len(t.LP) {
			return nil, train.BadInput(fmt.Errorf("train: distill targets %s:%d: %d id lists but %d log-prob lists", uri, n, len(t.IDs), len(t.LP)))
		}
		out = append(out, t)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("train: distill targets %s: %w", uri, err)
	}
	return out, nil
}
