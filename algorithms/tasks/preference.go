package tasks

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// PrefExample is one line of a preference dataset. Two forms:
//   - paired (DPO, IPO, ORPO, SimPO, and KTO, which splits a pair into one desirable and one
//     undesirable example): {"prompt": "12+3=", "chosen": "15", "rejected": "16"}
//   - unpaired (KTO): {"prompt": "12+3=", "completion": "15", "label": true}
//
// Answer is the reference answer a task checker compares with (optional); Task names the built-in task.
type PrefExample struct {
	ID         string `json:"id,omitempty"`
	Task       string `json:"task,omitempty"`
	Prompt     string `json:"prompt"`
	Chosen     string `json:"chosen,omitempty"`
	Rejected   string `json:"rejected,omitempty"`
	Completion string `json:"completion,omitempty"`
	Label      *bool  `json:"label,omitempty"`
	Answer     string `json:"answer,omitempty"`
}

// Paired reports whether e is a (chosen, rejected) pair rather than a labelled completion.
func (e PrefExample) Paired() bool { return e.Chosen != "" || e.Rejected != "" }

// Desirable is the label of an unpaired example (false when absent).
func (e PrefExample) Desirable() bool { return e.Label != nil && *e.Label }

// Check returns an error for a line that is neither a complete pair nor a complete labelled completion.
func (e PrefExample) Check() error {
	paired := e.Paired()
	unpaired := e.Completion != "" || e.Label != nil
	switch {
	case e.Prompt == "":
		return errors.New(`"prompt" is required`)
	case paired && unpaired:
		return errors.New(`mixes the paired form ("chosen"/"rejected") and the unpaired form ("completion"/"label"); use one per line`)
	case paired && (e.Chosen == "" || e.Rejected == ""):
		return errors.New(`a pair needs both "chosen" and "rejected"`)
	case paired && e.Chosen == e.Rejected:
		return errors.New(`"chosen" equals "rejected"`)
	case !paired && !unpaired:
		return errors.New(`no "chosen"/"rejected" pair and no "completion"/"label"`)
	case !paired && e.Completion == "":
		return errors.New(`"label" without "completion"`)
	case !paired && e.Label == nil:
		return errors.New(`"completion" without "label" (true: desirable, false: undesirable)`)
	}
	return nil
}

// AsExample is the prompt/completion Example of e with the given completion (for encoding and checking).
func (e PrefExample) AsExample(completion string) Example {
	return Example{ID: e.ID, Task: e.Task, Prompt: e.Prompt, Completion: completion, Answer: e.Answer}
}

var prefFields = fieldNames(reflect.TypeOf(PrefExample{}))

// ReadPrefJSONL calls fn for every preference example of r in order. name labels errors. Blank lines are
// skipped; a malformed line stops the read with a *LineError naming file and line.
func ReadPrefJSONL(r io.Reader, name string, fn func(line int, ex PrefExample) error) error {
	return readLines(r, name, checkedLine[PrefExample](prefFields), fn)
}

// ReadPrefAll reads every preference example of r.
func ReadPrefAll(r io.Reader, name string) ([]PrefExample, error) {
	return readAll(r, name, checkedLine[PrefExample](prefFields))
}

// WritePrefJSONL writes one preference example per line.
func WritePrefJSONL(w io.Writer, exs []PrefExample) error {
	return writeLines(w, "preference example", exs)
}

// Mistaker is a task that can write a plausible wrong answer to one of its examples: the rejected
// completion of a synthetic preference pair.
type Mistaker interface {
	// Mistake returns a completion that Check rejects, drawn using only rng.
	Mistake(ex Example, rng *rand.Rand) string
}

// PrefPairs turns task examples into preference pairs: chosen is the reference completion, rejected a
// plausible mistake drawn from rng. The task must implement Mistaker.
func PrefPairs(t Task, exs []Example, rng *rand.Rand) ([]PrefExample, error) {
	m, ok := t.(Mistaker)
	if !ok {
		return nil, fmt.Errorf("tasks: %s cannot write wrong answers, so it has no synthetic preference pairs", t.Name())
	}
	out := make([]PrefExample, len(exs))
	for i, ex := range exs {
		out[i] = PrefExample{ID: ex.ID, Task: t.Name(), Prompt: ex.Prompt, Chosen: ex.Completion,
			Rejected: m.Mistake(ex, rng), Answer: ex.Answer}
	}
	return out, nil
}

