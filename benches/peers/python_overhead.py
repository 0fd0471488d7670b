"""Per-call overhead of kiln's Python package against scipy.ndimage on small images.

Usage (with the package built into a venv, e.g. by scripts/ci-python.sh):
    target/py-venv/bin/python benches/peers/python_overhead.py [--calls 2000]

For each operator: 200 warm-up calls, then `--calls` timed calls of kiln.ndimage.X and
scipy.ndimage.X on the same 64x64 float32 image (same process, interleaved per operator);
prints the median and the 90th percentile per call in microseconds and the ratio
kiln/scipy, and checks that the outputs are bit-identical. Then 4 Python threads call kiln
concurrently (the GIL is released while kernels run): prints calls per second for 1 and 4
threads. Record the CPU (lscpu) with the numbers; this is an experiment, not a test.
"""
import argparse
import threading
import time

import numpy as np
import scipy.ndimage as sndi

import kiln.ndimage as kndi

OPS = [
    ("median_filter", dict(size=3)),
    ("grey_erosion", dict(size=3)),
    ("grey_opening", dict(size=(3, 3))),
]


def timed(f, calls):
    ts = np.empty(calls)
    for i in range(calls):
        t = time.perf_counter()
        f()
        ts[i] = time.perf_counter() - t
    return np.median(ts) * 1e6, np.percentile(ts, 90) * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    a = ap.parse_args()
    x = np.random.default_rng(0).random((64, 64), dtype=np.float32)
    print(f"{'operator':<20} {'kiln med us':>11} {'p90':>7} {'scipy med us':>12} {'p90':>7} {'kiln/scipy':>10}")
    for name, kw in OPS:
        k = lambda: getattr(kndi, name)(x, **kw)
        s = lambda: getattr(sndi, name)(x, **kw)
        same = np.array_equal(k().view(np.uint32), s().view(np.uint32))
        for _ in range(200):
            k()
            s()
        km, k90 = timed(k, a.calls)
        sm, s90 = timed(s, max(a.calls // 4, 50))
        print(f"{name:<20} {km:11.1f} {k90:7.1f} {sm:12.1f} {s90:7.1f} {km / sm:10.3f}"
              + ("" if same else "  OUTPUTS DIFFER"))

    def worker(n):
        for _ in range(n):
            kndi.median_filter(x, size=3)

    for threads in (1, 4):
        n = a.calls
        ts = [threading.Thread(target=worker, args=(n,)) for _ in range(threads)]
        t = time.perf_counter()
        for th in ts:
            th.start()
        for th in ts:
            th.join()
        dt = time.perf_counter() - t
        print(f"median_filter 64x64 from {threads} Python thread(s): {threads * n / dt:,.0f} calls/s")


if __name__ == "__main__":
    main()
