#!/usr/bin/env python3
"""kiln against scipy.ndimage, OpenCV, numpy and (when installed) kornia/torch, same run.

    pip install numpy scipy opencv-python-headless      # torch + kornia optional
    cargo build --release
    python3 benches/peers/compare.py [--threads 1,2] [--ops median3_2048,...] [--json out.json]

Runs `kiln bench --json` (the binary given by --kiln) on the workloads, generates the very same
inputs here (the integer hash of src/bench/data.rs, checked against kiln's input checksum),
times every peer (one warm-up, then repeated calls until --min-time seconds, median and IQR),
checks each peer's output against kiln's (`kiln bench --dump-outputs`), and prints one table:
median ms per library per thread count, kiln's ratio to the best peer and to the copy floor.
A library that is not installed, or has no such operation, gives a "skipped" cell.

With --paired N, each row with an OpenCV peer is then timed N more times, kiln and OpenCV
alternating (kiln first in even rounds, OpenCV first in odd ones; kiln as `kiln bench --ops NAME`
in a process of its own each round, OpenCV in this one), so that each kiln/OpenCV ratio compares
two timings taken seconds apart instead of minutes. Its table gives the median of the per-round
ratios and their range; the JSON keeps every round.

The morphology, distance and Sinkhorn family rows (issues 28-30) take their inputs, peers,
checks and goals from families.py beside this file (several inputs and outputs per row,
structured inputs, `close(...)` checks for float32/other-order peers); `--goals 2` prints the
issues' goal table at 2 threads. scripts/bench-families.sh runs exactly those rows.

Output checks: "exact" = every element bit-identical; "interior" = bit-identical away from the
border (the peer's border rule differs from kiln's, e.g. OpenCV medianBlur replicates edges
where kiln/kornia pad with zeros); "DIFF ..." = some element differs (count, max |diff|).
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import families  # noqa: E402  (the morphology, distance and Sinkhorn families' inputs and peers)

BOOL_THRESHOLD = 15_099_494


# ---------------------------------------------------------------- inputs (= src/bench/data.rs)
def hash32(i, seed):
    """The 32-bit hash of element indices `i` (uint32 array) and `seed`, modulo 2^32."""
    with np.errstate(over="ignore"):
        h = (i * np.uint32(0x9E3779B1)) ^ np.uint32((seed * 0x85EBCA77) & 0xFFFFFFFF)
        h ^= h >> np.uint32(16)
        h *= np.uint32(0x7FEB352D)
        h ^= h >> np.uint32(15)
        h *= np.uint32(0x846CA68B)
        h ^= h >> np.uint32(16)
    return h


def generate(dtype, shape, seed):
    """The input of a workload, identical to kiln's `bench::generate`."""
    n = int(np.prod(shape))
    h = hash32(np.arange(n, dtype=np.uint32), seed)
    u = h >> np.uint32(8)
    if dtype == "f32":
        x = u.astype(np.float32) * np.float32(1.0 / 16777216.0)
    elif dtype == "f64":
        x = u.astype(np.float64) * (1.0 / 16777216.0)
    elif dtype == "u8":
        x = (h >> np.uint32(24)).astype(np.uint8)
    elif dtype == "bool":
        x = u < np.uint32(BOOL_THRESHOLD)
    elif dtype in ("i8", "u16", "i16", "i32", "u32"):
        # The hash's high bits reduced to the width, wrapping (src/bench/data.rs).
        bits = {"i8": 8, "u16": 16, "i16": 16, "i32": 32, "u32": 32}[dtype]
        x = (h >> np.uint32(32 - bits)).astype(f"u{bits // 8}").view(DTYPES[dtype])
    else:
        raise ValueError(dtype)
    return x.reshape(shape)


DTYPES = {"i8": np.int8, "u16": np.uint16, "i16": np.int16, "i32": np.int32, "u32": np.uint32}


def checksum(x):
    """kiln's position-weighted checksum (src/bench/data.rs), modulo 2^64."""
    x = np.ascontiguousarray(x).reshape(-1)
    # The element's bit pattern as an unsigned integer of its width.
    bits = x.view(f"u{x.dtype.itemsize}").astype(np.uint64)
    w = (np.arange(x.size, dtype=np.uint64) & np.uint64(0xFFFF)) + np.uint64(1)
    with np.errstate(over="ignore"):
        return int((bits * w).sum(dtype=np.uint64))


# ---------------------------------------------------------------- timing
def time_it(f, min_time, min_reps=3, max_reps=10_000):
    """One warm-up call, then calls until min_time seconds and min_reps calls; ms stats."""
    t0 = time.perf_counter()
    out = f()
    first = (time.perf_counter() - t0) * 1e3
    samples = []
    start = time.perf_counter()
    while len(samples) < max_reps and (len(samples) < min_reps or time.perf_counter() - start < min_time):
        t = time.perf_counter()
        out = f()
        samples.append((time.perf_counter() - t) * 1e3)
    q1, med, q3 = np.percentile(samples, [25, 50, 75])
    stats = {"median_ms": float(med), "q1_ms": float(q1), "q3_ms": float(q3), "reps": len(samples),
             "first_call_ms": first}
    return stats, out


