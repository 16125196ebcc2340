package tokenize

import (
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normString is Hugging Face's NormalizedString: a piece of text as normalisers and
// pre-tokenizers have rewritten it, with, for every byte, the span of the input it came from
// (absolute byte offsets), so token offsets can be mapped back to the input. align is nil
// when nobody asked for offsets: every operation then only rewrites s, which keeps Encode
// as fast as a plain string pipeline.
type normString struct {
	s     string
	align [][2]int
	orig  int // where in the input this piece starts (HF's original_shift); tracked with align
}

func newNormString(s string, base int, track bool) normString {
	n := normString{s: s, orig: base}
	if !track {
		return n
	}
	n.align = make([][2]int, len(s))
	for i := 0; i < len(s); {
		_, size := utf8.DecodeRuneInString(s[i:])
		for k := 0; k < size; k++ {
			n.align[i+k] = [2]int{base + i, base + i + size}
		}
		i += size
	}
	return n
}

// change is one output character of a transformation and how it relates to the input
// characters (HF's (char, isize)): 0 replaces the next input character, +1 is inserted,
// -k replaces the next input character and removes k more.
type change struct {
	r   rune
	ch  int
	raw string // when set, written instead of r: an invalid UTF-8 byte kept as it is
}

// transformRange replaces the normalised bytes [start, end) by dest, skipping initialOffset
// input characters first, and assigns alignments exactly as HF's transform_range does.
func (n *normString) transformRange(start, end int, dest []change, initialOffset int) {
	var sb strings.Builder
	sb.Grow(end - start)
	if n.align == nil {
		for _, d := range dest {
			d.write(&sb)
		}
		n.s = n.s[:start] + sb.String() + n.s[end:]
		return
	}
	rest := n.s[start:end]
	pos := start
	skip := func() {
		if rest == "" {
			return
		}
		_, size := utf8.DecodeRuneInString(rest)
		rest = rest[size:]
		pos += size
	}
	for k := 0; k < initialOffset; k++ {
		skip()
	}
	al := make([][2]int, 0, end-start)
	for _, d := range dest {
		var a [2]int
		switch {
		case d.ch > 0 && pos < 1:
			a = [2]int{n.orig, n.orig}
		case d.ch > 0:
			a = n.align[pos-1]
		case pos < len(n.align):
			a = n.align[pos]
		default: // past the end: HF would index out of range; keep the last span
			a = n.align[len(n.align)-1]
		}
		if d.ch <= 0 {
			skip()
		}
		for k := 0; k < -d.ch; k++ {
			skip()
		}
		for k := d.write(&sb); k > 0; k-- {
			al = append(al, a)
		}
	}
	out := make([][2]int, 0, len(n.align)-(end-start)+len(al))
	out = append(append(append(out, n.align[:start]...), al...), n.align[end:]...)
	n.s = n.s[:start] + sb.String() + n.s[end:]
	n.align = out
}

func (d change) write(sb *strings.Builder) int {
	if d.raw != "" {
		sb.WriteString(d.raw)
		return len(d.raw)
	}
	n, _ := sb.WriteRune(d.r)
	return n
}

// runeChanges turns a per-character mapping into changes: each input character becomes
// its outputs, the first replacing it and the rest inserted.
func runeChanges(s string, f func(r rune, out []rune) []rune) []change {
	var ch []change
	var buf []rune
	for i, r := range s {
		if r == utf8.RuneError {
			if _, size := utf8.DecodeRuneInString(s[i:]); size == 1 {
				ch = append(ch, change{r: r, raw: s[i : i+1]})
				continue
			}
		}
		buf = f(r, buf[:0])
		for i, o := range buf {
			ch = append(ch, change{r: o, ch: min(i, 1)})
		}
		if len(buf) == 0 { // a removed character: fold it into the previous change
			if len(ch) > 0 {
				ch[len(ch)-1].ch--
			}
		}
	}
	return ch
}

// lowercase is Rust's char::to_lowercase applied to every character (no context rules).
func (n *normString) lowercase() {
	lower := func(r rune, out []rune) []rune {
		if r == 0x130 { // İ: the one unconditional multi-character lowercase mapping
			return append(out, 'i', 0x307)
		}
		return append(out, unicode.ToLower(r))
	}
	if n.align == nil {
		var sb strings.Builder
		sb.Grow(len(n.s))
		var buf []rune
		for i, r := range n.s {
			if r == utf8.RuneError {
				if _, size := utf8.DecodeRuneInString(n.s[i:]); size == 1 {
					sb.WriteByte(n.s[i])
					continue
				}
			}
			for _, o := range lower(r, buf[:0]) {
				sb.WriteRune(o)
			}
		}
		n.s = sb.String()
		return
	}
	n.transformRange(0, len(n.s), runeChanges(n.s, lower), 0)
}

// normalize applies NFC, NFD, NFKC or NFKD; with offsets it reproduces the alignment
// changes of the unicode-normalization-alignments crate HF uses.
func (n *normString) normalize(form norm.Form) {
	if form.IsNormalString(n.s) {
		return // HF's transformation is the identity here (all changes 0)
	}
	if n.align == nil {
		n.s = form.String(n.s)
		return
	}
	// Each run of valid UTF-8 separately: invalid bytes (which the reference never sees) stay.
	runs := validRuns(n.s)
	for i := len(runs) - 1; i >= 0; i-- {
		r := runs[i]
		seg := n.s[r[0]:r[1]]
		if form.IsNormalString(seg) {
			continue
		}
		compat := form == norm.NFKC || form == norm.NFKD
		ch := decomposeChanges(seg, compat)
		if form == norm.NFC || form == norm.NFKC {
			ch = recomposeChanges(ch)
		}
		n.transformRange(r[0], r[1], ch, 0)
	}
}

// validRuns lists the maximal runs of valid UTF-8 in s.
func validRuns(s string) [][2]int {
	var runs [][2]int
	start := 0
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			if start < i {
				runs = append(runs, [2]int{start, i})
			}
			start = i + 1
		}
		i += size
	}
	if start < len(s) {
		runs = append(runs, [2]int{start, len(s)})
	}
	return runs
}

