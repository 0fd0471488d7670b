#!/usr/bin/env python3
"""Generates scipy.ndimage reference data for kiln's morphology family (tests/golden/morphology/).

Needs numpy and scipy 1.17 (`pip install numpy scipy`); CI does not run this script, the
generated .npy files are committed. Deterministic: a fixed seed and a fixed case list.

Format (as scripts/make_scipy_refs.py): each case writes `<case>.out.npy` and one line of
`manifest.txt`; inputs are shared between cases and written once as `in_<n>.npy`. A line is

    <case> <op> <input file>[,<mask file>] [name=value ...]

with parameters in kiln-ops' registry syntax. Arrays hold the spatial axes only (the Rust test
reshapes them to [1, 1, S..]) unless the pseudo-parameter `layout=bc` says the array is
already [B, C, S..] (scipy then runs on each (b, c) plane). `iterations` < 1 and `mask` cases
run through kiln's program form. Binary inputs include NaN and -0.0 (truth-tested: NaN true,
-0.0 false); grey inputs have neither (kiln orders -0 < +0 and NaN is absorbing).
"""

import os

import numpy as np
import scipy
from scipy import ndimage as ndi

from goldlib import Writer, versions
from goldlib import fp_text as _fp_text
from goldlib import seq_text as seq

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "golden", "morphology")


def fp_text(fp, fmt=lambda v: str(int(v))):
    """Structures as written (values through `fmt`), not read as bool."""
    return _fp_text(fp, fmt)


def binary_data(rng, shape, dtype, p=0.6):
    v = rng.random(shape) < p
    if dtype == bool:
        return v
    x = np.where(v, rng.integers(1, 5, size=shape), 0).astype(dtype)
    if np.dtype(dtype).kind == "f":
        u = rng.random(shape)
        x[(u < 0.1) & v] = np.nan
        x[(u > 0.9) & ~v] = -0.0
    return x


def grey_data(rng, shape, dtype):
    if dtype == bool:
        return rng.random(shape) < 0.5
    if dtype == np.uint8:
        return rng.integers(0, 256, size=shape).astype(np.uint8)
    v = rng.integers(-8, 9, size=shape).astype(np.float64) * 0.5
    g = rng.random(shape) < 0.4
    v[g] = rng.standard_normal(int(g.sum())) * 3.0
    v[v == 0] = 0.0  # no negative zero
    return v.astype(dtype)