# ---------------------------------------------------------------- peers
def try_import(name):
    try:
        return __import__(name)
    except Exception:  # noqa: BLE001 - any import failure means "not installed"
        return None


cv2 = try_import("cv2")
scipy_ndimage = None
if try_import("scipy") is not None:
    import scipy.ndimage as scipy_ndimage  # noqa: E402
# torch.compile's first call includes its compile: give inductor a cache of this run's own,
# so that the first call of each workload compiles cold (later thread counts of the same
# workload then find the cache warm; the table says which is which).
if "TORCHINDUCTOR_CACHE_DIR" not in os.environ:
    import atexit
    import shutil

    os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="kiln-compare-inductor-")
    atexit.register(shutil.rmtree, os.environ["TORCHINDUCTOR_CACHE_DIR"], True)
torch = try_import("torch")
kornia = try_import("kornia") if torch is not None else None


def planes(x):
    """The 2-D planes of a [B, C, H, W] array, as a [B*C, H, W] view."""
    return x.reshape(-1, x.shape[-2], x.shape[-1])


def per_plane(f, x, out=None):
    """Applies a 2-D OpenCV function `f(plane, dst)` to every plane (how OpenCV handles stacks
    of images), writing straight into `out` (fresh when None) through OpenCV's `dst`: no
    temporary per plane and no extra copy, the fastest form a user would write."""
    p = planes(x)
    if out is None:
        out = np.empty(x.shape, dtype=x.dtype)
    o = planes(out)
    for i in range(p.shape[0]):
        r = f(p[i], o[i])
        if r is not None and r.__array_interface__["data"][0] != o[i].__array_interface__["data"][0]:
            raise RuntimeError("OpenCV did not write into dst")
    return out


def reused(f):
    """`f(x, out)` called with one output buffer kept across calls (the peer of kiln*)."""
    held = {}

    def g(x):
        if "out" not in held:
            held["out"] = np.empty(x.shape, dtype=x.dtype)
        return f(x, held["out"])

    return g


def size4(k):
    return (1, 1, k, k)


CROSS = np.array([[0, 1, 0], [1, 1, 1], [0, 1, 0]], dtype=bool)


def numpy_window(x, k, reduce, mode=None):
    """Sliding-window reduction with numpy only: pad (scipy 'reflect' = numpy 'symmetric' for
    min/max; zeros for kornia's median; `mode` overrides) then reduce a [.., H, W, k, k]
    window view."""
    from numpy.lib.stride_tricks import sliding_window_view

    r = k // 2
    if mode is None:
        mode = "constant" if reduce == "median" else "symmetric"
    p = np.pad(x, ((0, 0), (0, 0), (r, r), (r, r)), mode=mode)
    v = sliding_window_view(p, (k, k), axis=(2, 3))
    if reduce == "median":
        flat = v.reshape(*v.shape[:4], k * k)
        return np.partition(flat, (k * k) // 2, axis=-1)[..., (k * k) // 2]
    # separable: min over rows, then over columns (2k instead of k^2 reads)
    f = np.min if reduce == "min" else np.max
    a = f(sliding_window_view(p, k, axis=3), axis=-1)
    return f(sliding_window_view(a, k, axis=2), axis=-1)


def numpy_grad(x):
    """Central differences with scipy 'reflect' borders (= numpy 'symmetric'), then
    sqrt(dx*dx + dy*dy) in f32, the exact order of kiln's gradient_magnitude."""
    p = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="symmetric")
    dx = p[:, :, 1:-1, 2:] - p[:, :, 1:-1, :-2]
    dy = p[:, :, 2:, 1:-1] - p[:, :, :-2, 1:-1]
    return np.sqrt(dx * dx + dy * dy)


def scipy_grad(x):
    """scipy.ndimage.convolve with the central-difference kernels (mode reflect)."""
    kx = np.zeros((1, 1, 3, 3), np.float32)
    kx[0, 0, 1, 0], kx[0, 0, 1, 2] = 1, -1
    ky = np.zeros((1, 1, 3, 3), np.float32)
    ky[0, 0, 0, 1], ky[0, 0, 2, 1] = 1, -1
    dx = scipy_ndimage.convolve(x, kx, mode="reflect")
    dy = scipy_ndimage.convolve(x, ky, mode="reflect")
    return np.sqrt(dx * dx + dy * dy)


