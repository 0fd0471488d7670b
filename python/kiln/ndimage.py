"""``kiln.ndimage``: scipy.ndimage's filters, morphology and distance transforms with scipy's
signatures, run as kiln kernels.

Every function takes scipy's arguments (``size``, ``footprint``, ``structure``, ``mode``,
``cval``, ``origin``, ``output``, ``axes``, ``iterations``, ``mask``, ``border_value``, ...)
and returns scipy's output dtype (the input's for grey operators; bool for binary ones;
float64/int32/uint32 for distance transforms). Results are bit-identical to scipy's for
float32, float64, uint8, bool, int8, uint16, int16, int32 and uint32 inputs without NaN and
without mixed signed zeros (kiln orders ``-0 < +0`` and lets NaN win, where scipy's order is
implementation-defined). Every axis is filtered unless ``axes`` names the filtered ones, as in
scipy. Differences from scipy, all raising instead of computing: other dtypes (int64, uint64,
float16, complex) are a ``TypeError``; one ``mode`` for every axis; a non-flat ``structure``
needs float input (``TypeError``); ``output`` must be a C-contiguous writeable array of the
result's dtype (or that dtype itself) for the fused operators, an array of the result's dtype
and shape otherwise; ``axes`` in increasing order when a footprint or structure is given;
zero-size arrays and bad arguments are a ``ValueError`` (where scipy raises ``RuntimeError``).

Inside ``kiln.fuse`` the one-graph operators (grey morphology, filters, binary morphology
without ``mask`` and with 1 to 64 ``iterations``, hit-or-miss, top-hats, gradients) build the
fused chain instead of computing; the others (masks, ``iterations < 1``, propagation, hole
filling, distance transforms) raise ``ValueError`` there. torch (CPU) tensors and other
DLPack producers are taken without a copy and the result is returned in the input's library
(see ``kiln._dlpack``).
"""

from __future__ import annotations

import numpy as np

from . import _chain, _ndcommon, _rank
from ._fuse import Lazy as _Lazy
from ._distance import distance_transform_bf, distance_transform_cdt, distance_transform_edt
from ._rank import percentile_filter, rank_filter
from ._morphology import (
    binary_closing,
    binary_dilation,
    binary_erosion,
    binary_fill_holes,
    binary_hit_or_miss,
    binary_opening,
    binary_propagation,
    black_tophat,
    generate_binary_structure,
    iterate_structure,
    morphological_gradient,
    morphological_laplace,
    white_tophat,
)

__all__ = [
    "median_filter",
    "minimum_filter",
    "grey_erosion",
    "grey_dilation",
    "grey_opening",
    "grey_closing",
    "binary_erosion",
    "gradient_magnitude",
    # Morphology and distance transforms (scipy.ndimage's full morphology module).
    "binary_dilation",
    "binary_opening",
    "binary_closing",
    "binary_hit_or_miss",
    "binary_propagation",
    "binary_fill_holes",
    "white_tophat",
    "black_tophat",
    "morphological_gradient",
    "morphological_laplace",
    "generate_binary_structure",
    "iterate_structure",
    "distance_transform_edt",
    "distance_transform_cdt",
    "distance_transform_bf",
    # Rank filters of any window size.
    "rank_filter",
    "percentile_filter",
]


_run = _ndcommon.run


def _apply(spec, input, output, axes, sort_axes=False):
    return _ndcommon.apply(spec, input, output, axes, sort_axes)


_window = _ndcommon.window


def median_filter(input, size=None, footprint=None, output=None, mode="reflect", cval=0.0,
                  origin=0, *, axes=None):
    """scipy.ndimage.median_filter: the element ``n // 2`` of the sorted window of ``n``
    footprint entries, borders by ``mode``/``cval``. Bit-identical to scipy without NaN and
    mixed signed zeros."""
    s = _window("median_filter", size, footprint, None, mode, cval, origin)
    if not isinstance(input, _Lazy):
        ndim = getattr(input, "ndim", None)
        ndim = np.ndim(input) if ndim is None else ndim
        ndim = ndim if axes is None else len(_chain.ints(axes, "axes"))
        if _rank.window_count(size, footprint, ndim) > _rank.NETWORK_LIMIT:
            # beyond the fused network: kiln's sliding-histogram program, same selection
            return _rank.select("median_filter", "median", 0, input, size, footprint, output,
                                mode, cval, origin, axes)
    return _apply(s, input, output, axes, sort_axes=True)


def grey_erosion(input, size=None, footprint=None, structure=None, output=None,
                 mode="reflect", cval=0.0, origin=0, *, axes=None):
    """scipy.ndimage.grey_erosion: the minimum over the footprint, minus the non-flat
    ``structure``'s values when given (computed in the input's float dtype; float input only).
    Bit-identical to scipy without NaN and mixed signed zeros."""
    s = _window("grey_erosion", size, footprint, structure, mode, cval, origin)
    return _apply(s, input, output, axes, sort_axes=s[2] is not None)


def minimum_filter(input, size=None, footprint=None, output=None, mode="reflect", cval=0.0,
                   origin=0, *, axes=None):
    """scipy.ndimage.minimum_filter (the same as ``grey_erosion`` with a flat footprint)."""
    return grey_erosion(input, size, footprint, None, output, mode, cval, origin, axes=axes)


def grey_dilation(input, size=None, footprint=None, structure=None, output=None,
                  mode="reflect", cval=0.0, origin=0, *, axes=None):
    """scipy.ndimage.grey_dilation: the maximum over the reflected footprint (plus the
    reflected non-flat ``structure`` when given; float input only). Bit-identical to scipy
    without NaN and mixed signed zeros."""
    s = _window("grey_dilation", size, footprint, structure, mode, cval, origin)
    return _apply(s, input, output, axes, sort_axes=s[2] is not None)


def grey_opening(input, size=None, footprint=None, structure=None, output=None,
                 mode="reflect", cval=0.0, origin=0, *, axes=None):
    """scipy.ndimage.grey_opening (dilation of the erosion), fused into one kernel."""
    s = _window("grey_opening", size, footprint, structure, mode, cval, origin)
    return _apply(s, input, output, axes, sort_axes=s[2] is not None)


def grey_closing(input, size=None, footprint=None, structure=None, output=None,
                 mode="reflect", cval=0.0, origin=0, *, axes=None):
    """scipy.ndimage.grey_closing (erosion of the dilation), fused into one kernel."""
    s = _window("grey_closing", size, footprint, structure, mode, cval, origin)
    return _apply(s, input, output, axes, sort_axes=s[2] is not None)


def gradient_magnitude(input, mode="reflect", cval=0.0, output=None, *, axes=None):
    """kiln's central-difference gradient magnitude over the last two filtered axes:
    ``sqrt(dx*dx + dy*dy)`` with ``dx = x[.., j+1] - x[.., j-1]`` (float32/float64, each step
    rounded in the input dtype). Equals ``np.sqrt(cx**2 + cy**2)`` where ``cx``/``cy`` are
    ``scipy.ndimage.convolve`` with ``[[0,0,0],[1,0,-1],[0,0,0]]`` and its transpose (same
    mode and cval)."""
    s = _chain.spec("gradient_magnitude", mode=mode, cval=cval)
    return _apply(s, input, output, axes)
