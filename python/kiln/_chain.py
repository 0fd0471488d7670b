"""Operator specs and the cache of compiled chains shared by ``ndimage``, ``kornia`` and
``fuse``.

A spec is a hashable tuple ``(kind, size, footprint_shape, footprint_mask, origin, mode,
cval, border_value, iterations, structure_values, structure2)``; a chain of specs plus scipy's ``axes`` keys one native ``Chain``,
which compiles once per dtype and shape (kernels once per rank). Exactness: nothing here
touches values. Limits: the cache holds at most ``_MAX`` chains and is emptied when full.
"""

from __future__ import annotations

import numbers
import threading

import numpy as np

from ._kiln import Chain

_MAX = 256
_cache: dict = {}
_lock = threading.Lock()


def chain(specs: tuple, axes) -> Chain:
    """The native chain for ``specs`` and ``axes`` (cached)."""
    key = (specs, axes)
    c = _cache.get(key)
    if c is None:
        c = Chain(list(specs), None if axes is None else list(axes))
        with _lock:
            if len(_cache) >= _MAX:
                _cache.clear()
            _cache[key] = c
    return c


def ints(v, name: str) -> tuple:
    """An int or a sequence of ints as a tuple."""
    if isinstance(v, numbers.Integral):
        return (int(v),)
    try:
        out = tuple(int(i) for i in v)
    except TypeError:
        raise TypeError(f"{name} must be an int or a sequence of ints, got {v!r}") from None
    return out


def footprint(fp, name: str = "footprint"):
    """A boolean array as ``(shape, mask)``."""
    a = np.asarray(fp)
    if a.ndim == 0 or a.size == 0:
        raise ValueError(f"{name} must be a non-empty array")
    return tuple(int(s) for s in a.shape), tuple(bool(b) for b in (a != 0).ravel())


def spec(kind, size=None, fp=None, origin=0, mode=None, cval=0.0, border_value=False,
         iterations=1, values=None, structure2=None) -> tuple:
    """One operator spec (``values``: a non-flat structure's values, row-major over the
    footprint's shape; ``structure2``: binary_hit_or_miss's second structure as
    ``(shape, mask)``)."""
    shape, mask = fp if fp is not None else (None, None)
    sizes = None if size is None or fp is not None else ints(size, "size")
    if sizes is not None and any(s < 0 for s in sizes):
        raise ValueError(f"{kind}: bad size {sizes}: sizes must be at least 1")
    org = () if isinstance(origin, numbers.Integral) and origin == 0 else ints(origin, "origin")
    if mode is not None and not isinstance(mode, str):
        raise ValueError(f"{kind}: mode must be one string (kiln takes one mode for every axis)")
    vals = None if values is None else tuple(float(v) for v in values)
    return (kind, sizes, shape, mask, org, mode, float(cval), bool(border_value),
            int(iterations), vals, structure2)


def normalize_axes(axes):
    """scipy's ``axes`` as a tuple (or None)."""
    if axes is None:
        return None
    return ints(axes, "axes")
