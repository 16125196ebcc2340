package tasks

import (
	"strconv"
	"strings"
)

// Kinds of arithmetic mistakes MistakeKind recognises, in the order it tests them (the first that
// fits names the mistake).
const (
	MistakeSign     = "sign"      // the answer negated
	MistakeSwap     = "swap"      // two adjacent digits swapped
	MistakeNoCarry  = "no_carry"  // an addition's columns summed without carrying
	MistakeUnits    = "units"     // off by one (the units digit)
	MistakeCarry    = "carry"     // off by 10 or 100: a forgotten or spurious carry, or a digit off by one
	MistakeLength   = "length"    // a digit dropped or doubled (the length differs)
	MistakeOther    = "other"     // some other integer
	MistakeNotInt   = "not_int"   // the rejected completion is not an integer
	MistakeNotArith = "not_arith" // the example has no integer answer: not an arithmetic pair
)

// MistakeKinds lists the kinds MistakeKind returns, in a fixed order (for reports).
var MistakeKinds = []string{MistakeSign, MistakeSwap, MistakeNoCarry, MistakeUnits, MistakeCarry, MistakeLength,
	MistakeOther, MistakeNotInt, MistakeNotArith}

// MistakeKind classifies the rejected answer of an arithmetic preference pair against the correct
// answer, so that a reward model's pairwise accuracy can be reported per kind of mistake (a model
// that only checks the units digit catches "units" and "swap" but not "carry"). prompt is used for
// additions ("a+b="), whose carry-less column sum is its own kind.
func MistakeKind(prompt, answer, rejected string) string {
	want, err := strconv.ParseInt(strings.TrimSpace(answer), 10, 64)
	if err != nil {
		return MistakeNotArith
	}
	rej := FirstLine(rejected)
	got, err := strconv.ParseInt(rej, 10, 64)
	if err != nil {
		return MistakeNotInt
	}
	abs := func(v int64) int64 {
		if v < 0 {
			return -v
		}
		return v
	}
	ws, gs := strconv.FormatInt(abs(want), 10), strconv.FormatInt(abs(got), 10)
	switch {
	case got == want:
		return MistakeOther // not a mistake at all; callers' data is wrong, but classify, don't fail
	case want != 0 && got == -want:
		return MistakeSign
	case (got < 0) == (want < 0) && adjacentSwap(ws, gs):
		return MistakeSwap
	case noCarrySum(prompt) == got && got >= 0:
		return MistakeNoCarry
	case abs(got-want) == 1:
		return MistakeUnits
	case abs(got-want) == 10 || abs(got-want) == 100:
		return MistakeCarry
	case len(gs) != len(ws):
		return MistakeLength
	}
	return MistakeOther
}

// adjacentSwap reports whether b is a with two adjacent, different digits swapped.
func adjacentSwap(a, b string) bool {
	if len(a) != len(b) || a == b {
		return false
	}
	for i := 0; i+1 < len(a); i++ {
		if a[i] != b[i] {
			return a[i] != a[i+1] && a[i] == b[i+1] && a[i+1] == b[i] && a[i+2:] == b[i+2:]
		}
	}
	return false
}

// noCarrySum is the column sum without carries of a prompt "x+y=" with non-negative operands, or -1.
func noCarrySum(prompt string) int64 {
	l, r, ok := strings.Cut(strings.TrimSuffix(strings.TrimSpace(prompt), "="), "+")
	if !ok {
		return -1
	}
	x, e1 := strconv.ParseInt(l, 10, 64)
	y, e2 := strconv.ParseInt(r, 10, 64)
	if e1 != nil || e2 != nil || x < 0 || y < 0 {
		return -1
	}
	var m, p int64 = 0, 1
	for ; x > 0 || y > 0; x, y = x/10, y/10 {
		m += ((x%10 + y%10) % 10) * p
		p *= 10
	}
	return m
}
