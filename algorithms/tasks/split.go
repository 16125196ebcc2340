package tasks

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
)

// SplitSum asks for n as a sum of two positive integers: "split 57:" → "20+37". Any a+b with a, b ≥ 1
// and a + b = n passes, so checking is easy while a demonstration is one arbitrary choice among
// n−1: the demonstrations split n at a uniformly drawn point (both parts 1–2 digits, like add2's
// operands), so imitating them means learning to subtract, while a verifier-driven learner may
// find any rule that always works (place value: 57 → 50+7). It is the many-valid-answers case
// (countdown's) in its smallest form, for comparing RL with SFT on few demonstrations. It defines
// partial credit (Partial), which only a verifier-driven learner can use.
type SplitSum struct{}

func init() { register(SplitSum{}) }

// Name implements Task.
func (SplitSum) Name() string { return "split" }

// Doc implements Task.
func (SplitSum) Doc() string {
	return "split n (10-198) into a sum of two positive integers: \"split 57:\" → any a+b = 57 passes; demonstrations split at random"
}

// Example implements Task.
func (SplitSum) Example(rng *rand.Rand) Example {
	n := 10 + rng.IntN(189) // 10..198
	lo, hi := max(1, n-99), min(99, n-1)
	a := lo + rng.IntN(hi-lo+1)
	ans := fmt.Sprintf("%d+%d", a, n-a)
	return Example{Prompt: fmt.Sprintf("split %d:", n), Completion: ans, Answer: ans}
}

// splitTarget reads n from a "split n:" prompt.
func splitTarget(prompt string) (int64, bool) {
	s, ok := strings.CutPrefix(prompt, "split ")
	if !ok {
		return 0, false
	}
	s, ok = strings.CutSuffix(s, ":")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil && n >= 2
}

// positive parses a positive integer written without sign or leading zeros, at most 12 digits.
func positive(s string) (int64, bool) {
	if s == "" || len(s) > 12 || s[0] == '0' {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil
}

// Check implements Task: the first line must be a+b, two positive integers (no sign, no leading
// zeros) that sum to the prompt's n. The example's Answer is not needed.
func (SplitSum) Check(ex Example, completion string) (bool, string) {
	n, ok := splitTarget(ex.Prompt)
	if !ok {
		return false, fmt.Sprintf("the prompt %q is not \"split N:\"", truncate(ex.Prompt, 30))
	}
	got := FirstLine(completion)
	left, right, ok := strings.Cut(got, "+")
	if got == "" || !ok {
		return false, fmt.Sprintf("write two positive numbers joined by +, like %d+%d", n-1, 1)
	}
	a, okA := positive(left)
	b, okB := positive(right)
	if !okA || !okB {
		return false, fmt.Sprintf("%q: both parts must be positive integers without sign or leading zeros", truncate(got, 20))
	}
	if a+b != n {
		return false, fmt.Sprintf("%d+%d = %d, not %d", a, b, a+b, n)
	}
	return true, ""
}

// Partial implements PartialCredit: for a well-formed a+b whose sum s is not n, half a point
// times the fraction of digit places (right-aligned) where s and n agree, so 52 for 57 earns 0.25
// and 58 for 57 too; malformed answers earn 0.
func (SplitSum) Partial(ex Example, completion string) float64 {
	n, ok := splitTarget(ex.Prompt)
	if !ok {
		return 0
	}
	left, right, ok := strings.Cut(FirstLine(completion), "+")
	if !ok {
		return 0
	}
	a, okA := positive(left)
	b, okB := positive(right)
	if !okA || !okB || a+b == n {
		return 0 // a correct answer scores 1 through Check, not here
	}
	return placeCredit(strconv.FormatInt(a+b, 10), strconv.FormatInt(n, 10))
}

// placeCredit is half a point times the fraction of digit places, right-aligned, where two unsigned
// decimal numbers agree: the partial credit of the arithmetic tasks ("52" for "57": 0.25; "157" for
// "57": 2 of 3 places, 1/3).
func placeCredit(got, want string) float64 {
	places := max(len(got), len(want))
	if places == 0 {
		return 0
	}
	same := 0
	for i := 1; i <= min(len(got), len(want)); i++ {
		if got[len(got)-i] == want[len(want)-i] {
			same++
		}
	}
	return 0.5 * float64(same) / float64(places)
}
