package verify

import (
	"errors"
	"math"
	"math/big"
	"math/cmplx"
	"regexp"
	"strings"
)

// A final answer is parsed into a typed value: an expression (numbers are expressions without
// symbols), a relation (equation or inequality, sides kept), a list (bare "a, b": ordered), a set
// (\{…\} or a ± answer: unordered), a tuple or interval (brackets kept), a union of intervals, a
// matrix, or, when it is none of these, normalised text. Text is never reduced to a number it
// contains.

// maxValueDepth bounds the nesting of lists, tuples and relations: each level may parse its
// parts more than once, so the bound keeps the work polynomial whatever the input.
const maxValueDepth = 6

type vkind int

const (
	vText vkind = iota
	vExpr
	vRel
	vList
	vSet
	vTuple // (a, b), [a, b), …: ordered pair or interval; the brackets must match
	vUnion
	vMatrix
)

type value struct {
	kind    vkind
	key     string // normalised text of the whole answer (spaces removed, lower-case)
	x       *node
	mask    int  // sign choice of each ± in x
	percent bool // written with %, percent or pct: x is the number before it
	ops     []string
	sides   []*node
	items   []value
	open    byte
	close   byte
	err     error  // a number too large or a division by zero
	label   string // "a_3" in "a_3 = 2": list items with labels are matched by label
}

var (
	wrapCmdRE = regexp.MustCompile(`\\(?:text|textbf|textit|textrm|textnormal|mathrm|mathbf|mathit|mathsf|mbox|operatorname|displaystyle|boxed|fbox|overline|hbox)\s*\{([^{}]*)\}`)
	degreeRE  = regexp.MustCompile(`\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|°|\\degree`)
	spacing   = strings.NewReplacer(`\left`, "", `\right`, "", `\big`, "", `\Big`, "", `\!`, "", `\,`, " ", `\;`, " ", `\:`, " ",
		`\ `, " ", "~", " ", `\qquad`, ", ", `\quad`, ", ", "{,}", "", `\dfrac`, `\frac`, `\tfrac`, `\frac`, `\cfrac`, `\frac`,
		"−", "-", "–", "-", "²", "^2", "³", "^3", "½", "(1/2)", "¼", "(1/4)", "¾", "(3/4)", "⩽", "≤", "⩾", "≥", "×", `\times `, "÷", `\div `, "·", `\cdot `, "⋅", `\cdot `, `\$`, "", "$", "",
		`\(`, "", `\)`, "", `\[`, "", `\]`, "", `\%`, "%", `\lt`, "<", `\gt`, ">", `\leqslant`, "≤", `\geqslant`, "≥",
		`\leq`, "≤", `\geq`, "≥", `\le`, "≤", `\ge`, "≥", `\neq`, "≠", `\ne`, "≠", "<=", "≤", ">=", "≥", "!=", "≠",
		`\approx`, "≈", `\cup`, "∪", `\infty`, "∞", `\dots`, "…", `\ldots`, "…", `\cdots`, "…", "\n", " ")
	thousandSpaceRE = regexp.MustCompile(`^([-+]?\d{1,3}(?: \d{3})+(?:\.\d+)?)( \d+/\d+)?$`)
	commaBangRE     = regexp.MustCompile(`,\\!\s*`)
	lineNumbersRE   = regexp.MustCompile(`(\d)[ \t]*\r?\n\s*([-+]?\d)`)
	repeatingRE     = regexp.MustCompile(`(\d*)\.(\d{0,20})\\overline\s*\{(\d{1,20})\}`)
	bracedCommaRE   = regexp.MustCompile(`\{\s*,\s*\}`)
	doubleSlashRE   = regexp.MustCompile(`\\\\([a-zA-Z])`)
	outerMatrixRE   = regexp.MustCompile(`^[(\[]\s*(\\begin\{.*\\end\{[a-zA-Z]+\})\s*[)\]]$`)
	labelInRE       = regexp.MustCompile(`^[A-Za-z](?:_\{?\w+\}?)?\s*\\in\s+`)
	unitWordRE      = regexp.MustCompile(`^(.*?[0-9}).)])\s*((?:[A-Za-z]+\.?(?:\s*\^\s*\{?[23]\}?)?\s*)+)$`)
	matrixRE        = regexp.MustCompile(`^\\begin\{([pbvBV]?matrix|array)\}(?:\{[lcr|]*\})?(.*)\\end\{([pbvBV]?matrix|array)\}$`)
)