def main():
    assert scipy.__version__.startswith("1.17"), scipy.__version__
    rng = np.random.default_rng(28)
    w = Writer(OUT)
    w.clear()

    cross = ndi.generate_binary_structure(2, 1)
    full = ndi.generate_binary_structure(2, 2)
    false_centre = np.array([[0, 1, 0], [1, 0, 1], [0, 1, 0]], bool)
    even = np.array([[1, 1], [0, 1]], bool)
    wide = np.array([[1, 0, 1, 1]], bool)
    structs2 = {
        "default": (None, []),
        "conn2": (full, [("connectivity", "2")]),
        "falsec": (false_centre, [("structure", fp_text(false_centre))]),
        "even": (even, [("structure", fp_text(even))]),
        "wide": (wide, [("structure", fp_text(wide))]),
        "iter2": (ndi.iterate_structure(cross, 2), [("structure_iterations", "2")]),
    }
    binops = {
        "binary_erosion": ndi.binary_erosion,
        "binary_dilation": ndi.binary_dilation,
        "binary_opening": ndi.binary_opening,
        "binary_closing": ndi.binary_closing,
    }
    shapes2 = {"9x11": (9, 11), "1x1": (1, 1), "2x2": (2, 2), "1x7": (1, 7)}
    for opname, fn in binops.items():
        for dt in [bool, np.uint8, np.float32, np.float64]:
            for sname, shp in shapes2.items():
                if dt != bool and sname != "9x11":
                    continue
                x = binary_data(rng, shp, dt)
                for stname, (st, sp) in structs2.items():
                    for bv in [0, 1]:
                        for it in [1, 2]:
                            if it == 2 and (dt != bool or bv == 1):
                                continue
                            kw = dict(structure=st, border_value=bv, iterations=it)
                            y = fn(x, **kw)
                            params = sp + [("border_value", str(bv))]
                            if it != 1:
                                params.append(("iterations", str(it)))
                            w.add(f"{opname}_{np.dtype(dt).name}_{sname}_{stname}_bv{bv}_it{it}",
                                  opname, params, x, y)
        # origins at both limits (3x3: -1 and 1; even 2x2: -1 and 0; wide 1x4: -2 and 1)
        x = binary_data(rng, (8, 9), bool)
        for stname, st, origins in [("cross", cross, [(-1, -1), (1, 1), (-1, 1)]),
                                    ("even", even, [(-1, -1), (0, 0), (-1, 0)]),
                                    ("wide", wide, [(0, -2), (0, 1)])]:
            for o in origins:
                for bv in [0, 1]:
                    y = fn(x, structure=st, origin=o, border_value=bv)
                    w.add(f"{opname}_origin_{stname}_{o[0]}_{o[1]}_bv{bv}", opname,
                          [("structure", fp_text(st)), ("origin", seq(o)), ("border_value", str(bv))], x, y)
        # 1-D and 3-D
        x1 = binary_data(rng, (17,), bool)
        for st in [np.array([1, 1, 1], bool), np.array([1, 0, 1, 1], bool)]:
            for bv in [0, 1]:
                w.add(f"{opname}_1d_{len(st)}_bv{bv}", opname,
                      [("structure", fp_text(st)), ("border_value", str(bv))], x1, fn(x1, structure=st, border_value=bv))
        x3 = binary_data(rng, (4, 5, 6), bool, 0.7)
        for conn in [1, 3]:
            st = ndi.generate_binary_structure(3, conn)
            w.add(f"{opname}_3d_conn{conn}", opname, [("connectivity", str(conn))], x3, fn(x3, structure=st))
        # [B, C, S..] batch: scipy per plane with the 2-D cross
        xb = binary_data(rng, (2, 3, 6, 7), bool)
        yb = np.stack([np.stack([fn(xb[i, j]) for j in range(3)]) for i in range(2)])
        w.add(f"{opname}_bc", opname, [("layout", "bc")], xb, yb)
        # masks and until-convergence (program forms)
        x = binary_data(rng, (10, 12), bool, 0.55)
        m = rng.random((10, 12)) < 0.7
        for it in [1, 3, 0, -1]:
            for bv in [0, 1]:
                if opname in ("binary_opening", "binary_closing") and it < 1:
                    y = fn(x, iterations=it, mask=m, border_value=bv)
                else:
                    y = fn(x, iterations=it, mask=m, border_value=bv)
                w.add(f"{opname}_mask_it{it}_bv{bv}", opname,
                      [("iterations", str(it)), ("border_value", str(bv))], x, y, mask=m)
        for it in [0, 5]:
            y = fn(x, iterations=it, structure=full, brute_force=True)
            w.add(f"{opname}_nomask_it{it}_full", opname,
                  [("iterations", str(it)), ("connectivity", "2"), ("brute_force", "1")], x, y)

    # hit or miss
    hx = binary_data(rng, (9, 10), bool, 0.5)
    s1 = np.array([[0, 1, 0], [1, 1, 1], [0, 0, 0]], bool)
    s2 = np.array([[0, 0, 0], [0, 0, 0], [1, 1, 1]], bool)
    for name, kw, params in [
        ("default", {}, []),
        ("s1", dict(structure1=s1), [("structure1", fp_text(s1))]),
        ("s1s2", dict(structure1=s1, structure2=s2), [("structure1", fp_text(s1)), ("structure2", fp_text(s2))]),
        ("full", dict(structure1=full), [("structure1", fp_text(full))]),
        ("o1", dict(structure1=s1, origin1=(1, -1)), [("structure1", fp_text(s1)), ("origin1", "1,-1")]),
        ("o2", dict(structure1=s1, structure2=s2, origin1=(0, 1), origin2=(-1, 0)),
         [("structure1", fp_text(s1)), ("structure2", fp_text(s2)), ("origin1", "0,1"), ("origin2", "-1,0")]),
        ("even", dict(structure1=even), [("structure1", fp_text(even))]),
    ]:
        for dt in [bool, np.float32]:
            x = hx if dt == bool else binary_data(rng, (9, 10), dt, 0.5)
            w.add(f"binary_hit_or_miss_{name}_{np.dtype(dt).name}", "binary_hit_or_miss", params, x,
                  ndi.binary_hit_or_miss(x, **kw))
    x1 = binary_data(rng, (15,), bool)
    w.add("binary_hit_or_miss_1d", "binary_hit_or_miss", [], x1, ndi.binary_hit_or_miss(x1))

    # propagation and fill holes
    for i, shp in enumerate([(16, 18), (1, 1), (3, 2)]):
        seed = rng.random(shp) < 0.05
        m = rng.random(shp) < 0.6
        for bv in [0, 1]:
            for stname, st, sp in [("cross", None, []), ("conn2", full, [("connectivity", "2")]),
                                   ("even", np.array([[1, 1], [1, 1]], bool), [("structure", "1,1;1,1")])]:
                y = ndi.binary_propagation(seed, structure=st, mask=m, border_value=bv)
                w.add(f"binary_propagation_{i}_{stname}_bv{bv}", "binary_propagation",
                      sp + [("border_value", str(bv))], seed, y, mask=m)
    seed3 = rng.random((4, 5, 6)) < 0.05
    m3 = rng.random((4, 5, 6)) < 0.7
    w.add("binary_propagation_3d", "binary_propagation", [], seed3, ndi.binary_propagation(seed3, mask=m3), mask=m3)
    yy, xx = np.mgrid[0:24, 0:26]
    ring = ((yy - 10) ** 2 + (xx - 11) ** 2 < 60) & ((yy - 10) ** 2 + (xx - 11) ** 2 > 12)
    ring |= rng.random((24, 26)) < 0.15
    for stname, st, sp in [("cross", None, []), ("conn2", full, [("connectivity", "2")])]:
        w.add(f"binary_fill_holes_{stname}", "binary_fill_holes", sp, ring, ndi.binary_fill_holes(ring, structure=st))
        f = ring.astype(np.float32)
        w.add(f"binary_fill_holes_{stname}_f32", "binary_fill_holes", sp, f, ndi.binary_fill_holes(f, structure=st))
    w.add("binary_fill_holes_origin", "binary_fill_holes", [("origin", "1,0")], ring,
          ndi.binary_fill_holes(ring, origin=(1, 0)))
    b3 = rng.random((5, 6, 7)) < 0.6
    w.add("binary_fill_holes_3d", "binary_fill_holes", [], b3, ndi.binary_fill_holes(b3))
    for i, shp in enumerate([(7, 9), (12, 5), (2, 3)]):
        r = rng.random(shp) < 0.6
        w.add(f"binary_fill_holes_rand{i}", "binary_fill_holes", [], r, ndi.binary_fill_holes(r))
    w.add("binary_fill_holes_1x1", "binary_fill_holes", [], np.zeros((1, 1), bool), ndi.binary_fill_holes(np.zeros((1, 1), bool)))

    # grey: derived operators and non-flat structures
    gops = {
        "white_tophat": ndi.white_tophat, "black_tophat": ndi.black_tophat,
        "morphological_gradient": ndi.morphological_gradient,
        "morphological_laplace": ndi.morphological_laplace,
        "grey_erosion": ndi.grey_erosion, "grey_dilation": ndi.grey_dilation,
        "grey_opening": ndi.grey_opening, "grey_closing": ndi.grey_closing,
    }
    nonflat = np.array([[0.0, 1.0, 0.0], [1.0, 2.5, 1.0], [0.0, 1.0, 0.0]])
    nonflat_even = np.array([[0.5, 1.0], [0.0, 3.0]])
    fp_ring = np.array([[1, 1, 1], [1, 0, 1], [1, 1, 1]], bool)
    for opname, fn in gops.items():
        derived = opname not in ("grey_erosion", "grey_dilation", "grey_opening", "grey_closing")
        for dt in [np.float32, np.float64, np.uint8, bool]:
            if dt == bool and opname not in ("white_tophat", "black_tophat"):
                continue
            x = grey_data(rng, (9, 11), dt)
            cases = []
            if derived:
                cases += [("size3", dict(size=3), [("size", "3")]),
                          ("size2x4", dict(size=(2, 4)), [("size", "2,4")]),
                          ("ring", dict(footprint=fp_ring), [("footprint", fp_text(fp_ring))]),
                          ("size3_o", dict(size=3, origin=(-1, 1)), [("size", "3"), ("origin", "-1,1")])]
            if dt in (np.float32, np.float64):  # kiln refuses non-flat structures on ints
                cases += [("st", dict(structure=nonflat), [("structure", fp_text(nonflat, lambda v: repr(float(v))))]),
                          ("st_even", dict(structure=nonflat_even), [("structure", fp_text(nonflat_even, lambda v: repr(float(v))))]),
                          ("st_fp", dict(structure=nonflat, footprint=fp_ring),
                           [("structure", fp_text(nonflat, lambda v: repr(float(v)))), ("footprint", fp_text(fp_ring))]),
                          ("st_o", dict(structure=nonflat_even, origin=(-1, 0)),
                           [("structure", fp_text(nonflat_even, lambda v: repr(float(v)))), ("origin", "-1,0")])]
            for cname, kw, params in cases:
                for mode in ["reflect", "constant", "nearest"]:
                    mp = [("mode", mode)]
                    kk = dict(kw, mode=mode)
                    if mode == "constant":
                        cv = 7 if dt == np.uint8 else 1.5
                        if dt == bool:
                            cv = 1
                        kk["cval"] = cv
                        mp.append(("cval", str(cv)))
                    if dt == np.uint8 and "structure" in kw:
                        xx8 = x.copy()
                        xx8[:2, :3] = [[0, 1, 2], [255, 254, 253]]  # wrapping arithmetic
                        w.add(f"{opname}_{np.dtype(dt).name}_{cname}_{mode}", opname, params + mp, xx8, fn(xx8, **kk))
                    else:
                        w.add(f"{opname}_{np.dtype(dt).name}_{cname}_{mode}", opname, params + mp, x, fn(x, **kk))
        if derived:
            x1 = grey_data(rng, (13,), np.float32)
            w.add(f"{opname}_1d", opname, [("size", "4")], x1, fn(x1, size=4))
            x3 = grey_data(rng, (4, 5, 6), np.uint8)
            w.add(f"{opname}_3d", opname, [("size", "3,2,3")], x3, fn(x3, size=(3, 2, 3)))
            xs = grey_data(rng, (2, 2), np.float32)
            w.add(f"{opname}_small", opname, [("size", "5")], xs, fn(xs, size=5))
            xb = grey_data(rng, (2, 2, 5, 6), np.float32)
            yb = np.stack([np.stack([fn(xb[i, j], size=3) for j in range(2)]) for i in range(2)])
            w.add(f"{opname}_bc", opname, [("size", "3"), ("layout", "bc")], xb, yb)

    w.finish([versions("gold_morphology.py", numpy_first=False)])
    print(f"{len(w.lines)} cases, {w.bytes} bytes")
    assert w.bytes < 2_000_000


if __name__ == "__main__":
    main()
