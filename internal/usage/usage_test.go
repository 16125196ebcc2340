package usage

import (
	"errors"
	"fmt"
	"io/fs"
	"testing"
)

func TestIs(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", errors.New("disk full"), false},
		{"Errorf", Errorf("--n %d: want ≥ 1", 0), true},
		{"Wrap", Wrap(fs.ErrNotExist), true},
		{"wrapped further", fmt.Errorf("bench peak: %w", Errorf("--seconds=-2")), true},
	} {
		if got := Is(tc.err); got != tc.want {
			t.Errorf("%s: Is(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	if Wrap(nil) != nil {
		t.Error("Wrap(nil) is not nil")
	}
	err := Errorf("read %s: %w", "p.yaml", fs.ErrNotExist)
	if !errors.Is(err, fs.ErrNotExist) || err.Error() != "read p.yaml: file does not exist" {
		t.Errorf("Errorf lost its cause or message: %v", err)
	}
}