// normalizeAnswer strips the LaTeX decoration that never changes a value.
func normalizeAnswer(s string) string {
	s = strings.TrimSpace(s)
	if len(s) > 4*maxExprBytes {
		s = s[:4*maxExprBytes]
	}
	s = lineNumbersRE.ReplaceAllString(s, "$1; $2") // 11\n5/6 is two numbers, not 11 5/6
	s = commaBangRE.ReplaceAllString(s, "")
	s = bracedCommaRE.ReplaceAllString(s, "")
	if !strings.Contains(s, `\begin`) {
		s = doubleSlashRE.ReplaceAllString(s, `\$1`) // \\frac written with an escaped backslash
	}
	s = strings.ReplaceAll(s, `\{`, "\x01") // set braces survive the brace handling below
	s = strings.ReplaceAll(s, `\}`, "\x02")
	s = strings.ReplaceAll(s, `\\`, "\x03") // row breaks survive the spacing commands
	s = spacing.Replace(s)
	s = strings.ReplaceAll(s, "\x03", `\\`)
	s = repeatingRE.ReplaceAllStringFunc(s, repeating)
	for i := 0; i < 4 && wrapCmdRE.MatchString(s); i++ {
		s = wrapCmdRE.ReplaceAllString(s, " $1 ")
	}
	s = degreeRE.ReplaceAllString(s, "")
	s = strings.Join(strings.Fields(s), " ")
	s = strings.TrimRight(s, ".,;: ")
	s = strings.TrimLeft(s, ":, ")
	if m := thousandSpaceRE.FindStringSubmatch(s); m != nil {
		s = strings.ReplaceAll(m[1], " ", "") + m[2] // "1 000", "1 000 4/9"
	}
	return s
}

func textKey(s string) string {
	s = strings.ToLower(s)
	s = strings.NewReplacer(" ", "", "{", "", "}", "", "\x01", "{", "\x02", "}").Replace(s)
	if len(s) == 3 && s[0] == '(' && s[2] == ')' { // (c) is the choice c
		s = s[1:2]
	}
	return s
}

// parseValue reads a final answer. asReference allows "or" as a list separator (a reference
// "3 or 4" lists two answers; a completion saying so hedges).
func parseValue(raw string, asReference bool) value {
	s := normalizeAnswer(raw)
	v := parseList(s, asReference, 0)
	v.key = textKey(s)
	return v
}

func parseList(s string, asReference bool, d int) value {
	if s == "" || d > maxValueDepth {
		return value{kind: vText}
	}
	if m := labelInRE.FindStringIndex(s); m != nil {
		s = s[m[1]:]
	}
	if strings.HasPrefix(s, "\x01") && strings.HasSuffix(s, "\x02") && closing(s, 0) == len(s)-1 {
		parts := splitTop(s[1:len(s)-1], asReference)
		v := value{kind: vSet}
		for _, p := range parts {
			v.items = append(v.items, flattenPM(parseElement(p, d+1))...)
		}
		return v
	}
	parts := splitTop(s, asReference)
	if len(parts) == 1 {
		e := parseElement(parts[0], d+1)
		if e.kind == vExpr && e.x.has(nPM) {
			return value{kind: vSet, items: flattenPM(e)}
		}
		return e
	}
	v := value{kind: vList}
	set := false
	for _, p := range parts {
		e := parseElement(p, d+1)
		if e.kind == vExpr && e.x.has(nPM) {
			set = true
		}
		v.items = append(v.items, flattenPM(e)...)
	}
	if set {
		v.kind = vSet
	}
	return v
}

// flattenPM expands an expression with ± into one value per sign choice.
func flattenPM(e value) []value {
	if e.kind != vExpr || !e.x.has(nPM) {
		return []value{e}
	}
	n := 0
	for k := 0; k < 3; k++ {
		if hasPMIndex(e.x, k) {
			n = k + 1
		}
	}
	var out []value
	for m := 0; m < 1<<n; m++ {
		c := e
		c.mask = m
		out = append(out, c)
	}
	return out
}

