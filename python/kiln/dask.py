"""``kiln.dask``: a kiln operator or fused chain applied to a Dask array, chunk by chunk.

``map_overlap(fn, array)`` traces ``fn`` (or takes a ``kiln.Fused``), reads the overlap
depth from the chain's halo (how far it reads along each axis, summed over the chain) and
runs ``dask.array.map_overlap``. Exactness: each chunk is extended by at least the halo on
its inner sides, so every kept point of a chunk reads exactly the values it reads in the
whole array; at the array's own edges no padding is added (``boundary='none'``), so kiln
applies the chain's own border mode there, as on the whole array. Chains reading under
``wrap`` are padded periodically instead (``boundary='periodic'``), which is the same
values. The chunked result is therefore bit-identical to the whole-array result. Limits: a
chain mixing ``wrap`` with other modes raises ``ValueError`` (no single Dask boundary
serves both); kiln never distributes work itself, Dask does.
"""

from __future__ import annotations

import dask.array as da
import numpy as np

from ._fuse import Fused, fuse

__all__ = ["map_overlap", "overlap_of"]


def overlap_of(fn, ndim: int):
    """``(depth, boundary)`` for ``dask.array.map_overlap`` of ``fn`` on an ``ndim``-d array:
    depth per axis (the larger side of the halo), boundary ``'none'`` or ``'periodic'``."""
    f = fn if isinstance(fn, Fused) else fuse(fn)
    depth = {a: max(h) for a, h in enumerate(f.halo(ndim))}
    modes = set(f.modes())
    if "wrap" in modes and len(modes) > 1:
        raise ValueError(
            f"kiln.dask: a chain mixing wrap with {sorted(modes - {'wrap'})} cannot be chunked exactly"
        )
    return depth, ("periodic" if modes == {"wrap"} else "none")


def map_overlap(fn, array: da.Array) -> da.Array:
    """``fn`` (a function of kiln operators, or a ``kiln.Fused``) applied to the Dask
    ``array``; bit-identical to ``fn(array.compute())``."""
    f = fn if isinstance(fn, Fused) else fuse(fn)
    depth, boundary = overlap_of(f, array.ndim)
    # binary operators return bool (a chain holding one starts with it, see _ndcommon.run)
    binary = any(s[0].startswith("binary_") for s in f.specs)
    dtype = np.dtype(bool) if binary else array.dtype
    return array.map_overlap(
        f,
        depth=depth,
        boundary=boundary,
        dtype=dtype,
        meta=np.empty((0,) * array.ndim, dtype=dtype),
    )
