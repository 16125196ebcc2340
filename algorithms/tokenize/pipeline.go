package tokenize

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// The tokenizer.json components, each a port of its Rust counterpart in Hugging Face's
// tokenizers crate (same names, same order of operations, same offset bookkeeping).

// normalizer rewrites one piece of text.
type normalizer interface{ normalize(n *normString) }

// preTokenizer cuts a piece into pieces (HF's PreTokenizedString::split over one split).
type preTokenizer interface {
	split(n normString, out []normString) []normString
}

// decoderStep is HF's Decoder::decode_chain.
type decoderStep interface{ decodeChain(toks []string) []string }

// encToken is one token of an encoding: id, its text (HF's Token.value) and input span.
type encToken struct {
	id     int
	value  string
	offset [2]int
}

// postProcessor is HF's PostProcessor on a single sequence of text.
type postProcessor interface {
	process(toks []encToken, addSpecial bool, text string) []encToken
}

// hfNode is the union of fields the components read; each type uses its own.
type hfNode struct {
	Type           string            `json:"type"`
	Normalizers    []json.RawMessage `json:"normalizers"`
	Pretokenizers  []json.RawMessage `json:"pretokenizers"`
	Decoders       []json.RawMessage `json:"decoders"`
	Processors     []json.RawMessage `json:"processors"`
	AddPrefixSpace *bool             `json:"add_prefix_space"`
	TrimOffsets    *bool             `json:"trim_offsets"`
	UseRegex       *bool             `json:"use_regex"`
	Pattern        *struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Content          *string          `json:"content"`
	Prepend          *string          `json:"prepend"`
	Behavior         *string          `json:"behavior"`
	Invert           bool             `json:"invert"`
	Replacement      *string          `json:"replacement"`
	PrependScheme    *string          `json:"prepend_scheme"`
	Split            *bool            `json:"split"`
	IndividualDigits bool             `json:"individual_digits"`
	StripLeft        *bool            `json:"strip_left"`
	StripRight       *bool            `json:"strip_right"`
	Start            int              `json:"start"`
	Stop             int              `json:"stop"`
	Delimiter        *string          `json:"delimiter"`
	Suffix           *string          `json:"suffix"`
	Single           []templatePiece  `json:"single"`
	SpecialTokens    map[string]tSpec `json:"special_tokens"`
}

type templatePiece struct {
	SpecialToken *struct {
		ID string `json:"id"`
	} `json:"SpecialToken"`
	Sequence *struct {
		ID string `json:"id"`
	} `json:"Sequence"`
}

type tSpec struct {
	ID     string   `json:"id"`
	IDs    []int    `json:"ids"`
	Tokens []string `json:"tokens"`
}

func decodeNode(where string, raw json.RawMessage) (hfNode, error) {
	var n hfNode
	if err := json.Unmarshal(raw, &n); err != nil {
		return n, fmt.Errorf("%s: %w", where, err)
	}
	return n, nil
}

// pattern compiles a Split/Replace pattern: a String is matched literally, a Regex by the
// Oniguruma-compatible engine (or a hand-written scanner for the GPT-2, Llama-3 and Qwen2
// patterns, which are proved equal to the engine by the tests).
func compilePattern(where string, n hfNode) (matcher, error) {
	switch {
	case n.Pattern == nil || n.Pattern.String == nil && n.Pattern.Regex == nil:
		return nil, fmt.Errorf("%s: pattern must be {\"String\": ...} or {\"Regex\": ...}", where)
	case n.Pattern.String != nil:
		if *n.Pattern.String == "" {
			return nil, fmt.Errorf("%s: empty String pattern unsupported", where)
		}
		return literalMatcher(*n.Pattern.String), nil
	}
	if sp, ok := splitterFor(*n.Pattern.Regex); ok {
		return scannerMatcher{sp}, nil
	}
	re, err := compileRegex(*n.Pattern.Regex)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where, err)
	}
	return re, nil
}

