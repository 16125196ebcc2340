package chat

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The template source is cut into segments (text, {{ output }}, {% tag %}) with Jinja2's
// whitespace rules applied as transformers configures them: trim_blocks (the first newline after a
// block or comment tag goes), lstrip_blocks (spaces and tabs before a block or comment tag that
// starts its line go), "-" markers strip all whitespace on their side, "+" turns either rule off,
// and a single trailing newline of the source is dropped (keep_trailing_newline false).

type segKind int

const (
	segText segKind = iota
	segOutput
	segTag
)

type segment struct {
	kind segKind
	text string  // segText
	toks []token // segOutput, segTag: the tokens between the delimiters
	line int
}

type tokKind int

const (
	tokName tokKind = iota
	tokString
	tokInt
	tokFloat
	tokOp
)

type token struct {
	kind tokKind
	s    string // name, operator, or the decoded string literal
	line int
}

func (t token) String() string {
	if t.kind == tokString {
		return fmt.Sprintf("%q", t.s)
	}
	return t.s
}

// isSpace is Python's str.isspace for the characters \s matches in Jinja2's lexer regexes.
func isSpace(r rune) bool { return unicode.IsSpace(r) }

func lex(src string) ([]segment, error) {
	src = strings.ReplaceAll(src, "\r\n", "\n")
	src = strings.TrimSuffix(src, "\n")
	var segs []segment
	line := 1
	pos := 0
	lineStarting := true // the previous tag ended with a newline it consumed, or this is the start
	// stripNext: the previous tag ended with "-": strip the following text's leading whitespace.
	// trimNext: it was a block or comment ending without a marker: drop one leading newline.
	stripNext, trimNext := false, false
	for pos <= len(src) {
		i := nextOpen(src, pos)
		text := src[pos:]
		if i >= 0 {
			text = src[pos:i]
		}
		if stripNext {
			text = strings.TrimLeftFunc(text, isSpace)
		} else if trimNext && strings.HasPrefix(text, "\n") {
			text = text[1:]
		}
		if i < 0 {
			if text != "" {
				segs = append(segs, segment{kind: segText, text: text, line: line})
			}
			break
		}
		open := src[i : i+2]
		marker := byte(0)
		if i+2 < len(src) && (src[i+2] == '-' || src[i+2] == '+') {
			marker = src[i+2]
		}
		switch {
		case marker == '-':
			text = strings.TrimRightFunc(text, isSpace)
		case marker == 0 && open != "{{":
			// lstrip_blocks: only whitespace between the line's start and a block or comment tag.
			l := strings.LastIndexByte(text, '\n') + 1
			if (l > 0 || lineStarting) && l < len(text) && strings.TrimLeftFunc(text[l:], isSpace) == "" {
				text = text[:l]
			}
		}
		if text != "" {
			segs = append(segs, segment{kind: segText, text: text, line: line})
		}
		line += strings.Count(src[pos:i], "\n")
		body := i + 2
		if marker != 0 {
			body++
		}
		var end int
		var endMarker byte
		seg := segment{line: line}
		switch open {
		case "{#":
			j := strings.Index(src[body:], "#}")
			if j < 0 {
				return nil, fmt.Errorf("line %d: unclosed comment", line)
			}
			end = body + j + 2
			if j > 0 && (src[body+j-1] == '-' || src[body+j-1] == '+') {
				endMarker = src[body+j-1]
			}
		default:
			closer := "}}"
			seg.kind = segOutput
			if open == "{%" {
				closer, seg.kind = "%}", segTag
			}
			toks, n, m, err := lexExpr(src, body, closer, line)
			if err != nil {
				return nil, err
			}
			seg.toks, end, endMarker = toks, n, m
			if seg.kind == segTag && len(toks) > 0 && toks[0].s == "raw" {
				return nil, fmt.Errorf("line %d: {%% raw %%} is not supported", line)
			}
			segs = append(segs, seg)
		}
		line += strings.Count(src[i:end], "\n")
		stripNext = endMarker == '-'
		trimNext = endMarker == 0 && open != "{{"
		lineStarting = false
		if trimNext && strings.HasPrefix(src[end:], "\n") {
			lineStarting = true
		}
		pos = end
	}
	return segs, nil
}

// nextOpen finds the next "{{", "{%" or "{#" at or after pos.
func nextOpen(src string, pos int) int {
	for i := pos; i+1 < len(src); i++ {
		if src[i] == '{' && (src[i+1] == '{' || src[i+1] == '%' || src[i+1] == '#') {
			return i
		}
	}
	return -1
}

var ops3 = []string{"//=", "**="}
var ops2 = []string{"==", "!=", "<=", ">=", "//", "**", "+=", "-="}

