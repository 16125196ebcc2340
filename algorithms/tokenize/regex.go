package tokenize

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// hfRegex is a backtracking matcher for the Oniguruma (Ruby syntax, UTF-8) patterns that
// tokenizer.json files hand to the Rust tokenizers' onig engine. Go's regexp lacks lookahead
// and Perl-style leftmost-first backtracking over alternations, which these patterns rely on
// (`\s+(?!\S)`), so the subset HF files use is implemented here with Oniguruma's meanings:
// \s is Unicode White_Space, \d is Nd, \w is letters/marks/Nd/Pc, \h is a hex digit, `.`
// excludes only \n, ^ and $ are line anchors, (?i) folds case by Unicode simple folding
// orbits, and `X{n,m}+` is a repeated interval (not possessive) as in Ruby syntax. Positions
// are byte offsets; an invalid UTF-8 byte is one character U+FFFD. Lookbehind, backreferences,
// conditionals and class intersections are refused at compile time.
type hfRegex struct {
	pattern string
	root    reNode
}

type reNode interface {
	// match tries to match at byte offset i of s and calls k with each possible end, in
	// preference order, until k returns true.
	match(s string, i int, k func(int) bool) bool
}

type reSeq []reNode

func (n reSeq) match(s string, i int, k func(int) bool) bool {
	if len(n) == 0 {
		return k(i)
	}
	return n[0].match(s, i, func(j int) bool { return n[1:].match(s, j, k) })
}

type reAlt []reNode

func (n reAlt) match(s string, i int, k func(int) bool) bool {
	for _, a := range n {
		if a.match(s, i, k) {
			return true
		}
	}
	return false
}

// reChar matches one character satisfying pred; lit is the character of a case-folded
// literal (0 otherwise), kept to refuse multi-character case folds.
type reChar struct {
	pred func(rune) bool
	lit  rune
}

func (n reChar) match(s string, i int, k func(int) bool) bool {
	if i >= len(s) {
		return false
	}
	r, size := utf8.DecodeRuneInString(s[i:])
	return n.pred(r) && k(i+size)
}

// reRepeat is a quantifier; max < 0 means unbounded.
type reRepeat struct {
	sub        reNode
	min, max   int
	lazy       bool
	possessive bool
}

func (n reRepeat) match(s string, i int, k func(int) bool) bool {
	if c, ok := n.sub.(reChar); ok { // one character at a time: iterate, no recursion
		ends := []int{i}
		for j := i; n.max < 0 || len(ends)-1 < n.max; {
			if j >= len(s) {
				break
			}
			r, size := utf8.DecodeRuneInString(s[j:])
			if !c.pred(r) {
				break
			}
			j += size
			ends = append(ends, j)
		}
		if len(ends)-1 < n.min {
			return false
		}
		if n.possessive {
			return k(ends[len(ends)-1])
		}
		if n.lazy {
			for c := n.min; c < len(ends); c++ {
				if k(ends[c]) {
					return true
				}
			}
			return false
		}
		for c := len(ends) - 1; c >= n.min; c-- {
			if k(ends[c]) {
				return true
			}
		}
		return false
	}
	if n.possessive {
		end := -1
		n.general(s, i, 0, func(j int) bool { end = j; return true })
		return end >= 0 && k(end)
	}
	return n.general(s, i, 0, k)
}

func (n reRepeat) general(s string, i, count int, k func(int) bool) bool {
	more := func() bool {
		if n.max >= 0 && count >= n.max {
			return false
		}
		return n.sub.match(s, i, func(j int) bool {
			if j == i && count >= n.min { // an empty iteration cannot help: stop looping
				return false
			}
			return n.general(s, j, count+1, k)
		})
	}
	if count < n.min {
		return more()
	}
	if n.lazy {
		return k(i) || more()
	}
	return more() || k(i)
}

type reLook struct {
	sub    reNode
	negate bool
}

func (n reLook) match(s string, i int, k func(int) bool) bool {
	found := n.sub.match(s, i, func(int) bool { return true })
	if found == n.negate {
		return false
	}
	return k(i)
}

type reAtomic struct{ sub reNode }

func (n reAtomic) match(s string, i int, k func(int) bool) bool {
	end := -1
	n.sub.match(s, i, func(j int) bool { end = j; return true })
	return end >= 0 && k(end)
}

