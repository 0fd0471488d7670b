"""Bad input raises TypeError/ValueError with kiln's message; many threads calling at once
get the same bits as one."""

import threading

import numpy as np
import pytest
import scipy.ndimage as sp

import kiln.ndimage as kn
from conftest import assert_bits, make


def test_wrong_dtype():
    with pytest.raises(TypeError, match="int32"):
        kn.median_filter(np.zeros((4, 4), np.int32), 3)
    with pytest.raises(TypeError, match="f32 or f64"):
        kn.gradient_magnitude(np.zeros((4, 4), np.uint8))


def test_bad_mode_size_origin_rank():
    x = np.zeros((5, 5), np.float32)
    with pytest.raises(ValueError, match="unknown mode"):
        kn.median_filter(x, 3, mode="edge")
    with pytest.raises(ValueError, match="at least 1"):
        kn.grey_erosion(x, 0)
    with pytest.raises(ValueError, match="origin"):
        kn.grey_erosion(x, 3, origin=4)
    with pytest.raises(ValueError, match="spatial axes"):
        kn.median_filter(x, footprint=np.ones((3, 3, 3)))
    with pytest.raises(ValueError, match="out of range"):
        kn.median_filter(x, 3, axes=(2,))
    with pytest.raises(ValueError, match="no footprint or filter size"):
        kn.median_filter(x)


def test_zero_size_and_0d():
    with pytest.raises(ValueError, match="zero-size"):
        kn.median_filter(np.zeros((0, 4), np.float32), 3)
    with pytest.raises(ValueError, match="0-d"):
        kn.median_filter(np.float32(1.0), 3)


def test_bad_outputs():
    x = make((6, 8), np.float32)
    with pytest.raises(ValueError, match="C-contiguous"):
        kn.median_filter(x, 3, output=np.empty((8, 6), np.float32).T)
    ro = np.empty_like(x)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="not writable"):
        kn.median_filter(x, 3, output=ro)
    with pytest.raises(TypeError, match="dtype"):
        kn.median_filter(x, 3, output=np.empty(x.shape, np.float64))
    with pytest.raises(ValueError, match="shape"):
        kn.median_filter(x, 3, output=np.empty((6, 7), np.float32))
    with pytest.raises(TypeError, match="differs"):
        kn.median_filter(x, 3, output=np.uint8)


def test_unsupported_scipy_features_raise():
    x = np.zeros((5, 5), np.float32)
    with pytest.raises(ValueError, match="non-flat"):
        kn.grey_erosion(x, structure=np.ones((3, 3)))
    with pytest.raises(ValueError, match="iterations"):
        kn.binary_erosion(x, iterations=2)
    with pytest.raises(ValueError, match="one string"):
        kn.median_filter(x, 3, mode=("reflect", "wrap"))


def test_threads_agree():
    x = make((96, 80), np.float32, seed=30)
    want = sp.median_filter(sp.grey_opening(x, 3), 5)
    errors = []

    def work():
        try:
            for _ in range(10):
                assert_bits(kn.median_filter(kn.grey_opening(x, 3), 5), want)
        except Exception as e:  # reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    assert not any(t.is_alive() for t in threads)
