package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime"

	"github.com/temperml/temper/scripts/peer"
	"github.com/temperml/temper/tpu"
)

// peerDefaultExecutor is Temper's executor under --peer unless --executor says otherwise: the one
// workers run. Since the decode kernels split large products across workers themselves, the
// sequential executor measured as fast as the parallel one for training (train ratios 2.17–2.41
// against 2.26–2.54 on AVX-512, one window) and faster for cached generation, whose many small ops
// paid the parallel scheduler's overhead (small preset 9,952 against 6,192 tok/s).
const peerDefaultExecutor = tpu.ExecutorSequential

// peerFlags are the flags of `bench model --peer`.
type peerFlags struct {
	on                   bool
	repeats              int
	torch, interop, blas int
	decodeAttend         string
	genPromptLen         int
}

func (p *peerFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&p.on, "peer", false, "bench model: also run the PyTorch peer (scripts/peer/bench_torch.py on "+peer.Python+"), alternating with Temper, and print Temper/PyTorch ratios")
	fs.IntVar(&p.repeats, "repeats", 2, "bench model --peer: runs of each side per preset (the order alternates between repeats)")
	fs.IntVar(&p.torch, "peer-torch-threads", 1, "bench model --peer: torch.set_num_threads of the peer")
	fs.IntVar(&p.interop, "peer-interop-threads", 1, "bench model --peer: torch.set_num_interop_threads of the peer")
	fs.IntVar(&p.blas, "peer-blas-threads", runtime.NumCPU(), "bench model --peer: OPENBLAS_NUM_THREADS of the peer (0: the environment's)")
	fs.StringVar(&p.decodeAttend, "peer-decode-attend", "filled", "bench model --peer: the peer's decode attends over the filled cache (filled, as inference engines do) or all of it with a mask (full); Temper attends over the filled part rounded up to 32 columns")
	fs.IntVar(&p.genPromptLen, "gen-prompt-len", 16, "bench model: tokens per generation prompt")
}

// flagSet reports whether the flag name was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// runBenchPeer runs Temper's bench and the PyTorch peer alternately, preset by preset, and prints
// the ratios. Each Temper run is a fresh Runtime (as `bench model`), each peer run a fresh Python
// process; the uncached reference generation is skipped (the peer has none).
func runBenchPeer(ctx context.Context, bo tpu.BenchOptions, pf peerFlags, executorSet, asJSON bool) error {
	if pf.repeats < 1 {
		return usageErr("bench model --peer: --repeats=%d: must be >= 1", pf.repeats)
	}
	if pf.decodeAttend != "filled" && pf.decodeAttend != "full" {
		return usageErr("bench model --peer: --peer-decode-attend=%q: allowed \"filled\", \"full\"", pf.decodeAttend)
	}
	if err := peer.Available(ctx); err != nil {
		return err
	}
	var cmp peer.Comparison
	cmp.ISA = peer.DetectISA()
	cmp.Repeats = pf.repeats
	cmp.Order = "PyTorch first in odd repeats, Temper first in even ones, preset by preset"
	cmp.Temper.ExecutorChoice = "executor set by --executor"
	if !executorSet && bo.Backend != tpu.BackendXLA {
		bo.Mode = peerDefaultExecutor
		cmp.Temper.ExecutorChoice = "executor " + peerDefaultExecutor + ": the workers' own, the default under --peer"
	}
	bo.UncachedTokens = -1
	po := peer.Options{Batch: bo.Batch, Seq: bo.Seq, Steps: bo.Steps, GenPrompts: bo.GenPrompts,
		GenPromptLen: bo.GenPromptLen, GenTokens: bo.GenTokens, GenCalls: 1, DecodeAttend: pf.decodeAttend, Seed: 1,
		Threads: peer.Threads{Torch: pf.torch, Interop: pf.interop, BLAS: pf.blas}}
	gen := "no generation"
	if bo.GenPrompts > 0 {
		gen = fmt.Sprintf("cached generation of %d prompts × %d random tokens → %d new tokens, greedy (1 untimed call, then 1 timed)",
			bo.GenPrompts, bo.GenPromptLen, bo.GenTokens)
	}
	cmp.Workload = fmt.Sprintf("training %d×%d random tokens, AdamW, %d timed steps after 1 untimed; %s", bo.Batch, bo.Seq, bo.Steps, gen)

	for r := range pf.repeats {
		for _, preset := range bo.Presets {
			runPeer := func() error {
				o := po
				o.Presets = []string{preset}
				rep, err := peer.Run(ctx, o, os.Stderr)
				if err != nil {
					return err
				}
				row, ok := rep.Row(preset)
				if !ok {
					return fmt.Errorf("bench model --peer: the peer reported no row for %s", preset)
				}
				cmp.SetPeer(rep)
				cmp.Samples = append(cmp.Samples, peer.Sample{Side: peer.SidePeer, Repeat: r + 1, Preset: preset,
					TrainTokPerSec: row.TrainTokensPerSec, CachedTokPerSec: row.CachedTokensPerSec})
				return nil
			}
			runTemper := func() error {
				o := bo
				o.Presets = []string{preset}
				rep, err := tpu.BenchModel(ctx, o)
				if err != nil {
					return err
				}
				row := rep.Rows[0]
				cmp.Temper.Backend, cmp.Temper.GOMAXPROCS, cmp.Temper.GoVersion = rep.Backend, rep.GOMAXPROCS, rep.GoVersion
				cmp.Samples = append(cmp.Samples, peer.Sample{Side: peer.SideTemper, Repeat: r + 1, Preset: preset,
					TrainTokPerSec: row.TrainTokensPerSec, CachedTokPerSec: row.CachedTokensPerSec})
				return nil
			}
			first, second := runPeer, runTemper
			if r%2 == 1 {
				first, second = runTemper, runPeer
			}
			if err := first(); err != nil {
				return err
			}
			if err := second(); err != nil {
				return err
			}
		}
	}
	cmp.Rows = peer.Compare(bo.Presets, cmp.Samples)
	if asJSON {
		b, err := json.MarshalIndent(cmp, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	fmt.Fprint(stdout, cmp.String())
	return nil
}
