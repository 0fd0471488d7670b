"""kiln.dask against dask_image (scipy.ndimage per chunk) on a distributed.LocalCluster.

Usage (with the package built into a venv, e.g. by scripts/ci-python.sh):
    target/py-venv/bin/python benches/peers/dask_bench.py                 # issue 26: 16384², 2048² chunks
    target/py-venv/bin/python benches/peers/dask_bench.py --size 4096     # a quick check

Installs dask-image with pip into the running interpreter when it is missing (say
--no-install to refuse). Starts a LocalCluster of --workers worker processes (default 2,
--threads-per-worker default: cores / workers), builds a seeded random float32 image of
--size² in --chunk² chunks on the workers (persisted before timing), then per workload
times (best of --repeat) `dask_image.ndfilters.X` / `dask_image.ndmorph.X` (scipy.ndimage on
each chunk with dask's overlap) and `kiln.dask.map_overlap` of the same kiln.ndimage
operator (overlap from the chain's halo), each persisted on the workers and waited for (kiln's
kernels are compiled in every worker first on a 64² array, unless --cold).
Checks that the two results are bit-identical (a count of differing elements computed on
the workers) and prints a table: seconds per run, megapixels per second, speedup. kiln runs
its own thread pool inside each worker, so it is given the same worker threads as
dask_image (rayon adds its threads: record the CPU and the flags with the numbers). An
experiment, not a test: exits non-zero only when the results differ.
"""
import argparse
import os
import subprocess
import sys
import time


def ensure_dask_image(install):
    try:
        import dask_image.ndfilters  # noqa: F401
    except ImportError:
        if not install:
            sys.exit("dask-image is not installed (pip install dask-image)")
        print("installing dask-image with pip ...", flush=True)
        subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", "dask-image"])


def workloads():
    """(name, dask_image function, kiln function) triples on float32 images; binary ones
    threshold the image first (the same on both sides)."""
    import dask_image.ndfilters as dif
    import dask_image.ndmorph as dim

    import kiln.ndimage as kn

    return [
        ("median_filter size=3", lambda d: dif.median_filter(d, size=3),
         lambda a: kn.median_filter(a, size=3)),
        ("median_filter size=5", lambda d: dif.median_filter(d, size=5),
         lambda a: kn.median_filter(a, size=5)),
        ("minimum_filter size=7", lambda d: dif.minimum_filter(d, size=7),
         lambda a: kn.minimum_filter(a, size=7)),
        ("binary_opening 3 iter", lambda d: dim.binary_opening(d > 0.5, iterations=3),
         lambda a: kn.binary_opening(a, iterations=3)),
    ]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--size", type=int, default=16384)
    ap.add_argument("--chunk", type=int, default=2048)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--threads-per-worker", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default="", help="substring filter on workload names")
    ap.add_argument("--no-install", action="store_true")
    ap.add_argument("--cold", action="store_true", help="no JIT warm-up in the workers")
    args = ap.parse_args()
    ensure_dask_image(not args.no_install)

    import dask
    import dask.array as da
    from importlib.metadata import version

    import distributed
    import numpy as np
    import scipy

    import kiln
    import kiln.dask as kd

    tpw = args.threads_per_worker or max(1, (os.cpu_count() or 2) // args.workers)
    cluster = distributed.LocalCluster(n_workers=args.workers, threads_per_worker=tpw,
                                       processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
    try:
        n, c = args.size, args.chunk
        img = da.random.default_rng(26).random((n, n), dtype=np.float32, chunks=c).persist()
        distributed.wait(img)
        binary = (img > 0.5).persist()
        distributed.wait(binary)
        print(f"image {n}x{n} float32 in {c}x{c} chunks; LocalCluster {args.workers} worker "
              f"processes x {tpw} threads; dask {dask.__version__}, dask-image "
              f"{version('dask-image')}, scipy {scipy.__version__}, kiln {kiln.__version__}; "
              f"{os.cpu_count()} CPUs", flush=True)
        rows, bad = [], 0
        for name, theirs, ours in workloads():
            if args.only not in name:
                continue
            is_binary = name.startswith("binary")
            f = kiln.fuse(ours)
            # JIT warm-up in every worker (kernels are shape-free: a small array compiles
            # them); --cold measures the first run instead
            if not args.cold:
                small = np.zeros((64, 64), bool if is_binary else np.float32)
                client.run(lambda: f(small) is not None)

            def run_peer():
                return theirs(img).persist()

            def run_kiln():
                return kd.map_overlap(f, binary if is_binary else img).persist()

            times = {}
            results = {}
            for label, fn in [("dask_image+scipy", run_peer), ("kiln.dask", run_kiln)]:
                best = float("inf")
                for _ in range(args.repeat):
                    t0 = time.perf_counter()
                    out = fn()
                    distributed.wait(out)
                    best = min(best, time.perf_counter() - t0)
                    results[label] = out
                times[label] = best
            a, b = results["dask_image+scipy"], results["kiln.dask"]
            if a.dtype != b.dtype:
                differ = a.size
            elif a.dtype == np.bool_:
                differ = int((a != b).sum().compute())
            else:
                differ = int((a.view(np.uint32) != b.view(np.uint32)).sum().compute())
            bad += differ != 0
            del results, a, b
            mp = n * n / 1e6
            t_p, t_k = times["dask_image+scipy"], times["kiln.dask"]
            rows.append((name, t_p, t_k, mp / t_p, mp / t_k, t_p / t_k,
                         "yes" if differ == 0 else f"NO ({differ} differ)"))
            print(f"  {name}: dask_image {t_p:.2f}s, kiln {t_k:.2f}s", flush=True)
        print()
        print("| workload | dask_image+scipy s | kiln.dask s | dask_image MP/s | kiln MP/s | speedup | bit-identical |")
        print("|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r[0]} | {r[1]:.2f} | {r[2]:.2f} | {r[3]:.1f} | {r[4]:.1f} | {r[5]:.1f}x | {r[6]} |")
        if bad:
            sys.exit(f"{bad} workload(s) differ")
    finally:
        client.close()
        cluster.close()


if __name__ == "__main__":
    main()