// reAssert is a zero-width anchor.
type reAssert struct{ at func(s string, i int) bool }

func (n reAssert) match(s string, i int, k func(int) bool) bool { return n.at(s, i) && k(i) }

// find returns the leftmost match starting at or after from, as Oniguruma's search does.
func (re *hfRegex) find(s string, from int) (start, end int, ok bool) {
	for i := from; i <= len(s); {
		e := -1
		if re.root.match(s, i, func(j int) bool { e = j; return true }) {
			return i, e, true
		}
		if i == len(s) {
			break
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
	}
	return 0, 0, false
}

// findAll lists non-overlapping matches as the onig crate's find_iter does: an empty match
// right where the previous match ended is skipped by advancing one character.
func (re *hfRegex) findAll(s string) [][2]int {
	var out [][2]int
	lastEnd, lastMatchEnd := 0, -1
	for lastEnd <= len(s) {
		st, e, ok := re.find(s, lastEnd)
		if !ok {
			break
		}
		if st == e && lastMatchEnd == e {
			if lastEnd >= len(s) {
				break
			}
			_, size := utf8.DecodeRuneInString(s[lastEnd:])
			lastEnd += size
			continue
		}
		lastEnd, lastMatchEnd = e, e
		out = append(out, [2]int{st, e})
	}
	return out
}

// compileRegex parses an Oniguruma pattern.
func compileRegex(pattern string) (*hfRegex, error) {
	p := &reParser{src: pattern}
	n, err := p.alternation()
	if err == nil && p.pos < len(p.src) {
		err = p.errorf("unexpected %q", p.src[p.pos])
	}
	if err != nil {
		return nil, fmt.Errorf("regex %q: %w", pattern, err)
	}
	return &hfRegex{pattern: pattern, root: n}, nil
}

type reParser struct {
	src  string
	pos  int
	fold bool // (?i) in effect
}

func (p *reParser) errorf(format string, args ...any) error {
	return fmt.Errorf("at offset %d: %s (supported: literals, escapes, classes with \\p{..}, groups (?:) (?i:) (?=) (?!) (?>), quantifiers, ^ $ \\A \\z \\Z \\b \\B)",
		p.pos, fmt.Sprintf(format, args...))
}

func (p *reParser) more() bool { return p.pos < len(p.src) }

func (p *reParser) peek() rune {
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	return r
}

func (p *reParser) next() rune {
	r, n := utf8.DecodeRuneInString(p.src[p.pos:])
	p.pos += n
	return r
}

func (p *reParser) alternation() (reNode, error) {
	var alts reAlt
	for {
		seq, err := p.sequence()
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		if !p.more() || p.peek() != '|' {
			break
		}
		p.pos++
	}
	if len(alts) == 1 {
		return alts[0], nil
	}
	return alts, nil
}

func (p *reParser) sequence() (reNode, error) {
	var seq reSeq
	saved := p.fold
	defer func() { p.fold = saved }() // an inline (?i) lasts to the end of its group
	for p.more() && p.peek() != '|' && p.peek() != ')' {
		atom, err := p.atom()
		if err != nil {
			return nil, err
		}
		if atom == nil { // an inline option such as (?i)
			continue
		}
		if c, ok := atom.(reChar); ok && c.lit != 0 {
			if hasMultiFold(c.lit) {
				return nil, p.errorf("case-insensitive %q (a multi-character case fold) unsupported", c.lit)
			}
			if len(seq) > 0 {
				if prev, ok := seq[len(seq)-1].(reChar); ok && multiFoldTargets[[2]rune{prev.lit, c.lit}] {
					return nil, p.errorf("case-insensitive %q (which one character folds to) unsupported", string([]rune{prev.lit, c.lit}))
				}
			}
		}
		atom, err = p.quantifiers(atom)
		if err != nil {
			return nil, err
		}
		seq = append(seq, atom)
	}
	if len(seq) == 1 {
		return seq[0], nil
	}
	return seq, nil
}

func (p *reParser) quantifiers(atom reNode) (reNode, error) {
	for p.more() {
		min, max := 0, 0
		interval := false
		switch p.peek() {
		case '*':
			p.pos++
			min, max = 0, -1
		case '+':
			p.pos++
			min, max = 1, -1
		case '?':
			p.pos++
			min, max = 0, 1
		case '{':
			lo, hi, n, ok := parseInterval(p.src[p.pos:])
			if !ok {
				return atom, nil // a literal '{', as Oniguruma reads it
			}
			p.pos += n
			min, max, interval = lo, hi, true
		default:
			return atom, nil
		}
		rep := reRepeat{sub: atom, min: min, max: max}
		if p.more() && p.peek() == '?' {
			p.pos++
			rep.lazy = true
		} else if !interval && p.more() && p.peek() == '+' {
			p.pos++
			rep.possessive = true
		}
		atom = rep
	}
	return atom, nil
}

// parseInterval reads {n}, {n,}, {,m} or {n,m}.
func parseInterval(s string) (lo, hi, n int, ok bool) {
	end := strings.IndexByte(s, '}')
	if end < 0 {
		return 0, 0, 0, false
	}
	body := s[1:end]
	a, b, comma := strings.Cut(body, ",")
	num := func(t string, def int) (int, bool) {
		if t == "" {
			return def, true
		}
		v, err := strconv.Atoi(t)
		return v, err == nil && v >= 0 && v <= 100000 && !strings.ContainsAny(t, "+-")
	}
	if a == "" && (!comma || b == "") {
		return 0, 0, 0, false
	}
	lo, ok1 := num(a, 0)
	if !ok1 {
		return 0, 0, 0, false
	}
	if !comma {
		return lo, lo, end + 1, true
	}
	hi, ok2 := num(b, -1)
	if !ok2 || (hi >= 0 && hi < lo) {
		return 0, 0, 0, false
	}
	return lo, hi, end + 1, true
}

func (p *reParser) atom() (reNode, error) {
	c := p.next()
	switch c {
	case '(':
		return p.group()
	case '[':
		pred, err := p.class()
		if err != nil {
			return nil, err
		}
		return reChar{pred: pred}, nil
	case '.':
		return reChar{pred: func(r rune) bool { return r != '\n' }}, nil
	case '^':
		return reAssert{at: func(s string, i int) bool { return i == 0 || s[i-1] == '\n' }}, nil
	case '$':
		return reAssert{at: func(s string, i int) bool { return i == len(s) || s[i] == '\n' }}, nil
	case '\\':
		return p.escapeAtom()
	case '*', '+', '?':
		return nil, p.errorf("quantifier %q without operand", c)
	}
	return p.literal(c), nil
}

func (p *reParser) literal(c rune) reNode {
	if !p.fold {
		return reChar{pred: func(r rune) bool { return r == c }}
	}
	return reChar{pred: p.folded(func(r rune) bool { return r == c }), lit: unicode.ToLower(c)}
}

// hasMultiFold reports characters whose full case folding is several characters (ß -> ss,
// ﬁ -> fi, ...; CaseFolding.txt status F): Oniguruma matches them against character
// sequences under (?i), which this engine does not.
func hasMultiFold(r rune) bool {
	switch {
	case r == 0xDF, r == 0x130, r == 0x149, r == 0x1F0, r == 0x390, r == 0x3B0, r == 0x587,
		r >= 0x1E96 && r <= 0x1E9A, r == 0x1E9E, r >= 0x1F50 && r <= 0x1F56, r >= 0x1F80 && r <= 0x1FFC && r != 0x1FB8 && r != 0x1FB9,
		r >= 0xFB00 && r <= 0xFB06, r >= 0xFB13 && r <= 0xFB17:
		return true
	}
	return false
}

// multiFoldTargets are the ASCII pairs a single character folds to (ß, ﬀ, ﬁ, ﬂ, ﬅ/ﬆ).
var multiFoldTargets = map[[2]rune]bool{{'s', 's'}: true, {'f', 'f'}: true, {'f', 'i'}: true, {'f', 'l'}: true, {'s', 't'}: true}

// folded widens pred to every case variant when (?i) is in effect.
func (p *reParser) folded(pred func(rune) bool) func(rune) bool {
	if !p.fold {
		return pred
	}
	return func(r rune) bool {
		if pred(r) {
			return true
		}
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			if pred(f) {
				return true
			}
		}
		return false
	}
}

