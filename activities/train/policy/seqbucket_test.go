package policy

import "testing"

// TestSeqBucket: the padded lengths of a policy step's rows, two buckets an octave.
func TestSeqBucket(t *testing.T) {
	for _, c := range []struct{ n, want int }{
		{0, 8}, {1, 8}, {8, 8}, {9, 12}, {10, 12}, {12, 12}, {13, 16}, {16, 16}, {17, 24}, {24, 24},
		{25, 32}, {33, 48}, {48, 48}, {49, 64}, {100, 128}, {129, 192}, {200, 256},
	} {
		if got := SeqBucket(c.n); got != c.want {
			t.Errorf("SeqBucket(%d) = %d, want %d", c.n, got, c.want)
		}
	}
}