func ccc(r rune) uint8 { return norm.NFD.PropertiesString(string(r)).CCC() }

// decomposeChanges is the crate's Decompositions iterator: full decomposition of every
// character, canonical reordering of each run of non-starters (stable, by class).
func decomposeChanges(s string, compat bool) []change {
	form := norm.NFD
	if compat {
		form = norm.NFKD
	}
	type item struct {
		class uint8
		c     change
	}
	var buf []item
	ready := 0
	sortPending := func() {
		p := buf[ready:]
		sort.SliceStable(p, func(i, j int) bool { return p[i].class < p[j].class })
		ready = len(buf)
	}
	for _, r := range s {
		for i, d := range form.String(string(r)) {
			cl := ccc(d)
			if cl == 0 {
				sortPending()
			}
			buf = append(buf, item{cl, change{r: d, ch: min(i, 1)}})
		}
	}
	sortPending()
	out := make([]change, len(buf))
	for i, it := range buf {
		out[i] = it.c
	}
	return out
}

// compose returns the primary composite of a and b, if any.
func compose(a, b rune) (rune, bool) {
	s := norm.NFC.String(string([]rune{a, b}))
	r, size := utf8.DecodeRuneInString(s)
	if size == len(s) && r != a {
		return r, true
	}
	return 0, false
}

