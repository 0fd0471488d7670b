"""scipy.ndimage's ``rank_filter`` and ``percentile_filter`` (and ``median_filter`` for
windows beyond the fused network's 441 values), with scipy's signatures.

Scope: argument handling in Python (``size``/``footprint``, ``mode``, ``cval``, ``origin``,
``output``, ``axes`` by widening the window with extent 1 on the other axes, as scipy does);
the selection is kiln's (``kiln._kiln.rank_select``: the fused selection network up to 441
window values, the sliding-histogram program above; GIL released). Exactness: bit for bit
scipy 1.17 on kiln's goldens, for the nine dtypes, without NaN and mixed signed zeros (kiln
lets NaN win and orders ``-0 < +0``). Limits: not recordable in ``kiln.fuse`` (a program);
one ``mode`` for every axis; ``axes`` in increasing order;
``output=`` an array of the input's dtype and shape (or that dtype).
"""

from __future__ import annotations

import numbers
import operator

import numpy as np

from . import _chain, _dlpack, _kiln, _ndcommon
from ._fuse import Lazy

# The largest window the fused median network takes (kiln_ops::MAX_SELECTION_WINDOW).
NETWORK_LIMIT = 441


def _widen(ndim, axes, size, fp, origin):
    """``size``/``footprint``/``origin`` over ``axes`` as full-rank ones (extent 1, origin 0
    on the other axes)."""
    if axes is None:
        return size, fp, origin
    axes = [a % ndim if -ndim <= a < ndim else a for a in axes]
    if any(not 0 <= a < ndim for a in axes) or len(set(axes)) != len(axes):
        raise ValueError(f"axes {tuple(axes)} out of range or repeated for {ndim} axes")
    k = len(axes)
    org = _chain.ints(origin, "origin")
    org = org * k if len(org) == 1 else org
    if len(org) != k:
        raise ValueError(f"origin {origin!r}: one value or one per axis in axes")
    full_origin = [0] * ndim
    for a, o in zip(axes, org):
        full_origin[a] = o
    if fp is not None:
        shape, mask = fp
        if len(shape) != k:
            raise ValueError(f"footprint has {len(shape)} axes, axes= names {k}")
        full = [1] * ndim
        for a, s in zip(axes, shape):
            full[a] = s
        return None, (tuple(full), mask), tuple(full_origin)
    sz = _chain.ints(size, "size")
    sz = sz * k if len(sz) == 1 else sz
    if len(sz) != k:
        raise ValueError(f"size {size!r}: one value or one per axis in axes")
    full = [1] * ndim
    for a, s in zip(axes, sz):
        full[a] = s
    return tuple(full), None, tuple(full_origin)


def select(name, which, value, input, size, footprint, output, mode, cval, origin, axes):
    """Runs one rank selection under scipy's arguments."""
    if isinstance(input, Lazy):
        raise ValueError(f"kiln.fuse: {name} is a program, not a fusable graph operator")
    if not isinstance(mode, str):
        raise ValueError(f"{name}: mode must be one string (kiln takes one mode for every axis)")
    x, back = _dlpack.to_numpy(input)
    fp = None if footprint is None else _chain.footprint(footprint)
    if fp is None and size is None:
        raise ValueError(f"{name}: no footprint or filter size provided")
    axes = _chain.normalize_axes(axes)
    # scipy maps a rank filter's window onto the axes in increasing order but origins in
    # the order given: kiln asks for increasing axes (as for median_filter)
    _ndcommon.check_sorted_axes(name, axes, x.ndim)
    size, fp, origin = _widen(x.ndim, axes, size, fp, origin)
    sizes = None if fp is not None else _chain.ints(size, "size")
    if sizes is not None and any(s < 1 for s in sizes):
        raise ValueError(f"{name}: bad size {sizes}: sizes must be at least 1")
    if x.dtype.kind in "iub":
        _ndcommon.check_int_cval([(name, None, None, None, None, mode, float(cval))], x.dtype)
    org = [] if isinstance(origin, numbers.Integral) and origin == 0 else list(_chain.ints(origin, "origin"))
    r = _kiln.rank_select(which, x, float(value), None if sizes is None else list(sizes),
                          None if fp is None else (list(fp[0]), list(fp[1])), mode,
                          float(cval), org)
    return _ndcommon.store(r, output, back)


def rank_filter(input, rank, size=None, footprint=None, output=None, mode="reflect", cval=0.0,
                origin=0, *, axes=None):
    """scipy.ndimage.rank_filter: the element ``rank`` (negative: counted from the end) of
    each sorted window of ``size`` or ``footprint``, borders by ``mode``/``cval``. Any window
    size; bit-identical to scipy without NaN and mixed signed zeros."""
    rank = operator.index(rank)
    return select("rank_filter", "rank", rank, input, size, footprint, output, mode, cval,
                  origin, axes)


def percentile_filter(input, percentile, size=None, footprint=None, output=None,
                      mode="reflect", cval=0.0, origin=0, *, axes=None):
    """scipy.ndimage.percentile_filter: the element ``int(n * percentile / 100)`` of each
    sorted window of ``n`` values (negative percentiles count from 100). Any window size;
    bit-identical to scipy without NaN and mixed signed zeros."""
    if not isinstance(percentile, numbers.Real):
        raise TypeError(f"percentile_filter: percentile must be a number, got {percentile!r}")
    return select("percentile_filter", "percentile", float(percentile), input, size, footprint,
                  output, mode, cval, origin, axes)


def window_count(size, footprint, ndim):
    """How many values a ``size``/``footprint`` window holds on ``ndim`` filtered axes."""
    if footprint is not None:
        return int(np.count_nonzero(np.asarray(footprint)))
    sz = _chain.ints(size, "size")
    sz = sz * ndim if len(sz) == 1 else sz
    return int(np.prod(sz))
