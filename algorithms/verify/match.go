package verify

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Normalize says how text is compared by "exact" and "contains". The defaults are safe for short
// answers: case-insensitive, whitespace collapsed, surrounding punctuation and quotes trimmed;
// inner punctuation is kept so that "1.2" never equals "12".
type Normalize struct {
	CaseSensitive bool `json:"case_sensitive,omitempty"`
	// StripPunctuation removes all punctuation (SQuAD style).
	StripPunctuation bool `json:"strip_punctuation,omitempty"`
	// StripArticles removes the English articles a, an, the (SQuAD style).
	StripArticles bool `json:"strip_articles,omitempty"`
}

func (n Normalize) apply(s string) string {
	if !n.CaseSensitive {
		s = strings.ToLower(s)
	}
	if n.StripPunctuation {
		s = strings.Map(func(r rune) rune {
			if unicode.IsPunct(r) || unicode.IsSymbol(r) {
				return ' '
			}
			return r
		}, s)
	}
	words := strings.Fields(s)
	if n.StripArticles {
		kept := words[:0]
		for _, w := range words {
			if lw := strings.ToLower(w); lw != "a" && lw != "an" && lw != "the" {
				kept = append(kept, w)
			}
		}
		words = kept
	}
	s = strings.Join(words, " ")
	s = strings.TrimRightFunc(s, trimmable)
	// A leading sign or decimal point of a number stays: "-12" is not "12".
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		if !trimmable(r) || (r == '-' || r == '+' || r == '.') && len(s) > 1 && s[1] >= '0' && s[1] <= '9' {
			break
		}
		s = s[n:]
	}
	return s
}

func trimmable(r rune) bool { return unicode.IsPunct(r) || unicode.IsSpace(r) || r == '`' }

// MatchParams configures "exact" and "contains".
type MatchParams struct {
	// Answer is the reference; Answers lists alternatives (any one matches).
	Answer  Text   `json:"answer,omitempty"`
	Answers []Text `json:"answers,omitempty"`
	// Tag: when the completion has <tag>…</tag>, only its content is compared (all occurrences
	// must agree). Default "answer"; "-" compares the whole completion always.
	Tag       string    `json:"tag,omitempty"`
	Normalize Normalize `json:"normalize,omitempty"`
	// AnyPosition (contains only) accepts matches glued to letters or digits ("12" in "120");
	// by default a match must stand alone.
	AnyPosition bool `json:"any_position,omitempty"`
}

func (p *MatchParams) refs() []string {
	var out []string
	if s := string(p.Answer); strings.TrimSpace(s) != "" {
		out = append(out, s)
	}
	for _, a := range p.Answers {
		if strings.TrimSpace(string(a)) != "" {
			out = append(out, string(a))
		}
	}
	return out
}

type matchVerifier struct {
	name     string
	p        MatchParams
	contains bool
}

// NewExact builds "exact": the (tagged) answer equals a reference after normalisation.
func NewExact(params json.RawMessage) (Verifier, error) { return newMatch("exact", params, false) }

// NewContains builds "contains": the completion contains a reference as a stand-alone token
// sequence after normalisation. Beware: a model can list every option; prefer "exact" or
// "choice" when the answer space is small.
func NewContains(params json.RawMessage) (Verifier, error) {
	return newMatch("contains", params, true)
}

func newMatch(name string, params json.RawMessage, contains bool) (Verifier, error) {
	m := &matchVerifier{name: name, contains: contains}
	if err := DecodeParams(name, params, &m.p); err != nil {
		return nil, err
	}
	m.p.Tag = cmp.Or(m.p.Tag, "answer")
	if m.p.Tag != "-" && !validTagName(m.p.Tag) {
		return nil, fmt.Errorf("verify: %s params: tag=%q: want letters, digits, '_' or '-', or \"-\" for none", name, m.p.Tag)
	}
	if m.p.AnyPosition && !contains {
		return nil, fmt.Errorf("verify: %s params: any_position applies to contains only", name)
	}
	return m, nil
}

