#!/usr/bin/env python3
"""Golden references for kiln's distance transforms, from scipy.ndimage (1.17).

Writes tests/golden/distance/: one `<case>.in.npy` (the input, [B, C, S..]), `<case>.dist.npy`
and `<case>.idx.npy` (scipy's outputs, batch and channel axes in front: distances [B, C, S..],
indices [B, C, d, S..]) per case, and `cases.txt`: one line per case,
`name op key=value ...` with the kiln parameters. Each (b, c) image is one scipy call.
Run: python3 scripts/gold_distance.py (numpy, scipy). Deterministic (seeded).
"""
import os
import sys

import numpy as np
import scipy
from scipy import ndimage as ndi

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "distance")
rng = np.random.default_rng(29)
lines = []


def truth_values(mask):
    """A float64 input whose truth test is `mask`, using NaN (true) and -0.0 (false)."""
    x = np.where(mask, 1.0, 0.0)
    r = rng.random(mask.shape)
    x = np.where(mask & (r < 0.15), np.nan, x)
    x = np.where(mask & (r > 0.85), 2.5, x)
    x = np.where(~mask & (r < 0.3), -0.0, x)
    return x


def run(op, img, params):
    if op == "edt":
        s = params.get("sampling")
        return ndi.distance_transform_edt(img, sampling=s, return_indices=True)
    if op == "cdt":
        return ndi.distance_transform_cdt(img, metric=params["metric"], return_indices=True)
    if op == "bf":
        return ndi.distance_transform_bf(img, metric=params["metric"], sampling=params.get("sampling"),
                                         return_indices=True)
    if op == "signed":
        t = params.get("threshold")
        m = (img > t) if t is not None else img.astype(bool)
        s = params.get("sampling")
        return ndi.distance_transform_edt(m, sampling=s) - ndi.distance_transform_edt(~m, sampling=s), None
    raise ValueError(op)


def fmt_param(k, v):
    if k == "sampling":
        return "sampling=" + ",".join(repr(float(x)) for x in np.atleast_1d(v))
    if k == "metric" and not isinstance(v, str):
        a = np.asarray(v).astype(bool).astype(int)
        if a.ndim == 2:
            return "metric=" + ";".join(",".join(str(e) for e in row) for row in a)
        if a.ndim == 3:
            return "metric=" + "|".join(";".join(",".join(str(e) for e in row) for row in pl) for pl in a)
        raise ValueError("metric rank")
    if k == "threshold":
        return f"threshold={float(v)!r}"
    return f"{k}={v}"


def case(name, op, x, **params):
    """x: [B, C, S..] input (any dtype)."""
    b, c = x.shape[:2]
    dists, idxs = [], []
    for i in range(b):
        for j in range(c):
            d, ix = run(op, x[i, j], params)
            dists.append(d)
            idxs.append(ix)
    dist = np.stack(dists).reshape((b, c) + dists[0].shape)
    np.save(os.path.join(OUT, f"{name}.in.npy"), x)
    np.save(os.path.join(OUT, f"{name}.dist.npy"), dist)
    if idxs[0] is not None:
        idx = np.stack(idxs).reshape((b, c) + idxs[0].shape)
        assert idx.dtype == np.int32
        np.save(os.path.join(OUT, f"{name}.idx.npy"), idx)
    lines.append(" ".join([name, op] + [fmt_param(k, v) for k, v in params.items()]))


def img(mask):
    return truth_values(mask)[None, None]


def random_mask(shape, p):
    return rng.random(shape) < p


