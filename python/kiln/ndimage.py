"""``kiln.ndimage``: scipy.ndimage's filters with scipy's signatures, run as kiln kernels.

Every function takes scipy's arguments (``size``, ``footprint``, ``structure``, ``mode``,
``cval``, ``origin``, ``output``, ``axes``) and returns scipy's output dtype (the input's;
bool for ``binary_erosion``). Results are bit-identical to scipy's for float32, float64 and
uint8 inputs without NaN and without mixed signed zeros (kiln orders ``-0 < +0`` and lets
NaN win, where scipy's order is implementation-defined). Every axis is filtered unless
``axes`` names the filtered ones, as in scipy. Differences from scipy, all raising instead
of computing: only float32, float64, uint8 and bool arrays (``TypeError``); one ``mode`` for
every axis; grey morphology with a flat footprint only (a ``structure`` must be all zeros);
``binary_erosion`` with one iteration and no mask; ``output`` must be a C-contiguous
writeable array of the result's dtype (or that dtype itself); zero-size arrays are a
``ValueError``.

Inside ``kiln.fuse`` these functions build the fused chain instead of computing. torch (CPU)
tensors and other DLPack producers are taken without a copy and the result is returned in the
input's library (see ``kiln._dlpack``).
"""

from __future__ import annotations

import numpy as np

from . import _chain, _dlpack
from ._fuse import Lazy

__all__ = [
    "median_filter",
    "minimum_filter",
    "grey_erosion",
    "grey_dilation",
    "grey_opening",
    "grey_closing",
    "binary_erosion",
    "gradient_magnitude",
]


def _run(specs, axes, input, output):
    x, back = _dlpack.to_numpy(input)
    out = None
    if output is not None:
        if isinstance(output, np.ndarray):
            out = output
        elif _dlpack.is_dlpack(output):
            # Written in place through a view; like scipy, the given output is returned.
            out = _dlpack.writable_view(output)
            _chain.chain(specs, axes).run(x, out)
            return output
        else:
            try:
                dt = np.dtype(output)
            except TypeError:
                raise TypeError(f"output: must be an array or a dtype, got {output!r}") from None
            if dt != x.dtype:
                raise TypeError(
                    f"output: dtype {dt} differs from the input's {x.dtype} "
                    "(kiln computes in the input's dtype)"
                )
    result = _chain.chain(specs, axes).run(x, out)
    return output if out is not None else _dlpack.from_numpy(result, back)


def _apply(spec, input, output, axes, sort_axes=False):
    axes = _chain.normalize_axes(axes)
    if sort_axes and axes is not None:
        # scipy maps a footprint's (and a rank filter's) dimensions onto the axes in
        # increasing order but origins in the order given; kiln takes one order, so it asks
        # for increasing axes there rather than guess.
        ndim = None if isinstance(input, Lazy) else np.ndim(input)
        norm = [a % ndim if ndim and -ndim <= a < ndim else a for a in axes]
        if norm != sorted(norm):
            raise ValueError(
                f"{spec[0]}: with a footprint (and in median_filter) give axes in increasing "
                f"order, got {axes}"
            )
    if isinstance(input, Lazy):
        if output is not None:
            raise ValueError("kiln.fuse: output= is not allowed inside a traced function")
        return input.then(spec, axes)
    return _run((spec,), axes, input, output)


def _window(name, size, footprint, structure, mode, cval, origin):
    if structure is not None:
        st = np.asarray(structure)
        if np.any(st != 0):
            raise ValueError(
                f"{name}: a non-flat structure is not supported (use footprint=)"
            )
        if footprint is None:
            footprint = np.ones(st.shape, dtype=bool)
    if footprint is not None:
        return _chain.spec(name, fp=_chain.footprint(footprint), origin=origin, mode=mode, cval=cval)
    if size is None:
        raise ValueError(f"{name}: no footprint or filter size provided")
    return _chain.spec(name, size=size, origin=origin, mode=mode, cval=cval)


def median_filter(input, size=None, footprint=None, output=None, mode="reflect", cval=0.0,
                  origin=0, *, axes=None):
    """scipy.ndimage.median_filter: the element ``n // 2`` of the sorted window of ``n``
    footprint entries, borders by ``mode``/``cval``. Bit-identical to scipy without NaN and
    mixed signed zeros."""
    s = _window("median_filter", size, footprint, None, mode, cval, origin)
    return _apply(s, input, output, axes, sort_axes=True)


def grey_erosion(input, size=None, footprint=None, structure=None, output=None,
                 mode="reflect", cval=0.0, origin=0, *, axes=None):
    """scipy.ndimage.grey_erosion with a flat footprint (a minimum filter). Bit-identical to
    scipy without NaN and mixed signed zeros."""
    s = _window("grey_erosion", size, footprint, structure, mode, cval, origin)
    return _apply(s, input, output, axes, sort_axes=s[2] is not None)


def minimum_filter(input, size=None, footprint=None, output=None, mode="reflect", cval=0.0,
                   origin=0, *, axes=None):
    """scipy.ndimage.minimum_filter (the same as ``grey_erosion`` with a flat footprint)."""
    return grey_erosion(input, size, footprint, None, output, mode, cval, origin, axes=axes)


def grey_dilation(input, size=None, footprint=None, structure=None, output=None,
                  mode="reflect", cval=0.0, origin=0, *, axes=None):
    """scipy.ndimage.grey_dilation with a flat footprint: the maximum over the reflected
    footprint. Bit-identical to scipy without NaN and mixed signed zeros."""
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


def binary_erosion(input, structure=None, iterations=1, mask=None, output=None,
                   border_value=0, origin=0, brute_force=False, *, axes=None):
    """scipy.ndimage.binary_erosion: one iteration, no mask (``ValueError`` otherwise).
    Non-bool input is read as ``input != 0``, as scipy does. Returns bool, bit-identical to
    scipy."""
    if iterations != 1:
        raise ValueError("binary_erosion: only iterations=1 is supported")
    if mask is not None:
        raise ValueError("binary_erosion: mask is not supported")
    if border_value not in (0, 1, True, False):
        raise ValueError("binary_erosion: border_value must be 0 or 1")
    fp = None if structure is None else _chain.footprint(structure, "structure")
    s = _chain.spec("binary_erosion", fp=fp, origin=origin, border_value=bool(border_value))
    if not isinstance(input, Lazy):
        input = np.asarray(input)
        if input.dtype != np.bool_:
            if np.iscomplexobj(input):
                raise TypeError("binary_erosion: complex input is not supported")
            input = input != 0
    return _apply(s, input, output, axes)


def gradient_magnitude(input, mode="reflect", cval=0.0, output=None, *, axes=None):
    """kiln's central-difference gradient magnitude over the last two filtered axes:
    ``sqrt(dx*dx + dy*dy)`` with ``dx = x[.., j+1] - x[.., j-1]`` (float32/float64, each step
    rounded in the input dtype). Equals ``np.sqrt(cx**2 + cy**2)`` where ``cx``/``cy`` are
    ``scipy.ndimage.convolve`` with ``[[0,0,0],[1,0,-1],[0,0,0]]`` and its transpose (same
    mode and cval)."""
    s = _chain.spec("gradient_magnitude", mode=mode, cval=cval)
    return _apply(s, input, output, axes)