// PrefSplit draws disjoint train and held-out preference pairs of t from seed: the prompts of
// Split(t, nTrain, nHeldout, seed) (so the held-out prompts are those an SFT phase with the same seed and
// sizes held out), each with its correct completion as chosen and a mistake as rejected.
func PrefSplit(t Task, nTrain, nHeldout int, seed uint64) (train, heldout []PrefExample, err error) {
	tr, he := Split(t, nTrain, nHeldout, seed)
	if train, err = PrefPairs(t, tr, NewRNG(seed, 2)); err != nil {
		return nil, nil, err
	}
	if heldout, err = PrefPairs(t, he, NewRNG(seed, 3)); err != nil {
		return nil, nil, err
	}
	return train, heldout, nil
}

// Unpair turns pairs into KTO's unpaired form, in order: each pair becomes its chosen completion
// (label true) followed by its rejected one (label false). Unpaired examples pass through.
func Unpair(exs []PrefExample) []PrefExample {
	yes, no := true, false
	out := make([]PrefExample, 0, 2*len(exs))
	for _, ex := range exs {
		if !ex.Paired() {
			out = append(out, ex)
			continue
		}
		d, u := ex, ex
		d.Chosen, d.Rejected, d.Completion, d.Label = "", "", ex.Chosen, &yes
		u.Chosen, u.Rejected, u.Completion, u.Label = "", "", ex.Rejected, &no
		if ex.ID != "" {
			d.ID, u.ID = ex.ID+"-d", ex.ID+"-u"
		}
		out = append(out, d, u)
	}
	return out
}

// PairUp turns examples into pairs for pairwise evaluation: pairs pass through; unpaired examples are
// grouped by prompt (in order of first appearance) and the first desirable completion of a prompt is
// paired with its first undesirable one. Prompts lacking either side are dropped.
func PairUp(exs []PrefExample) []PrefExample {
	type group struct {
		first       PrefExample
		good, bad   string
		hasG, hasB  bool
		isPairGroup bool
	}
	var order []string
	groups := map[string]*group{}
	var out []PrefExample
	for _, ex := range exs {
		if ex.Paired() {
			out = append(out, ex)
			continue
		}
		g := groups[ex.Prompt]
		if g == nil {
			g = &group{first: ex}
			groups[ex.Prompt] = g
			order = append(order, ex.Prompt)
		}
		if ex.Desirable() && !g.hasG {
			g.good, g.hasG = ex.Completion, true
		} else if !ex.Desirable() && !g.hasB {
			g.bad, g.hasB = ex.Completion, true
		}
	}
	for _, p := range order {
		g := groups[p]
		if g.hasG && g.hasB && g.good != g.bad {
			out = append(out, PrefExample{ID: g.first.ID, Task: g.first.Task, Prompt: p, Chosen: g.good, Rejected: g.bad, Answer: g.first.Answer})
		}
	}
	return out
}

