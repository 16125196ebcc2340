package train

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"github.com/temperml/temper/activities/ckpt"
)

// Store objects a phase makes before its chunks (precomputed reference log-probs, teacher targets,
// pairs from a model): their keys derive from the run, the phase and InputHash of what they were made
// from, so a retried activity finds the object an earlier attempt wrote (ExistingObject) instead of
// making it again.

// PutObject writes body at key of the store root and returns its URI.
func PutObject(ctx context.Context, cl *ckpt.Client, root, key string, body []byte) (string, error) {
	uri, err := cl.PutObject(ctx, root, key, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("train: %w", err)
	}
	return uri, nil
}

// ExistingObject returns the URI of key when it already exists (an earlier attempt wrote it).
func ExistingObject(ctx context.Context, cl *ckpt.Client, root, key string) (string, bool, error) {
	uri, ok, err := cl.StatObject(ctx, root, key)
	if err != nil {
		return "", false, fmt.Errorf("train: %w", err)
	}
	return uri, ok, nil
}

// InputHash is a short hash of v's JSON: the part of an object's key that names what made it.
func InputHash(v any) string {
	b, _ := json.Marshal(v)
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:6])
}