// matcher lists the non-overlapping matches of a pattern in s.
type matcher interface{ findAll(s string) [][2]int }

type literalMatcher string

func (m literalMatcher) findAll(s string) [][2]int {
	var out [][2]int
	for i := 0; ; {
		j := strings.Index(s[i:], string(m))
		if j < 0 {
			return out
		}
		out = append(out, [2]int{i + j, i + j + len(m)})
		i += j + len(m)
	}
}

// scannerMatcher adapts a hand-written scanner, whose pieces cover s and are each a match.
type scannerMatcher struct{ sp splitter }

func (m scannerMatcher) findAll(s string) [][2]int {
	var out [][2]int
	pos := 0
	for _, w := range m.sp(s) {
		out = append(out, [2]int{pos, pos + len(w)})
		pos += len(w)
	}
	return out
}

// ---- normalizers ----

type normSeq []normalizer

func (s normSeq) normalize(n *normString) {
	for _, x := range s {
		x.normalize(n)
	}
}

type normUnicode struct{ form norm.Form }

func (u normUnicode) normalize(n *normString) { n.normalize(u.form) }

type normLowercase struct{}

func (normLowercase) normalize(n *normString) { n.lowercase() }

type normStrip struct{ left, right bool }

func (s normStrip) normalize(n *normString) { n.strip(s.left, s.right) }

type normPrepend string

func (p normPrepend) normalize(n *normString) { n.prepend(string(p)) }

type normReplace struct {
	pattern matcher
	content string
}

func (r normReplace) normalize(n *normString) { n.replace(r.pattern.findAll(n.s), r.content) }

func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	n, err := decodeNode("normalizer", raw)
	if err != nil {
		return nil, err
	}
	switch n.Type {
	case "Sequence":
		var seq normSeq
		for _, r := range n.Normalizers {
			x, err := parseNormalizer(r)
			if err != nil {
				return nil, err
			}
			if x != nil {
				seq = append(seq, x)
			}
		}
		return seq, nil
	case "NFC":
		return normUnicode{norm.NFC}, nil
	case "NFD":
		return normUnicode{norm.NFD}, nil
	case "NFKC":
		return normUnicode{norm.NFKC}, nil
	case "NFKD":
		return normUnicode{norm.NFKD}, nil
	case "Lowercase":
		return normLowercase{}, nil
	case "Strip":
		return normStrip{left: n.StripLeft != nil && *n.StripLeft, right: n.StripRight != nil && *n.StripRight}, nil
	case "Prepend":
		if n.Prepend == nil {
			return nil, fmt.Errorf("normalizer Prepend: missing prepend")
		}
		return normPrepend(*n.Prepend), nil
	case "Replace":
		m, err := compilePattern("normalizer Replace", n)
		if err != nil {
			return nil, err
		}
		if n.Content == nil {
			return nil, fmt.Errorf("normalizer Replace: missing content")
		}
		return normReplace{pattern: m, content: *n.Content}, nil
	}
	return nil, fmt.Errorf("normalizer %q unsupported (supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, Prepend, Replace, Sequence)", n.Type)
}

// ---- pre-tokenizers ----

type preSeq []preTokenizer

func (s preSeq) split(n normString, out []normString) []normString {
	cur := []normString{n}
	for _, p := range s {
		var next []normString
		for _, c := range cur {
			next = p.split(c, next)
		}
		cur = next
	}
	return append(out, cur...)
}

type preSplit struct {
	pattern  matcher
	behavior splitBehavior
	invert   bool
}

func (p preSplit) split(n normString, out []normString) []normString {
	return n.splitBy(segmentsOf(n.s, p.pattern.findAll(n.s), p.invert), p.behavior, out)
}

// preChars splits on every character satisfying pred (Digits, Punctuation, WhitespaceSplit,
// CharDelimiterSplit).
type preChars struct {
	pred     func(rune) bool
	behavior splitBehavior
}