func hasPMIndex(n *node, k int) bool {
	if n == nil {
		return false
	}
	if n.kind == nPM && n.idx == k {
		return true
	}
	for _, c := range n.kids {
		if hasPMIndex(c, k) {
			return true
		}
	}
	return false
}

// closing returns the index of the bracket closing the one at i, or -1.
func closing(s string, i int) int {
	depth := 0
	for j := i; j < len(s); j++ {
		switch s[j] {
		case '(', '[', '{', '\x01':
			depth++
		case ')', ']', '}', '\x02':
			depth--
			if depth == 0 {
				return j
			}
		}
	}
	return -1
}

// scanTop calls at for every byte of s outside brackets; at returns how many bytes it used
// (0: one byte, nothing taken). It reports whether the brackets balance.
func scanTop(s string, at func(i int) int) bool {
	depth := 0
	// An interval opened by '(' may close with ']' and the other way round; depth counts both.
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '(', '[', '{', '\x01':
			depth++
			continue
		case ')', ']', '}', '\x02':
			depth--
			continue
		}
		if depth == 0 {
			if n := at(i); n > 0 {
				i += n - 1
			}
		}
	}
	return depth == 0
}

// splitTop splits s at top-level list separators: ',' (not a thousands separator), ';', "and"
// and, for a reference, "or". Intervals such as [0,1) are one element.
func splitTop(s string, asReference bool) []string {
	var parts []string
	last := 0
	balanced := scanTop(s, func(i int) int {
		cut := 0
		switch c := s[i]; {
		case c == ';':
			cut = 1
		case c == ',':
			if !thousandsAt(s, i) {
				cut = 1
			}
		case wordAt(s, i, "and"):
			cut = 3
		case asReference && wordAt(s, i, "or"):
			cut = 2
		}
		if cut > 0 {
			if p := strings.TrimSpace(s[last:i]); p != "" {
				parts = append(parts, p)
			}
			last = i + cut
		}
		return cut
	})
	if p := strings.TrimSpace(s[last:]); p != "" {
		parts = append(parts, p)
	}
	if !balanced || len(parts) == 0 {
		return []string{s}
	}
	return parts
}

// thousandsAt reports whether the comma at i separates thousands: 1-3 digits before (starting
// the number) and exactly three after.
func thousandsAt(s string, i int) bool {
	j := i
	for j > 0 && s[j-1] >= '0' && s[j-1] <= '9' {
		j--
	}
	if i-j < 1 || i-j > 3 {
		return false
	}
	if j > 0 && (s[j-1] == '.' || isLetterAt(s, j-1)) {
		return false
	}
	if j > 0 && s[j-1] == ',' && !thousandsAt(s, j-1) {
		return false
	}
	if j > 0 && s[j-1] == ',' {
		// inside a grouped number already: the previous group must be three digits
		if i-j != 3 {
			return false
		}
	}
	return i+3 < len(s)+0 && allDigits(safeSlice(s, i+1, i+4)) && !digitAt(s, i+4)
}

func safeSlice(s string, a, b int) string {
	if b > len(s) {
		return ""
	}
	return s[a:b]
}

func wordAt(s string, i int, w string) bool {
	if !strings.HasPrefix(s[i:], w) {
		return false
	}
	if i > 0 && (isAlnum(s[i-1]) || s[i-1] == '\\') {
		return false
	}
	return !isLetterAt(s, i+len(w))
}

var relOps = []string{"≤", "≥", "≠", "≈", "=", "<", ">"}

// splitRel splits s at top-level relation signs.
func splitRel(s string) (sides []string, ops []string) {
	last := 0
	scanTop(s, func(i int) int {
		for _, op := range relOps {
			if strings.HasPrefix(s[i:], op) {
				sides = append(sides, strings.TrimSpace(s[last:i]))
				ops = append(ops, op)
				last = i + len(op)
				return len(op)
			}
		}
		return 0
	})
	sides = append(sides, strings.TrimSpace(s[last:]))
	return sides, ops
}

