package verify

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"strings"
)

// CountdownParams configures "countdown": reach Target with an arithmetic expression over
// Numbers, each used at most once (exactly once with UseAll), with + - * / and parentheses,
// evaluated with exact rationals (so 7/2*2 = 7). Unary minus, decimals and concatenated digits
// are not allowed.
type CountdownParams struct {
	Numbers []int64 `json:"numbers,omitempty"`
	Target  *int64  `json:"target,omitempty"`
	UseAll  bool    `json:"use_all,omitempty"`
	// Tag names the answer tag, default "answer". Without a tag the last non-empty line is read;
	// "expr = target" is accepted (the side with operators is evaluated).
	Tag string `json:"tag,omitempty"`
}

type countdownVerifier struct{ p CountdownParams }

// NewCountdown builds "countdown".
func NewCountdown(params json.RawMessage) (Verifier, error) {
	c := &countdownVerifier{}
	if err := DecodeParams("countdown", params, &c.p); err != nil {
		return nil, err
	}
	c.p.Tag = cmp.Or(c.p.Tag, "answer")
	if !validTagName(c.p.Tag) {
		return nil, fmt.Errorf("verify: countdown params: tag=%q: want letters, digits, '_' or '-'", c.p.Tag)
	}
	return c, nil
}

var countdownOps = strings.NewReplacer("×", "*", "÷", "/", "·", "*", "−", "-", `\times`, "*", `\div`, "/", `\cdot`, "*",
	`\left`, "", `\right`, "", "$", "", `\(`, "", `\)`, "")

func (c *countdownVerifier) Verify(ctx context.Context, s Sample) (Verdict, error) {
	p := c.p
	if err := ApplyReference("countdown", &p, s.Reference); err != nil {
		return Verdict{}, err
	}
	if len(p.Numbers) == 0 || p.Target == nil {
		return Verdict{}, fmt.Errorf("verify: countdown: reference needs \"numbers\" and \"target\"")
	}
	if len(p.Numbers) > 32 {
		return Verdict{}, fmt.Errorf("verify: countdown: %d numbers: at most 32", len(p.Numbers))
	}
	expr, fb := countdownExpr(s.Completion, p.Tag)
	if fb != "" {
		return fail("%s", fb), nil
	}
	for _, r := range expr {
		if !strings.ContainsRune("0123456789+-*/() ", r) {
			return fail("expression %s may only use the given numbers, + - * / and parentheses", quote(expr)), nil
		}
	}
	v, used, err := evalExpr(expr, modeCountdown)
	if err != nil {
		return fail("cannot evaluate %s: %v", quote(expr), err), nil
	}
	// Each literal must be matched by a distinct given number.
	left := map[string]int{}
	for _, n := range p.Numbers {
		left[big.NewInt(n).String()]++
	}
	for _, u := range used {
		k := u.String()
		if left[k] == 0 {
			return fail("%s is not available (given %s; each at most once)", clip(k, 20), numList(p.Numbers)), nil
		}
		left[k]--
	}
	if p.UseAll && len(used) != len(p.Numbers) {
		return fail("use every number exactly once (used %d of %d)", len(used), len(p.Numbers)), nil
	}
	if v.Cmp(new(big.Rat).SetInt64(*p.Target)) != 0 {
		return fail("%s = %s, not the target", quote(expr), ratString(v)), nil
	}
	return pass(), nil
}

func numList(ns []int64) string {
	parts := make([]string, len(ns))
	for i, n := range ns {
		parts[i] = fmt.Sprint(n)
	}
	return strings.Join(parts, ", ")
}

func countdownExpr(text, tag string) (string, string) {
	tagged, err := tagContents(text, tag)
	if err != nil {
		return "", err.Error()
	}
	var cand string
	switch {
	case len(tagged) > 0:
		cand = tagged[0]
		for _, t := range tagged[1:] {
			if strings.Join(strings.Fields(t), "") != strings.Join(strings.Fields(cand), "") {
				return "", fmt.Sprintf("%d different <%s> answers; give exactly one", len(tagged), tag)
			}
		}
	default:
		lines := strings.Split(strings.TrimSpace(text), "\n")
		cand = lines[len(lines)-1]
	}
	cand = strings.TrimSpace(countdownOps.Replace(cand))
	if cand == "" {
		return "", "no expression found; give it in <" + tag + ">…</" + tag + ">"
	}
	if strings.Contains(cand, "=") {
		parts := strings.Split(cand, "=")
		chosen := ""
		for _, part := range parts {
			if strings.ContainsAny(part, "+-*/") {
				if chosen != "" {
					return "", "give one expression, not a chain of equations"
				}
				chosen = part
			}
		}
		if chosen == "" {
			return "", "no expression found"
		}
		cand = strings.TrimSpace(chosen)
	}
	return cand, ""
}

// SudokuParams configures "sudoku": the completion is a solved grid (4x4 or 9x9) that keeps
// every given digit and has each digit once per row, column and box.
type SudokuParams struct {
	// Givens is the puzzle: a string of size*size cells ("0" or "." for empty, other separators
	// ignored) or an array of rows of integers (0 = empty).
	Givens Grid `json:"givens,omitempty"`
	// Tag: read the grid from inside <tag>…</tag> when present. Default "answer".
	Tag string `json:"tag,omitempty"`
	// Partial scores the fraction of rows, columns and boxes that are valid (givens must still
	// be kept); default is all-or-nothing.
	Partial bool `json:"partial,omitempty"`
}

// Grid is a square grid of digits, 0 for empty.
type Grid [][]int

