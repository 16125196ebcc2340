package train

import (
	"errors"
	"fmt"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/temperml/temper/algorithms/model"
)

// TestPermanent: a request longer than the model's context, however deeply wrapped, becomes a
// non-retryable InvalidInput error that keeps its message; other errors pass unchanged.
func TestPermanent(t *testing.T) {
	long := fmt.Errorf("train: evaluate x: episodes: tpu: generate: %w", fmt.Errorf("prompt 470 + max_new_tokens 64 exceeds max_seq 512: %w", model.ErrTooLong))
	err := Permanent(long)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() || app.Type() != "InvalidInput" || app.Message() != long.Error() {
		t.Fatalf("Permanent(too long) = %v (%T)", err, err)
	}
	other := errors.New("store: read: connection reset")
	if Permanent(other) != other || Permanent(nil) != nil {
		t.Fatal("Permanent changed a retryable error")
	}
}