// parseElement reads one element: a relation, union, tuple or interval, matrix, expression or text.
func parseElement(s string, d int) value {
	text := value{kind: vText, key: textKey(s)}
	if s == "" || d > maxValueDepth {
		return text
	}
	if s[0] == '\x01' && closing(s, 0) == len(s)-1 { // a set inside a union or tuple
		return parseList(s, false, d+1)
	}
	if m := outerMatrixRE.FindStringSubmatch(s); m != nil {
		s = m[1]
	}
	if m := matrixRE.FindStringSubmatch(s); m != nil {
		return parseMatrix(m[2], text, d)
	}
	if m := labelInRE.FindStringIndex(s); m != nil {
		s = s[m[1]:]
	}
	if sides, ops := splitRel(s); len(ops) > 0 {
		return parseRelation(sides, ops, text, d)
	}
	if strings.Contains(s, "∪") {
		v := value{kind: vUnion}
		finite := value{kind: vSet} // {1,3} ∪ {2,4} is the set {1,2,3,4}
		for _, p := range strings.Split(s, "∪") {
			p = strings.TrimSpace(p)
			e := parseElement(p, d+1)
			switch {
			case e.kind == vSet || e.kind == vList && strings.HasPrefix(p, "{"):
				finite.items = append(finite.items, e.items...)
			case e.kind != vTuple:
				return text
			}
			v.items = append(v.items, e)
		}
		if allFinite(v.items) {
			return finite
		}
		return v
	}
	if (s[0] == '(' || s[0] == '[') && (s[len(s)-1] == ')' || s[len(s)-1] == ']') && closing(s, 0) == len(s)-1 {
		inner := s[1 : len(s)-1]
		if parts := splitTop(inner, false); len(parts) > 1 {
			v := value{kind: vTuple, open: s[0], close: s[len(s)-1]}
			for _, p := range parts {
				v.items = append(v.items, parseElement(p, d+1))
			}
			return v
		}
	}
	if s[0] == '{' && closing(s, 0) == len(s)-1 { // {1,3}: braces that only group
		if parts := splitTop(s[1:len(s)-1], false); len(parts) > 1 {
			return parseList(s[1:len(s)-1], false, d+1)
		}
	}
	if e, ok := parseNumberish(s); ok {
		return e
	}
	if a, b, ok := strings.Cut(s, ":"); ok && !strings.Contains(b, ":") {
		// 7:32 is a ratio, 12:00 a time: both compared part by part.
		x, okA := parseNumberish(a)
		y, okB := parseNumberish(b)
		if okA && okB {
			return value{kind: vTuple, open: ':', close: ':', items: []value{x, y}, key: text.key}
		}
	}
	return text
}

// unitWords are the short unit names read as units after a number (longer words always are).
var unitWords = map[string]bool{"cm": true, "mm": true, "km": true, "kg": true, "mg": true, "ml": true,
	"hr": true, "ft": true, "yd": true, "mi": true, "lb": true, "oz": true, "sq": true, "cu": true}

// notUnits are words after a number that change what it says: "5 or more", "5 incorrect".
var notUnits = map[string]bool{"or": true, "and": true, "maybe": true, "not": true, "pi": true, "inf": true,
	"incorrect": true, "wrong": true, "false": true, "never": true, "none": true, "except": true, "without": true,
	"excluded": true, "impossible": true, "undefined": true, "more": true, "less": true, "fewer": true,
	"most": true, "least": true, "approximately": true, "about": true, "roughly": true, "nearly": true}

// parseNumberish reads an expression with an optional percent sign or trailing unit words
// ("125 miles", "15 cm^2", "28 percent").
func parseNumberish(s string) (value, bool) {
	v := value{kind: vExpr}
	body := strings.TrimSpace(s)
	if m := unitWordRE.FindStringSubmatch(body); m != nil {
		units := true
		unit := strings.ToLower(strings.TrimSpace(m[2]))
		for _, w := range strings.Fields(unit) {
			w = strings.TrimRight(strings.SplitN(w, "^", 2)[0], ".")
			if w == "" {
				continue // the ^2 of cm ^2
			}
			if notUnits[w] || funcs[w] != nil ||
				(len(w) < 3 && !unitWords[w]) {
				units = false
			}
		}
		if units {
			if unit == "percent" || unit == "pct" || unit == "percentage" {
				v.percent = true
			}
			body = strings.TrimSpace(m[1])
			if mult, ok := map[string]string{"thousand": "1000", "million": "10^6", "billion": "10^9", "trillion": "10^12"}[unit]; ok {
				body = "(" + body + ")*" + mult
			}
		}
	}
	if strings.HasSuffix(body, "%") {
		v.percent = true
		body = strings.TrimSpace(strings.TrimSuffix(body, "%"))
	}
	n, _, err := parseExpr(body)
	if err != nil {
		if errors.Is(err, errTooBig) || errors.Is(err, errDivZero) {
			return value{kind: vText, err: err, key: textKey(s)}, true
		}
		return value{}, false
	}
	v.x = n
	return v, true
}