func (p *reParser) group() (reNode, error) {
	kind := ""
	if strings.HasPrefix(p.src[p.pos:], "?") {
		rest := p.src[p.pos+1:]
		switch {
		case strings.HasPrefix(rest, ":"), strings.HasPrefix(rest, "="), strings.HasPrefix(rest, "!"), strings.HasPrefix(rest, ">"):
			kind = rest[:1]
			p.pos += 2
		case strings.HasPrefix(rest, "#"):
			end := strings.IndexByte(rest, ')')
			if end < 0 {
				return nil, p.errorf("unterminated comment")
			}
			p.pos += end + 2
			return nil, nil
		case strings.HasPrefix(rest, "<=") || strings.HasPrefix(rest, "<!"):
			return nil, p.errorf("lookbehind unsupported")
		case strings.HasPrefix(rest, "<") || strings.HasPrefix(rest, "P<") || strings.HasPrefix(rest, "'"):
			end := strings.IndexAny(rest, ">'")
			if end < 0 {
				return nil, p.errorf("unterminated group name")
			}
			p.pos += end + 2
			kind = ":"
		default: // options: (?i) (?-i) (?i:...) (?-i:...)
			j := 0
			on := true
			fold := p.fold
			for j < len(rest) && rest[j] != ')' && rest[j] != ':' {
				switch rest[j] {
				case '-':
					on = false
				case 'i':
					fold = on
				case 'm', 'x':
					return nil, p.errorf("option %q unsupported", rest[j])
				default:
					return nil, p.errorf("group (?%c unsupported", rest[j])
				}
				j++
			}
			if j == len(rest) {
				return nil, p.errorf("unterminated group")
			}
			p.pos += 1 + j + 1
			if rest[j] == ')' {
				p.fold = fold
				return nil, nil
			}
			saved := p.fold
			p.fold = fold
			n, err := p.alternation()
			p.fold = saved
			if err != nil {
				return nil, err
			}
			return n, p.closeGroup()
		}
	}
	n, err := p.alternation()
	if err != nil {
		return nil, err
	}
	if err := p.closeGroup(); err != nil {
		return nil, err
	}
	switch kind {
	case "=":
		return reLook{sub: n}, nil
	case "!":
		return reLook{sub: n, negate: true}, nil
	case ">":
		return reAtomic{sub: n}, nil
	}
	return n, nil
}