def cv2_grad(x, fused_magnitude=False):
    """OpenCV: filter2D with [-1, 0, 1] (BORDER_REFLECT = scipy reflect) on the stack viewed
    as one tall image (rows are independent for dx; for dy the first and last row of each
    plane are fixed up with numpy, since the tall image bleeds across planes), then
    cv2.multiply/add/sqrt (bit-exact), or cv2.magnitude (one pass, but it rounds differently:
    up to 1 ulp, hence its own column)."""
    b, c, h, w = x.shape
    tall = x.reshape(b * c * h, w)
    k = np.array([[-1, 0, 1]], np.float32)
    dx = cv2.filter2D(tall, cv2.CV_32F, k, borderType=cv2.BORDER_REFLECT)
    dy = cv2.filter2D(tall, cv2.CV_32F, k.T.copy(), borderType=cv2.BORDER_REFLECT)
    dy = dy.reshape(b * c, h, w)
    p = planes(x)
    dy[:, 0, :] = p[:, 1, :] - p[:, 0, :]
    dy[:, -1, :] = p[:, -1, :] - p[:, -2, :]
    dy = dy.reshape(b * c * h, w)
    if fused_magnitude:
        return cv2.magnitude(dx, dy).reshape(x.shape)
    return cv2.sqrt(cv2.add(cv2.multiply(dx, dx), cv2.multiply(dy, dy))).reshape(x.shape)


def torch_grad(t):
    """torch eager, the fastest plain form: replicate pad (= scipy reflect for 1 pixel), slice."""
    p = torch.nn.functional.pad(t, (1, 1, 1, 1), mode="replicate")
    dx = p[:, :, 1:-1, 2:] - p[:, :, 1:-1, :-2]
    dy = p[:, :, 2:, 1:-1] - p[:, :, :-2, 1:-1]
    return torch.sqrt(dx * dx + dy * dy)


def peers_for(name, k_or_size):
    """[(library, fn(x) -> out, check)] for a workload; check is 'exact' or ('interior', r)."""
    k = k_or_size
    r = k // 2
    P = []
    # 8-bit workloads: the same operators on u8 (no kornia: it takes float tensors). The
    # medians are scipy's median_filter with mode 'nearest', OpenCV medianBlur's border.
    u8 = name.startswith("u8_")
    if u8:
        name = name[len("u8_"):]
    if u8 and name.startswith("median"):
        if scipy_ndimage is not None:
            P.append(("scipy", lambda x: scipy_ndimage.median_filter(x, size=size4(k), mode="nearest"), "exact"))
        if cv2 is not None:
            f = lambda x, out=None: per_plane(lambda p, o: cv2.medianBlur(p, k, dst=o), x, out)  # noqa: E731
            P.append(("opencv", f, "exact"))
            P.append(("opencv*", reused(f), "exact"))
        P.append(("numpy", lambda x: numpy_window(x, k, "median", mode="edge"), "exact"))
        return P
    if name.startswith("median"):
        if scipy_ndimage is not None:
            P.append(("scipy", lambda x: scipy_ndimage.median_filter(x, size=size4(k), mode="constant", cval=0.0), "exact"))
        if cv2 is not None:
            f = lambda x, out=None: per_plane(lambda p, o: cv2.medianBlur(p, k, dst=o), x, out)  # noqa: E731
            P.append(("opencv", f, ("interior", r)))
            P.append(("opencv*", reused(f), ("interior", r)))
        P.append(("numpy", lambda x: numpy_window(x, k, "median"), "exact"))
        if kornia is not None:
            P.append(("kornia", "median", "exact"))
    elif name.startswith("erosion"):
        if scipy_ndimage is not None:
            P.append(("scipy", lambda x: scipy_ndimage.grey_erosion(x, size=size4(k)), "exact"))
        if cv2 is not None:
            ker = np.ones((k, k), np.uint8)
            f = lambda x, out=None: per_plane(lambda p, o: cv2.erode(p, ker, dst=o), x, out)  # noqa: E731
            P.append(("opencv", f, "exact"))
            P.append(("opencv*", reused(f), "exact"))
        P.append(("numpy", lambda x: numpy_window(x, k, "min"), "exact"))
        if kornia is not None and not u8:
            P.append(("kornia", "erosion", "exact"))
    elif name.startswith("opening"):
        if scipy_ndimage is not None:
            P.append(("scipy", lambda x: scipy_ndimage.grey_opening(x, size=size4(k)), "exact"))
        if cv2 is not None:
            ker = np.ones((k, k), np.uint8)
            f = lambda x, out=None: per_plane(  # noqa: E731
                lambda p, o: cv2.morphologyEx(p, cv2.MORPH_OPEN, ker, dst=o), x, out)
            P.append(("opencv", f, "exact"))
            P.append(("opencv*", reused(f), "exact"))
        P.append(("numpy", lambda x: numpy_window(numpy_window(x, k, "min"), k, "max"), "exact"))
        if kornia is not None and not u8:
            P.append(("kornia", "opening", "exact"))
    elif name.startswith("white_tophat"):
        if scipy_ndimage is not None:
            P.append(("scipy", lambda x: scipy_ndimage.white_tophat(x, size=size4(k)), "exact"))
        if cv2 is not None:
            ker = np.ones((k, k), np.uint8)
            f = lambda x, out=None: per_plane(  # noqa: E731
                lambda p, o: cv2.morphologyEx(p, cv2.MORPH_TOPHAT, ker, dst=o), x, out)
            P.append(("opencv", f, "exact"))
            P.append(("opencv*", reused(f), "exact"))
    elif name.startswith("morph_gradient"):
        if scipy_ndimage is not None:
            P.append(("scipy", lambda x: scipy_ndimage.morphological_gradient(x, size=size4(k)), "exact"))
        if cv2 is not None:
            ker = np.ones((k, k), np.uint8)
            f = lambda x, out=None: per_plane(  # noqa: E731
                lambda p, o: cv2.morphologyEx(p, cv2.MORPH_GRADIENT, ker, dst=o), x, out)
            P.append(("opencv", f, "exact"))
            P.append(("opencv*", reused(f), "exact"))
    elif name.startswith("binary_erosion"):
        if scipy_ndimage is not None:
            st = CROSS.reshape(1, 1, 3, 3)
            P.append(("scipy", lambda x: scipy_ndimage.binary_erosion(x, structure=st, border_value=0), "exact"))
        if cv2 is not None:
            ker = CROSS.astype(np.uint8)
            def f(x, out=None):
                o = None if out is None else out.view(np.uint8)
                return per_plane(
                    lambda p, d: cv2.erode(p, ker, dst=d, borderType=cv2.BORDER_CONSTANT, borderValue=0),
                    x.view(np.uint8), o).view(bool)

            P.append(("opencv", f, "exact"))
            P.append(("opencv*", reused(f), "exact"))
    elif name.startswith("gradmag"):
        if scipy_ndimage is not None:
            P.append(("scipy", scipy_grad, "exact"))
        if cv2 is not None:
            P.append(("opencv", cv2_grad, "exact"))
            P.append(("opencv-mag", lambda x: cv2_grad(x, True), "exact"))
        P.append(("numpy", numpy_grad, "exact"))
        if torch is not None:
            P.append(("torch", "grad", "exact"))
    return P


