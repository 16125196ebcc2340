package verify

import (
	"fmt"
	"regexp"
	"strings"
)

// Extraction rules that cannot be gamed:
//   - every candidate final answer counts: two different \boxed answers, or a prose answer
//     hedged with "or maybe", fail;
//   - an explicit self-correction ("no, wait", "actually", "correction") or a "final answer is"
//     phrase picks the last candidate;
//   - boxes joined only by "and" or commas form one list answer (\boxed{1} and \boxed{2});
//   - digits glued to letters (AZYUK2A, x2) are never a number.

var (
	finalPhraseRE = regexp.MustCompile(`(?i)final\s+answer\s*(?:is\b|:|：)|the\s+answer\s+is\b\s*:?`)
	correctionRE  = regexp.MustCompile(`(?i)\bno[,.!]|\b(?:nope|wait|actually|oops|correction|scratch\s+that|i\s+mean|mistake|re-?check(?:ing)?|let\s+me\s+(?:re|check|fix|correct))\b`)
	negatedRE     = regexp.MustCompile(`(?i)(?:\bnot|n't|≠|\\neq?)\s*$`)
	mixedTailRE   = regexp.MustCompile(`^\d+\s*/\s*\d+$`)
	wholeRE       = regexp.MustCompile(`^[-+]?\d+$`)
	notRE         = regexp.MustCompile(`(?i)^\s*(?:not|n't)\b`)
	hedgeRE       = regexp.MustCompile(`(?i)\b(?:or|maybe|perhaps|possibly|either|alternatively|probably|might|could)\b`)
	gapNoiseRE    = regexp.MustCompile(`\\(?:text|mathrm|textnormal|mbox)\s*\{([^{}]*)\}|\\quad|\\qquad|\\[()\[\]]|\$|\\,|\\;|\\?"|[.,;:!()'\s]`)
	spanRE        = regexp.MustCompile(`\$\$([^$]{1,600}?)\$\$|\$((?:[^$\n\\]|\\.){1,600}?)\$|\\\(((?s:.){1,600}?)\\\)|\\\[((?s:.){1,600}?)\\\]`)
)

type span struct {
	start, end int
	content    string
}

// boxSpans returns every \boxed{…} / \fbox{…} with its position; the one-token form (\boxed 5)
// counts only when the token is not a word.
func boxSpans(text string) ([]span, error) {
	var out []span
	// Next known position of each command (absolute; -1: none left), searched again only once
	// passed, so a text full of one command costs linear time.
	nextBoxed, nextFbox := -2, -2
	find := func(pos *int, cmd string, from int) int {
		if *pos == -1 || *pos >= from {
			return *pos
		}
		if k := strings.Index(text[from:], cmd); k >= 0 {
			*pos = from + k
		} else {
			*pos = -1
		}
		return *pos
	}
	i := 0
	for i < len(text) {
		b, f := find(&nextBoxed, `\boxed`, i), find(&nextFbox, `\fbox`, i)
		j, n := b, len(`\boxed`)
		if j < 0 || (f >= 0 && f < j) {
			j, n = f, len(`\fbox`)
		}
		if j < 0 {
			break
		}
		start := j
		p := start + n
		for p < len(text) && text[p] == ' ' {
			p++
		}
		if p >= len(text) || text[p] != '{' {
			q := p
			for q < len(text) && !strings.ContainsRune(" \n\t$,", rune(text[q])) {
				q++
			}
			tok := strings.TrimRight(text[p:q], ".")
			if tok != "" && !(len(tok) > 1 && isLetterAt(tok, 0) && isLetterAt(tok, 1)) {
				out = append(out, span{start, q, tok})
			}
			i = max(q, start+n)
			continue
		}
		depth, end := 0, -1
		for q := p; q < len(text) && end < 0; q++ {
			switch text[q] {
			case '\\':
				q++
			case '{':
				depth++
			case '}':
				depth--
				if depth == 0 {
					end = q
				}
			}
		}
		if end < 0 {
			return nil, fmt.Errorf(`unbalanced braces in \boxed{…}`)
		}
		if strings.TrimSpace(text[p+1:end]) != "" {
			out = append(out, span{start, end + 1, text[p+1 : end]})
		}
		i = end + 1
	}
	return out, nil
}