// isLabel reports whether an equation's left side names the answer ("x", "a_3", "f(x)",
// "|AB|", "(p,q)", "V_1:V_2", "\frac{NO}{BO}") rather than being part of it: no digits outside
// subscripts and arguments.
func isLabel(s string) bool {
	if s == "" || len(s) > 40 {
		return false
	}
	depthSub := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '_' {
			depthSub = 1
			continue
		}
		if depthSub > 0 {
			if c == '{' || isAlnum(c) {
				if c == '{' {
					if k := strings.IndexByte(s[i:], '}'); k > 0 {
						i += k
					}
				}
				depthSub = 0
				continue
			}
		}
		if c >= '0' && c <= '9' {
			// f(2) is a label; 2x is not.
			if i > 0 && s[i-1] == '(' {
				continue
			}
			return false
		}
		if c == '+' || c == '-' || c == '^' {
			return false
		}
	}
	return true
}

func constant(v value) bool {
	switch v.kind {
	case vExpr:
		syms := map[string]bool{}
		v.x.symbols(syms)
		return len(syms) == 0
	case vTuple, vList, vSet, vUnion, vMatrix:
		for _, it := range v.items {
			if !constant(it) {
				return false
			}
		}
		return true
	}
	return false
}

func parseRelation(sides, ops []string, text value, d int) value {
	// x = 5+5+1 = 1/3 ≈ 0.33: what follows ≈ is an approximation of what precedes it.
	for k, op := range ops {
		if op == "≈" {
			if k == 0 {
				if len(sides) >= 2 && isLabel(sides[0]) {
					sides, ops = sides[:2], []string{"="}
				} else {
					return text
				}
			} else {
				sides, ops = sides[:k+1], ops[:k]
			}
			break
		}
	}
	for _, s := range sides {
		if s == "" {
			return text
		}
	}
	allEq := true
	for _, op := range ops {
		allEq = allEq && op == "="
	}
	if allEq {
		last := parseElement(sides[len(sides)-1], d+1)
		if len(sides) >= 3 {
			// x = 5+5+1 = 11: a worked chain; its value is the last side when that is a constant.
			if constant(last) {
				return last
			}
			return text
		}
		l, r := sides[0], sides[1]
		if constant(last) {
			lv, ok := parseNumberish(l)
			if isLabel(l) {
				last.label = strings.ReplaceAll(strings.ReplaceAll(l, "{", ""), "}", "")
				last.label = strings.ReplaceAll(last.label, " ", "")
				return last
			}
			if ok && constant(lv) {
				return last
			}
		}
		return equation([]string{l, r}, []string{"="}, text)
	}
	if len(sides) == 3 && len(ops) == 2 {
		// -2 ≤ x ≤ 7 is the interval [-2, 7].
		lo, okLo := parseNumberish(sides[0])
		hi, okHi := parseNumberish(sides[2])
		up := (ops[0] == "<" || ops[0] == "≤") && (ops[1] == "<" || ops[1] == "≤")
		down := (ops[0] == ">" || ops[0] == "≥") && (ops[1] == ">" || ops[1] == "≥")
		if okLo && okHi && constant(lo) && constant(hi) && isLabel(sides[1]) && (up || down) {
			if down {
				lo, hi = hi, lo
				ops = []string{ops[1], ops[0]}
			}
			v := value{kind: vTuple, open: '(', close: ')', items: []value{lo, hi}}
			if ops[0] == "≤" {
				v.open = '['
			}
			if ops[1] == "≤" {
				v.close = ']'
			}
			return v
		}
		return text
	}
	if len(sides) != 2 {
		return text
	}
	// x ≥ 2 is the interval [2, ∞).
	l, r := sides[0], sides[1]
	op := ops[0]
	if isSymbolName(r) && !isSymbolName(l) {
		l, r = r, l
		op = map[string]string{"<": ">", ">": "<", "≤": "≥", "≥": "≤", "≠": "≠"}[op]
	}
	rel := equation(sides, ops, text)
	if isSymbolName(l) && op != "≠" {
		if c, ok := parseNumberish(r); ok && constant(c) {
			inf := value{kind: vExpr, x: &node{kind: nInf}}
			var v value
			switch op {
			case "<":
				v = value{kind: vTuple, open: '(', close: ')', items: []value{neg(inf), c}}
			case "≤":
				v = value{kind: vTuple, open: '(', close: ']', items: []value{neg(inf), c}}
			case ">":
				v = value{kind: vTuple, open: '(', close: ')', items: []value{c, inf}}
			case "≥":
				v = value{kind: vTuple, open: '[', close: ')', items: []value{c, inf}}
			}
			// kept too, so that x < 1 still equals -x > -1
			v.ops, v.sides = rel.ops, rel.sides
			return v
		}
	}
	return rel
}

