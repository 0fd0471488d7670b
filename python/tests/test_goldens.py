"""kiln.ndimage against the scipy 1.17 golden files the Rust tests use (tests/golden/
morphology, int_dtypes, distance), bit for bit, and the installed scipy (CI pins 1.15.2)
against the same files: where the installed scipy differs from 1.17, the case is named and
printed (the 1.17 golden is the reference; kiln must equal it). SKIP (printed) when the
golden files are not there (an installed package run outside a checkout)."""

import os
import sys

import numpy as np
import pytest
import scipy
import scipy.ndimage as sp

import kiln.ndimage as kn
from conftest import assert_bits

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "golden")


def lines(family, manifest):
    path = os.path.join(ROOT, family, manifest)
    if not os.path.exists(path):
        print(f"SKIP: {path} not found (tests run outside a kiln checkout)")
        pytest.skip(f"{path} not found")
    with open(path) as f:
        return [ln.split() for ln in f if ln.strip() and not ln.startswith("#")]


def load(family, name):
    return np.load(os.path.join(ROOT, family, name))


def array_param(text, ndim, dtype):
    planes = [[[float(v) for v in row.split(",")] for row in pl.split(";")]
              for pl in text.split("|")]
    a = np.array(planes if "|" in text else planes[0])
    while a.ndim > ndim and a.shape[0] == 1:
        a = a[0]
    return a.astype(dtype)


def ints(text):
    v = tuple(int(s) for s in text.split(","))
    return v[0] if len(v) == 1 else v


def kwargs(op, params, ndim):
    kw, conn, st_iter = {}, None, None
    for p in params:
        k, v = p.split("=", 1)
        if k in ("structure", "structure1", "structure2"):
            grey = not op.startswith("binary")
            kw[k] = array_param(v, ndim, np.float64 if grey else bool)
        elif k == "footprint":
            kw[k] = array_param(v, ndim, bool)
        elif k in ("size", "origin", "origin1", "origin2"):
            kw[k] = ints(v)
        elif k in ("border_value", "iterations"):
            kw[k] = int(v)
        elif k == "cval":
            kw[k] = float(v)
        elif k == "mode":
            kw[k] = v
        elif k == "connectivity":
            conn = int(v)
        elif k == "structure_iterations":
            st_iter = int(v)
        elif k == "brute_force":
            kw[k] = bool(int(v))
        elif k == "layout":
            pass
        else:
            raise AssertionError(f"unknown golden parameter {k}")
    if conn is not None or st_iter is not None:
        st = sp.generate_binary_structure(ndim, conn or 1)
        kw["structure"] = st if st_iter is None else sp.iterate_structure(st, st_iter)
    return kw


def run_planes(fn, x, mask, kw, bc):
    """``fn`` on each ``[b, c]`` plane when ``bc``, else on ``x``."""
    if not bc:
        return fn(x, mask=mask, **kw) if mask is not None else fn(x, **kw)
    return np.stack([np.stack([fn(x[i, j], **kw) for j in range(x.shape[1])])
                     for i in range(x.shape[0])])


def same(a, b):
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    if a.dtype.kind == "f":
        return np.array_equal(a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}"))
    return np.array_equal(a, b)


def replay(family, manifest, stride=1):
    differ, skipped, n = [], [], 0
    for i, (case, op, files, *params) in enumerate(lines(family, manifest)):
        if i % stride:
            continue
        n += 1
        names = files.split(",")
        x = load(family, names[0])
        mask = load(family, names[1]) if len(names) > 1 else None
        bc = "layout=bc" in params
        kw = kwargs(op, params, x.ndim - 2 if bc else x.ndim)
        want = load(family, f"{case}.out.npy")
        got = run_planes(getattr(kn, op), x, mask, kw, bc)
        try:
            assert_bits(got, want)
        except AssertionError as e:
            raise AssertionError(f"{family} case {case}: kiln != scipy 1.17 golden: {e}") from None
        if op == "median_filter" and x.ndim == 1 and scipy.__version__.startswith("1.15"):
            skipped.append(case)  # scipy 1.15's 1-D median path reads out of bounds
            continue
        theirs = run_planes(getattr(sp, op), x, mask, kw, bc)
        if not same(theirs, want):
            differ.append(case)
    if skipped:
        print(f"SKIP (scipy side only) {len(skipped)} {family} cases: scipy {scipy.__version__}'s "
              f"1-D median_filter reads out of bounds (kiln equals 1.17 there): {skipped}",
              file=sys.stderr)
    if differ:
        print(f"NOTE: scipy {scipy.__version__} differs from the scipy 1.17 goldens on "
              f"{len(differ)} of {n} {family} cases (kiln equals 1.17): {differ}",
              file=sys.stderr)
    else:
        print(f"scipy {scipy.__version__} equals the scipy 1.17 goldens on the other "
              f"{n - len(skipped)} of {n} {family} cases", file=sys.stderr)
    return n


def test_morphology_goldens():
    assert replay("morphology", "manifest.txt") > 900


def test_int_dtype_goldens():
    # every third case keeps CI time bounded; the Rust test replays all of them
    assert replay("int_dtypes", "manifest.txt", stride=3) > 300


def test_distance_goldens():
    differ, n = [], 0
    for case, op, *params in lines("distance", "cases.txt"):
        if op == "signed":
            continue  # kiln's own signed transform has no scipy.ndimage function
        kw = {}
        for p in params:
            k, v = p.split("=", 1)
            if k == "sampling":
                kw[k] = [float(s) for s in v.split(",")]
            elif k == "metric":
                kw[k] = v if v[0].isalpha() else array_param(v, v.count("|") and 3 or 2, bool)
        x = load("distance", f"{case}.in.npy")
        want_d = load("distance", f"{case}.dist.npy")
        want_i = load("distance", f"{case}.idx.npy")
        fn = {"edt": "distance_transform_edt", "cdt": "distance_transform_cdt",
              "bf": "distance_transform_bf"}[op]
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                n += 1
                d, ix = getattr(kn, fn)(x[i, j], return_indices=True, **kw)
                assert_bits(d, want_d[i, j])
                assert_bits(ix, want_i[i, j])
                sd, si = getattr(sp, fn)(x[i, j], return_indices=True, **kw)
                if not (same(sd, want_d[i, j]) and same(si, want_i[i, j])):
                    differ.append(case)
    if differ:
        print(f"NOTE: scipy {scipy.__version__} differs from the scipy 1.17 goldens on "
              f"{len(differ)} of {n} distance images (kiln equals 1.17): {differ}",
              file=sys.stderr)
    else:
        print(f"scipy {scipy.__version__} equals the scipy 1.17 goldens on all {n} distance "
              "images", file=sys.stderr)
    assert n > 60