// explicitAnswer finds the answer declared by \boxed or a "final answer is" phrase. ok is false
// when the text declares none.
func explicitAnswer(text string, p MathParams) (ans, fb string, ok bool) {
	boxes, err := boxSpans(text)
	if err != nil {
		return "", err.Error(), true
	}
	var phrases [][]int
	if !p.Strict {
		for _, ph := range finalPhraseRE.FindAllStringIndex(text, -1) {
			if !notRE.MatchString(text[ph[1]:min(len(text), ph[1]+12)]) { // "the answer is not 5"
				phrases = append(phrases, ph)
			}
		}
	}
	if len(phrases) > 0 {
		last := phrases[len(phrases)-1][1]
		var after []span
		for _, b := range boxes {
			if b.start >= last {
				after = append(after, b)
			}
		}
		if len(after) > 0 {
			a, fb := groupSpans(text, after, p)
			return a, fb, true
		}
		if a, fb := phraseAnswer(text[last:], p); a != "" || fb != "" {
			return a, fb, true
		}
	}
	if len(boxes) == 0 {
		return "", "", false
	}
	// A self-correction between two boxes supersedes everything before it.
	for k := len(boxes) - 1; k >= 1; k-- {
		if gap := text[boxes[k-1].end:boxes[k].start]; correctionRE.MatchString(gap) && !hedgeRE.MatchString(gap) {
			boxes = boxes[k:]
			break
		}
	}
	a, fb := groupSpans(text, boxes, p)
	return a, fb, true
}

// groupSpans joins runs of spans separated only by "and" or commas into one list answer
// (\boxed{1} and \boxed{2}); several runs must all give the same answer.
func groupSpans(text string, spans []span, p MathParams) (string, string) {
	var groups []string
	cur := []string{spans[0].content}
	for k := 1; k < len(spans); k++ {
		if listGap(text[spans[k-1].end:spans[k].start]) {
			cur = append(cur, spans[k].content)
			continue
		}
		groups = append(groups, strings.Join(cur, ", "))
		cur = []string{spans[k].content}
	}
	groups = append(groups, strings.Join(cur, ", "))
	if len(groups) == 1 {
		if same := len(spans) > 1 && allSame(spans); same {
			return spans[0].content, "" // \boxed{1}\boxed{1} says 1 twice
		}
		return groups[0], ""
	}
	return agree(groups, `\boxed answers`, p)
}

// listGap reports whether the text between two answers joins them into a list: only
// punctuation, spacing and at most a few words including "and", never a hedge.
func listGap(gap string) bool {
	if len(gap) > 60 || hedgeRE.MatchString(gap) || correctionRE.MatchString(gap) {
		return false
	}
	rest := strings.TrimSpace(gapNoiseRE.ReplaceAllString(gap, " $1 "))
	rest = strings.TrimSpace(gapNoiseRE.ReplaceAllString(rest, " "))
	if rest == "" {
		return true
	}
	words := strings.Fields(rest)
	hasAnd := false
	for _, w := range words {
		hasAnd = hasAnd || strings.EqualFold(w, "and")
	}
	return hasAnd && len(words) <= 5
}