def single_bg(shape):
    m = np.ones(shape, bool)
    m[tuple(s // 2 for s in shape)] = False
    return m


def checker(shape):
    return (np.indices(shape).sum(axis=0) % 2) == 1


def symmetric_blob(shape):
    """Background at the four (2**d) mirrored corners of a centred box: many equidistant sites."""
    m = np.ones(shape, bool)
    idx = np.indices(shape)
    corner = np.ones(shape, bool)
    for k, n in enumerate(shape):
        corner &= (idx[k] == n // 4) | (idx[k] == n - 1 - n // 4)
    m[corner] = False
    return m


def main():
    if not scipy.__version__.startswith("1.17"):
        print(f"warning: scipy {scipy.__version__}, the goldens were made with 1.17", file=sys.stderr)
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".npy") or f == "cases.txt":
            os.remove(os.path.join(OUT, f))

    # --- EDT
    case("edt_1d_random", "edt", img(random_mask((37,), 0.7)))
    case("edt_1d_single", "edt", img(single_bg((15,))))
    case("edt_1d_nobg", "edt", img(np.ones((9,), bool)))
    case("edt_1d_nofg", "edt", img(np.zeros((9,), bool)))
    case("edt_1d_sampled", "edt", img(random_mask((29,), 0.8)), sampling=[0.7])
    case("edt_2d_random", "edt", img(random_mask((23, 31), 0.75)))
    case("edt_2d_dense", "edt", img(random_mask((40, 37), 0.97)))
    case("edt_2d_single", "edt", img(single_bg((15, 15))))
    case("edt_2d_single_even", "edt", img(single_bg((14, 16))))
    case("edt_2d_checker", "edt", img(checker((16, 16))))
    case("edt_2d_blob", "edt", img(symmetric_blob((17, 21))))
    case("edt_2d_blob_sampled", "edt", img(symmetric_blob((17, 21))), sampling=[1.0, 2.5])
    case("edt_2d_aniso", "edt", img(random_mask((21, 19), 0.85)), sampling=[1.0, 2.5])
    case("edt_2d_nonint", "edt", img(random_mask((21, 19), 0.85)), sampling=[0.3, 0.7])
    case("edt_2d_nonint_single", "edt", img(single_bg((13, 11))), sampling=[0.1, 0.3])
    case("edt_2d_row", "edt", img(random_mask((1, 17), 0.7)))
    case("edt_2d_col", "edt", img(random_mask((17, 1), 0.7)))
    case("edt_2d_nobg", "edt", img(np.ones((5, 7), bool)))
    case("edt_2d_nobg_sampled", "edt", img(np.ones((5, 7), bool)), sampling=[1.5, 0.5])
    case("edt_2d_nofg", "edt", img(np.zeros((5, 7), bool)))
    case("edt_2d_one_pixel", "edt", img(np.ones((1, 1), bool)))
    case("edt_3d_random", "edt", img(random_mask((9, 10, 11), 0.85)), sampling=[1.5, 1.0, 0.7])
    case("edt_3d_single", "edt", img(single_bg((7, 7, 7))))
    case("edt_3d_blob", "edt", img(symmetric_blob((9, 8, 9))))
    case("edt_3d_thin", "edt", img(random_mask((1, 8, 9), 0.8)))
    case("edt_3d_slab", "edt", img(np.pad(np.ones((3, 6, 5), bool), ((0, 2), (0, 0), (0, 0)),
                                          constant_values=False)))
    case("edt_4d_random", "edt", img(random_mask((5, 6, 4, 7), 0.85)), sampling=[1.0, 2.0, 3.0, 0.5])
    case("edt_4d_single", "edt", img(single_bg((5, 5, 5, 5))))
    case("edt_batch", "edt", truth_values(random_mask((2, 3, 12, 13), 0.8)), sampling=[1.25, 0.75])
    case("edt_batch_u8", "edt", (random_mask((2, 1, 9, 10), 0.8) * rng.integers(1, 255, (2, 1, 9, 10))).astype(np.uint8))
    case("edt_batch_bool", "edt", random_mask((1, 2, 6, 5, 4), 0.8))
    case("edt_batch_i32", "edt", (random_mask((2, 1, 8, 9), 0.8) * rng.integers(-5, 5, (2, 1, 8, 9))).astype(np.int32),
         sampling=[0.5, 1.5])
    case("edt_batch_f32", "edt", truth_values(random_mask((1, 2, 11, 10), 0.8)).astype(np.float32))

    # --- CDT
    for metric in ["chessboard", "taxicab"]:
        case(f"cdt_1d_{metric}", "cdt", img(random_mask((31,), 0.75)), metric=metric)
        case(f"cdt_2d_{metric}", "cdt", img(random_mask((23, 29), 0.85)), metric=metric)
        case(f"cdt_2d_single_{metric}", "cdt", img(single_bg((13, 13))), metric=metric)
        case(f"cdt_2d_checker_{metric}", "cdt", img(checker((10, 12))), metric=metric)
        case(f"cdt_2d_blob_{metric}", "cdt", img(symmetric_blob((15, 17))), metric=metric)
        case(f"cdt_2d_nobg_{metric}", "cdt", img(np.ones((4, 6), bool)), metric=metric)
        case(f"cdt_3d_{metric}", "cdt", img(random_mask((7, 8, 9), 0.85)), metric=metric)
        case(f"cdt_4d_{metric}", "cdt", img(random_mask((4, 5, 3, 6), 0.85)), metric=metric)
    case("cdt_2d_cityblock", "cdt", img(random_mask((12, 14), 0.8)), metric="cityblock")
    case("cdt_2d_manhattan", "cdt", img(random_mask((12, 14), 0.8)), metric="manhattan")
    case("cdt_2d_array_asym", "cdt", img(random_mask((15, 16), 0.8)),
         metric=np.array([[1, 1, 0], [1, 1, 0], [0, 0, 0]], bool))
    case("cdt_2d_array_full", "cdt", img(single_bg((9, 9))),
         metric=np.array([[1, 0, 1], [0, 1, 1], [1, 1, 1]], bool))
    case("cdt_3d_array", "cdt", img(random_mask((6, 7, 5), 0.8)),
         metric=ndi.generate_binary_structure(3, 2))
    case("cdt_u16", "cdt", (random_mask((1, 1, 9, 10), 0.8) * 300).astype(np.uint16), metric="taxicab")
    case("cdt_batch", "cdt", truth_values(random_mask((2, 2, 9, 11), 0.8)), metric="taxicab")

    # --- BF
    for metric in ["euclidean", "taxicab", "chessboard"]:
        case(f"bf_2d_{metric}", "bf", img(random_mask((13, 15), 0.8)), metric=metric)
        case(f"bf_2d_single_{metric}", "bf", img(single_bg((9, 9))), metric=metric)
        case(f"bf_3d_{metric}", "bf", img(random_mask((5, 6, 7), 0.8)), metric=metric)
        case(f"bf_2d_nobg_{metric}", "bf", img(np.ones((3, 4), bool)), metric=metric)
    case("bf_1d_euclidean", "bf", img(random_mask((21,), 0.7)), metric="euclidean")
    case("bf_2d_sampled", "bf", img(random_mask((12, 13), 0.8)), metric="euclidean", sampling=[0.3, 0.7])
    case("bf_2d_sampled_taxicab", "bf", img(random_mask((12, 13), 0.8)), metric="taxicab", sampling=[0.3, 0.7])
    case("bf_batch", "bf", truth_values(random_mask((2, 2, 7, 8), 0.8)), metric="euclidean", sampling=[2.0, 0.5])

    # --- signed distance edt(m) - edt(~m)
    smooth = np.sin(np.indices((2, 1, 19, 23)).sum(axis=0) * 0.37) + 0.2 * rng.standard_normal((2, 1, 19, 23))
    case("signed_2d_threshold", "signed", smooth, threshold=0.25, sampling=[1.0, 0.75])
    case("signed_2d_truth", "signed", img(random_mask((17, 15), 0.5)))
    case("signed_3d", "signed", img(random_mask((6, 7, 8), 0.6)), threshold=0.5)

    with open(os.path.join(OUT, "cases.txt"), "w") as f:
        f.write(f"# scipy {scipy.__version__}, numpy {np.__version__}; written by scripts/gold_distance.py\n")
        f.write("\n".join(lines) + "\n")
    total = sum(os.path.getsize(os.path.join(OUT, f)) for f in os.listdir(OUT))
    print(f"{len(lines)} cases, {total} bytes in {OUT}")


if __name__ == "__main__":
    main()