func neg(v value) value {
	v.x = &node{kind: nNeg, kids: []*node{v.x}}
	return v
}

var symbolNameRE = regexp.MustCompile(`^(?:[A-Za-z]|\\[a-zA-Z]+)(?:_\{?\w+\}?)?$`)

func isSymbolName(s string) bool { return symbolNameRE.MatchString(strings.TrimSpace(s)) }

// equation keeps a relation's sides as expressions: l - r REL 0, with > and ≥ turned around.
func equation(sides, ops []string, text value) value {
	if len(sides) != 2 {
		return text
	}
	l, _, err1 := parseExpr(sides[0])
	r, _, err2 := parseExpr(sides[1])
	if err1 != nil || err2 != nil || l.has(nPM) || r.has(nPM) {
		return text
	}
	op := ops[0]
	switch op {
	case ">":
		l, r, op = r, l, "<"
	case "≥":
		l, r, op = r, l, "≤"
	}
	return value{kind: vRel, ops: []string{op}, sides: []*node{l, r}, key: text.key}
}

func parseMatrix(body string, text value, d int) value {
	v := value{kind: vMatrix}
	for _, row := range strings.Split(body, `\\`) {
		row = strings.TrimSpace(row)
		if row == "" {
			continue
		}
		r := value{kind: vTuple, open: '[', close: ']'}
		for _, c := range strings.Split(row, "&") {
			r.items = append(r.items, parseElement(strings.TrimSpace(c), d+1))
		}
		v.items = append(v.items, r)
	}
	if len(v.items) == 0 {
		return text
	}
	return v
}

// equalValues decides whether the completion's answer g equals the reference w.
func equalValues(g, w value, p MathParams) bool {
	if g.kind == vList && w.kind == vList && allLabelled(g) && allLabelled(w) {
		// a_3 = 2, a_37 = 19: matched label by label, in any order.
		if len(g.items) != len(w.items) {
			return false
		}
		for _, wi := range w.items {
			found := false
			for _, gi := range g.items {
				if gi.label == wi.label && equalValues(gi, wi, p) {
					found = true
					break
				}
			}
			if !found {
				return false
			}
		}
		return true
	}
	if g.kind == vSet || w.kind == vSet || (g.kind == vList && w.kind == vList && allTuples(g) && allTuples(w)) {
		// Sets and lists of ordered pairs (solution sets) are unordered.
		gi, wi := items(g), items(w)
		return covers(gi, wi, p) && covers(wi, gi, p)
	}
	if g.kind != w.kind && len(g.sides) > 0 && len(w.sides) > 0 {
		return relEqual(g, w)
	}
	if g.kind != w.kind {
		if g.kind == vRel && w.kind == vExpr {
			return relAsExpr(g, w, p)
		}
		if w.kind == vRel && g.kind == vExpr {
			return relAsExpr(w, g, p)
		}
		return g.key != "" && g.key == w.key && g.kind != vExpr && w.kind != vExpr
	}
	switch g.kind {
	case vText:
		return g.key != "" && g.key == w.key
	case vExpr:
		return exprEqual(g, w, p)
	case vRel:
		return relEqual(g, w)
	case vTuple:
		if g.open != w.open || g.close != w.close {
			return false
		}
		fallthrough
	case vList, vUnion, vMatrix:
		if len(g.items) != len(w.items) {
			return false
		}
		for k := range g.items {
			gi, wi := g.items[k], w.items[k]
			if gi.label != "" && wi.label != "" && gi.label != wi.label {
				return false // y_1 = …, y_2 = … is not y_2 = …, y_2 = …
			}
			if !equalValues(gi, wi, p) {
				return false
			}
		}
		return true
	}
	return false
}