// phraseAnswer reads the answer after "final answer is": the LaTeX spans of its sentence
// (joined like boxes), else the whole sentence when it parses, else its last number.
func phraseAnswer(rest string, p MathParams) (string, string) {
	line, _, _ := strings.Cut(rest, "\n")
	if k := strings.Index(line, "I hope"); k >= 0 {
		line = line[:k]
	}
	sentence := line
	for k := 0; k+1 < len(line); k++ {
		if line[k] == '.' && (line[k+1] == ' ' || line[k+1] == '<') && !insideSpan(line, k) {
			sentence = line[:k]
			break
		}
	}
	after := rest[len(sentence):]
	sentence = strings.TrimSpace(sentence)
	if sentence == "" {
		return "", ""
	}
	a, fb := sentenceAnswer(sentence, p)
	if a != "" && fb == "" {
		// "The answer is $5$, but it might be $6$.": a hedge right after the answer fails.
		if para, _, _ := strings.Cut(after, "\n\n"); len(para) > 0 {
			para = para[:min(len(para), 300)]
			for _, c := range proseCandidates(para) {
				if hedgeRE.MatchString(para[max(0, c.start-24):c.start]) {
					x, y := parseValue(a, false), parseValue(c.text, false)
					if x.key != y.key && !equalValues(y, x, p) {
						return "", fmt.Sprintf("two different answers (%s, %s); give exactly one final answer", quote(a), quote(c.text))
					}
				}
			}
		}
	}
	return a, fb
}

// sentenceAnswer reads the answer of the sentence after "final answer is".
func sentenceAnswer(sentence string, p MathParams) (string, string) {
	var spans []span
	for _, m := range spanRE.FindAllStringSubmatchIndex(sentence, -1) {
		for g := 2; g < len(m); g += 2 {
			if m[g] >= 0 {
				spans = append(spans, span{m[0], m[1], sentence[m[g]:m[g+1]]})
				break
			}
		}
	}
	if len(spans) > 0 && strings.TrimSpace(gapNoiseRE.ReplaceAllString(sentence[:spans[0].start], "")) == "" {
		return groupSpans(sentence, spans, p)
	}
	if v := parseValue(sentence, false); v.kind != vText {
		return sentence, ""
	}
	return proseAnswer(sentence, p)
}

// insideSpan reports whether position k of s lies inside a $…$ span.
func insideSpan(s string, k int) bool {
	return strings.Count(s[:k], "$")%2 == 1
}

// numberRE finds numbers in free text: -\frac{a}{b}, 1,234.5, 3/4, -2, .5, 6.02e23, 25%.
var numberRE = regexp.MustCompile(`-?\\[dtc]?frac\{[^{}]{1,40}\}\{[^{}]{1,40}\}|-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d{1,4})?(?:\s*/\s*\d+(?:\.\d+)?)?(?:\s?%)?|-?\.\d+`)

type candidate struct {
	start, end int
	text       string
}

// proseCandidates lists the LaTeX spans and stand-alone numbers of s, in order. A number glued
// to a letter before it (K2, x2) is part of a word; a '-' after a letter, digit or closing
// bracket is subtraction, not a sign.
func proseCandidates(s string) []candidate {
	var out []candidate
	spans := spanRE.FindAllStringSubmatchIndex(s, -1)
	prev := 0
	scan := func(from, to int) {
		for _, l := range numberRE.FindAllStringIndex(s[from:to], -1) {
			a, b := from+l[0], from+l[1]
			if len(out) > 0 && a < out[len(out)-1].end {
				continue // inside the token already taken
			}
			m := s[a:b]
			if m[0] == '-' && a > 0 {
				if c := s[a-1]; isAlnum(c) || c == ')' || c == '}' || c == ']' {
					m, a = m[1:], a+1
				}
			}
			first := a
			if s[first] == '-' {
				first++
			}
			if first > 0 && s[first-1] == '.' && first > 1 && digitAt(s, first-2) {
				continue
			}
			if negatedRE.MatchString(s[max(from, a-8):a]) {
				continue // "not 5" is not the answer 5
			}
			// The number may be part of a token written without spaces: 2x+1, x^2, f(2)=5,
			// AZYUK2A, 5cm. A token that parses is the candidate; a unit glued after the number
			// leaves the number; anything else glued to letters is not a number at all.
			ta, tb := tokenBounds(s, a, b, from, to)
			if ta == a && tb == b {
				// "11 6/6": a fraction right after a whole number reads with it as a mixed
				// number (valid or not), never on its own.
				if k := len(out) - 1; k >= 0 && mixedTailRE.MatchString(m) && out[k].end == a-1 && s[a-1] == ' ' && wholeRE.MatchString(out[k].text) {
					out[k] = candidate{out[k].start, b, s[out[k].start:b]}
					continue
				}
				out = append(out, candidate{a, b, m})
				continue
			}
			if tok := s[ta:tb]; ta == a && gluedUnit(s[b:tb]) {
				out = append(out, candidate{a, b, m})
			} else if !hasText(parseValue(tok, false)) {
				out = append(out, candidate{ta, tb, tok})
			}
		}
	}
	for _, m := range spans {
		scan(prev, m[0])
		for g := 2; g < len(m); g += 2 {
			if m[g] >= 0 {
				if c := strings.TrimSpace(s[m[g]:m[g+1]]); c != "" {
					out = append(out, candidate{m[0], m[1], c})
				}
				break
			}
		}
		prev = m[1]
	}
	scan(prev, len(s))
	return out
}

