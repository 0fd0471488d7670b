"""Shared helpers for the kiln Python tests: seeded test arrays and bit comparison."""

import numpy as np
import pytest


def make(shape, dtype, seed=0):
    """Seeded values without NaN and without -0 (where kiln and scipy may order differently)."""
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind in "iu":
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max, size=shape, dtype=dtype, endpoint=True)
    if dtype == np.bool_:
        return rng.random(shape) > 0.3
    v = rng.integers(-400, 400, size=shape).astype(dtype) / dtype(8)
    v[v == 0] = dtype(0.0)  # +0 only
    return v


def assert_bits(got, want):
    """Same dtype, shape and bytes (NaN payloads included)."""
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    g, w = np.ascontiguousarray(got), np.ascontiguousarray(want)
    if g.dtype.kind == "f":
        itype = np.uint32 if g.dtype == np.float32 else np.uint64
        bad = g.view(itype) != w.view(itype)
        assert not bad.any(), f"{bad.sum()} differing elements, first at {np.argwhere(bad)[0]}"
    else:
        assert np.array_equal(g, w)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
