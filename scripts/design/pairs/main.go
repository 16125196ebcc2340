// Command pairs writes synthetic design preference pairs (package design) as JSONL of image
// pairs for a vision reward phase:
//
//	go run ./scripts/design/pairs -out /data/design -train 2000 -heldout 400 -size 32 -noise 0.1
//
// writes train.jsonl (label noise applied) and heldout.jsonl (clean labels, another seed) with the
// PNGs under images/.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/temperml/temper/scripts/design"
)

func main() {
	out := flag.String("out", "", "output directory")
	nTrain := flag.Int("train", 2000, "training pairs")
	nHeld := flag.Int("heldout", 400, "held-out pairs")
	size := flag.Int("size", 32, "image side in pixels")
	noise := flag.Float64("noise", 0.1, "label noise of the training pairs (0..0.5)")
	seed := flag.Uint64("seed", 1, "seed")
	inline := flag.Bool("inline", false, "embed images as data: URIs instead of PNG files")
	flag.Parse()
	if *out == "" || *noise < 0 || *noise > 0.5 {
		fmt.Fprintln(os.Stderr, "pairs: -out is required and -noise must be in [0, 0.5]")
		os.Exit(2)
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, f := range []struct {
		name  string
		pairs []design.Pair
	}{{"train.jsonl", design.Pairs(*nTrain, *seed, *noise)}, {"heldout.jsonl", design.Pairs(*nHeld, *seed+1000, 0)}} {
		if err := design.WritePairs(filepath.Join(*out, f.name), f.pairs, *size, *inline); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
}
