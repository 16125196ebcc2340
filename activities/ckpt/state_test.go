package ckpt

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
)

func TestStateJSONRoundTripExact(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    State
	}{
		{"zero", State{}},
		{"resume fields at the edges", State{
			Step:          1<<62 + 3,
			Cursor:        Cursor{Epoch: 3, Index: 1<<53 + 1, Seed: math.MaxUint64},
			RNG:           RNG{Algorithm: "pcg", Words: Words{1<<63 + 1, math.MaxUint64, 0, 1<<53 + 1}, Bytes: []byte{0, 1, 2, 255}},
			PolicyVersion: 42,
			ConfigHash:    "sha256:0123abcd",
			Scalars: map[string]float64{
				"lr": 3e-4, "third": 1.0 / 3, "tiny": 5e-324, "big": math.MaxFloat64,
				"nan": math.NaN(), "inf": math.Inf(1), "-inf": math.Inf(-1), "negzero": math.Copysign(0, -1),
			},
			Extra: map[string]json.RawMessage{"sampler": json.RawMessage(`{"temperature":0.7}`)},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b1, err := json.Marshal(tc.s)
			if err != nil {
				t.Fatal(err)
			}
			var back State
			if err := json.Unmarshal(b1, &back); err != nil {
				t.Fatal(err)
			}
			b2, err := json.Marshal(back)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(b1, b2) {
				t.Fatalf("re-encoding differs:\n%s\n%s", b1, b2)
			}
			if back.Step != tc.s.Step || back.Cursor != tc.s.Cursor || back.PolicyVersion != tc.s.PolicyVersion ||
				back.ConfigHash != tc.s.ConfigHash || !reflect.DeepEqual(back.RNG.Words, tc.s.RNG.Words) ||
				!bytes.Equal(back.RNG.Bytes, tc.s.RNG.Bytes) {
				t.Fatalf("resume fields changed:\n got %+v\nwant %+v", back, tc.s)
			}
			for k, v := range tc.s.Scalars {
				if got := back.Scalars[k]; math.Float64bits(got) != math.Float64bits(v) && !(math.IsNaN(v) && math.IsNaN(got)) {
					t.Errorf("scalar %s = %v, want %v", k, got, v)
				}
			}
			// No uint64 may travel as a JSON number: generic decoders go through float64.
			var generic map[string]any
			if err := json.Unmarshal(b1, &generic); err != nil {
				t.Fatal(err)
			}
			if seed, ok := generic["cursor"].(map[string]any)["seed"].(string); !ok {
				t.Fatalf("seed encoded as %T, want string", generic["cursor"].(map[string]any)["seed"])
			} else if tc.s.Cursor.Seed == math.MaxUint64 && seed != "18446744073709551615" {
				t.Fatalf("seed = %s", seed)
			}
			t.Logf("%s", b1)
		})
	}
	// Words also accept exact integers written by other tools.
	var w Words
	if err := json.Unmarshal([]byte(`[18446744073709551615,"9007199254740993"]`), &w); err != nil || w[0] != math.MaxUint64 || w[1] != 1<<53+1 {
		t.Fatalf("Words = %v, %v", w, err)
	}
	if err := json.Unmarshal([]byte(`[1.5]`), &w); err == nil || !strings.Contains(err.Error(), "rng word 0") {
		t.Fatalf("non-integer word: %v", err)
	}
}
