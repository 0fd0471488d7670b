"""kiln.kornia.median_blur against a numpy statement of kornia's semantics, and kiln.fuse
against the operators called one by one."""

import numpy as np
import pytest
import scipy.ndimage as sp

import kiln
import kiln.kornia as kk
import kiln.ndimage as kn
from conftest import assert_bits, make


def kornia_median(x, ky, kx):
    """kornia.filters.median_blur in numpy: zero padding, lower median, NaN where the window
    (padding excluded) holds a non-finite value."""
    py, px = (ky - 1) // 2, (kx - 1) // 2
    pad = np.pad(x, ((0, 0), (0, 0), (py, ky - 1 - py), (px, kx - 1 - px)))
    bad = np.pad(~np.isfinite(x), ((0, 0), (0, 0), (py, ky - 1 - py), (px, kx - 1 - px)))
    H, W = x.shape[2:]
    win = np.stack([pad[:, :, i:i + H, j:j + W] for i in range(ky) for j in range(kx)], -1)
    anybad = np.stack([bad[:, :, i:i + H, j:j + W] for i in range(ky) for j in range(kx)], -1).any(-1)
    med = np.sort(win, axis=-1)[..., (ky * kx - 1) // 2]
    return np.where(anybad, x.dtype.type(np.nan), med)


@pytest.mark.parametrize("k", [3, 5, (3, 5), 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_median_blur(k, dtype):
    x = make((2, 3, 9, 11), dtype, seed=20)
    x[0, 1, 4, 5] = np.inf
    x[1, 2, 0, 0] = np.nan
    ky, kx = (k, k) if isinstance(k, int) else k
    got = kk.median_blur(x, k)
    want = kornia_median(x, ky, kx)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert_bits(got[ok], want[ok])
    assert np.isnan(got).sum() > 0


def test_median_blur_wants_bchw():
    with pytest.raises(ValueError, match="B, C, H, W"):
        kk.median_blur(np.zeros((4, 4), np.float32), 3)


def test_fuse_equals_the_chain_and_dumps_one_kernel():
    f = kiln.fuse(lambda x: kn.median_filter(kn.grey_opening(x, 3), 3))
    x = make((40, 33), np.float32, seed=21)
    assert_bits(f(x), sp.median_filter(sp.grey_opening(x, 3), 3))
    assert f.names() == ["grey_opening", "median_filter"]
    text = f.dump((40, 33))
    assert "== kernel 0" in text and "fused groups" in text
    assert f.halo(2) == [(3, 3), (3, 3)]


def test_fuse_with_axes_and_output():
    f = kiln.fuse(lambda x: kn.grey_closing(kn.grey_erosion(x, size=(3, 1), axes=(0, 2)),
                                            size=(1, 3), axes=(0, 2)))
    x = make((6, 4, 7), np.float64, seed=22)
    out = np.empty_like(x)
    f(x, output=out)
    want = sp.grey_closing(sp.grey_erosion(x, size=(3, 1), axes=(0, 2)), size=(1, 3), axes=(0, 2))
    assert_bits(out, want)


def test_fuse_rejects_what_it_cannot_trace():
    with pytest.raises(TypeError):
        kiln.fuse(lambda x: x)
    with pytest.raises(ValueError, match="same axes"):
        kiln.fuse(lambda x: kn.median_filter(kn.grey_erosion(x, 3, axes=(0,)), 3))