const ops1 = "+-*/%~()[]{}.,:|=<>!?"

// lexExpr tokenises from pos up to closer ("}}" or "%}", optionally preceded by "-" or "+") and
// returns the tokens, the index after the closer and the marker before it.
func lexExpr(src string, pos int, closer string, line int) ([]token, int, byte, error) {
	var toks []token
	for {
		for pos < len(src) && isSpace(rune(src[pos])) {
			if src[pos] == '\n' {
				line++
			}
			pos++
		}
		if pos >= len(src) {
			return nil, 0, 0, fmt.Errorf("line %d: missing %q", line, closer)
		}
		rest := src[pos:]
		if strings.HasPrefix(rest, closer) {
			return toks, pos + 2, 0, nil
		}
		if (rest[0] == '-' || rest[0] == '+') && strings.HasPrefix(rest[1:], closer) {
			return toks, pos + 3, rest[0], nil
		}
		c := rest[0]
		switch {
		case c == '"' || c == '\'':
			s, n, err := lexString(rest)
			if err != nil {
				return nil, 0, 0, fmt.Errorf("line %d: %w", line, err)
			}
			toks = append(toks, token{kind: tokString, s: s, line: line})
			pos += n
		case c >= '0' && c <= '9':
			n, kind := 0, tokInt
			for n < len(rest) && (rest[n] >= '0' && rest[n] <= '9' || rest[n] == '_') {
				n++
			}
			if n+1 < len(rest) && rest[n] == '.' && rest[n+1] >= '0' && rest[n+1] <= '9' {
				kind = tokFloat
				n++
				for n < len(rest) && rest[n] >= '0' && rest[n] <= '9' {
					n++
				}
			}
			if n < len(rest) && (rest[n] == 'e' || rest[n] == 'E') {
				m := n + 1
				if m < len(rest) && (rest[m] == '+' || rest[m] == '-') {
					m++
				}
				if m < len(rest) && rest[m] >= '0' && rest[m] <= '9' {
					kind = tokFloat
					for n = m; n < len(rest) && rest[n] >= '0' && rest[n] <= '9'; n++ {
					}
				}
			}
			toks = append(toks, token{kind: kind, s: strings.ReplaceAll(rest[:n], "_", ""), line: line})
			pos += n
		case c == '_' || c < utf8.RuneSelf && unicode.IsLetter(rune(c)):
			n := 0
			for n < len(rest) && (rest[n] == '_' || rest[n] < utf8.RuneSelf && (unicode.IsLetter(rune(rest[n])) || unicode.IsDigit(rune(rest[n])))) {
				n++
			}
			toks = append(toks, token{kind: tokName, s: rest[:n], line: line})
			pos += n
		default:
			op := ""
			for _, o := range ops3 {
				if strings.HasPrefix(rest, o) {
					op = o
				}
			}
			if op == "" {
				for _, o := range ops2 {
					if strings.HasPrefix(rest, o) {
						op = o
						break
					}
				}
			}
			if op == "" && strings.IndexByte(ops1, c) >= 0 {
				op = rest[:1]
			}
			if op == "" {
				r, _ := utf8.DecodeRuneInString(rest)
				return nil, 0, 0, fmt.Errorf("line %d: unexpected character %q", line, r)
			}
			toks = append(toks, token{kind: tokOp, s: op, line: line})
			pos += len(op)
		}
	}
}

// lexString decodes a Python string literal (as Jinja2 does) at the start of s.
func lexString(s string) (string, int, error) {
	q := s[0]
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		if c == q {
			return b.String(), i + 1, nil
		}
		if c != '\\' || i+1 >= len(s) {
			b.WriteByte(c)
			continue
		}
		i++
		switch e := s[i]; e {
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case '0':
			b.WriteByte(0)
		case 'b':
			b.WriteByte('\b')
		case 'f':
			b.WriteByte('\f')
		case 'v':
			b.WriteByte('\v')
		case 'a':
			b.WriteByte('\a')
		case '\\', '\'', '"':
			b.WriteByte(e)
		case '\n':
		case 'x', 'u', 'U':
			n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
			if i+n >= len(s) {
				return "", 0, fmt.Errorf("bad \\%c escape in string literal", e)
			}
			var r rune
			if _, err := fmt.Sscanf(s[i+1:i+1+n], "%x", &r); err != nil {
				return "", 0, fmt.Errorf("bad \\%c escape in string literal", e)
			}
			b.WriteRune(r)
			i += n
		default:
			b.WriteByte('\\')
			b.WriteByte(e)
		}
	}
	return "", 0, fmt.Errorf("unterminated string literal")
}