func (p *reParser) closeGroup() error {
	if !p.more() || p.peek() != ')' {
		return p.errorf("missing )")
	}
	p.pos++
	return nil
}

func (p *reParser) escapeAtom() (reNode, error) {
	if !p.more() {
		return nil, p.errorf("trailing backslash")
	}
	c := p.peek()
	switch c {
	case 'A':
		p.pos++
		return reAssert{at: func(s string, i int) bool { return i == 0 }}, nil
	case 'z':
		p.pos++
		return reAssert{at: func(s string, i int) bool { return i == len(s) }}, nil
	case 'Z':
		p.pos++
		return reAssert{at: func(s string, i int) bool { return i == len(s) || i == len(s)-1 && s[i] == '\n' }}, nil
	case 'b', 'B':
		p.pos++
		want := c == 'b'
		return reAssert{at: func(s string, i int) bool { return atWordBoundary(s, i) == want }}, nil
	case 'G', 'K', 'R', 'X', 'g', 'k', 'y', 'Y':
		return nil, p.errorf("escape \\%c unsupported", c)
	}
	if c >= '1' && c <= '9' {
		return nil, p.errorf("backreference \\%c unsupported", c)
	}
	pred, err := p.escapeClass()
	if err != nil {
		return nil, err
	}
	return reChar{pred: p.folded(pred)}, nil
}

func atWordBoundary(s string, i int) bool {
	before, after := false, false
	if i > 0 {
		r, _ := utf8.DecodeLastRuneInString(s[:i])
		before = isWordChar(r)
	}
	if i < len(s) {
		r, _ := utf8.DecodeRuneInString(s[i:])
		after = isWordChar(r)
	}
	return before != after
}

// isWordChar is Oniguruma's Unicode \w: alphabetic, marks, decimal digits, connectors.
func isWordChar(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsMark(r) || unicode.Is(unicode.Nd, r) || unicode.Is(unicode.Pc, r) ||
		unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r)
}

func isHexDigit(r rune) bool { return r < 128 && isHex(byte(r)) }