func (p preChars) split(n normString, out []normString) []normString {
	return n.splitBy(charSegments(n.s, p.pred), p.behavior, out)
}

type preByteLevel struct {
	addPrefixSpace, useRegex bool
}

func (p preByteLevel) split(n normString, out []normString) []normString {
	if p.addPrefixSpace && !strings.HasPrefix(n.s, " ") {
		n.prepend(" ")
	}
	start := len(out)
	if p.useRegex {
		out = n.splitBy(segmentsOf(n.s, scannerMatcher{splitGPT2}.findAll(n.s), false), splitIsolated, out)
	} else if n.s != "" {
		out = append(out, n)
	}
	for i := start; i < len(out); i++ {
		out[i].byteLevel()
	}
	return out
}

// byteLevel maps every byte to its GPT-2 character; all bytes of one input character keep
// that character's span.
func (n *normString) byteLevel() {
	if n.align == nil {
		n.s = byteLevelMap(n.s)
		return
	}
	var sb strings.Builder
	sb.Grow(2 * len(n.s))
	al := make([][2]int, 0, 2*len(n.s))
	for i := 0; i < len(n.s); {
		_, size := utf8.DecodeRuneInString(n.s[i:])
		a := n.align[i]
		for k := 0; k < size; k++ {
			r := byteToRune[n.s[i+k]]
			sb.WriteRune(r)
			for m := utf8.RuneLen(r); m > 0; m-- {
				al = append(al, a)
			}
		}
		i += size
	}
	n.s, n.align = sb.String(), al
}

type prependScheme int

const (
	prependAlways prependScheme = iota
	prependFirst
	prependNever
)

type preMetaspace struct {
	replacement rune
	scheme      prependScheme
	splits      bool
}

func (p preMetaspace) split(n normString, out []normString) []normString {
	rep := string(p.replacement)
	n.replace(literalMatcher(" ").findAll(n.s), rep)
	switch p.scheme {
	case prependAlways:
		if !strings.HasPrefix(n.s, rep) {
			n.prepend(rep)
		}
	case prependFirst:
		if !strings.HasPrefix(n.s, rep) && n.orig == 0 {
			n.prepend(rep)
		}
	}
	if !p.splits {
		if n.s == "" {
			return out
		}
		return append(out, n)
	}
	return n.splitBy(charSegments(n.s, func(r rune) bool { return r == p.replacement }), splitMergedWithNext, out)
}

func isPunctuation(r rune) bool {
	return r < 128 && unicode.IsPunct(r) || r < 128 && unicode.IsSymbol(r) || unicode.IsPunct(r)
}

func isNumeric(r rune) bool { return unicode.IsNumber(r) }

