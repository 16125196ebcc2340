package ckpt

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
)

// State is state.json: what a resumed run needs besides the weights. Every
// uint64 is written as a decimal string so that no JSON reader (jq, JS,
// Python's float path) can round it through float64; scalars may be NaN or ±Inf.
type State struct {
	Step          int64  `json:"step"`
	Cursor        Cursor `json:"cursor"`
	RNG           RNG    `json:"rng"`
	PolicyVersion int64  `json:"policy_version"`
	ConfigHash    string `json:"config_hash"`
	// Scalars holds free-form numbers (learning rate, loss EMA, KL coefficient...).
	Scalars map[string]float64 `json:"-"`
	// Extra holds any other JSON the caller wants to keep with the checkpoint.
	Extra map[string]json.RawMessage `json:"extra,omitempty"`
}

// Cursor is the position in the data stream.
type Cursor struct {
	Epoch int64  `json:"epoch"`
	Index int64  `json:"index"`
	Seed  uint64 `json:"seed,string"`
}

// RNG is opaque generator state: uint64 words (e.g. PCG's two), raw bytes
// (e.g. from encoding.BinaryMarshaler), or both.
type RNG struct {
	Algorithm string `json:"algorithm,omitempty"`
	Words     Words  `json:"words,omitempty"`
	Bytes     []byte `json:"bytes,omitempty"` // base64 in JSON
}

// Words are uint64s encoded as JSON strings; decoding also accepts exact
// JSON integers.
type Words []uint64

func (w Words) MarshalJSON() ([]byte, error) {
	out := make([]byte, 0, 2+len(w)*22)
	out = append(out, '[')
	for i, v := range w {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, '"')
		out = strconv.AppendUint(out, v, 10)
		out = append(out, '"')
	}
	return append(out, ']'), nil
}

func (w *Words) UnmarshalJSON(data []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	out := make(Words, len(raw))
	for i, r := range raw {
		s := string(r)
		if len(s) >= 2 && s[0] == '"' {
			s = s[1 : len(s)-1]
		}
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return fmt.Errorf("rng word %d: %w", i, err)
		}
		out[i] = v
	}
	*w = out
	return nil
}

// jsonFloat writes finite values as JSON numbers (shortest exact form) and
// NaN/±Inf as the strings "NaN", "+Inf", "-Inf".
type jsonFloat float64

func (f jsonFloat) MarshalJSON() ([]byte, error) {
	v := float64(f)
	switch {
	case math.IsNaN(v):
		return []byte(`"NaN"`), nil
	case math.IsInf(v, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(v, -1):
		return []byte(`"-Inf"`), nil
	}
	return strconv.AppendFloat(nil, v, 'g', -1, 64), nil
}

func (f *jsonFloat) UnmarshalJSON(data []byte) error {
	s := string(data)
	if len(s) >= 2 && s[0] == '"' {
		s = s[1 : len(s)-1]
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return err
	}
	*f = jsonFloat(v)
	return nil
}

type stateJSON struct {
	plainState
	Scalars map[string]jsonFloat `json:"scalars,omitempty"`
}

type plainState State // no methods: stops MarshalJSON recursion

func (s State) MarshalJSON() ([]byte, error) {
	out := stateJSON{plainState: plainState(s)}
	if len(s.Scalars) > 0 {
		out.Scalars = make(map[string]jsonFloat, len(s.Scalars))
		for k, v := range s.Scalars {
			out.Scalars[k] = jsonFloat(v)
		}
	}
	return json.Marshal(out)
}

func (s *State) UnmarshalJSON(data []byte) error {
	var in stateJSON
	if err := json.Unmarshal(data, &in); err != nil {
		return err
	}
	*s = State(in.plainState)
	if in.Scalars != nil {
		s.Scalars = make(map[string]float64, len(in.Scalars))
		for k, v := range in.Scalars {
			s.Scalars[k] = float64(v)
		}
	}
	return nil
}