// recomposeChanges is the crate's Recompositions iterator over decomposed changes.
func recomposeChanges(in []change) []change {
	var out, buffer []change
	var composee *change
	lastCCC := -1
	for _, c := range in {
		class := int(ccc(c.r))
		if composee == nil {
			if class != 0 {
				out = append(out, c)
				continue
			}
			cc := c
			composee = &cc
			continue
		}
		k := *composee
		if lastCCC < 0 {
			if r, ok := compose(k.r, c.r); ok {
				composee = &change{r: r, ch: k.ch + c.ch - 1}
				continue
			}
			if class == 0 {
				cc := c
				composee = &cc
				out = append(out, k)
				continue
			}
			buffer = append(buffer, c)
			lastCCC = class
			continue
		}
		if lastCCC >= class {
			if class == 0 {
				cc := c
				composee = &cc
				lastCCC = -1
				out = append(out, k)
				out = append(out, buffer...)
				buffer = buffer[:0]
				continue
			}
			buffer = append(buffer, c)
			lastCCC = class
			continue
		}
		if r, ok := compose(k.r, c.r); ok {
			composee = &change{r: r, ch: k.ch + c.ch - 1}
			continue
		}
		buffer = append(buffer, c)
		lastCCC = class
	}
	if composee != nil {
		out = append(out, *composee)
	}
	return append(out, buffer...)
}

// replace substitutes content for every match, as HF's NormalizedString::replace: the
// replacement characters all take the span of the match's last byte.
func (n *normString) replace(matches [][2]int, content string) {
	if len(matches) == 0 {
		return
	}
	var sb strings.Builder
	sb.Grow(len(n.s))
	var al [][2]int
	if n.align != nil {
		al = make([][2]int, 0, len(n.align))
	}
	last := 0
	for _, m := range matches {
		sb.WriteString(n.s[last:m[0]])
		if n.align != nil {
			al = append(al, n.align[last:m[0]]...)
			a := [2]int{n.orig, n.orig}
			if m[1] >= 1 {
				a = n.align[m[1]-1]
			}
			for k := 0; k < len(content); k++ {
				al = append(al, a)
			}
		}
		sb.WriteString(content)
		last = m[1]
	}
	sb.WriteString(n.s[last:])
	if n.align != nil {
		al = append(al, n.align[last:]...)
		n.align = al
	}
	n.s = sb.String()
}

// prepend inserts s before the first character, which shares its span.
func (n *normString) prepend(s string) {
	if n.s == "" {
		return
	}
	if n.align == nil {
		n.s = s + n.s
		return
	}
	first, size := utf8.DecodeRuneInString(n.s)
	var dest []change
	for i, r := range s {
		dest = append(dest, change{r: r, ch: min(i, 1)})
	}
	dest = append(dest, change{r: first, ch: 1, raw: n.s[:size]})
	n.transformRange(0, size, dest, 0)
}

// strip removes leading and/or trailing whitespace (Rust's char::is_whitespace).
func (n *normString) strip(left, right bool) {
	lead, trail := 0, 0
	if left {
		lead = runOf(n.s, unicode.IsSpace)
	}
	if right && lead < len(n.s) {
		for i := len(n.s); i > lead; {
			r, size := utf8.DecodeLastRuneInString(n.s[:i])
			if !unicode.IsSpace(r) {
				break
			}
			i -= size
			trail += size
		}
	}
	if lead == 0 && trail == 0 {
		return
	}
	if n.align == nil {
		n.s = n.s[lead : len(n.s)-trail]
		return
	}
	// HF rebuilds through transform; the kept characters keep their spans.
	end := len(n.s) - trail
	if lead >= end {
		n.s, n.align = "", nil
		n.align = [][2]int{}
		return
	}
	n.s = n.s[lead:end]
	n.align = n.align[lead:end]
}

// slice returns the normalised byte range [start, end) with its spans.
func (n *normString) slice(start, end int) normString {
	out := normString{s: n.s[start:end]}
	if n.align != nil {
		out.align = n.align[start:end]
		if start < end {
			out.orig = out.align[0][0]
		} else {
			out.orig = n.orig
		}
	}
	return out
}