func parsePreTokenizer(raw json.RawMessage) (preTokenizer, error) {
	n, err := decodeNode("pre_tokenizer", raw)
	if err != nil {
		return nil, err
	}
	behavior := func(def splitBehavior) (splitBehavior, error) {
		if n.Behavior == nil {
			return def, nil
		}
		b, ok := splitBehaviors[*n.Behavior]
		if !ok {
			return 0, fmt.Errorf("pre_tokenizer %s: behavior %q unknown (allowed: Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous)", n.Type, *n.Behavior)
		}
		return b, nil
	}
	switch n.Type {
	case "Sequence":
		var seq preSeq
		for _, r := range n.Pretokenizers {
			x, err := parsePreTokenizer(r)
			if err != nil {
				return nil, err
			}
			seq = append(seq, x)
		}
		return seq, nil
	case "Split":
		m, err := compilePattern("pre_tokenizer Split", n)
		if err != nil {
			return nil, err
		}
		if n.Behavior == nil {
			return nil, fmt.Errorf("pre_tokenizer Split: missing behavior")
		}
		b, err := behavior(splitIsolated)
		if err != nil {
			return nil, err
		}
		return preSplit{pattern: m, behavior: b, invert: n.Invert}, nil
	case "ByteLevel":
		if n.AddPrefixSpace == nil { // a required field for HF's deserializer too
			return nil, fmt.Errorf("pre_tokenizer ByteLevel: missing add_prefix_space")
		}
		return preByteLevel{addPrefixSpace: *n.AddPrefixSpace, useRegex: n.UseRegex == nil || *n.UseRegex}, nil
	case "Metaspace":
		if n.Replacement == nil || utf8.RuneCountInString(*n.Replacement) != 1 {
			return nil, fmt.Errorf("pre_tokenizer Metaspace: replacement must be one character")
		}
		r, _ := utf8.DecodeRuneInString(*n.Replacement)
		p := preMetaspace{replacement: r, scheme: prependAlways, splits: n.Split == nil || *n.Split}
		if n.PrependScheme != nil {
			switch *n.PrependScheme {
			case "always":
			case "first":
				p.scheme = prependFirst
			case "never":
				p.scheme = prependNever
			default:
				return nil, fmt.Errorf("pre_tokenizer Metaspace: prepend_scheme %q unknown (allowed: always, first, never)", *n.PrependScheme)
			}
		}
		if n.AddPrefixSpace != nil && !*n.AddPrefixSpace {
			if p.scheme != prependNever {
				return nil, fmt.Errorf("pre_tokenizer Metaspace: add_prefix_space does not match declared prepend_scheme")
			}
		}
		return p, nil
	case "Digits":
		if n.IndividualDigits {
			return preChars{pred: isNumeric, behavior: splitIsolated}, nil
		}
		return preChars{pred: isNumeric, behavior: splitContiguous}, nil
	case "Punctuation":
		b, err := behavior(splitIsolated)
		if err != nil {
			return nil, err
		}
		return preChars{pred: isPunctuation, behavior: b}, nil
	case "WhitespaceSplit":
		return preChars{pred: unicode.IsSpace, behavior: splitRemoved}, nil
	case "Whitespace":
		re, err := compileRegex(`\w+|[^\w\s]+`)
		if err != nil {
			return nil, err
		}
		return preSplit{pattern: re, behavior: splitRemoved, invert: true}, nil
	case "CharDelimiterSplit":
		if n.Delimiter == nil || utf8.RuneCountInString(*n.Delimiter) != 1 {
			return nil, fmt.Errorf("pre_tokenizer CharDelimiterSplit: delimiter must be one character")
		}
		d, _ := utf8.DecodeRuneInString(*n.Delimiter)
		return preChars{pred: func(r rune) bool { return r == d }, behavior: splitRemoved}, nil
	}
	return nil, fmt.Errorf("pre_tokenizer %q unsupported (supported: Split, ByteLevel, Metaspace, Digits, Punctuation, Whitespace, WhitespaceSplit, CharDelimiterSplit, Sequence)", n.Type)
}

// ---- decoders ----

type decSeq []decoderStep

func (s decSeq) decodeChain(toks []string) []string {
	for _, d := range s {
		toks = d.decodeChain(toks)
	}
	return toks
}

type decByteLevel struct{}

// decodeChain maps each token's characters back to bytes; a token with a character outside
// the byte alphabet is kept as its UTF-8. The bytes of all tokens are then read as UTF-8
// with Rust's from_utf8_lossy.
func (decByteLevel) decodeChain(toks []string) []string {
	var b []byte
	for _, t := range toks {
		ok := true
		for _, r := range t {
			if int(r) >= len(runeToByte) || runeToByte[r] < 0 || r == utf8.RuneError {
				ok = false
				break
			}
		}
		if !ok {
			b = append(b, t...)
			continue
		}
		for _, r := range t {
			b = append(b, byte(runeToByte[r]))
		}
	}
	return []string{lossyUTF8(b)}
}