def torch_fns(kind, k):
    """(eager fn, torch.compile fn) on torch tensors, or None when unavailable."""
    if torch is None:
        return None
    if kind == "median":
        # kornia >= 0.9 reflects at the border by default; kiln's median_blur pads with
        # zeros (older kornia's rule), so ask for that: the same work, checked exactly.
        import inspect

        if "border_type" in inspect.signature(kornia.filters.median_blur).parameters:
            f = lambda t: kornia.filters.median_blur(t, (k, k), border_type="constant")  # noqa: E731
        else:
            f = lambda t: kornia.filters.median_blur(t, (k, k))  # noqa: E731
    elif kind == "erosion":
        ker = torch.ones(k, k)
        f = lambda t: kornia.morphology.erosion(t, ker)  # noqa: E731
    elif kind == "opening":
        ker = torch.ones(k, k)
        f = lambda t: kornia.morphology.opening(t, ker)  # noqa: E731
    elif kind == "grad":
        f = torch_grad
    else:
        return None
    try:
        c = torch.compile(f)
    except Exception:  # noqa: BLE001
        c = None
    return f, c


# ---------------------------------------------------------------- checks
def compare(kiln_out, peer_out, check):
    """'exact' / 'interior' when bit-identical (in the region the check covers), else DIFF."""
    if kiln_out is None:
        return "no kiln output"
    if isinstance(check, dict):  # family checks: {"kind", "post", "rtol", "label"}
        if check.get("post") is not None:
            peer_out = check["post"](np.asarray(peer_out))
        if check["kind"] == "close":
            return compare_close(kiln_out, peer_out, check["rtol"], check["label"])
        check = check["kind"]
    a = np.asarray(kiln_out)
    b = np.asarray(peer_out).reshape(a.shape).astype(a.dtype, copy=False)
    label = "exact"
    if check != "exact":
        r = check[1]
        if r > 0:
            a = a[..., r:-r, r:-r]
            b = b[..., r:-r, r:-r]
        label = "interior"
    if a.dtype == np.float32:
        same = a.view(np.uint32) == b.view(np.uint32)
    elif a.dtype == np.float64:
        same = a.view(np.uint64) == b.view(np.uint64)
    else:
        same = a == b
    bad = int(same.size - np.count_nonzero(same))
    if bad == 0:
        return label
    d = np.abs(a.astype(np.float64) - b.astype(np.float64))
    ulp = ""
    if a.dtype == np.float32:
        ia = a.view(np.int32).astype(np.int64)
        ib = b.view(np.int32).astype(np.int64)
        ulp = f" <={int(np.max(np.abs(ia - ib)))}ulp"
    return f"DIFF {bad}/{same.size} max|d|={float(np.nanmax(d)):.3g}{ulp}"


