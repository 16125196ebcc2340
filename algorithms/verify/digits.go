package verify

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
)

// DigitsParams configures "digits": an integer answer graded digit by digit.
type DigitsParams struct {
	// Answer is the reference integer ("62", "-118"); usually supplied per sample in the reference.
	Answer string `json:"answer"`
}

// NewDigits builds "digits": the first line of the completion must be the reference integer; partial
// credit is the fraction of digit positions, aligned from the units digit, that agree, over the
// longer of the two numbers (a sign counts as one more position when either is negative). "62" for
// 62 scores 1 and passes; "69" and "52" score 0.5; "620" scores 0 (every digit shifted); anything that
// is not an integer scores 0. It is the dense reward for arithmetic RL: a model that gets the units
// digit right is told so, where exact match says only "wrong" until every digit is right.
func NewDigits(params json.RawMessage) (Verifier, error) {
	var p DigitsParams
	if err := DecodeParams("digits", params, &p); err != nil {
		return nil, err
	}
	return Func(func(ctx context.Context, s Sample) (Verdict, error) {
		q := p
		if err := ApplyReference("digits", &q, s.Reference); err != nil {
			return Verdict{}, err
		}
		wantNeg, want, ok := splitInt(strings.TrimSpace(q.Answer))
		if !ok {
			return Verdict{}, fmt.Errorf("verify: digits: reference answer %q is not an integer", q.Answer)
		}
		line, _, _ := strings.Cut(s.Completion, "\n")
		gotNeg, got, ok := splitInt(strings.TrimSpace(line))
		if !ok {
			return fail("the first line is not an integer: write only the result"), nil
		}
		n := max(len(got), len(want))
		right := 0
		for i := 1; i <= min(len(got), len(want)); i++ {
			if got[len(got)-i] == want[len(want)-i] {
				right++
			}
		}
		if gotNeg || wantNeg {
			n++
			if gotNeg == wantNeg {
				right++
			}
		}
		if right == n && len(got) == len(want) {
			return pass(), nil
		}
		v := fail("%d of %d digits are right", right, n)
		v.Score = float64(right) / float64(n)
		v.Partial = map[string]float64{"digits": v.Score}
		return v, nil
	}), nil
}

// splitInt splits "-0123" into (true, "123"); leading zeros are dropped ("0" stays "0"). ok is false
// unless s is an optional '-' followed by 1..64 ASCII digits.
func splitInt(s string) (neg bool, digits string, ok bool) {
	if strings.HasPrefix(s, "-") {
		neg, s = true, s[1:]
	}
	if s == "" || len(s) > 64 {
		return false, "", false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false, "", false
		}
	}
	s = strings.TrimLeft(s, "0")
	if s == "" {
		return false, "0", true // -0 is 0
	}
	return neg, s, true
}