type decByteFallback struct{}

func (decByteFallback) decodeChain(toks []string) []string {
	var out []string
	var pending []byte
	flush := func() {
		if len(pending) == 0 {
			return
		}
		if utf8.Valid(pending) {
			out = append(out, string(pending))
		} else {
			for range pending {
				out = append(out, "\ufffd")
			}
		}
		pending = pending[:0]
	}
	for _, t := range toks {
		if b, ok := fallbackByte(t); ok {
			pending = append(pending, b)
			continue
		}
		flush()
		out = append(out, t)
	}
	flush()
	return out
}

// fallbackByte parses "<0xHH>" as Rust's u8::from_str_radix does (which also takes "+H").
func fallbackByte(t string) (byte, bool) {
	if len(t) != 6 || !strings.HasPrefix(t, "<0x") || t[5] != '>' {
		return 0, false
	}
	h := t[3:5]
	if h[0] == '+' {
		h = h[1:]
	}
	v := 0
	for i := 0; i < len(h); i++ {
		if !isHex(h[i]) {
			return 0, false
		}
		v = v*16 + int(hexDigit(h[i]))
	}
	return byte(v), true
}

func isHex(c byte) bool { return '0' <= c && c <= '9' || 'A' <= c && c <= 'F' || 'a' <= c && c <= 'f' }

func hexDigit(c byte) byte {
	switch {
	case c <= '9':
		return c - '0'
	case c <= 'F':
		return c - 'A' + 10
	}
	return c - 'a' + 10
}

type decFuse struct{}

func (decFuse) decodeChain(toks []string) []string { return []string{strings.Join(toks, "")} }

type decStrip struct {
	content     rune
	start, stop int
}

func (d decStrip) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		rs := []rune(t)
		lo := 0
		for k := 0; k < d.start && k < len(rs) && rs[k] == d.content; k++ {
			lo = k + 1
		}
		hi := len(rs)
		for k := 0; k < d.stop; k++ {
			j := len(rs) - k - 1
			if j < 0 || rs[j] != d.content {
				break
			}
			hi = j
		}
		if hi < lo {
			hi = lo
		}
		out[i] = string(rs[lo:hi])
	}
	return out
}

type decReplace struct {
	pattern matcher
	content string
}

func (d decReplace) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		var sb strings.Builder
		last := 0
		for _, m := range d.pattern.findAll(t) {
			sb.WriteString(t[last:m[0]])
			sb.WriteString(d.content)
			last = m[1]
		}
		sb.WriteString(t[last:])
		out[i] = sb.String()
	}
	return out
}

type decMetaspace struct {
	replacement rune
	scheme      prependScheme
}

func (d decMetaspace) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		var sb strings.Builder
		for _, r := range t {
			if r == d.replacement {
				if i == 0 && d.scheme != prependNever {
					continue
				}
				r = ' '
			}
			sb.WriteRune(r)
		}
		out[i] = sb.String()
	}
	return out
}

// decBPE is the BPEDecoder: the end-of-word suffix becomes a space (none after the last).
type decBPE struct{ suffix string }

func (d decBPE) decodeChain(toks []string) []string {
	out := make([]string, len(toks))
	for i, t := range toks {
		rep := " "
		if i == len(toks)-1 {
			rep = ""
		}
		out[i] = strings.ReplaceAll(t, d.suffix, rep)
	}
	return out
}