def compare_close(kiln_out, peer_out, rtol, label):
    """`label` when |kiln - peer| <= rtol * max|kiln| everywhere (float results of other
    precisions or summation orders), else CLOSE-DIFF with the worst relative error."""
    a = np.asarray(kiln_out).astype(np.float64)
    b = np.asarray(peer_out).reshape(a.shape).astype(np.float64)
    scale = max(float(np.max(np.abs(a))) if a.size else 0.0, np.finfo(np.float64).tiny)
    if not np.array_equal(np.isfinite(a), np.isfinite(b)):
        return "DIFF (non-finite elements differ)"
    fin = np.isfinite(a)
    rel = float(np.max(np.abs(a[fin] - b[fin]))) / scale if fin.any() else 0.0
    return label if rel <= rtol else f"DIFF rel={rel:.3g} > {rtol:g}"


def compare_all(kiln_outs, peer_out, check):
    """Checks every kiln output a check is given for (lists: one check per output)."""
    if not isinstance(check, list):
        first = kiln_outs[0] if kiln_outs else None
        p = peer_out[0] if isinstance(peer_out, tuple) else peer_out
        return compare(first, p, check)
    outs = peer_out if isinstance(peer_out, tuple) else (peer_out,)
    labels = []
    for i, c in enumerate(check):
        if c is None or i >= len(outs):
            continue
        k = kiln_outs[i] if i < len(kiln_outs) else None
        labels.append(compare(k, outs[i], c))
    return "+".join(labels) if len(set(labels)) > 1 else (labels[0] if labels else "-")


# ---------------------------------------------------------------- main
def window_size(w):
    p = w.get("params", {})
    return int(p.get("k", p.get("size", "3")))


def run_kiln(args, dump_dir):
    out = os.path.join(dump_dir, "kiln.json")
    cmd = [args.kiln, "bench", "--json", out, "--threads", args.threads, "--min-time", str(args.min_time),
           "--dump-outputs", dump_dir]
    if args.ops:
        cmd += ["--ops", args.ops]
    if args.sizes:
        cmd += ["--sizes", args.sizes]
    print("$", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=False)
    with open(out) as f:
        return json.load(f)


def fmt(x):
    return "skipped" if x is None else (f"{x:.3f}" if x < 10 else f"{x:.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default="target/release/kiln", help="path to the kiln binary")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--ops", default="", help="comma-separated workload names (default: all)")
    ap.add_argument("--sizes", default="", help="image sides replacing H and W (plot.py uses this)")
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--json", default="", help="write kiln's and the peers' results here")
    ap.add_argument("--markdown", action="store_true", help="also print the table as Markdown")
    ap.add_argument("--no-torch-compile", action="store_true")
    ap.add_argument("--goals", type=int, default=0, metavar="T",
                    help="also print the families' goal table (issues 28-30) at T threads")
    ap.add_argument("--paired", type=int, default=0, metavar="N",
                    help="then time kiln and OpenCV alternately, N rounds per row (see above)")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]

    with tempfile.TemporaryDirectory(prefix="kiln-compare-") as tmp:
        kj = run_kiln(args, tmp)
        results = []
        for row in kj["results"]:
            results.append(bench_peers(args, row, tmp, threads))
        if args.paired > 0:
            run_paired(args, results, tmp)
    meta = kj["metadata"]
    meta["python"] = sys.version.split()[0]
    meta["numpy"] = np.__version__
    meta["scipy"] = __import__("scipy").__version__ if scipy_ndimage is not None else None
    meta["opencv"] = cv2.__version__ if cv2 is not None else None
    meta["torch"] = torch.__version__ if torch is not None else None
    meta["kornia"] = kornia.__version__ if kornia is not None else None
    print_table(meta, results, args.markdown)
    print_paired(results, args.markdown)
    goals = print_goals(results, args.goals) if args.goals else None
    meta["pot"] = getattr(try_import("ot"), "__version__", None)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"metadata": meta, "results": results, "goals": goals}, f, indent=1)
    if BAD_INPUTS:
        print(f"!! input checksums differ from kiln's for {sorted(set(BAD_INPUTS))}", file=sys.stderr)
        sys.exit(2)


_inputs = {}
_kiln_out = {}


def workload_inputs(row):
    """The inputs of a kiln row, generated here and checked against kiln's checksums; the last
    workload's are kept (its rows at every thread count come one after another)."""
    specs = row.get("inputs") or [{"dtype": row["dtype"], "shape": row["shape"], "seed": row["seed"], "gen": "hash"}]
    key = (row["name"], tuple(row["shape"]))
    if key not in _inputs:
        _inputs.clear()
        xs = [families.make_input(sp, hash32, generate) for sp in specs]
        want = row.get("input_checksums") or [row["input_checksum"]]
        for i, (x, w) in enumerate(zip(xs, want)):
            if str(checksum(x)) != w:
                print(f"!! {row['name']}: input {i} checksum differs from kiln's: the generators disagree",
                      file=sys.stderr)
                BAD_INPUTS.append(row["name"])
        _inputs[key] = xs
    return _inputs[key]