// escapeClass reads the escape after a backslash (already consumed) as a one-character
// predicate: a shorthand class, a property or an escaped literal.
func (p *reParser) escapeClass() (func(rune) bool, error) {
	c := p.next()
	not := func(f func(rune) bool) func(rune) bool { return func(r rune) bool { return !f(r) } }
	switch c {
	case 's':
		return unicode.IsSpace, nil
	case 'S':
		return not(unicode.IsSpace), nil
	case 'd':
		return func(r rune) bool { return unicode.Is(unicode.Nd, r) }, nil
	case 'D':
		return func(r rune) bool { return !unicode.Is(unicode.Nd, r) }, nil
	case 'w':
		return isWordChar, nil
	case 'W':
		return not(isWordChar), nil
	case 'h':
		return isHexDigit, nil
	case 'H':
		return not(isHexDigit), nil
	case 'p', 'P':
		pred, err := p.property()
		if err != nil {
			return nil, err
		}
		if c == 'P' {
			return not(pred), nil
		}
		return pred, nil
	}
	r, err := p.escapedRune(c)
	if err != nil {
		return nil, err
	}
	return func(x rune) bool { return x == r }, nil
}

// escapedRune decodes a literal escape whose letter c has been consumed.
func (p *reParser) escapedRune(c rune) (rune, error) {
	switch c {
	case 't':
		return '\t', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 'f':
		return '\f', nil
	case 'v':
		return '\v', nil
	case 'a':
		return '\a', nil
	case 'e':
		return 0x1b, nil
	case '0':
		v := 0
		for k := 0; k < 2 && p.more() && p.peek() >= '0' && p.peek() <= '7'; k++ {
			v = v*8 + int(p.next()-'0')
		}
		return rune(v), nil
	case 'x':
		if p.more() && p.peek() == '{' {
			end := strings.IndexByte(p.src[p.pos:], '}')
			if end < 0 {
				return 0, p.errorf("unterminated \\x{")
			}
			v, err := strconv.ParseUint(p.src[p.pos+1:p.pos+end], 16, 32)
			if err != nil || v > unicode.MaxRune {
				return 0, p.errorf("bad \\x{...}")
			}
			p.pos += end + 1
			return rune(v), nil
		}
		return p.hexDigits(2)
	case 'u':
		return p.hexDigits(4)
	}
	if c < 128 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
		return 0, p.errorf("escape \\%c unsupported", c)
	}
	return c, nil // an escaped punctuation or non-ASCII character stands for itself
}

func (p *reParser) hexDigits(max int) (rune, error) {
	v, n := 0, 0
	for n < max && p.more() && isHexDigit(p.peek()) {
		d, _ := strconv.ParseUint(string(p.next()), 16, 8)
		v = v*16 + int(d)
		n++
	}
	if n == 0 {
		return 0, p.errorf("bad hex escape")
	}
	return rune(v), nil
}

// property reads {Name} or {^Name} after \p.
func (p *reParser) property() (func(rune) bool, error) {
	if !p.more() || p.peek() != '{' {
		return nil, p.errorf("\\p without {name}")
	}
	end := strings.IndexByte(p.src[p.pos:], '}')
	if end < 0 {
		return nil, p.errorf("unterminated \\p{")
	}
	name := p.src[p.pos+1 : p.pos+end]
	p.pos += end + 1
	negate := strings.HasPrefix(name, "^")
	name = strings.TrimPrefix(name, "^")
	pred, ok := unicodeProperty(name)
	if !ok {
		return nil, p.errorf("unicode property %q unsupported (general categories, scripts, Alphabetic, White_Space, Any)", name)
	}
	if negate {
		return func(r rune) bool { return !pred(r) }, nil
	}
	return pred, nil
}

