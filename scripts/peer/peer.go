package peer

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

//go:embed bench_torch.py
var script []byte

// Python is the interpreter that runs the peer: Debian's, into which python3-torch installs torch.
// A python3 earlier on PATH (pyenv, a venv) usually lacks it. TEMPER_PEER_PYTHON overrides it.
const Python = "/usr/bin/python3"

// python returns the interpreter to run (the one place that decides it).
func python() string {
	if p := os.Getenv("TEMPER_PEER_PYTHON"); p != "" {
		return p
	}
	return Python
}

// InstallHint says how to get the peer's dependencies.
const InstallHint = "run scripts/peer/install.sh (Debian: apt-get install python3-torch libopenblas0-pthread)"

// Options configure one run of the peer script. Zero values mean the script's defaults.
type Options struct {
	Presets      []string
	Batch, Seq   int
	Steps        int // timed training steps after the first
	GenPrompts   int // < 0 skips generation
	GenPromptLen int
	GenTokens    int
	GenCalls     int    // timed generation calls after the first
	DecodeAttend string // "filled" (default) or "full"
	Seed         uint64
	Threads      Threads
}

// Threads are the peer's thread settings.
type Threads struct {
	Torch   int `json:"torch"`   // torch.set_num_threads
	Interop int `json:"interop"` // torch.set_num_interop_threads
	BLAS    int `json:"blas"`    // OPENBLAS_NUM_THREADS; 0 leaves the environment's
}

// Args is the script's command line for o.
func (o Options) Args() []string {
	var a []string
	add := func(flag string, v int) {
		if v != 0 {
			a = append(a, "--"+flag, strconv.Itoa(v))
		}
	}
	if len(o.Presets) > 0 {
		a = append(a, "--presets", strings.Join(o.Presets, ","))
	}
	add("batch", o.Batch)
	add("seq", o.Seq)
	add("steps", o.Steps)
	add("gen-prompts", o.GenPrompts)
	add("gen-prompt-len", o.GenPromptLen)
	add("gen-tokens", o.GenTokens)
	add("gen-calls", o.GenCalls)
	add("torch-threads", o.Threads.Torch)
	add("interop-threads", o.Threads.Interop)
	add("blas-threads", o.Threads.BLAS)
	if o.DecodeAttend != "" {
		a = append(a, "--decode-attend", o.DecodeAttend)
	}
	if o.Seed != 0 {
		a = append(a, "--seed", strconv.FormatUint(o.Seed, 10))
	}
	return a
}

// Report is what the script prints.
type Report struct {
	Peer          string         `json:"peer"`
	TorchVersion  string         `json:"torch_version"`
	Python        string         `json:"python"`
	BLASLibraries []string       `json:"blas_libraries"`
	OpenBLASCore  string         `json:"openblas_core"`
	MatmulGFLOPS  float64        `json:"matmul512_gflops"`
	MatmulPerCPU  float64        `json:"matmul512_gflops_per_cpu_second"`
	Threads       map[string]any `json:"threads"`
	DecodeAttend  string         `json:"decode_attend"`
	Rows          []Row          `json:"rows"`
}

// Row is one preset's figures from the script.
type Row struct {
	Preset             string    `json:"preset"`
	Params             int64     `json:"params"`
	Batch              int       `json:"batch"`
	Seq                int       `json:"seq"`
	StepSeconds        []float64 `json:"step_seconds"`
	TrainTokensPerSec  float64   `json:"train_tokens_per_sec"`
	LossFirst          float64   `json:"loss_first"`
	LossLast           float64   `json:"loss_last"`
	GenPrompts         int       `json:"gen_prompts"`
	GenTokens          int       `json:"gen_tokens"`
	GenSeconds         []float64 `json:"gen_seconds"`
	CachedTokensPerSec float64   `json:"cached_tokens_per_sec"`
}