func allFinite(parts []value) bool {
	for _, p := range parts {
		if p.kind != vSet && p.kind != vList {
			return false
		}
	}
	return true
}

func allTuples(v value) bool {
	for _, it := range v.items {
		if it.kind != vTuple || it.open == ':' {
			return false
		}
	}
	return len(v.items) > 0
}

func allLabelled(v value) bool {
	seen := map[string]bool{}
	for _, it := range v.items {
		if it.label == "" || seen[it.label] {
			return false
		}
		seen[it.label] = true
	}
	return len(v.items) > 0
}

// hasText reports whether any part of v is unparsed text.
func hasText(v value) bool {
	if v.kind == vText {
		return true
	}
	for _, it := range v.items {
		if hasText(it) {
			return true
		}
	}
	return false
}

func items(v value) []value {
	if v.kind == vSet || v.kind == vList {
		return v.items
	}
	return []value{v}
}

// covers reports whether every item of b equals some item of a (set semantics: a repeated
// solution is the same solution).
func covers(a, b []value, p MathParams) bool {
	for _, bi := range b {
		found := false
		for _, ai := range a {
			if equalValues(ai, bi, p) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return len(a) > 0
}

// relAsExpr: "y = 2x+3" against "2x+3", when the left side is a symbol or f(x) that the right
// side does not use.
func relAsExpr(r, e value, p MathParams) bool {
	if r.ops[0] != "=" || r.sides[0].kind != nSym {
		return false
	}
	syms := map[string]bool{}
	r.sides[1].symbols(syms)
	if syms[r.sides[0].name] {
		return false
	}
	return exprEqual(value{kind: vExpr, x: r.sides[1]}, e, p)
}

func (v value) symbolSet(into map[string]bool) {
	if v.x != nil {
		v.x.symbols(into)
	}
	for _, s := range v.sides {
		s.symbols(into)
	}
}

// exprEqual compares two expressions: exactly when both are rational, numerically (with the
// configured tolerance) when both are constants, and at sample points when symbols appear.
func exprEqual(g, w value, p MathParams) bool {
	syms := map[string]bool{}
	g.symbolSet(syms)
	w.symbolSet(syms)
	if len(syms) == 0 {
		gr, gok, gerr := g.x.exact(g.mask)
		wr, wok, werr := w.x.exact(w.mask)
		if gerr != nil || werr != nil {
			return false
		}
		if gok && wok {
			for _, gc := range scaled(gr, g.percent, completionPercent(p.Percent)) {
				for _, wc := range scaled(wr, w.percent, p.Percent) {
					// The default tolerance absorbs rounding in a written decimal; between two
					// integers there is none: 7425001 is not 7425000.
					if gc.IsInt() && wc.IsInt() && p.AbsTolerance == 0 && p.Tolerance <= 1e-6 {
						if gc.Cmp(wc) == 0 {
							return true
						}
						continue
					}
					if withinTolerance(gc, wc, p.Tolerance, p.AbsTolerance) {
						return true
					}
				}
			}
			return false
		}
		env := func(string) complex128 { return 0 }
		gv, wv := g.x.eval(env, g.mask), w.x.eval(env, w.mask)
		for _, gc := range scaledC(gv, g.percent, completionPercent(p.Percent)) {
			for _, wc := range scaledC(wv, w.percent, p.Percent) {
				if closeC(gc, wc, p.Tolerance, p.AbsTolerance) {
					return true
				}
			}
		}
		return false
	}
	if g.percent != w.percent {
		return false
	}
	valid := 0
	for k := 0; k < samplePoints; k++ {
		env := func(name string) complex128 { return symbolValue(name, k) }
		gv, wv := g.x.eval(env, g.mask), w.x.eval(env, w.mask)
		if bad(gv) || bad(wv) {
			if bad(gv) != bad(wv) && !(cmplx.IsNaN(gv) || cmplx.IsNaN(wv)) {
				return false
			}
			continue
		}
		valid++
		if !closeC(gv, wv, 1e-9, 0) {
			return false
		}
	}
	return valid >= 3
}

func bad(z complex128) bool { return cmplx.IsNaN(z) || cmplx.IsInf(z) }

// completionPercent is the percent rule for the completion's side: only "lenient" lets a
// completion's % stand for both the number and the fraction.
func completionPercent(mode string) string {
	if mode == "lenient" {
		return "either"
	}
	return "value"
}

func scaled(v *big.Rat, percent bool, mode string) []*big.Rat {
	if !percent {
		return []*big.Rat{v}
	}
	frac := new(big.Rat).Quo(v, big.NewRat(100, 1))
	if mode == "value" {
		return []*big.Rat{frac}
	}
	return []*big.Rat{frac, v}
}

func scaledC(v complex128, percent bool, mode string) []complex128 {
	if !percent {
		return []complex128{v}
	}
	if mode == "value" {
		return []complex128{v / 100}
	}
	return []complex128{v / 100, v}
}

// closeC: |g-w| <= max(abs, rel*|w|), plus a few ulps for float evaluation; infinities must be
// the same infinity.
func closeC(g, w complex128, rel, abs float64) bool {
	if cmplx.IsInf(g) || cmplx.IsInf(w) {
		return g == w
	}
	if cmplx.IsNaN(g) || cmplx.IsNaN(w) {
		return false
	}
	d := cmplx.Abs(g - w)
	bound := math.Max(abs, math.Max(rel, 0)*cmplx.Abs(w))
	return d <= bound+1e-12*math.Max(cmplx.Abs(w), 1e-300)
}

// relEqual: the same relation, sides compared as l-r up to a nonzero factor (positive for
// inequalities, whose direction it would otherwise flip).
func relEqual(g, w value) bool {
	if len(g.ops) != 1 || len(w.ops) != 1 || g.ops[0] != w.ops[0] {
		return false
	}
	syms := map[string]bool{}
	g.symbolSet(syms)
	w.symbolSet(syms)
	if len(syms) == 0 { // 1 < 2 is not 3 < 5
		return g.key == w.key
	}
	var ratio complex128
	have := false
	valid := 0
	for k := 0; k < samplePoints; k++ {
		env := func(name string) complex128 { return symbolValue(name, k) }
		dg := g.sides[0].eval(env, 0) - g.sides[1].eval(env, 0)
		dw := w.sides[0].eval(env, 0) - w.sides[1].eval(env, 0)
		if bad(dg) || bad(dw) {
			continue
		}
		valid++
		if !have {
			if cmplx.Abs(dw) < 1e-12 {
				if cmplx.Abs(dg) > 1e-12 {
					return false
				}
				continue
			}
			ratio, have = dg/dw, true
			if cmplx.Abs(ratio) < 1e-12 {
				return false
			}
			if g.ops[0] != "=" && g.ops[0] != "≠" && (math.Abs(imag(ratio)) > 1e-12 || real(ratio) <= 0) {
				return false
			}
		}
		if cmplx.Abs(dg-ratio*dw) > 1e-9*math.Max(cmplx.Abs(dg), 1e-12) {
			return false
		}
	}
	return have && valid >= 3
}

// repeating turns a repeating decimal (0.1\overline{6}) into the fraction it is: with I the
// integer part, F the fixed digits and R the repeated ones, I.F(R) = (IFR - IF) / (10^|F| (10^|R| - 1)).
func repeating(m string) string {
	g := repeatingRE.FindStringSubmatch(m)
	i, f, r := g[1], g[2], g[3]
	if i == "" {
		i = "0"
	}
	all, _ := new(big.Int).SetString(i+f+r, 10)
	head, _ := new(big.Int).SetString(i+f, 10)
	num := new(big.Int).Sub(all, head)
	den := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(f))), nil)
	nines := new(big.Int).Sub(new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(len(r))), nil), big.NewInt(1))
	den.Mul(den, nines)
	return "(" + num.String() + "/" + den.String() + ")"
}