func parseDecoder(raw json.RawMessage) (decoderStep, error) {
	n, err := decodeNode("decoder", raw)
	if err != nil {
		return nil, err
	}
	switch n.Type {
	case "Sequence":
		var seq decSeq
		for _, r := range n.Decoders {
			x, err := parseDecoder(r)
			if err != nil {
				return nil, err
			}
			seq = append(seq, x)
		}
		return seq, nil
	case "ByteLevel":
		return decByteLevel{}, nil
	case "ByteFallback":
		return decByteFallback{}, nil
	case "Fuse":
		return decFuse{}, nil
	case "Strip":
		if n.Content == nil || utf8.RuneCountInString(*n.Content) != 1 {
			return nil, fmt.Errorf("decoder Strip: content must be one character")
		}
		r, _ := utf8.DecodeRuneInString(*n.Content)
		return decStrip{content: r, start: n.Start, stop: n.Stop}, nil
	case "Replace":
		m, err := compilePattern("decoder Replace", n)
		if err != nil {
			return nil, err
		}
		if n.Content == nil {
			return nil, fmt.Errorf("decoder Replace: missing content")
		}
		return decReplace{pattern: m, content: *n.Content}, nil
	case "Metaspace":
		if n.Replacement == nil || utf8.RuneCountInString(*n.Replacement) != 1 {
			return nil, fmt.Errorf("decoder Metaspace: replacement must be one character")
		}
		r, _ := utf8.DecodeRuneInString(*n.Replacement)
		d := decMetaspace{replacement: r}
		if n.PrependScheme != nil {
			switch *n.PrependScheme {
			case "always":
			case "first":
				d.scheme = prependFirst
			case "never":
				d.scheme = prependNever
			default:
				return nil, fmt.Errorf("decoder Metaspace: prepend_scheme %q unknown (allowed: always, first, never)", *n.PrependScheme)
			}
		}
		if n.AddPrefixSpace != nil && !*n.AddPrefixSpace {
			d.scheme = prependNever
		}
		return d, nil
	case "BPEDecoder":
		suffix := "</w>"
		if n.Suffix != nil {
			suffix = *n.Suffix
		}
		return decBPE{suffix: suffix}, nil
	}
	return nil, fmt.Errorf("decoder %q unsupported (supported: ByteLevel, ByteFallback, Fuse, Strip, Replace, Metaspace, BPEDecoder, Sequence)", n.Type)
}

// ---- post-processors ----

type postSeq []postProcessor

func (s postSeq) process(toks []encToken, addSpecial bool, text string) []encToken {
	for _, p := range s {
		toks = p.process(toks, addSpecial, text)
	}
	return toks
}

// postByteLevel trims the byte-level spaces off offsets when trim_offsets is set.
type postByteLevel struct{ trim, addPrefixSpace bool }

// process trims as HF's process_offsets does on the offsets its Python and Node bindings
// report, which count characters: the leading and trailing Ġ/whitespace characters of a
// token's text are taken off its span in characters, then converted back to bytes.
func (p postByteLevel) process(toks []encToken, _ bool, text string) []encToken {
	if !p.trim || len(toks) == 0 {
		return toks
	}
	charAt := make([]int, len(text)+1) // byte offset -> character index (at boundaries)
	byteAt := make([]int, 0, len(text)+1)
	n := 0
	for i := range text {
		charAt[i] = n
		byteAt = append(byteAt, i)
		n++
	}
	charAt[len(text)] = n
	byteAt = append(byteAt, len(text))
	isSp := func(r rune) bool { return r == 'Ġ' || unicode.IsSpace(r) }
	for i := range toks {
		t := &toks[i]
		lead, trail := 0, 0
		for _, r := range t.value {
			if !isSp(r) {
				break
			}
			lead++
		}
		rs := []rune(t.value)
		for k := len(rs) - 1; k >= 0 && isSp(rs[k]); k-- {
			trail++
		}
		if lead == 0 && trail == 0 || t.offset[1] > len(text) {
			continue
		}
		start, end := charAt[t.offset[0]], charAt[t.offset[1]]
		if lead > 0 {
			first := i == 0 || start == 0
			if first && p.addPrefixSpace && lead == 1 {
				lead = 0
			}
			start = min(start+lead, end)
		}
		if trail > 0 && end >= trail {
			end = max(end-trail, start)
		}
		t.offset = [2]int{byteAt[start], byteAt[end]}
	}
	return toks
}

