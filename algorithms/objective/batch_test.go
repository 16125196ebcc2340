package objective

import (
	"fmt"
	"strings"
	"testing"
)

// TestBatchLayouts: every batch lays its fields out in its objective's documented input order, with
// the documented dtypes and shapes (rows 2, seq 3, a second side of seq 4, window or k 5).
func TestBatchLayouts(t *testing.T) {
	ints := func(rows, cols, base int) [][]int {
		x := make([][]int, rows)
		for r := range x {
			x[r] = make([]int, cols)
			for c := range x[r] {
				x[r][c] = base + r*cols + c
			}
		}
		return x
	}
	floats := func(rows, cols int, base float32) [][]float32 {
		x := make([][]float32, rows)
		for r := range x {
			x[r] = make([]float32, cols)
			for c := range x[r] {
				x[r][c] = base + float32(r*cols+c)
			}
		}
		return x
	}
	valid := func(rows, cols int) [][]bool {
		x := make([][]bool, rows)
		for r := range x {
			x[r] = make([]bool, cols)
			x[r][0] = true
		}
		return x
	}
	rows := PolicyRows{Tokens: ints(2, 3, 0), Targets: ints(2, 3, 100), Positions: ints(2, 3, 200), Valid: valid(2, 3),
		Mask: floats(2, 3, 0), Old: floats(2, 3, 10), Behaviour: floats(2, 3, 20), Ref: floats(2, 3, 30)}
	rowsLayout := "int32[2 3]=0 int32[2 3]=100 int32[2 3]=200 bool[2 3]=true float32[2 3]=0 float32[2 3]=10 float32[2 3]=20 float32[2 3]=30"
	side := func(seq, base int) PrefSide {
		return PrefSide{Tokens: ints(2, seq, base), Positions: ints(2, seq, base+50), Valid: valid(2, seq), Mask: floats(2, seq, float32(base))}
	}
	seqs := func(base int) Sequences {
		return Sequences{Tokens: ints(2, 3, base), Positions: ints(2, 3, base+50), Valid: valid(2, 3), Last: []int{base + 1, 2},
			Completion: floats(2, 3, float32(base))}
	}
	for _, c := range []struct {
		name  string
		batch Batch
		want  string
	}{
		{"policy", PolicyBatch{PolicyRows: rows, Adv: []float32{7, 8}}, rowsLayout + " float32[2]=7"},
		{"policy window", PolicyBatch{PolicyRows: rows, Adv: []float32{7, 8}, Cols: [][]int{{1, 2}, {2}}, Window: 5},
			rowsLayout + " float32[2]=7 int32[2 5]=1"},
		{"ppo", PPOBatch{PolicyRows: rows, Adv: floats(2, 3, 40), OldValues: floats(2, 3, 50), Returns: floats(2, 3, 60)},
			rowsLayout + " float32[2 3]=40 float32[2 3]=50 float32[2 3]=60"},
		{"pref", PrefBatch{Chosen: side(3, 1), Rejected: side(4, 2), RefChosen: floats(2, 3, 3), RefRejected: floats(2, 4, 4)},
			"int32[2 3]=1 int32[2 3]=51 bool[2 3]=true float32[2 3]=1 int32[2 4]=2 int32[2 4]=52 bool[2 4]=true float32[2 4]=2 float32[2 3]=3 float32[2 4]=4"},
		{"kto", KTOBatch{Rows: side(3, 1), Ref: floats(2, 3, 3), Desirable: []float32{1, 0}, KL: side(4, 2), KLRef: floats(2, 4, 4)},
			"int32[2 3]=1 int32[2 3]=51 bool[2 3]=true float32[2 3]=1 float32[2 3]=3 float32[2]=1 int32[2 4]=2 int32[2 4]=52 bool[2 4]=true float32[2 4]=2 float32[2 4]=4"},
		{"sequences", seqs(1), "int32[2 3]=1 int32[2 3]=51 bool[2 3]=true int32[2]=2 float32[2 3]=1"},
		{"bradley-terry", BTBatch{Chosen: seqs(1), Rejected: seqs(2), Weight: []float32{1, 0}},
			"int32[2 3]=1 int32[2 3]=51 bool[2 3]=true int32[2]=2 int32[2 3]=2 int32[2 3]=52 bool[2 3]=true int32[2]=3 float32[2]=1 float32[2 3]=1 float32[2 3]=2"},
		{"distill logits", DistillBatch{Tokens: ints(2, 3, 1), Positions: ints(2, 3, 2), Valid: valid(2, 3), Mask: floats(2, 3, 3),
			Logits: make([]float32, 2*3*5), Width: 5}, "int32[2 3]=1 int32[2 3]=2 bool[2 3]=true float32[2 3]=3 float32[2 3 5]=0"},
		{"distill top-k", DistillBatch{Tokens: ints(2, 3, 1), Positions: ints(2, 3, 2), Valid: valid(2, 3), Mask: floats(2, 3, 3),
			IDs: make([]int32, 2*3*5), LogProbs: make([]float32, 2*3*5), Width: 5}, "int32[2 3]=1 int32[2 3]=2 bool[2 3]=true float32[2 3]=3 int32[2 3 5]=0 float32[2 3 5]=0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []string
			for _, x := range c.batch.Tensors() {
				// The first value tells the fields apart; the dtype and shape check the layout.
				first := strings.TrimLeft(fmt.Sprint(x.Value()), "[")
				first = strings.FieldsFunc(first, func(r rune) bool { return r == ' ' || r == ']' })[0]
				got = append(got, fmt.Sprintf("%s%v=%s", strings.ToLower(x.DType().String()), x.Shape().Dimensions, first))
			}
			if g := strings.Join(got, " "); g != c.want {
				t.Errorf("layout\n got %s\nwant %s", g, c.want)
			}
		})
	}
}