BAD_INPUTS = []
# Peers timed at the first thread count only (single-threaded), carried to the other rows.
SINGLE = ("scipy", "numpy", "pot-log")


def workload_input(row):
    """The first input of a kiln row (see workload_inputs)."""
    return workload_inputs(row)[0]


def kiln_outputs(args, row, tmp):
    """kiln's dumped outputs of a row: NAME.npy, then NAME.outK.npy for K = 1, 2, ..."""
    shape = tuple(row["shape"])
    key = (row["name"], shape)
    if key not in _kiln_out:
        _kiln_out.clear()
        suffix = f"_{shape[-1]}" if args.sizes else ""
        outs = []
        while True:
            tag = f".out{len(outs)}" if outs else ""
            path = os.path.join(tmp, f"{row['name']}{suffix}{tag}.npy")
            if not os.path.exists(path):
                break
            outs.append(np.load(path))
        _kiln_out[key] = outs
    return _kiln_out[key]


def blas_limit(t):
    """A context limiting BLAS threads to t (threadpoolctl), or a no-op when not installed."""
    tp = try_import("threadpoolctl")
    if tp is None:
        import contextlib

        return contextlib.nullcontext()
    return tp.threadpool_limits(limits=t)


def time_once(f):
    """One cold call (for the slow single-threaded peers): ms stats with reps = 1."""
    t = time.perf_counter()
    out = f()
    ms = (time.perf_counter() - t) * 1e3
    return {"median_ms": ms, "q1_ms": ms, "q3_ms": ms, "reps": 1, "first_call_ms": ms, "once": True}, out


def bench_family(args, row, tmp, threads, peers):
    """Times a family row's peers (families.family_peers) on its inputs."""
    name, t = row["name"], row["threads"]
    res = {"kiln": row, "peers": {}, "checks": {}, "notes": {}}
    xs = workload_inputs(row)
    kouts = kiln_outputs(args, row, tmp)
    if cv2 is not None:
        cv2.setNumThreads(t)
    for lib, fn, check, mode in peers:
        if fn is None:
            res["notes"][lib] = check
            continue
        if mode in ("once", "single") and t != threads[0]:
            continue
        try:
            with blas_limit(t):
                if mode == "once":
                    st, out = time_once(lambda: fn(*xs))
                else:
                    st, out = time_it(lambda: fn(*xs), args.min_time, min_reps=1 if mode in ("single", "few") else 3)
            res["peers"][lib] = st
            res["checks"][lib] = compare_all(kouts, out, check)
        except Exception as e:  # noqa: BLE001
            res["peers"][lib] = None
            res["checks"][lib] = f"error: {type(e).__name__}: {e}"
    return res


def bench_peers(args, row, tmp, threads):
    """Times the peers on one kiln row (one workload at one thread count)."""
    name, t = row["name"], row["threads"]
    res = {"kiln": row, "peers": {}, "checks": {}}
    if row["status"] != "ok":
        return res
    fam = families.family_peers(row, {"scipy": scipy_ndimage, "cv2": cv2, "ot": try_import("ot")})
    if fam is not None:
        return bench_family(args, row, tmp, threads, fam)
    x = workload_input(row)
    outs = kiln_outputs(args, row, tmp)
    kout = outs[0] if outs else None
    if cv2 is not None:
        cv2.setNumThreads(t)
    if torch is not None:
        torch.set_num_threads(t)
    k = window_size(row)
    for lib, fn, check in peers_for(name, k):
        if isinstance(fn, str):  # torch / kornia: eager and compiled
            fns = torch_fns(fn, k)
            if fns is None:
                continue
            tx = torch.from_numpy(x)
            for label, f in (("torch-eager" if fn == "grad" else "kornia-eager", fns[0]),
                             ("torch.compile", None if args.no_torch_compile else fns[1])):
                if f is None:
                    res["peers"][label] = None
                    continue
                try:
                    with torch.no_grad():
                        st, out = time_it(lambda: f(tx), args.min_time)
                    res["peers"][label] = st
                    res["checks"][label] = compare(kout, out.numpy(), check)
                except Exception as e:  # noqa: BLE001
                    res["peers"][label] = None
                    res["checks"][label] = f"error: {type(e).__name__}"
            continue
        # scipy and numpy are single-threaded: time them once, at the first thread count.
        if lib in ("scipy", "numpy") and t != threads[0]:
            continue
        try:
            st, out = time_it(lambda: fn(x), args.min_time)
            res["peers"][lib] = st
            res["checks"][lib] = compare(kout, out, check)
        except Exception as e:  # noqa: BLE001
            res["peers"][lib] = None
            res["checks"][lib] = f"error: {type(e).__name__}: {e}"
    return res