// Parse decodes the script's output and checks that every row has its figures.
func Parse(out []byte) (Report, error) {
	var r Report
	dec := json.NewDecoder(bytes.NewReader(out))
	if err := dec.Decode(&r); err != nil {
		return r, fmt.Errorf("peer: parse output: %w (output starts %q)", err, head(out, 200))
	}
	if r.Peer != "pytorch" {
		return r, fmt.Errorf("peer: parse output: peer=%q, want \"pytorch\"", r.Peer)
	}
	if len(r.Rows) == 0 {
		return r, fmt.Errorf("peer: parse output: no rows")
	}
	for i, row := range r.Rows {
		switch {
		case row.Preset == "":
			return r, fmt.Errorf("peer: parse output: rows[%d]: no preset", i)
		case !(row.TrainTokensPerSec > 0):
			return r, fmt.Errorf("peer: parse output: rows[%d] (%s): train_tokens_per_sec=%g: must be > 0", i, row.Preset, row.TrainTokensPerSec)
		case row.GenPrompts > 0 && !(row.CachedTokensPerSec > 0):
			return r, fmt.Errorf("peer: parse output: rows[%d] (%s): cached_tokens_per_sec=%g: must be > 0", i, row.Preset, row.CachedTokensPerSec)
		}
	}
	return r, nil
}

func head(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// Row returns the row of preset.
func (r Report) Row(preset string) (Row, bool) {
	i := slices.IndexFunc(r.Rows, func(w Row) bool { return w.Preset == preset })
	if i < 0 {
		return Row{}, false
	}
	return r.Rows[i], true
}

// BLAS names the BLAS library the peer ran on (the OpenBLAS one when several are mapped).
func (r Report) BLAS() string {
	for _, l := range r.BLASLibraries {
		if strings.Contains(l, "libopenblas") {
			if r.OpenBLASCore != "" {
				return filepath.Base(l) + " (" + r.OpenBLASCore + " kernels)"
			}
			return filepath.Base(l)
		}
	}
	if len(r.BLASLibraries) > 0 {
		return filepath.Base(r.BLASLibraries[0])
	}
	return "unknown"
}

// SlowBLAS reports why the peer's BLAS looks like the reference implementation (no OpenBLAS mapped,
// or a 512² fp32 matmul under 5 GFLOP per CPU-second, which a busy machine does not cause), or ""
// when it looks fine: such a peer is no peer.
func (r Report) SlowBLAS() string {
	openblas := slices.ContainsFunc(r.BLASLibraries, func(l string) bool { return strings.Contains(l, "openblas") })
	switch {
	case !openblas:
		return fmt.Sprintf("torch is not running on OpenBLAS (BLAS libraries mapped: %q): %s", r.BLASLibraries, InstallHint)
	case r.MatmulPerCPU > 0 && r.MatmulPerCPU < 5:
		return fmt.Sprintf("torch's 512x512 matmul runs at %.1f GFLOP per CPU-second, the reference BLAS's speed: %s", r.MatmulPerCPU, InstallHint)
	}
	return ""
}

// Available reports why the peer cannot run here (no interpreter, or no torch in it), or nil.
func Available(ctx context.Context) error {
	py := python()
	if _, err := os.Stat(py); err != nil {
		return fmt.Errorf("peer: python %s: %w; %s", py, err, InstallHint)
	}
	out, err := exec.CommandContext(ctx, py, "-c", "import torch").CombinedOutput()
	if err != nil {
		return fmt.Errorf("peer: %s cannot import torch: %v: %s; %s", py, err, strings.TrimSpace(head(out, 300)), InstallHint)
	}
	return nil
}

// Run executes the peer script with o; its progress lines go to progress (may be nil).
func Run(ctx context.Context, o Options, progress io.Writer) (Report, error) {
	out, err := runScript(ctx, o.Args(), progress)
	if err != nil {
		return Report{}, err
	}
	return Parse(out)
}

// Check runs the script's --check mode on file (Temper's weights and inputs as JSON; see the test
// that writes it) and returns what it prints: the peer's logits, losses and generations for them.
func Check(ctx context.Context, file string) ([]byte, error) {
	return runScript(ctx, []string{"--check", file}, nil)
}

// runScript writes the embedded script to a temporary file and runs it with args on python().
func runScript(ctx context.Context, args []string, progress io.Writer) ([]byte, error) {
	if err := Available(ctx); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "temper-peer-")
	if err != nil {
		return nil, fmt.Errorf("peer: %w", err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "bench_torch.py")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		return nil, fmt.Errorf("peer: %w", err)
	}
	cmd := exec.CommandContext(ctx, python(), append([]string{path}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	if progress != nil {
		cmd.Stderr = io.MultiWriter(&stderr, progress)
	}
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return nil, fmt.Errorf("peer: %s bench_torch.py %s: %w: %s", python(), strings.Join(args, " "), err,
				strings.TrimSpace(tail(stderr.String(), 800)))
		}
		return nil, fmt.Errorf("peer: %w", err)
	}
	return stdout.Bytes(), nil
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
