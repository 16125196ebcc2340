package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"

	"github.com/temperml/temper/algorithms/model"
	"github.com/temperml/temper/internal/usage"
	"github.com/temperml/temper/scripts/peer"
	"github.com/temperml/temper/tpu"
)

// PeerDefaultExecutor is Temper's executor under the peer comparison unless one is chosen: the one
// workers run. Since the decode kernels split large products across workers themselves, the
// sequential executor measured as fast as the parallel one for training (train ratios 2.17–2.41
// against 2.26–2.54 on AVX-512, one window) and faster for cached generation, whose many small ops
// paid the parallel scheduler's overhead (small preset 9,952 against 6,192 tok/s).
const PeerDefaultExecutor = tpu.ExecutorSequential

// ModelOptions size `temper bench model`.
type ModelOptions struct {
	// Bench.PeakGFLOPS is the peak MFU is computed against; 0 measures it first (Peak), on the Go
	// backend (the xla backend then reports no MFU: the measured peak is the Go engine's).
	Bench tpu.BenchOptions
	// Peak sizes the in-run peak measurement (matmul only: StreamBytes is ignored).
	Peak PeakOptions
	// Peer, when set, also runs the PyTorch peer (scripts/peer) and reports Temper/PyTorch ratios.
	Peer *PeerOptions
}

// PeerOptions configure the PyTorch peer of `bench model --peer`.
type PeerOptions struct {
	Repeats      int // runs of each side per preset; the order alternates between repeats
	Threads      peer.Threads
	DecodeAttend string // the peer's decode attends over the filled cache ("filled") or all of it with a mask ("full")
	// ExecutorSet says the caller chose Bench.Mode; otherwise Temper runs PeerDefaultExecutor.
	ExecutorSet bool
	Log         io.Writer // the peer's progress
}

// Model measures the engine (train tok/s, GFLOP/s, MFU, memory, cached and uncached generation), and
// with o.Peer the same workload on PyTorch.
func Model(ctx context.Context, o ModelOptions) (Report, error) {
	if p := o.Bench.PeakGFLOPS; p < 0 || math.IsNaN(p) || math.IsInf(p, 0) {
		return nil, usage.Errorf("bench model: --peak=%g: want the machine's GFLOP/s (from `temper bench peak`), or 0 to measure it in this run", p)
	}
	if o.Peer != nil {
		if o.Bench.PeakGFLOPS != 0 {
			return nil, usage.Errorf("bench model --peer: --peak: the peer comparison prints ratios, not MFU")
		}
		cmp, err := comparePeer(ctx, o.Bench, *o.Peer)
		if err != nil {
			return nil, err
		}
		return peerReport{cmp}, nil
	}
	r := modelReport{source: peakFromFlag}
	if o.Bench.PeakGFLOPS == 0 {
		r.source = peakNone
		if o.Bench.Backend == "" || o.Bench.Backend == tpu.BackendGo {
			// A misspelt preset should not wait for the peak's seconds to be reported.
			for _, name := range o.Bench.Presets {
				if _, err := model.Preset(name); err != nil {
					return nil, fmt.Errorf("bench model: %w", err)
				}
			}
			po := o.Peak
			po.StreamBytes = -1
			peak, err := MeasurePeak(ctx, po)
			if err != nil {
				return nil, err
			}
			r.source, r.peak, o.Bench.PeakGFLOPS = peakMeasured, peak, peak.PeakGFLOPS
		}
	}
	var err error
	if r.rep, err = tpu.BenchModel(ctx, o.Bench); err != nil {
		return nil, err
	}
	return r, nil
}

// Where `bench model`'s MFU reference came from.
const (
	peakMeasured = "measured" // in this run, before the presets
	peakFromFlag = "flag"     // --peak
	peakNone     = "none"     // no MFU
)

type modelReport struct {
	rep    tpu.BenchReport
	source string
	peak   *PeakReport // when measured
}

func (r modelReport) Text(w io.Writer) {
	switch r.source {
	case peakMeasured:
		p := r.peak
		fmt.Fprintf(w, "peak measured in this run: %.1f GFLOP/s (float32 %s on the Go engine's %s kernels, %d cores, %s GFLOP per CPU-second; `temper bench peak` prints every shape)\n",
			p.PeakGFLOPS, p.PeakShape, p.ISA, p.GOMAXPROCS, perCPU(p.PeakGFLOPSPerCPUSecond))
	case peakFromFlag:
		fmt.Fprintf(w, "peak from --peak: %.1f GFLOP/s\n", r.rep.PeakGFLOPS)
	default:
		fmt.Fprintln(w, "no MFU: the in-run peak is measured on the Go backend only; pass --peak GFLOPS")
	}
	fmt.Fprint(w, r.rep.String())
}

func (r modelReport) JSON() ([]byte, error) {
	return json.MarshalIndent(struct {
		tpu.BenchReport
		PeakSource string      `json:"peak_source"` // measured, flag or none
		Peak       *PeakReport `json:"peak,omitempty"`
	}{r.rep, r.source, r.peak}, "", "  ")
}

