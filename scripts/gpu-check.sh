#!/usr/bin/env bash
# GPU check for kiln's PTX backend, for a machine with an NVIDIA GPU, its driver, and Python
# with PyTorch: no Rust toolchain and no internet needed. Build the binary beforehand:
#
#   cargo build --release --features cuda          # on a build machine
#   scp target/release/kiln scripts/gpu-check.sh gpu-host:   (plus wheels/ with kornia if absent)
#   KILN=./kiln ./gpu-check.sh
#
# Steps (whole script: under 5 minutes, each step has its own time limit):
#   1. the eager-vs-fused differential suite on the GPU (outputs compared with to_bits());
#   2. 2,000 fuzz cases on the GPU;
#   3. median 3x3 / 5x5 and grey_opening 3x3 on 8x3x1024x1024 f32: kiln (CUDA) against
#      kornia's median_blur / morphology.opening under torch eager and torch.compile,
#      timed with CUDA events, medians in milliseconds; one table at the end.
#
# NOTE: written without a GPU at hand; it has not been run yet (see docs/PTX.md).
set -uo pipefail

KILN="${KILN:-$(dirname "$0")/../target/release/kiln}"
PY="${PYTHON:-python3}"
WHEELS="${KILN_WHEELS:-$(dirname "$0")/../wheels}"
OUT="${KILN_GPU_OUT:-$(mktemp -d)}"
status=0

if [ ! -x "$KILN" ]; then
    echo "gpu-check: kiln binary not found at $KILN (build with --features cuda, set KILN)" >&2
    exit 2
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true

echo "== 1. differential suite (eager vs fused on CUDA, bit-exact)"
if ! timeout 60 "$KILN" demo --backend cuda; then
    echo "gpu-check: differential suite FAILED" >&2
    status=1
fi

echo "== 2. fuzz: 2000 cases on CUDA"
if ! timeout 120 "$KILN" fuzz --backend cuda --cases 2000 --seed 1 --out "$OUT/repro"; then
    echo "gpu-check: fuzzing FAILED (reproducers in $OUT/repro)" >&2
    status=1
fi

echo "== 3. benchmark"
timeout 45 "$KILN" bench --backend cuda --ops median3_8x3x1024,median5_8x3x1024,grey_opening3_8x3x1024 \
    --json "$OUT/kiln.json" || echo "gpu-check: kiln bench failed" >&2

if ! "$PY" -c "import kornia" 2>/dev/null && [ -d "$WHEELS" ]; then
    "$PY" -m pip install --quiet --no-index --find-links "$WHEELS" kornia >&2 || true
fi

timeout 90 "$PY" - "$OUT/kiln.json" <<'PY'
import json, sys, statistics
import torch
try:
    import kornia
except ImportError:
    kornia = None

dev = "cuda"
x = torch.rand(8, 3, 1024, 1024, device=dev, dtype=torch.float32)

def time_ms(fn, reps=20, warm=3):
    for _ in range(warm):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); fn(); e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    return statistics.median(ts)

rows = {}
if kornia is not None:
    k3 = torch.ones(3, 3, device=dev)
    work = {
        "median3": lambda t: kornia.filters.median_blur(t, (3, 3)),
        "median5": lambda t: kornia.filters.median_blur(t, (5, 5)),
        "grey_opening3": lambda t: kornia.morphology.opening(t, k3),
    }
    for name, f in work.items():
        eager = time_ms(lambda: f(x))
        try:
            cf = torch.compile(f)
            compiled = time_ms(lambda: cf(x))
        except Exception as ex:  # inductor missing or failing: report, keep going
            print(f"torch.compile {name}: {ex}", file=sys.stderr)
            compiled = float("nan")
        rows[name] = [eager, compiled]
else:
    print("kornia not importable: torch columns left empty", file=sys.stderr)

kiln = {}
try:
    data = json.load(open(sys.argv[1]))
    for r in data if isinstance(data, list) else data.get("results", []):
        for name in ("median3", "median5", "grey_opening3"):
            if str(r.get("name", "")).startswith(name):
                kiln[name] = r.get("median_ms", float("nan"))
except Exception as ex:
    print(f"kiln results unreadable: {ex}", file=sys.stderr)

print(f"\n{torch.cuda.get_device_name()} | 8x3x1024x1024 f32 | median ms (CUDA events)")
print(f"{'workload':<16}{'kiln cuda':>12}{'kornia eager':>14}{'torch.compile':>15}")
for name in ("median3", "median5", "grey_opening3"):
    e, c = rows.get(name, [float("nan")] * 2)
    print(f"{name:<16}{kiln.get(name, float('nan')):>12.3f}{e:>14.3f}{c:>15.3f}")
PY
[ $? -eq 0 ] || status=1
exit $status