def kiln_once(args, row, tmp):
    """kiln's median ms for one row, from a `kiln bench` process of its own (no output dump)."""
    out = os.path.join(tmp, "paired.json")
    cmd = [args.kiln, "bench", "--json", out, "--threads", str(row["threads"]), "--min-time", str(args.min_time),
           "--ops", row["name"]]
    if args.sizes:
        cmd += ["--sizes", str(row["shape"][-1])]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    with open(out) as f:
        (k,) = json.load(f)["results"]
    if k["status"] != "ok":
        raise RuntimeError(f"{row['name']}: {k['status']}: {k['reason']}")
    return k["time"]["median_ms"]


def run_paired(args, results, tmp):
    """Times kiln and OpenCV alternately, args.paired rounds per row (see the module docs)."""
    for res in results:
        row = res["kiln"]
        if row["status"] != "ok" or not res["peers"].get("opencv"):
            continue
        name, t = row["name"], row["threads"]
        fn = next((f for lib, f, _ in peers_for(name, window_size(row)) if lib == "opencv"), None)
        if fn is None:
            continue
        x = workload_input(row)
        cv2.setNumThreads(t)
        kiln_ms, opencv_ms = [], []
        for r in range(args.paired):
            for side in ("kiln", "opencv") if r % 2 == 0 else ("opencv", "kiln"):
                if side == "kiln":
                    kiln_ms.append(kiln_once(args, row, tmp))
                else:
                    opencv_ms.append(time_it(lambda: fn(x), args.min_time)[0]["median_ms"])
        ratios = [k / o for k, o in zip(kiln_ms, opencv_ms)]
        res["paired"] = {"kiln_ms": kiln_ms, "opencv_ms": opencv_ms, "ratios": ratios,
                         "ratio_median": float(np.median(ratios))}
        print(f"paired {name} thr={t}: kiln/opencv {res['paired']['ratio_median']:.2f} "
              f"({min(ratios):.2f}-{max(ratios):.2f}) over {len(ratios)} rounds", flush=True)


def print_paired(results, markdown):
    """The --paired table: kiln and OpenCV timed alternately, per-round ratios."""
    rows = []
    for r in results:
        p = r.get("paired")
        if not p:
            continue
        k = r["kiln"]
        rows.append([k["name"], "x".join(map(str, k["shape"])), str(k["threads"]), str(len(p["ratios"])),
                     fmt(float(np.median(p["kiln_ms"]))), fmt(float(np.median(p["opencv_ms"]))),
                     f"{p['ratio_median']:.2f}", f"{min(p['ratios']):.2f}-{max(p['ratios']):.2f}"])
    if not rows:
        return
    head = ["workload", "shape", "thr", "rounds", "kiln ms", "opencv ms", "kiln/opencv", "range"]
    print()
    print("paired: kiln and OpenCV timed alternately (medians over the rounds; kiln/opencv = median of "
          "the per-round ratios)")
    widths = [max(len(h), *(len(c) for c in col)) for h, col in zip(head, zip(*rows))]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    for c in rows:
        print("  ".join(x.ljust(w) for x, w in zip(c, widths)))
    if markdown:
        print()
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for c in rows:
            print("| " + " | ".join(c) + " |")


