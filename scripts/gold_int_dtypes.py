#!/usr/bin/env python3
"""Golden references from scipy.ndimage for kiln's integer dtypes (tests/golden/int_dtypes/).

grey_erosion, grey_dilation, grey_opening, grey_closing and median_filter on int16, uint16,
int32 (and int8, uint32) images, with every border mode, box and masked windows, origins,
even sizes, 1-D to 3-D and degenerate shapes. The Rust test `ops/tests/int_dtypes_golden.rs`
runs every case eagerly and fused and compares the bits.

Needs numpy and scipy (`python3 -m venv .venv-gold && .venv-gold/bin/pip install numpy scipy`);
the generated files are committed, the tests never run Python. Deterministic: fixed seed and
case list. Manifest lines are `<case> <op> <input file> [name=value ...]` in kiln-ops' registry
syntax (as `scripts/make_scipy_refs.py` writes them); arrays hold the spatial axes only.

Data: the dtype's minimum and maximum and their neighbours, values around zero (ties, and
where the signed and unsigned orders differ), and random values over the whole range, so a
min/max or a rank computed in the wrong order, a wrong width or a saturating conversion
shows. `cval` is an integer inside every dtype's range (scipy converts cval to the input's
type; kiln's cast of an out-of-range or fractional cval is its own documented rule).
"""

import os

import numpy as np
from scipy import ndimage as ndi

from goldlib import FORMAT, Writer, versions
from goldlib import window_params as _window_params

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden",
                   "int_dtypes")
MODES = ["reflect", "constant", "nearest", "mirror", "wrap"]
DTYPES = [np.int16, np.uint16, np.int32, np.int8, np.uint32]
NAME = {np.int16: "i16", np.uint16: "u16", np.int32: "i32", np.int8: "i8", np.uint32: "u32"}
GREY = {
    "median_filter": ndi.median_filter,
    "grey_erosion": ndi.grey_erosion,
    "grey_dilation": ndi.grey_dilation,
    "grey_opening": ndi.grey_opening,
    "grey_closing": ndi.grey_closing,
}


def data(rng, shape, dtype):
    info = np.iinfo(dtype)
    lo, hi = int(info.min), int(info.max)
    v = rng.integers(lo, hi, size=shape, endpoint=True, dtype=np.int64)
    u = rng.random(shape)
    small = rng.integers(-3, 4, size=shape) if lo < 0 else rng.integers(0, 4, size=shape)
    v = np.where(u < 0.35, small, v)
    extremes = rng.choice([lo, lo + 1, hi - 1, hi], size=shape)
    v = np.where((u >= 0.35) & (u < 0.5), extremes, v)
    return v.astype(dtype)


def window_params(size=None, footprint=None, mode="reflect", cval=0, origin=0):
    """Integer cval text (scipy converts cval to the input's type)."""
    return _window_params(size, footprint, mode, cval, origin, cval_text=lambda c: str(int(c)))


def main():
    rng = np.random.default_rng(20261204)
    w = Writer(OUT, same_dtype=True)
    w.clear()
    masked = np.array([[1, 0, 1], [0, 1, 1], [1, 1, 0]], dtype=bool)
    windows = [
        ("s3", 3, None, 0),
        ("s23", (2, 3), None, 0),
        ("s4", 4, None, 0),
        ("s5o", 5, None, (-2, 2)),
        ("s4om2", 4, None, (-2, 1)),
        ("fp", None, masked, 0),
        ("fpo", None, masked, (1, -1)),
    ]
    for dtype in DTYPES:
        dn = NAME[dtype]
        main_types = dtype in (np.int16, np.uint16, np.int32)
        img = data(rng, (7, 9), dtype)
        for op, fn in GREY.items():
            for label, size, fp, origin in windows:
                for mode in MODES:
                    # Every mode for the main dtypes' basic windows; the rest in two modes.
                    basic = label in ("s3", "s4", "fp") and main_types
                    if not basic and mode not in ("reflect", "constant"):
                        continue
                    cval = -5 if np.iinfo(dtype).min < 0 else 7
                    params, kw = window_params(size, fp, mode, cval, origin)
                    y = fn(img, **kw)
                    w.add(f"{op}_{dn}_{label}_{mode}", op, params, img, y)
        # 1-D, degenerate 2-D and a 3-D volume.
        for shape in ((11,), (1, 1), (1, 6), (6, 1)):
            x = data(rng, shape, dtype)
            tag = f"{dn}_{'x'.join(map(str, shape))}"
            for op, fn in GREY.items():
                for mode in (MODES if main_types else ["reflect", "constant"]):
                    params, kw = window_params(3, None, mode, 3, 0)
                    w.add(f"{op}_{tag}_s3_{mode}", op, params, x, fn(x, **kw))
        if main_types:
            vol = data(rng, (4, 5, 6), dtype)
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
                        params, kw = window_params(size, fp, mode, 1, origin)
                        w.add(f"{op}_{dn}_3d_{label}_{mode}", op, params, vol, fn(vol, **kw))
    w.finish([versions("gold_int_dtypes.py"), FORMAT])
    print(f"{len(w.lines)} cases, {len(w.inputs)} inputs, {w.bytes} bytes in {OUT}")
    assert w.bytes < 2_000_000


if __name__ == "__main__":
    main()
