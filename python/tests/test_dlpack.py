"""DLPack: tensors of other libraries in and out without copies.

A stand-in producer (this module's ``Tensor`` and ``from_dlpack``) shows the protocol path
without torch; the torch tests run when torch is installed and say SKIP otherwise.
"""

import sys

import numpy as np
import pytest
import scipy.ndimage as sndi

import kiln.kornia
import kiln.ndimage as ndi


class Tensor:
    """A minimal DLPack producer over a numpy array (what torch/JAX tensors look like)."""

    def __init__(self, a, device=(1, 0)):
        self.a = a
        self.device = device

    def __array__(self, dtype=None, copy=None):
        return self.a

    def __dlpack__(self, **kw):
        return self.a.__dlpack__(**kw)

    def __dlpack_device__(self):
        return self.device


def from_dlpack(x):
    """This module's `from_dlpack`, found through the input's module as torch.from_dlpack."""
    return Tensor(np.from_dlpack(x))


def bits(a):
    return np.asarray(a).view(np.uint32 if a.dtype == np.float32 else np.uint64)


def test_a_producer_in_gives_the_producer_out_with_scipys_bits():
    x = np.random.default_rng(1).random((33, 41), dtype=np.float32)
    y = ndi.median_filter(Tensor(x), size=3)
    assert isinstance(y, Tensor), type(y)
    assert np.array_equal(bits(y.a), bits(sndi.median_filter(x, size=3)))


def test_the_result_is_handed_back_without_a_copy():
    x = np.random.default_rng(2).random((16, 16))
    y = ndi.grey_erosion(Tensor(x), size=3)
    # The producer holds a view of kiln's result array, not a copy of it.
    assert not y.a.flags.owndata
    assert np.array_equal(bits(y.a), bits(sndi.grey_erosion(x, size=3)))


def test_output_through_dlpack_is_written_in_place():
    x = np.random.default_rng(3).random((20, 24), dtype=np.float32)
    out = Tensor(np.zeros_like(x))
    r = ndi.grey_opening(x, size=3, output=out)
    assert r is out
    assert np.array_equal(bits(out.a), bits(sndi.grey_opening(x, size=3)))


def test_a_read_only_export_is_refused_as_output():
    class ReadOnly(Tensor):
        def __array__(self, dtype=None, copy=None):
            return self.a.copy()

    x = np.ones((4, 4), np.float32)
    with pytest.raises(ValueError, match="exported read-only"):
        ndi.grey_opening(x, size=3, output=ReadOnly(np.zeros_like(x)))


def test_a_device_tensor_is_a_clear_value_error():
    with pytest.raises(ValueError, match="DLPack device"):
        ndi.median_filter(Tensor(np.ones((4, 4), np.float32), device=(2, 0)), size=3)


def test_kornia_median_blur_takes_a_producer():
    x = np.random.default_rng(4).random((1, 2, 9, 11), dtype=np.float32)
    y = kiln.kornia.median_blur(Tensor(x), 3)
    assert isinstance(y, Tensor)
    assert np.array_equal(bits(y.a), bits(kiln.kornia.median_blur(x, 3)))


def test_torch_tensors_round_trip():
    torch = pytest.importorskip("torch", reason="SKIP: torch is not installed")
    x = torch.rand(1, 1, 31, 37)
    y = ndi.median_filter(x, size=3)
    assert isinstance(y, torch.Tensor)
    want = sndi.median_filter(x.numpy(), size=3)
    assert np.array_equal(y.numpy().view(np.uint32), want.view(np.uint32))
    out = torch.zeros_like(x)
    assert ndi.median_filter(x, size=3, output=out) is out
    assert np.array_equal(out.numpy().view(np.uint32), want.view(np.uint32))


def test_morphology_distance_and_programs_through_dlpack():
    rng = np.random.default_rng(9)
    b = rng.random((20, 22)) < 0.7
    for f, kw in [("binary_dilation", dict(iterations=2)), ("binary_closing", dict(mask=b)),
                  ("binary_fill_holes", {}), ("binary_propagation", dict(mask=b))]:
        y = getattr(ndi, f)(Tensor(b), **kw)
        assert isinstance(y, Tensor), (f, type(y))
        assert np.array_equal(y.a, getattr(sndi, f)(b, **kw)), f
    d, i = ndi.distance_transform_edt(Tensor(b), return_indices=True)
    assert isinstance(d, Tensor) and isinstance(i, Tensor)
    wd, wi = sndi.distance_transform_edt(b, return_indices=True)
    assert np.array_equal(bits(d.a), bits(wd)) and np.array_equal(i.a, wi)
    x = rng.random((20, 22))
    y = ndi.white_tophat(Tensor(x), size=3)
    assert isinstance(y, Tensor)
    assert np.array_equal(bits(y.a), bits(sndi.white_tophat(x, size=3)))