def print_table(meta, results, markdown):
    libs = []
    for r in results:
        for lib in r["peers"]:
            if lib not in libs:
                libs.append(lib)
    # single-threaded peers: carry their time to the other thread counts
    single = {}
    for r in results:
        for lib in SINGLE:
            if lib in r["peers"]:
                single[(r["kiln"]["name"], tuple(r["kiln"]["shape"]), lib)] = (r["peers"][lib], r["checks"].get(lib))
    head = ["workload", "shape", "thr", "kiln ms", "floor ms", "compile ms"] + [f"{l} ms" for l in libs] + [
        "best peer", "kiln/best", "kiln/floor", "kiln* ms", "kiln*/floor*", "kiln*/best*", "checks"]
    rows = []
    for r in results:
        k = r["kiln"]
        shape = "x".join(map(str, k["shape"]))
        if k["status"] != "ok":
            rows.append([k["name"], shape, str(k["threads"]), k["status"] + ": " + k["reason"][:50]] + [""] * (len(head) - 4))
            continue
        peers = dict(r["peers"])
        checks = dict(r["checks"])
        for lib in SINGLE:
            s = single.get((k["name"], tuple(k["shape"]), lib))
            if lib not in peers and s is not None:
                peers[lib] = s[0]
                checks[lib] = s[1]
        # Peers marked `*` reuse one output buffer: they are compared with kiln* only.
        timed = {l: s["median_ms"] for l, s in peers.items() if s is not None and not l.endswith("*")}
        timed_reused = {l: s["median_ms"] for l, s in peers.items() if s is not None and l.endswith("*")}
        best = min(timed, key=timed.get) if timed else None
        best_reused = min(timed_reused, key=timed_reused.get) if timed_reused else None
        km = k["time"]["median_ms"]
        if k.get("first_call_ms") is not None:
            compile_cell = f"1st {k['first_call_ms']:.1f}"
        else:
            compile_cell = f"{k['compile_ms']:.2f}"
        if k.get("upgrade_compile_ms") is not None:
            compile_cell += f"+{k['upgrade_compile_ms']:.1f}"
        cells = [k["name"], shape, str(k["threads"]), fmt(km), fmt(k["floor"]["median_ms"]), compile_cell]
        cells += [fmt(peers[l]["median_ms"]) if peers.get(l) else "skipped" for l in libs]
        cells += [best or "-", f"{km / timed[best]:.2f}" if best else "-", f"{k['ratio_to_floor']:.2f}"]
        reused = k.get("time_reused", {}).get("median_ms")
        warm = k.get("floor_warm", {}).get("median_ms")
        cells += [fmt(reused) if reused else "-", f"{reused / warm:.2f}" if reused and warm else "-"]
        cells.append(f"{reused / timed_reused[best_reused]:.2f}" if reused and best_reused else "-")
        notes = [f"{l}: {n}" for l, n in r.get("notes", {}).items()]
        cells.append(", ".join([f"{l}:{c}" for l, c in checks.items()] + notes))
        rows.append(cells)
    print()
    print(f"machine: {meta['machine']} ({meta['cores']} cores), {meta['rustc']}, kiln {meta['kiln_commit'][:12]}"
          f"{' (dirty)' if meta.get('kiln_dirty') else ''}; numpy {meta['numpy']}, scipy {meta['scipy']}, "
          f"opencv {meta['opencv']}, torch {meta['torch']}, kornia {meta['kornia']}")
    widths = [max(len(h), *(len(c) for c in col)) for h, col in zip(head, zip(*rows))] if rows else [len(h) for h in head]
    print("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    for c in rows:
        print("  ".join(x.ljust(w) for x, w in zip(c, widths)))
    print("scipy and numpy run single-threaded (timed at the first thread count, shown at every one); "
          "on the family rows (fill_holes, propagation, medians, distances) scipy is timed with ONE cold "
          "call, and so is POT's sinkhorn_log (numpy element-wise, one thread); POT's sinkhorn with one warm-up "
          "and at least one call; "
          "OpenCV's distanceTransform is float32 (close(f32): within 1e-6 of kiln's float64, not bit-exact); "
          "programs show `1st` = their first call (it compiles their graphs) instead of a compile time; "
          "kiln/best = kiln median / fastest peer median; kiln/floor = kiln median / copy floor; "
          "kiln* = kiln writing into its previous outputs (run_into), kiln*/floor* = that / the copy "
          "floor into a reused buffer, kiln*/best* = that / the fastest peer writing into a reused "
          "buffer (opencv* = OpenCV with the same `dst` every call); compile ms = until the kernels "
          "run, + the background compile of tiered kernels (bigger steps and the clean-input "
          "forms, Cranelift time), each the "
          "median of 5 compiles with fresh engines.")
    if markdown:
        print()
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for c in rows:
            print("| " + " | ".join(x.replace("|", "/") for x in c) + " |")
    print_compile_table(results)


def print_goals(results, threads):
    """The families' goal table (issues 28-30): workload, goal, kiln ms, peer ms, ratio, verdict."""
    rows = families.goal_rows(results, threads)
    head = ["workload", "goal", "kiln ms", "peer ms", "ratio", "verdict"]
    print()
    print(f"goals at {threads} thread(s) (issues 28-30):")
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for c in rows:
        print("| " + " | ".join(x.replace("|", "/") for x in c) + " |")
    return rows


def print_compile_table(results):
    """kiln's compile against torch.compile's first call (its compile plus one run)."""
    seen = set()
    lines = []
    for r in results:
        k = r["kiln"]
        tc = r["peers"].get("torch.compile")
        if k["status"] != "ok" or not tc or "first_call_ms" not in tc:
            continue
        key = (k["name"], tuple(k["shape"]))
        cache = "warm" if key in seen else "cold"
        seen.add(key)
        lines.append(f"{k['name']:<22} {k['threads']:>3}  {k['compile_ms']:>10.2f}  {tc['first_call_ms']:>18.1f}  "
                     f"{tc['median_ms']:>12.3f}  {cache}")
    if not lines:
        return
    print()
    print("compile: kiln ms until its kernels run, against torch.compile's first call (compile + one run; "
          "inductor cache of this run's own: cold on a workload's first thread count, then warm)")
    print(f"{'workload':<22} {'thr':>3}  {'kiln ms':>10}  {'torch.compile 1st ms':>18}  {'then ms/call':>12}  cache")
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
