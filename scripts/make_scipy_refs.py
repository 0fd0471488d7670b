#!/usr/bin/env python3
"""Generates scipy.ndimage reference data for kiln-ops (tests/reference/).

Needs numpy and scipy (`pip install numpy scipy`); CI does not run this script, the
generated .npy files are committed. Deterministic: a fixed seed, fixed case list.

Each case writes `<case>.out.npy` and one line of `manifest.txt`; inputs are shared between
cases and written once as `in_<n>.npy`. Arrays hold the spatial axes only (e.g. [H, W]; the
Rust test reshapes them to [1, 1, H, W]). A manifest line is

    <case> <op> <input file> [name=value ...]

with parameters in kiln-ops' registry syntax (`size=3,5`, `footprint=1,0;0,1`, `mode=...`,
`cval=...`, `origin=...`, `structure=...`, `border_value=...`). Inputs contain ties and
+-Inf but no NaN and no negative zero (kiln orders -0 < +0, scipy does not).
"""

import os
import sys

import numpy as np
from scipy import ndimage as ndi

from goldlib import FORMAT, Writer, fp_text, seq_text, versions, window_params

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "reference")
MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]


def data(rng, shape, dtype, specials=True):
    """Half-integers (many ties), some Gaussian values, and a few +-Inf."""
    v = rng.integers(-4, 5, size=shape).astype(np.float64) * 0.5
    gauss = rng.random(shape) < 0.3
    v[gauss] = rng.standard_normal(int(gauss.sum())) * 3.0
    if specials:
        u = rng.random(shape)
        v[u < 0.05] = np.inf
        v[(u >= 0.05) & (u < 0.10)] = -np.inf
    v = v.astype(dtype)
    assert not np.isnan(v).any()
    assert not np.any((v == 0) & np.signbit(v)), "no negative zero"
    return v


GREY = {
    "median_filter": ndi.median_filter,
    "grey_erosion": ndi.grey_erosion,
    "grey_dilation": ndi.grey_dilation,
    "grey_opening": ndi.grey_opening,
    "grey_closing": ndi.grey_closing,
}


def gradient(x, mode, cval):
    row = np.array([[0, 0, 0], [1, 0, -1], [0, 0, 0]], dtype=np.float64)
    col = row.T
    if x.ndim == 3:
        row, col = row[None], col[None]
    dx = ndi.convolve(x, row, mode=mode, cval=cval)
    dy = ndi.convolve(x, col, mode=mode, cval=cval)
    with np.errstate(invalid="ignore", over="ignore"):
        return np.sqrt(dx * dx + dy * dy)