// postTemplate is TemplateProcessing for a single sequence: its special tokens (offsets
// (0,0)) around the sequence, only when special tokens are requested.
type postTemplate struct {
	pieces []templateItem
}

type templateItem struct {
	sequence bool
	ids      []int
	tokens   []string
}

func (p postTemplate) process(toks []encToken, addSpecial bool, _ string) []encToken {
	var out []encToken
	for _, it := range p.pieces {
		if it.sequence {
			out = append(out, toks...)
			continue
		}
		if !addSpecial {
			continue
		}
		for k, id := range it.ids {
			out = append(out, encToken{id: id, value: it.tokens[k]})
		}
	}
	return out
}

func parsePostProcessor(raw json.RawMessage) (postProcessor, error) {
	n, err := decodeNode("post_processor", raw)
	if err != nil {
		return nil, err
	}
	switch n.Type {
	case "Sequence":
		var seq postSeq
		for _, r := range n.Processors {
			x, err := parsePostProcessor(r)
			if err != nil {
				return nil, err
			}
			seq = append(seq, x)
		}
		return seq, nil
	case "ByteLevel":
		if n.TrimOffsets == nil || n.AddPrefixSpace == nil { // required fields for HF's deserializer too
			return nil, fmt.Errorf("post_processor ByteLevel: missing trim_offsets or add_prefix_space")
		}
		return postByteLevel{trim: *n.TrimOffsets, addPrefixSpace: *n.AddPrefixSpace}, nil
	case "TemplateProcessing":
		var p postTemplate
		seqs := 0
		for _, piece := range n.Single {
			switch {
			case piece.Sequence != nil:
				if piece.Sequence.ID != "A" {
					return nil, fmt.Errorf("post_processor TemplateProcessing: single template uses sequence %q; only A is supported", piece.Sequence.ID)
				}
				seqs++
				p.pieces = append(p.pieces, templateItem{sequence: true})
			case piece.SpecialToken != nil:
				sp, ok := n.SpecialTokens[piece.SpecialToken.ID]
				if !ok || len(sp.IDs) != len(sp.Tokens) {
					return nil, fmt.Errorf("post_processor TemplateProcessing: special token %q missing from special_tokens or ids/tokens differ in length", piece.SpecialToken.ID)
				}
				p.pieces = append(p.pieces, templateItem{ids: sp.IDs, tokens: sp.Tokens})
			default:
				return nil, fmt.Errorf("post_processor TemplateProcessing: template piece is neither Sequence nor SpecialToken")
			}
		}
		if seqs != 1 {
			return nil, fmt.Errorf("post_processor TemplateProcessing: single template has %d sequences, want 1", seqs)
		}
		return p, nil
	}
	return nil, fmt.Errorf("post_processor %q unsupported (supported: TemplateProcessing, ByteLevel, Sequence)", n.Type)
}

// lossyUTF8 is Rust's String::from_utf8_lossy: each maximal ill-formed subsequence becomes
// one U+FFFD (Go's conversions would emit one per byte, or keep the bytes).
func lossyUTF8(b []byte) string {
	if utf8.Valid(b) {
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(b) + 8)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r != utf8.RuneError || size > 1 {
			sb.Write(b[i : i+size])
			i += size
			continue
		}
		sb.WriteRune(utf8.RuneError)
		i += maximalSubpart(b[i:])
	}
	return sb.String()
}

// maximalSubpart is the length of the longest prefix of b (starting with an invalid
// sequence) that is a prefix of some valid UTF-8 sequence, at least 1 (Unicode §3.9).
func maximalSubpart(b []byte) int {
	c := b[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(b); k++ {
		x := b[n]
		if k == 0 {
			if x < lo || x > hi {
				return n
			}
		} else if x < 0x80 || x > 0xBF {
			return n
		}
		n++
	}
	return n
}