func (m *matchVerifier) Verify(ctx context.Context, s Sample) (Verdict, error) {
	p := m.p
	if err := ApplyReference(m.name, &p, s.Reference); err != nil {
		return Verdict{}, err
	}
	refs := p.refs()
	if len(refs) == 0 {
		return Verdict{}, fmt.Errorf("verify: %s: reference has no answer (set \"answer\" or \"answers\")", m.name)
	}
	text := s.Completion
	if p.Tag != "-" {
		tagged, err := tagContents(text, p.Tag)
		if err != nil {
			return fail("%v", err), nil
		}
		if len(tagged) > 0 {
			for _, t := range tagged[1:] {
				if p.Normalize.apply(t) != p.Normalize.apply(tagged[0]) {
					return fail("%d different <%s> answers; give exactly one", len(tagged), p.Tag), nil
				}
			}
			text = tagged[0]
		}
	}
	got := p.Normalize.apply(text)
	if got == "" {
		return fail("empty answer"), nil
	}
	for _, r := range refs {
		want := p.Normalize.apply(r)
		if want == "" {
			continue
		}
		if !m.contains && got == want {
			return pass(), nil
		}
		if m.contains && containsToken(got, want, p.AnyPosition) {
			return pass(), nil
		}
	}
	if m.contains {
		return fail("the expected answer is not in the output"), nil
	}
	return fail("answer %s is not correct", quote(got)), nil
}

// containsToken reports whether want occurs in got without letters or digits glued to either
// side (unless any is set).
func containsToken(got, want string, any bool) bool {
	for off := 0; off <= len(got)-len(want); {
		j := strings.Index(got[off:], want)
		if j < 0 {
			return false
		}
		j += off
		if any {
			return true
		}
		before := j == 0 || !isWordByte(got[j-1]) && !numberGlue(got, j-1, want[0], -1)
		after := j+len(want) == len(got) || !isWordByte(got[j+len(want)]) && !numberGlue(got, j+len(want), want[len(want)-1], 1)
		// A boundary only matters where want itself starts or ends with a word character.
		if (before || !isWordByte(want[0])) && (after || !isWordByte(want[len(want)-1])) {
			return true
		}
		off = j + 1
	}
	return false
}

func isWordByte(c byte) bool { return isAlnum(c) || c == '_' || c >= 0x80 }

// ChoiceParams configures "choice" (multiple-choice letter answers).
type ChoiceParams struct {
	// Answer is the correct letter ("B").
	Answer Text `json:"answer,omitempty"`
	// Choices lists the valid letters, default "ABCD".
	Choices string `json:"choices,omitempty"`
	// Tag names the answer tag, default "answer".
	Tag string `json:"tag,omitempty"`
}

type choiceVerifier struct{ p ChoiceParams }

// NewChoice builds "choice". The chosen letter is, in order: the content of <tag>…</tag> or
// \boxed{…} (which must be a single letter, optionally "(B)", "B." or "B) text"), the last
// "answer is B" / "Answer: (B)" phrase, or a completion that is just the letter. Letters must be
// upper-case outside tags (the article "a" is not an answer). Several different letters in the
// chosen source fail.
func NewChoice(params json.RawMessage) (Verifier, error) {
	c := &choiceVerifier{}
	if err := DecodeParams("choice", params, &c.p); err != nil {
		return nil, err
	}
	if err := c.p.validate(false); err != nil {
		return nil, err
	}
	return c, nil
}

func (p *ChoiceParams) validate(needAnswer bool) error {
	p.Choices = cmp.Or(p.Choices, "ABCD")
	p.Tag = cmp.Or(p.Tag, "answer")
	for _, r := range p.Choices {
		if r < 'A' || r > 'Z' {
			return fmt.Errorf("verify: choice params: choices=%q: want upper-case letters A-Z", p.Choices)
		}
	}
	if !validTagName(p.Tag) {
		return fmt.Errorf("verify: choice params: tag=%q: want letters, digits, '_' or '-'", p.Tag)
	}
	if needAnswer {
		a := strings.ToUpper(strings.TrimSpace(string(p.Answer)))
		if len(a) != 1 || !strings.Contains(p.Choices, a) {
			return fmt.Errorf("verify: choice: reference answer %q: want one of the letters %s", p.Answer, p.Choices)
		}
	}
	return nil
}