def main():
    rng = np.random.default_rng(20240601)
    w = Writer(OUT)
    w.clear()
    dt_name = {np.float32: "f32", np.float64: "f64"}

    # Windows on 2-D images: (label, size, footprint, origin).
    masked = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0]], dtype=bool)
    windows = [
        ("s3", 3, None, 0),
        ("s5", 5, None, 0),
        ("s23", (2, 3), None, 0),
        ("s4", 4, None, 0),
        ("s3o1", 3, None, 1),
        ("s4om2", 4, None, (-2, 1)),
        ("s23o", (2, 3), None, (-1, 1)),
        ("fp", None, masked, 0),
        ("fpo", None, masked, (1, -1)),
    ]
    for dtype in (np.float32, np.float64):
        img = data(rng, (7, 9), dtype)
        for op, fn in GREY.items():
            for label, size, fp, origin in windows:
                for mode in MODES:
                    # Every mode for the basic windows; the rest in two modes.
                    if label not in ("s3", "s4", "fp") and mode not in ("reflect", "constant"):
                        continue
                    cval = 2.5 if mode == "constant" else 0.0
                    params, kw = window_params(size, fp, mode, cval, origin)
                    y = fn(img, **kw)
                    w.add(f"{op}_{dt_name[dtype]}_{label}_{mode}", op, params, img, y)

    # Small and degenerate shapes, and a 3-D volume.
    for dtype in (np.float32, np.float64):
        for shape in ((1, 1), (1, 6), (6, 1)):
            img = data(rng, shape, dtype)
            tag = f"{dt_name[dtype]}_{shape[0]}x{shape[1]}"
            for op, fn in GREY.items():
                for mode in MODES:
                    cval = -1.25 if mode == "constant" else 0.0
                    params, kw = window_params(3, None, mode, cval, 0)
                    w.add(f"{op}_{tag}_s3_{mode}", op, params, img, fn(img, **kw))
        vol = data(rng, (5, 4, 6), dtype)
        fp3 = np.zeros((3, 3, 3), dtype=bool)
        fp3[1, 1, :] = fp3[1, :, 1] = fp3[:, 1, 1] = True
        fp3[0, 0, 0] = True
        for op, fn in GREY.items():
            for label, size, fp, origin in [
                ("s3", 3, None, 0),
                ("s234", (2, 3, 4), None, (0, 1, -2)),
                ("fp", None, fp3, (0, 0, 1)),
            ]:
                for mode in ("reflect", "constant", "wrap"):
                    params, kw = window_params(size, fp, mode, 0.5, origin)
                    w.add(f"{op}_{dt_name[dtype]}_3d_{label}_{mode}", op, params, vol,
                          fn(vol, **kw))

    # Gradient magnitude through scipy's convolve.
    for dtype in (np.float32, np.float64):
        for shape, specials in (((7, 9), False), ((7, 9), True), ((1, 6), False),
                                ((6, 1), False), ((5, 4, 6), False)):
            img = data(rng, shape, dtype, specials)
            tag = f"{dt_name[dtype]}_{'x'.join(map(str, shape))}{'_inf' if specials else ''}"
            for mode in MODES:
                cval = 1.5 if mode == "constant" else 0.0
                params = [("mode", mode)] + ([("cval", repr(cval))] if mode == "constant" else [])
                w.add(f"gradient_magnitude_{tag}_{mode}", "gradient_magnitude", params, img,
                      gradient(img, mode, cval))

    # Binary erosion on bool images.
    structures = [
        ("default", None, 0),
        ("full", np.ones((3, 3), dtype=bool), 0),
        ("masked", np.array([[1, 1, 0], [0, 1, 1], [0, 0, 1]], dtype=bool), 0),
        ("masked_o", np.array([[1, 1, 0], [0, 1, 1], [0, 0, 1]], dtype=bool), (1, -1)),
        ("even", np.ones((2, 2), dtype=bool), 0),
        ("even_o", np.array([[1, 0], [1, 1]], dtype=bool), (-1, 0)),
        ("row", np.ones((1, 4), dtype=bool), (0, 1)),
    ]
    for shape in ((7, 9), (1, 6), (6, 1)):
        img = rng.random(shape) < 0.75
        tag = "x".join(map(str, shape))
        for label, st, origin in structures:
            for bv in (0, 1):
                params = []
                kw = {"border_value": bv, "origin": origin}
                if st is not None:
                    params.append(("structure", fp_text(st)))
                    kw["structure"] = st
                params += [("border_value", str(bv)), ("origin", seq_text(origin))]
                w.add(f"binary_erosion_{tag}_{label}_bv{bv}", "binary_erosion", params, img,
                      ndi.binary_erosion(img, **kw))
    vol = rng.random((5, 4, 6)) < 0.8
    for bv in (0, 1):
        w.add(f"binary_erosion_3d_default_bv{bv}", "binary_erosion",
              [("border_value", str(bv))], vol, ndi.binary_erosion(vol, border_value=bv))

    # Gradient magnitude with a cval that f32 cannot represent: scipy's convolve reads it in
    # float64 (issue 27). Appended last so the random draws above stay as they were.
    for dtype in (np.float32, np.float64):
        for shape in ((7, 9), (1, 6), (6, 1)):
            img = data(rng, shape, dtype, specials=False)
            tag = f"{dt_name[dtype]}_{shape[0]}x{shape[1]}"
            for label, cval in (("tenth", 0.1), ("third", 1.0 / 3.0), ("m2_7", -2.7)):
                params = [("mode", "constant"), ("cval", repr(cval))]
                w.add(f"gradient_magnitude_{tag}_cval_{label}_constant", "gradient_magnitude",
                      params, img, gradient(img, "constant", cval))

    w.finish([versions("make_scipy_refs.py"), FORMAT])
    print(f"{len(w.lines)} cases, {w.bytes} bytes of .npy in {os.path.normpath(OUT)}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