var categoryAliases = map[string]string{
	"Letter": "L", "Uppercase_Letter": "Lu", "Lowercase_Letter": "Ll", "Titlecase_Letter": "Lt",
	"Modifier_Letter": "Lm", "Other_Letter": "Lo", "Mark": "M", "Combining_Mark": "M", "Nonspacing_Mark": "Mn",
	"Spacing_Mark": "Mc", "Enclosing_Mark": "Me", "Number": "N", "Decimal_Number": "Nd", "Letter_Number": "Nl",
	"Other_Number": "No", "Punctuation": "P", "Connector_Punctuation": "Pc", "Dash_Punctuation": "Pd",
	"Open_Punctuation": "Ps", "Close_Punctuation": "Pe", "Initial_Punctuation": "Pi", "Final_Punctuation": "Pf",
	"Other_Punctuation": "Po", "Symbol": "S", "Math_Symbol": "Sm", "Currency_Symbol": "Sc", "Modifier_Symbol": "Sk",
	"Other_Symbol": "So", "Separator": "Z", "Space_Separator": "Zs", "Line_Separator": "Zl",
	"Paragraph_Separator": "Zp", "Other": "C", "Control": "Cc", "Format": "Cf", "Private_Use": "Co",
	"Surrogate": "Cs",
}

func unicodeProperty(name string) (func(rune) bool, bool) {
	if a, ok := categoryAliases[name]; ok {
		name = a
	}
	switch name {
	case "Any":
		return func(rune) bool { return true }, true
	case "Alphabetic", "Alpha":
		return func(r rune) bool {
			return unicode.IsLetter(r) || unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Other_Alphabetic, r)
		}, true
	case "White_Space", "Space":
		return unicode.IsSpace, true
	case "L&", "LC":
		return func(r rune) bool { return unicode.In(r, unicode.Lu, unicode.Ll, unicode.Lt) }, true
	}
	if t, ok := unicode.Categories[name]; ok {
		return func(r rune) bool { return unicode.Is(t, r) }, true
	}
	if t, ok := unicode.Scripts[name]; ok {
		return func(r rune) bool { return unicode.Is(t, r) }, true
	}
	if t, ok := unicode.Properties[name]; ok {
		return func(r rune) bool { return unicode.Is(t, r) }, true
	}
	return nil, false
}

// class parses a bracket expression after '[' into a predicate; nested brackets are unions.
func (p *reParser) class() (func(rune) bool, error) {
	negate := false
	if p.more() && p.peek() == '^' {
		p.pos++
		negate = true
	}
	var preds []func(rune) bool
	var ranges [][2]rune
	first := true
	for {
		if !p.more() {
			return nil, p.errorf("missing ]")
		}
		c := p.next()
		if c == ']' && !first {
			break
		}
		first = false
		var lo rune
		switch {
		case c == '[':
			if p.more() && p.peek() == ':' {
				return nil, p.errorf("POSIX bracket expressions unsupported")
			}
			sub, err := p.class()
			if err != nil {
				return nil, err
			}
			preds = append(preds, sub)
			continue
		case c == '&' && p.more() && p.peek() == '&':
			return nil, p.errorf("class intersection && unsupported")
		case c == '\\':
			if !p.more() {
				return nil, p.errorf("trailing backslash")
			}
			e := p.peek()
			if strings.ContainsRune("sSdDwWhHpP", e) {
				pred, err := p.escapeClass()
				if err != nil {
					return nil, err
				}
				preds = append(preds, pred)
				continue
			}
			p.pos++
			if e == 'b' {
				lo = '\b'
			} else {
				r, err := p.escapedRune(e)
				if err != nil {
					return nil, err
				}
				lo = r
			}
		default:
			lo = c
		}
		hi := lo
		if p.more() && p.peek() == '-' && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' {
			p.pos++
			h := p.next()
			if h == '\\' {
				if !p.more() {
					return nil, p.errorf("trailing backslash")
				}
				r, err := p.escapedRune(p.next())
				if err != nil {
					return nil, err
				}
				h = r
			} else if h == '[' {
				return nil, p.errorf("range to a class unsupported")
			}
			if h < lo {
				return nil, p.errorf("empty range %q-%q", lo, h)
			}
			hi = h
		}
		if p.fold {
			for r := lo; r <= hi && r-lo < 0x10000; r++ {
				if hasMultiFold(r) {
					return nil, p.errorf("case-insensitive class member %q (a multi-character case fold) unsupported", r)
				}
			}
		}
		ranges = append(ranges, [2]rune{lo, hi})
	}
	member := func(r rune) bool {
		for _, rg := range ranges {
			if rg[0] <= r && r <= rg[1] {
				return true
			}
		}
		for _, f := range preds {
			if f(r) {
				return true
			}
		}
		return false
	}
	member = p.folded(member) // Oniguruma folds the set, then complements it
	return func(r rune) bool { return member(r) != negate }, nil
}