// span maps the normalised byte range [start, end) to the input.
func (n *normString) span(start, end int) [2]int {
	if n.align == nil || start >= end || end > len(n.align) {
		return [2]int{n.orig + start, n.orig + end}
	}
	return [2]int{n.align[start][0], n.align[end-1][1]}
}

// splitBehavior is HF's SplitDelimiterBehavior.
type splitBehavior int

const (
	splitRemoved splitBehavior = iota
	splitIsolated
	splitMergedWithPrevious
	splitMergedWithNext
	splitContiguous
)

var splitBehaviors = map[string]splitBehavior{
	"Removed": splitRemoved, "Isolated": splitIsolated, "MergedWithPrevious": splitMergedWithPrevious,
	"MergedWithNext": splitMergedWithNext, "Contiguous": splitContiguous,
}

// segment is a piece of a string and whether a pattern matched it.
type segment struct {
	start, end int
	match      bool
}

// segmentsOf covers s with the matches and the gaps between them (HF's find_matches).
func segmentsOf(s string, matches [][2]int, invert bool) []segment {
	if s == "" {
		return []segment{{0, 0, invert}}
	}
	segs := make([]segment, 0, 2*len(matches)+1)
	prev := 0
	for _, m := range matches {
		if prev != m[0] {
			segs = append(segs, segment{prev, m[0], invert})
		}
		segs = append(segs, segment{m[0], m[1], !invert})
		prev = m[1]
	}
	if prev != len(s) {
		segs = append(segs, segment{prev, len(s), invert})
	}
	return segs
}

// charSegments is HF's Pattern for a char predicate: each matching character alone.
func charSegments(s string, pred func(rune) bool) []segment {
	if s == "" {
		return []segment{{0, 0, false}}
	}
	var segs []segment
	last := 0
	for i, r := range s {
		if pred(r) {
			size := utf8.RuneLen(r)
			if r == utf8.RuneError {
				_, size = utf8.DecodeRuneInString(s[i:])
			}
			if last < i {
				segs = append(segs, segment{last, i, false})
			}
			segs = append(segs, segment{i, i + size, true})
			last = i + size
		}
	}
	if last < len(s) {
		segs = append(segs, segment{last, len(s), false})
	}
	return segs
}

// splitBy applies a behaviour to segments and appends the non-empty pieces to out.
func (n *normString) splitBy(segs []segment, b splitBehavior, out []normString) []normString {
	type piece struct {
		start, end int
		remove     bool
	}
	var ps []piece
	switch b {
	case splitIsolated:
		ps = make([]piece, len(segs))
		for i, s := range segs {
			ps[i] = piece{s.start, s.end, false}
		}
	case splitRemoved:
		ps = make([]piece, len(segs))
		for i, s := range segs {
			ps[i] = piece{s.start, s.end, s.match}
		}
	case splitContiguous:
		prev := false
		for _, s := range segs {
			if s.match == prev && len(ps) > 0 {
				ps[len(ps)-1].end = s.end
			} else {
				ps = append(ps, piece{s.start, s.end, false})
			}
			prev = s.match
		}
	case splitMergedWithPrevious:
		prev := false
		for _, s := range segs {
			if s.match && !prev && len(ps) > 0 {
				ps[len(ps)-1].end = s.end
			} else {
				ps = append(ps, piece{s.start, s.end, false})
			}
			prev = s.match
		}
	case splitMergedWithNext:
		prev := false
		for i := len(segs) - 1; i >= 0; i-- {
			s := segs[i]
			if s.match && !prev && len(ps) > 0 {
				ps[len(ps)-1].start = s.start
			} else {
				ps = append(ps, piece{s.start, s.end, false})
			}
			prev = s.match
		}
		for i, j := 0, len(ps)-1; i < j; i, j = i+1, j-1 {
			ps[i], ps[j] = ps[j], ps[i]
		}
	}
	for _, p := range ps {
		if !p.remove && p.end > p.start {
			out = append(out, n.slice(p.start, p.end))
		}
	}
	return out
}
