"""kiln.ndimage's distance transforms against scipy.ndimage, bit for bit: EDT (sampling,
indices), CDT (metrics, structures), brute force (metrics, sampling), scipy's output
arguments, truth-testing of other dtypes, odd layouts and errors."""

import numpy as np
import pytest
import scipy.ndimage as sp

import kiln.ndimage as kn
from conftest import assert_bits


def mask(shape, p, seed):
    return np.random.default_rng(seed).random(shape) < p


def pair_bits(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_bits(g, w)
    else:
        assert_bits(got, want)


@pytest.mark.parametrize("shape", [(37,), (23, 31), (9, 10, 11)])
@pytest.mark.parametrize("sampling", [None, "aniso"])
def test_edt(shape, sampling):
    x = mask(shape, 0.8, seed=len(shape))
    s = None if sampling is None else [0.3, 0.7, 1.9][: len(shape)]
    for kw in [dict(), dict(return_indices=True), dict(return_distances=False, return_indices=True)]:
        pair_bits(kn.distance_transform_edt(x, sampling=s, **kw),
                  sp.distance_transform_edt(x, sampling=s, **kw))


@pytest.mark.parametrize("metric", ["chessboard", "taxicab", "cityblock", "manhattan", "array"])
@pytest.mark.parametrize("shape", [(29,), (17, 19), (6, 7, 8)])
def test_cdt(metric, shape):
    x = mask(shape, 0.75, seed=3)
    if metric == "array":
        metric = sp.generate_binary_structure(len(shape), 1)
        metric.flat[0] = True
    for kw in [dict(), dict(return_indices=True)]:
        pair_bits(kn.distance_transform_cdt(x, metric=metric, **kw),
                  sp.distance_transform_cdt(x, metric=metric, **kw))


@pytest.mark.parametrize("metric", ["euclidean", "taxicab", "chessboard"])
@pytest.mark.parametrize("shape", [(13,), (11, 12), (5, 6, 4)])
def test_bf(metric, shape):
    x = mask(shape, 0.7, seed=4)
    for kw in [dict(), dict(return_indices=True), dict(sampling=[0.5, 2.0, 1.5][: len(shape)])]:
        pair_bits(kn.distance_transform_bf(x, metric=metric, **kw),
                  sp.distance_transform_bf(x, metric=metric, **kw))


def test_no_background_and_truth_testing():
    ones = np.ones((5, 6), bool)
    for f in ["distance_transform_edt", "distance_transform_cdt", "distance_transform_bf"]:
        pair_bits(getattr(kn, f)(ones, return_indices=True),
                  getattr(sp, f)(ones, return_indices=True))
    v = np.where(mask((12, 13), 0.7, 5), 2.5, 0.0)
    v[0, 0], v[3, 4], v[5, 5] = np.nan, -0.0, np.nan
    for x in [v, v.astype(np.float32), (v != 0).astype(np.uint8) * 7, (v != 0).astype(np.int32)]:
        pair_bits(kn.distance_transform_edt(x, return_indices=True),
                  sp.distance_transform_edt(x, return_indices=True))
        pair_bits(kn.distance_transform_cdt(x, metric="taxicab"),
                  sp.distance_transform_cdt(x, metric="taxicab"))


def test_layouts():
    base = mask((18, 20), 0.8, seed=6)
    for x in [base.T, base[1::2, ::3], base[::-1, ::-2], np.asfortranarray(base)]:
        pair_bits(kn.distance_transform_edt(x, return_indices=True),
                  sp.distance_transform_edt(x, return_indices=True))
        pair_bits(kn.distance_transform_cdt(x), sp.distance_transform_cdt(x))


def test_output_arguments():
    x = mask((10, 11), 0.8, seed=7)
    d = np.empty((10, 11), np.float64)
    i = np.empty((2, 10, 11), np.int32)
    assert kn.distance_transform_edt(x, return_indices=True, distances=d, indices=i) is None
    wd, wi = sp.distance_transform_edt(x, return_indices=True)
    assert_bits(d, wd)
    assert_bits(i, wi)
    i2 = np.empty((2, 10, 11), np.int32)
    got = kn.distance_transform_cdt(x, return_indices=True, indices=i2)
    want, wi2 = sp.distance_transform_cdt(x, return_indices=True)
    assert_bits(got, want)
    assert_bits(i2, wi2)
    d3 = np.empty((10, 11), np.uint32)
    assert kn.distance_transform_bf(x, metric="taxicab", distances=d3) is None
    assert_bits(d3, sp.distance_transform_bf(x, metric="taxicab"))


def test_errors():
    x = mask((6, 7), 0.8, seed=8)
    with pytest.raises(ValueError, match="at least one"):
        kn.distance_transform_edt(x, return_distances=False)
    with pytest.raises(ValueError, match="return_indices must be True"):
        kn.distance_transform_edt(x, indices=np.empty((2, 6, 7), np.int32))
    with pytest.raises(TypeError, match="float64"):
        kn.distance_transform_edt(x, distances=np.empty((6, 7), np.float32))
    with pytest.raises(ValueError, match="shape"):
        kn.distance_transform_edt(x, distances=np.empty((6, 6)))
    with pytest.raises(ValueError, match="sampling"):
        kn.distance_transform_edt(x, sampling=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="metric"):
        kn.distance_transform_cdt(x, metric="euclidean")
    with pytest.raises(ValueError, match="metric"):
        kn.distance_transform_cdt(x, metric=np.ones((3, 3, 3), bool))
    with pytest.raises(ValueError, match="metric"):
        kn.distance_transform_bf(x, metric="chebyshev")
    with pytest.raises(ValueError):
        kn.distance_transform_edt(np.zeros((0, 4), bool))
    with pytest.raises(TypeError, match="complex"):
        kn.distance_transform_edt(np.zeros((3, 4), complex))