var (
	choiceAloneRE = regexp.MustCompile(`^\(?([A-Za-z])\)?(?:[.:)]|\s|$)`)
	choiceMoreRE  = regexp.MustCompile(`^\s*(?:(?i:or|and)|[,/&;])\s*\(?([A-Za-z])\)?(?:[\s.,;:)]|$)`)
	answerIsRE    = regexp.MustCompile(`(?i:answer)(?:\s+(?i:is))?\s*[:：]?\s*(?:\*\*)?\s*\(?([A-Z])\)?(?:\*\*)?(?:[\s.,;:!)]|$)`)
)

func (c *choiceVerifier) Verify(ctx context.Context, s Sample) (Verdict, error) {
	p := c.p
	if err := ApplyReference("choice", &p, s.Reference); err != nil {
		return Verdict{}, err
	}
	if err := p.validate(true); err != nil {
		return Verdict{}, err
	}
	want := strings.ToUpper(strings.TrimSpace(string(p.Answer)))
	got, fb := c.extract(s.Completion, p)
	if fb != "" {
		return fail("%s", fb), nil
	}
	if got == want {
		return pass(), nil
	}
	return fail("choice %s is not correct", got), nil
}

func (c *choiceVerifier) extract(text string, p ChoiceParams) (string, string) {
	if strings.TrimSpace(text) == "" {
		return "", "empty output; give the letter of your choice in <" + p.Tag + ">…</" + p.Tag + ">"
	}
	tagged, err := tagContents(text, p.Tag)
	if err != nil {
		return "", err.Error()
	}
	if len(tagged) == 0 {
		if b, err := boxedContents(text); err == nil {
			tagged = b
		}
	}
	if len(tagged) > 0 {
		letter := ""
		for _, t := range tagged {
			m := choiceAloneRE.FindStringSubmatch(strings.TrimSpace(t))
			if m == nil {
				return "", fmt.Sprintf("answer %s is not a single choice letter (%s)", quote(strings.TrimSpace(t)), p.Choices)
			}
			if second := choiceMoreRE.FindStringSubmatch(strings.TrimSpace(t)[len(m[0]):]); second != nil && !strings.EqualFold(second[1], m[1]) {
				return "", "several different choices given; give exactly one" // "B or C", "B, C"
			}
			l := strings.ToUpper(m[1])
			if letter != "" && l != letter {
				return "", "several different choices given; give exactly one"
			}
			letter = l
		}
		return c.valid(letter, p)
	}
	if ms := answerIsRE.FindAllStringSubmatch(text, -1); len(ms) > 0 {
		letter := ms[len(ms)-1][1]
		for _, m := range ms {
			if m[1] != letter && strings.Contains(p.Choices, m[1]) {
				return "", "several different choices given; give exactly one"
			}
		}
		return c.valid(letter, p)
	}
	if m := choiceAloneRE.FindStringSubmatch(strings.TrimSpace(text)); m != nil && len(strings.TrimSpace(text)) <= 4 {
		return c.valid(strings.ToUpper(m[1]), p)
	}
	return "", "no choice found; give the letter in <" + p.Tag + ">…</" + p.Tag + ">"
}

func (c *choiceVerifier) valid(letter string, p ChoiceParams) (string, string) {
	if !strings.Contains(p.Choices, letter) {
		return "", fmt.Sprintf("%s is not one of the choices %s", letter, p.Choices)
	}
	return letter, ""
}

// numberGlue reports whether got[i], next to a match whose edge character is edge, continues a
// number: "12" is not in "12.5", "-12", "12,000", "1/12" or "3.12".
func numberGlue(got string, i int, edge byte, dir int) bool {
	if edge < '0' || edge > '9' {
		return false
	}
	c := got[i]
	if dir < 0 && (c == '-' || c == '+') {
		return true
	}
	if c == '.' || c == ',' || c == '/' {
		k := i + dir
		return k >= 0 && k < len(got) && got[k] >= '0' && got[k] <= '9'
	}
	return false
}