type peerReport struct{ cmp peer.Comparison }

func (r peerReport) Text(w io.Writer)      { fmt.Fprint(w, r.cmp.String()) }
func (r peerReport) JSON() ([]byte, error) { return json.MarshalIndent(r.cmp, "", "  ") }

// comparePeer runs Temper's bench and the PyTorch peer alternately, preset by preset. Each Temper run
// is a fresh Runtime (as `bench model`), each peer run a fresh Python process; the uncached reference
// generation is skipped (the peer has none).
func comparePeer(ctx context.Context, bo tpu.BenchOptions, po PeerOptions) (peer.Comparison, error) {
	var cmp peer.Comparison
	if po.Repeats < 1 {
		return cmp, usage.Errorf("bench model --peer: --repeats=%d: must be >= 1", po.Repeats)
	}
	if po.DecodeAttend != "filled" && po.DecodeAttend != "full" {
		return cmp, usage.Errorf("bench model --peer: --peer-decode-attend=%q: allowed \"filled\", \"full\"", po.DecodeAttend)
	}
	if err := peer.Available(ctx); err != nil {
		return cmp, err
	}
	cmp.ISA = peer.DetectISA()
	cmp.Repeats = po.Repeats
	cmp.Order = "PyTorch first in odd repeats, Temper first in even ones, preset by preset"
	cmp.Temper.ExecutorChoice = "executor set by --executor"
	if !po.ExecutorSet && bo.Backend != tpu.BackendXLA {
		bo.Mode = PeerDefaultExecutor
		cmp.Temper.ExecutorChoice = "executor " + PeerDefaultExecutor + ": the workers' own, the default under --peer"
	}
	bo.UncachedTokens = -1
	gen := "no generation"
	if bo.GenPrompts > 0 {
		gen = fmt.Sprintf("cached generation of %d prompts × %d random tokens → %d new tokens, greedy (1 untimed call, then 1 timed)",
			bo.GenPrompts, bo.GenPromptLen, bo.GenTokens)
	}
	cmp.Workload = fmt.Sprintf("training %d×%d random tokens, AdamW, %d timed steps after 1 untimed; %s", bo.Batch, bo.Seq, bo.Steps, gen)
	for r := range po.Repeats {
		for _, preset := range bo.Presets {
			first, second := runPeerSide, runTemperSide
			if r%2 == 1 {
				first, second = runTemperSide, runPeerSide
			}
			if err := first(ctx, &cmp, bo, po, r+1, preset); err != nil {
				return cmp, err
			}
			if err := second(ctx, &cmp, bo, po, r+1, preset); err != nil {
				return cmp, err
			}
		}
	}
	cmp.Rows = peer.Compare(bo.Presets, cmp.Samples)
	return cmp, nil
}

// runPeerSide runs the PyTorch peer on one preset and adds its sample to cmp.
func runPeerSide(ctx context.Context, cmp *peer.Comparison, bo tpu.BenchOptions, po PeerOptions, repeat int, preset string) error {
	o := peer.Options{Batch: bo.Batch, Seq: bo.Seq, Steps: bo.Steps, GenPrompts: bo.GenPrompts,
		GenPromptLen: bo.GenPromptLen, GenTokens: bo.GenTokens, GenCalls: 1, DecodeAttend: po.DecodeAttend, Seed: 1,
		Threads: po.Threads, Presets: []string{preset}}
	rep, err := peer.Run(ctx, o, logTo(po.Log))
	if err != nil {
		return err
	}
	row, ok := rep.Row(preset)
	if !ok {
		return fmt.Errorf("bench model --peer: the peer reported no row for %s", preset)
	}
	cmp.SetPeer(rep)
	cmp.Samples = append(cmp.Samples, peer.Sample{Side: peer.SidePeer, Repeat: repeat, Preset: preset,
		TrainTokPerSec: row.TrainTokensPerSec, CachedTokPerSec: row.CachedTokensPerSec})
	return nil
}

// runTemperSide runs Temper's bench on one preset and adds its sample to cmp.
func runTemperSide(ctx context.Context, cmp *peer.Comparison, bo tpu.BenchOptions, _ PeerOptions, repeat int, preset string) error {
	bo.Presets = []string{preset}
	rep, err := tpu.BenchModel(ctx, bo)
	if err != nil {
		return err
	}
	row := rep.Rows[0]
	cmp.Temper.Backend, cmp.Temper.GOMAXPROCS, cmp.Temper.GoVersion = rep.Backend, rep.GOMAXPROCS, rep.GoVersion
	cmp.Samples = append(cmp.Samples, peer.Sample{Side: peer.SideTemper, Repeat: repeat, Preset: preset,
		TrainTokPerSec: row.TrainTokensPerSec, CachedTokPerSec: row.CachedTokensPerSec})
	return nil
}
