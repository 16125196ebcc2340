// Package peer runs the PyTorch peer of `temper bench model --peer` and compares it with Temper.
//
// bench_torch.py (embedded) implements Temper's Llama-style presets, training step and cached
// generation in PyTorch; install.sh installs Debian's python3-torch and libopenblas0-pthread, which
// it runs on, with Python (Debian's interpreter, not one earlier on PATH). Run executes the script
// and parses its JSON; Compare turns per-repeat samples of both sides into medians, spreads and
// Temper/PyTorch ratios; DetectISA names the CPU's vector ISA, since kernels and speed differ
// between AVX2 and AVX-512 machines and a ratio is only meaningful measured in one window on one
// machine. Nothing here is needed by `make test`: the tests that run Python skip without torch.
package peer
