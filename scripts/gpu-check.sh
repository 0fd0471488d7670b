#!/usr/bin/env bash
# GPU check for kiln's PTX backend, for a machine with an NVIDIA GPU, its driver, and Python
# with PyTorch: no Rust toolchain and no internet needed. Build the binary beforehand:
#
#   cargo build --release --features cuda          # on a build machine (no CUDA needed)
#   scp target/release/kiln scripts/gpu-check.sh gpu-host:   (plus wheels/ with kornia if absent)
#   KILN=./kiln ./gpu-check.sh
#
# Steps (whole script: under 5 minutes, every step has its own time limit):
#   1. differential check: `kiln demo --backend cuda` runs median 3x3, median 5x5 and
#      grey_opening 3x3 on a 1x1x1024x1024 image with NaN/±Inf as PTX kernels and compares
#      every output with the eager oracle (CPU) by to_bits();
#   2. 2,000 fuzz cases: `kiln fuzz --backend cuda` (random graphs, CUDA vs eager, to_bits);
#  2b. the Sinkhorn lane passes (tests/sinkhorn_cuda.rs, when its test binary is present):
#      every pass x f32/f64 on the GPU against the CPU lane kernels, to_bits;
#   3. benchmark on 8x3x1024x1024 f32: kiln's kernels timed with CUDA events
#      (`kiln demo --backend cuda --batch 8 --channels 3 --size 1024 --skip-eager`) against
#      kornia's median_blur / morphology.opening under torch eager and torch.compile on the
#      same GPU, CUDA events, medians in milliseconds; one table at the end.
#
# NOTE: written without a GPU at hand; it has not been run yet (see docs/PTX.md).
set -uo pipefail

KILN="${KILN:-$(dirname "$0")/../target/release/kiln}"
PY="${PYTHON:-python3}"
WHEELS="${KILN_WHEELS:-$(dirname "$0")/../wheels}"
OUT="${KILN_GPU_OUT:-$(mktemp -d)}"
status=0
diff_result="not run"
fuzz_result="not run"

if [ ! -x "$KILN" ]; then
    echo "gpu-check: kiln binary not found at $KILN (build with --features cuda, set KILN)" >&2
    exit 2
fi
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true

echo "== 1. differential check (3 ops on CUDA vs eager, bit-exact)"
if timeout 60 "$KILN" demo --backend cuda --size 1024 | tee "$OUT/diff.txt"; then
    diff_result="bit-exact"
else
    diff_result="FAILED"
    status=1
fi

echo "== 2. fuzz: 2000 cases on CUDA"
mkdir -p "$OUT/repro"
if timeout 120 "$KILN" fuzz --backend cuda --cases 2000 --seed 1 --time-limit 100 \
    --corpus "$OUT/repro" | tee "$OUT/fuzz.txt"; then
    fuzz_result="clean ($(grep -m1 '^cases:' "$OUT/fuzz.txt" | awk '{print $2}') cases)"
else
    fuzz_result="FAILED (reproducers in $OUT/repro)"
    status=1
fi

echo "== 2b. Sinkhorn lane passes on CUDA vs the CPU lane kernels (bit-exact)"
# The test binary of tests/sinkhorn_cuda.rs, built on the build machine with
#   cargo test --release --features cuda --test sinkhorn_cuda --no-run
# (copy target/release/deps/sinkhorn_cuda-* along, or set KILN_SINKHORN_TEST).
sk_test="${KILN_SINKHORN_TEST:-$(ls -t "$(dirname "$0")"/../target/release/deps/sinkhorn_cuda-* 2>/dev/null | grep -v '\.d$' | head -1)}"
sinkhorn_result="not run (no test binary)"
if [ -n "$sk_test" ] && [ -x "$sk_test" ]; then
    if KILN_REQUIRE_GPU=1 timeout 60 "$sk_test" --nocapture 2>&1 | tee "$OUT/sinkhorn.txt"; then
        sinkhorn_result="bit-exact ($(grep -c 'bit-identical' "$OUT/sinkhorn.txt") pass x dtype)"
    else
        sinkhorn_result="FAILED"
        status=1
    fi
fi

echo "== 3. benchmark (8x3x1024x1024 f32)"
timeout 45 "$KILN" demo --backend cuda --batch 8 --channels 3 --size 1024 --skip-eager \
    | tee "$OUT/kiln_bench.txt" || echo "gpu-check: kiln benchmark failed" >&2

if ! "$PY" -c "import kornia" 2>/dev/null && [ -d "$WHEELS" ]; then
    "$PY" -m pip install --quiet --no-index --find-links "$WHEELS" kornia >&2 || true
fi

timeout 70 "$PY" - "$OUT/kiln_bench.txt" "$diff_result" "$fuzz_result" "$sinkhorn_result" <<'PY'
import re, sys, statistics
import torch
try:
    import kornia
except ImportError:
    kornia = None

NAMES = {"median 3x3": "median3", "median 5x5": "median5", "grey_opening 3x3": "grey_opening3"}
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

# kiln demo rows: label, kernels, eager ms ('-'), host->host ms, kernel ms, verdict
kiln = {}
try:
    for line in open(sys.argv[1]):
        for label, name in NAMES.items():
            if line.startswith(label):
                cols = line[len(label):].split()
                kiln[name] = float(cols[3])
except Exception as ex:
    print(f"kiln results unreadable: {ex}", file=sys.stderr)

nan = float("nan")
print(f"\n{torch.cuda.get_device_name()} | 8x3x1024x1024 f32 | median ms (CUDA events)")
print(f"differential check: {sys.argv[2]} | fuzz: {sys.argv[3]} | sinkhorn passes: {sys.argv[4]}")
print(f"{'workload':<16}{'kiln cuda':>12}{'kornia eager':>14}{'torch.compile':>15}")
for name in NAMES.values():
    e, c = rows.get(name, [nan, nan])
    print(f"{name:<16}{kiln.get(name, nan):>12.3f}{e:>14.3f}{c:>15.3f}")
PY
[ $? -eq 0 ] || status=1
exit $status