// UnmarshalJSON reads a string of cells or an array of rows.
func (g *Grid) UnmarshalJSON(b []byte) error {
	var rows [][]int
	if err := json.Unmarshal(b, &rows); err == nil {
		*g = rows
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a string of cells or an array of rows")
	}
	var cells []int
	for _, r := range s {
		switch {
		case r >= '0' && r <= '9':
			cells = append(cells, int(r-'0'))
		case r == '.' || r == '_':
			cells = append(cells, 0)
		}
	}
	n := 0
	for n*n < len(cells) {
		n++
	}
	if n*n != len(cells) {
		return fmt.Errorf("%d cells is not a square grid", len(cells))
	}
	out := make(Grid, n)
	for i := range out {
		out[i] = cells[i*n : (i+1)*n]
	}
	*g = out
	return nil
}

type sudokuVerifier struct{ p SudokuParams }

// NewSudoku builds "sudoku".
func NewSudoku(params json.RawMessage) (Verifier, error) {
	v := &sudokuVerifier{}
	if err := DecodeParams("sudoku", params, &v.p); err != nil {
		return nil, err
	}
	v.p.Tag = cmp.Or(v.p.Tag, "answer")
	if !validTagName(v.p.Tag) {
		return nil, fmt.Errorf("verify: sudoku params: tag=%q: want letters, digits, '_' or '-'", v.p.Tag)
	}
	return v, nil
}

func boxShape(n int) (int, int, bool) {
	switch n {
	case 4:
		return 2, 2, true
	case 6:
		return 2, 3, true
	case 9:
		return 3, 3, true
	}
	return 0, 0, false
}

func (v *sudokuVerifier) Verify(ctx context.Context, s Sample) (Verdict, error) {
	p := v.p
	if err := ApplyReference("sudoku", &p, s.Reference); err != nil {
		return Verdict{}, err
	}
	n := len(p.Givens)
	br, bc, ok := boxShape(n)
	if !ok {
		return Verdict{}, fmt.Errorf("verify: sudoku: givens is %dx?: want 4x4, 6x6 or 9x9", n)
	}
	for i, row := range p.Givens {
		if len(row) != n {
			return Verdict{}, fmt.Errorf("verify: sudoku: givens row %d has %d cells, want %d", i, len(row), n)
		}
		for _, c := range row {
			if c < 0 || c > n {
				return Verdict{}, fmt.Errorf("verify: sudoku: givens row %d has %d: want 0..%d", i, c, n)
			}
		}
	}
	grid, fb := readGrid(s.Completion, p.Tag, n)
	if fb != "" {
		return fail("%s", fb), nil
	}
	for i := range n {
		for j := range n {
			if g := p.Givens[i][j]; g != 0 && grid[i][j] != g {
				return fail("cell (row %d, column %d) must keep the given %d", i+1, j+1, g), nil
			}
		}
	}
	okUnits, total := 0, 3*n
	var failures []string
	unit := func(kind string, idx int, cells []int) {
		seen := make([]bool, n+1)
		good := true
		for _, c := range cells {
			if c < 1 || c > n || seen[c] {
				good = false
				break
			}
			seen[c] = true
		}
		if good {
			okUnits++
		} else {
			failures = append(failures, fmt.Sprintf("%s %d does not hold 1..%d once each", kind, idx+1, n))
		}
	}
	for i := range n {
		unit("row", i, grid[i])
	}
	for j := range n {
		col := make([]int, n)
		for i := range n {
			col[i] = grid[i][j]
		}
		unit("column", j, col)
	}
	for b := range n {
		r0, c0 := (b/(n/bc))*br, (b%(n/bc))*bc
		var cells []int
		for i := r0; i < r0+br; i++ {
			cells = append(cells, grid[i][c0:c0+bc]...)
		}
		unit("box", b, cells)
	}
	verdict := fraction(okUnits, total, failures, nil)
	if !p.Partial && !verdict.Pass {
		verdict.Score = 0
	}
	return verdict, nil
}

// readGrid finds an n×n grid: a JSON array of rows, or the last n lines that hold exactly n
// cells each (digits 1-9, '0' or '.' for empty; separators such as | + - and spaces ignored).
func readGrid(text, tag string, n int) ([][]int, string) {
	tagged, err := tagContents(text, tag)
	if err != nil {
		return nil, err.Error()
	}
	if len(tagged) > 1 {
		return nil, fmt.Sprintf("<%s> appears %d times; expected once", tag, len(tagged))
	}
	if len(tagged) == 1 {
		text = tagged[0]
	} else if b, _ := fencedBlocks(text); len(b) > 0 {
		text = b[len(b)-1]
	}
	trim := strings.TrimSpace(text)
	if strings.HasPrefix(trim, "[") {
		var rows [][]int
		if err := json.Unmarshal([]byte(trim), &rows); err == nil {
			if len(rows) != n {
				return nil, fmt.Sprintf("grid has %d rows, want %d", len(rows), n)
			}
			for i, r := range rows {
				if len(r) != n {
					return nil, fmt.Sprintf("row %d has %d cells, want %d", i+1, len(r), n)
				}
			}
			return rows, ""
		}
	}
	var rows [][]int
	for _, line := range strings.Split(text, "\n") {
		var cells []int
		for _, r := range line {
			switch {
			case r >= '0' && r <= '9':
				cells = append(cells, int(r-'0'))
			case r == '.' || r == '_':
				cells = append(cells, 0)
			}
		}
		if len(cells) == n {
			rows = append(rows, cells)
		}
	}
	if len(rows) < n {
		return nil, fmt.Sprintf("no %dx%d grid found (one row per line)", n, n)
	}
	rows = rows[len(rows)-n:]
	for i, r := range rows {
		for j, c := range r {
			if c == 0 {
				return nil, fmt.Sprintf("cell (row %d, column %d) is empty", i+1, j+1)
			}
		}
	}
	return rows, ""
}
