#!/usr/bin/env python3
"""Median 3x3: time against image size (256^2 .. 4096^2) for kiln and its peers, as a PNG.

    pip install numpy scipy opencv-python-headless matplotlib   # torch + kornia optional
    cargo build --release
    python3 benches/plot.py [--kiln target/release/kiln] [--threads 2] [--out benches/median3_scaling.png]

kiln's times come from `kiln bench --ops median3_2048 --sizes ...` (same inputs and method as
benches/peers/compare.py, whose peer definitions are reused here); peers are timed in this run.
The raw numbers are written next to the PNG as JSON.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
import compare as C  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", default="target/release/kiln")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sizes", default="256,512,1024,2048,4096")
    ap.add_argument("--min-time", type=float, default=1.0,
                    help="seconds of repeated calls per point (short runs can catch the first calls' page faults)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "median3_scaling.png"))
    ap.add_argument("--skip-slow", action="store_true", help="skip scipy/numpy above 2048^2")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    with tempfile.TemporaryDirectory(prefix="kiln-plot-") as tmp:
        out = os.path.join(tmp, "kiln.json")
        cmd = [args.kiln, "bench", "--ops", "median3_2048", "--sizes", args.sizes, "--threads", str(args.threads),
               "--min-time", str(args.min_time), "--json", out]
        print("$", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)
        with open(out) as f:
            kj = json.load(f)
    series = {"kiln": {}, "copy floor": {}}
    seed = 1
    for r in kj["results"]:
        if r["status"] == "ok":
            series["kiln"][r["shape"][-1]] = r["time"]["median_ms"]
            series["copy floor"][r["shape"][-1]] = r["floor"]["median_ms"]
            seed = r["seed"]
    if C.cv2 is not None:
        C.cv2.setNumThreads(args.threads)
    if C.torch is not None:
        C.torch.set_num_threads(args.threads)
    for n in sizes:
        x = C.generate("f32", (1, 1, n, n), seed)
        for lib, fn, _check in C.peers_for("median3", 3):
            if isinstance(fn, str):
                fns = C.torch_fns(fn, 3)
                if fns is None:
                    continue
                tx = C.torch.from_numpy(x)
                for label, f in (("kornia-eager", fns[0]), ("torch.compile", fns[1])):
                    if f is None:
                        continue
                    with C.torch.no_grad():
                        st, _ = C.time_it(lambda: f(tx), args.min_time)
                    series.setdefault(label, {})[n] = st["median_ms"]
                    print(f"{label:>8} {n:>5}^2 {st['median_ms']:.3f} ms", flush=True)
                continue
            if args.skip_slow and lib in ("scipy", "numpy") and n > 2048:
                continue
            st, _ = C.time_it(lambda: fn(x), args.min_time)
            series.setdefault(lib, {})[n] = st["median_ms"]
            print(f"{lib:>8} {n:>5}^2 {st['median_ms']:.3f} ms", flush=True)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for name, pts in series.items():
        if not pts:
            continue
        xs = sorted(pts)
        style = "--" if name == "copy floor" else "-o"
        ax.plot([s * s for s in xs], [pts[s] for s in xs], style, label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks([s * s for s in sizes])
    ax.set_xticklabels([f"{s}²" for s in sizes])
    ax.set_xlabel("image size (pixels)")
    ax.set_ylabel("median time per call (ms)")
    m = kj["metadata"]
    ax.set_title(f"median 3x3, f32, {args.threads} thread(s) — {m['machine']}, kiln {m['kiln_commit'][:8]}", fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=120)
    with open(os.path.splitext(args.out)[0] + ".json", "w") as f:
        json.dump({"metadata": m, "threads": args.threads, "series_ms": series}, f, indent=1)
    print("wrote", args.out)


if __name__ == "__main__":
    main()
