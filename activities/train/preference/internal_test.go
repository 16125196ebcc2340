package preference

import (
	"slices"
	"testing"

	"github.com/temperml/temper/activities/train"
	"github.com/temperml/temper/algorithms/data"
	"github.com/temperml/temper/algorithms/tasks"
)

// TestNextRowsAndScatter checks the data order across epochs and the reference layout helpers.
func TestNextRowsAndScatter(t *testing.T) {
	seen := map[int]int{}
	cur := data.Cursor{Seed: 9}
	for i := 0; i < 5; i++ {
		var idx []int
		idx, cur = train.NextRows(10, 4, cur)
		for _, j := range idx {
			seen[j]++
		}
	}
	if cur.Epoch != 2 || cur.Index != 0 {
		t.Fatalf("after 20 rows of 10: cursor %+v, want epoch 2 index 0", cur)
	}
	for j := 0; j < 10; j++ {
		if seen[j] != 2 {
			t.Fatalf("example %d seen %d times in two epochs", j, seen[j])
		}
	}
	enc := train.Encoder()
	e1, _ := enc.Encode(tasks.Example{Prompt: "1+2=", Completion: "3"})
	side := layoutSide([]data.Encoded{e1}, 8)
	// [BOS 1 + 2 = 3 EOS PAD]: the counted targets are "3" (after "=") and EOS.
	if want := []float32{0, 0, 0, 0, 1, 1, 0, 0}; !slices.Equal(side.mask[0], want) {
		t.Fatalf("mask %v, want %v", side.mask[0], want)
	}
	full, err := side.scatter([][]float32{{-1, -2}})
	if err != nil || !slices.Equal(full[0], []float32{0, 0, 0, 0, -1, -2, 0, 0}) {
		t.Fatalf("scatter: %v %v", full, err)
	}
	if _, err := side.scatter([][]float32{{-1}}); err == nil {
		t.Fatal("scatter of too few values: want an error")
	}
	if got := side.counted(full); !slices.Equal(got[0], []float32{-1, -2}) {
		t.Fatalf("counted %v", got)
	}
	b := side.batch()
	if b.Targets[0][3] != b.Tokens[0][4] || b.Targets[0][7] != 256 {
		t.Fatalf("targets %v for tokens %v", b.Targets[0], b.Tokens[0])
	}
}
