#!/usr/bin/env bash
# Installs what the PyTorch peer of `temper bench model --peer` runs on, from Debian's packages:
# python3-torch (for Debian's /usr/bin/python3, not a pyenv/venv python3 earlier on PATH) and
# libopenblas0-pthread, without which torch's matmuls fall back to the reference BLAS (~3 GFLOP/s,
# a peer ten times too slow). Idempotent: installs only what is missing, then checks torch's BLAS.
# Run as root (or with sudo). Exit status: 0 installed and fast; 1 failed; 2 installed but slow BLAS.
set -euo pipefail

PY=/usr/bin/python3 # keep in step with scripts/peer/peer.go's Python
PKGS=(python3-torch libopenblas0-pthread)

missing=()
for p in "${PKGS[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then
		missing+=("$p")
	fi
done
if ((${#missing[@]})); then
	echo "install.sh: installing ${missing[*]}" >&2
	SUDO=""
	if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
	$SUDO apt-get update -qq
	DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
else
	echo "install.sh: ${PKGS[*]} already installed" >&2
fi

# torch links libblas.so.3; Debian's alternatives decide whether that is OpenBLAS. Check what a
# matmul really maps and how fast it runs, per CPU-second of one BLAS thread so that a busy machine
# does not look like a slow BLAS (OpenBLAS: tens of GFLOP per CPU-second; reference BLAS: ~3).
OPENBLAS_NUM_THREADS=1 "$PY" - <<'PYEOF'
import os, sys, time
import torch
torch.set_num_threads(1)
a, b = torch.randn(512, 512), torch.randn(512, 512)
for _ in range(3):
    a @ b
n, t0 = 10, time.process_time()
for _ in range(n):
    a @ b
gflops = 2 * 512 ** 3 * n / max(time.process_time() - t0, 1e-9) / 1e9
libs = set()
with open("/proc/self/maps") as f:
    for line in f:
        parts = line.split()
        if len(parts) >= 6 and "blas" in os.path.basename(parts[-1]):
            libs.add(os.path.realpath(parts[-1]))
config = torch.__config__.show()
print(f"install.sh: torch {torch.__version__} on {sys.executable}; BLAS mapped: {sorted(libs)}; "
      f"512x512 fp32 matmul {gflops:.1f} GFLOP per CPU-second", file=sys.stderr)
bad = []
if not any("openblas" in l for l in libs):
    bad.append("torch does not run on OpenBLAS (reference BLAS?): check `update-alternatives --display libblas.so.3-x86_64-linux-gnu`")
if gflops < 5:
    bad.append(f"matmul at {gflops:.1f} GFLOP per CPU-second is the reference BLAS's speed")
if bad:
    print("\n".join(["", "!" * 72, "install.sh: WARNING: the PyTorch peer will be far too slow to compare with:"] +
                    ["  - " + b for b in bad] + ["!" * 72, ""]), file=sys.stderr)
    sys.exit(2)
PYEOF