// Mistake implements Mistaker: the answer with one of the slips people and small models make, chosen at
// random among those that apply: one digit off by one, a forgotten or spurious carry (±10, ±100), the
// digits of an addition summed without carrying, two adjacent digits swapped, a digit dropped or
// doubled, or the sign flipped. The result is always a well-formed integer different from the answer.
func (a Arithmetic) Mistake(ex Example, rng *rand.Rand) string {
	want, err := strconv.ParseInt(ex.Answer, 10, 64)
	if err != nil {
		return ex.Answer + "0" // not an integer answer: any change is wrong
	}
	var x, y int64
	isAdd := false
	if a.terms <= 2 && strings.Count(ex.Prompt, "+") == 1 {
		l, r, _ := strings.Cut(strings.TrimSuffix(ex.Prompt, "="), "+")
		xv, e1 := strconv.ParseInt(l, 10, 64)
		yv, e2 := strconv.ParseInt(r, 10, 64)
		x, y, isAdd = xv, yv, e1 == nil && e2 == nil && xv >= 0 && yv >= 0
	}
	neg := want < 0
	mag := want
	if neg {
		mag = -want
	}
	digits := []byte(strconv.FormatInt(mag, 10))
	signed := func(m int64) int64 {
		if neg {
			return -m
		}
		return m
	}
	fromDigits := func(d []byte) (int64, bool) {
		s := strings.TrimLeft(string(d), "0")
		if s == "" {
			s = "0"
		}
		v, err := strconv.ParseInt(s, 10, 64)
		return v, err == nil
	}
	for try := 0; try < 64; try++ {
		var got int64
		ok := true
		switch rng.IntN(7) {
		case 0: // one digit off by one (the units digit most often)
			d := append([]byte(nil), digits...)
			i := len(d) - 1
			if rng.IntN(2) == 0 {
				i = rng.IntN(len(d))
			}
			if d[i] == '9' || (d[i] != '0' && rng.IntN(2) == 0) {
				d[i]--
			} else {
				d[i]++
			}
			var m int64
			m, ok = fromDigits(d)
			got = signed(m)
		case 1: // forgotten or spurious carry
			step := int64(10)
			if mag >= 100 && rng.IntN(3) == 0 {
				step = 100
			}
			if rng.IntN(2) == 0 {
				step = -step
			}
			got = want + step
		case 2: // column sums without carrying
			if !isAdd {
				ok = false
				break
			}
			var m, p int64 = 0, 1
			for xx, yy := x, y; xx > 0 || yy > 0; xx, yy = xx/10, yy/10 {
				m += ((xx%10 + yy%10) % 10) * p
				p *= 10
			}
			got = m
		case 3: // adjacent digits swapped
			if len(digits) < 2 {
				ok = false
				break
			}
			d := append([]byte(nil), digits...)
			i := rng.IntN(len(d) - 1)
			d[i], d[i+1] = d[i+1], d[i]
			var m int64
			m, ok = fromDigits(d)
			got = signed(m)
		case 4: // a digit dropped
			if len(digits) < 2 {
				ok = false
				break
			}
			i := rng.IntN(len(digits))
			d := append(append([]byte(nil), digits[:i]...), digits[i+1:]...)
			var m int64
			m, ok = fromDigits(d)
			got = signed(m)
		case 5: // a digit doubled
			i := rng.IntN(len(digits))
			d := append(append(append([]byte(nil), digits[:i+1]...), digits[i]), digits[i+1:]...)
			var m int64
			m, ok = fromDigits(d)
			got = signed(m)
		default: // sign flipped (subtraction slips), else off by one
			if want != 0 && strings.ContainsAny(strings.TrimPrefix(ex.Prompt, "-"), "-") {
				got = -want
			} else {
				got = want + 1 - 2*int64(rng.IntN(2))
			}
		}
		if ok && got != want {
			return strconv.FormatInt(got, 10)
		}
	}
	return strconv.FormatInt(want+1, 10)
}

// Mistake implements Mistaker: the right call with one thing wrong: another engine, or one parameter
// changed (another subject, style, mood, format or title from the task's lists; a length 5 or 10 off).
func (Router) Mistake(ex Example, rng *rand.Rand) string {
	var call routeCall
	if err := json.Unmarshal([]byte(ex.Answer), &call); err != nil || call.Params == nil {
		return `{"engine":"image","params":{}}`
	}
	engines := []string{"image", "video", "audio", "layout"}
	lists := map[string][]string{"subject": subjects, "style": styles, "mood": moods, "format": formats, "title": titles}
	for try := 0; try < 64; try++ {
		c := routeCall{Engine: call.Engine, Params: map[string]any{}}
		var keys []string
		for k, v := range call.Params {
			c.Params[k] = v
			keys = append(keys, k)
		}
		sort.Strings(keys)
		if rng.IntN(3) == 0 {
			c.Engine = engines[rng.IntN(len(engines))]
		} else {
			k := keys[rng.IntN(len(keys))]
			switch v := c.Params[k].(type) {
			case float64:
				d := float64(5 * (1 + rng.IntN(2)))
				if rng.IntN(2) == 0 && v > d {
					d = -d
				}
				c.Params[k] = v + d
			case string:
				if l := lists[k]; len(l) > 0 {
					c.Params[k] = l[rng.IntN(len(l))]
				}
			}
		}
		b, _ := json.Marshal(c)
		if s := string(b); s != ex.Answer {
			return s
		}
	}
	return `{"engine":"none","params":{}}`
}
