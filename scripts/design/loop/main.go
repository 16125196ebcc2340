// Command loop writes the design loop's data (package design, WriteLoop) for
// scripts/design/loop.yaml:
//
//	go run ./scripts/design/loop -out /tmp/temper-design
//
// writes sft.jsonl, heldout.jsonl, prompts.jsonl, critic-train.jsonl, critic-heldout.jsonl and
// images/ (the paths loop.yaml reads).
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/temperml/temper/scripts/design"
)

func main() {
	s := design.DefaultLoopSizes
	out := flag.String("out", "/tmp/temper-design", "output directory (loop.yaml reads /tmp/temper-design)")
	flag.IntVar(&s.SFT, "sft", s.SFT, "plain layouts to imitate (SFT)")
	flag.IntVar(&s.Heldout, "heldout", s.Heldout, "held-out briefs")
	flag.IntVar(&s.Prompts, "prompts", s.Prompts, "briefs for RL")
	flag.IntVar(&s.CriticTrain, "critic-train", s.CriticTrain, "the critic's training pairs")
	flag.IntVar(&s.CriticHeldout, "critic-heldout", s.CriticHeldout, "the critic's held-out pairs")
	flag.StringVar(&s.Pairs, "pairs", s.Pairs, "the critic's pair generator: principles or varied")
	flag.Uint64Var(&s.Seed, "seed", s.Seed, "seed")
	flag.Parse()
	if err := design.WriteLoop(*out, s); err != nil {
		fmt.Fprintln(os.Stderr, "loop:", err)
		os.Exit(1)
	}
}