// proseAnswer takes the last candidate of the text's tail; a hedge between it and a different
// earlier candidate ("5, or maybe 6") fails.
func proseAnswer(text string, p MathParams) (string, string) {
	const tail = 4096
	s := text
	if len(s) > tail {
		cut := len(s) - tail
		for cut < len(s) && !utf8Start(s[cut]) {
			cut++
		}
		s = s[cut:]
	}
	cands := proseCandidates(s)
	if len(cands) == 0 {
		return "", ""
	}
	last := cands[len(cands)-1]
	if len(cands) >= 2 {
		prev := cands[len(cands)-2]
		gap := s[prev.end:last.start]
		if hedgeRE.MatchString(gap) && !correctionRE.MatchString(gap) {
			a, b := parseValue(prev.text, false), parseValue(last.text, false)
			if a.key != b.key && !equalValues(a, b, p) {
				return "", fmt.Sprintf("two different answers (%s, %s); give exactly one final answer", quote(prev.text), quote(last.text))
			}
		}
	}
	return last.text, ""
}

// tokenBounds extends [a, b) over the characters a formula is written with, up to spaces and
// sentence punctuation, within [from, to).
func tokenBounds(s string, a, b, from, to int) (int, int) {
	in := func(c byte) bool {
		return isAlnum(c) || strings.IndexByte("+-*/^()=._{}", c) >= 0
	}
	for a > from && in(s[a-1]) {
		a--
	}
	for b < to && in(s[b]) {
		b++
	}
	for b > a && strings.IndexByte(".,;:", s[b-1]) >= 0 {
		b-- // sentence punctuation
	}
	for a < b && s[a] == '(' && strings.Count(s[a:b], "(") > strings.Count(s[a:b], ")") {
		a++
	}
	for b > a && s[b-1] == ')' && strings.Count(s[a:b], ")") > strings.Count(s[a:b], "(") {
		b--
	}
	return a, b
}

// gluedUnits are units written straight after a number (5cm, 3rd): the number still counts.
var gluedUnits = map[string]bool{"m": true, "cm": true, "mm": true, "km": true, "kg": true, "g": true, "mg": true,
	"s": true, "ms": true, "h": true, "hr": true, "hrs": true, "min": true, "ml": true, "l": true, "ft": true,
	"mi": true, "mph": true, "kph": true, "lb": true, "lbs": true, "oz": true, "st": true, "nd": true, "rd": true,
	"th": true, "am": true, "pm": true, "k": true, "yd": true, "sec": true}

func gluedUnit(rest string) bool { return gluedUnits[strings.ToLower(rest)] }

func allSame(spans []span) bool {
	for _, sp := range spans[1:] {
		if strings.TrimSpace(sp.content) != strings.TrimSpace(spans[0].content) {
			return false
		}
	}
	return true
}
