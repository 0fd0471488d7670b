"""scipy.ndimage's binary and grey morphology beyond the plain filters: binary dilation,
opening, closing (with ``iterations``, ``mask``, ``border_value``), hit-or-miss, propagation,
hole filling, top-hats, morphological gradient and Laplace, and the structure helpers.

Scope: each function takes scipy's signature. Without ``mask`` and with 1 to 64 iterations the
binary operators are one graph (a fused kernel, recordable in ``kiln.fuse`` and usable in
``kiln.dask``); with a ``mask``, ``iterations < 1`` (until nothing changes) or more than 64,
and for ``binary_propagation``/``binary_fill_holes``, they run kiln's fixpoint programs (not
recordable in ``kiln.fuse``). Exactness: non-bool input is read as ``input != 0`` (scipy's
reading); the kernels and programs are bit-identical to scipy 1.17 (kiln's goldens).
Limits: ``axes`` in increasing order when a structure or origin is given (scipy maps the
structure onto sorted axes but origins in the given order); ``output=`` of bool only (the
fused operators: C-contiguous); a non-flat grey ``structure`` needs float input.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import _chain, _dlpack, _kiln, _ndcommon
from ._fuse import Lazy

# The most iterations a binary operator unrolls into one graph (kiln_ops' limit).
_MAX_GRAPH_ITERATIONS = 64


def _bool_output(name, output):
    """The binary operators' ``output=`` as a chain ``out`` (bool) or ``None``."""
    if output is None or isinstance(output, np.ndarray) or _dlpack.is_dlpack(output):
        return output
    _ndcommon.check_output_dtype(output, np.bool_, f"{name} returns bool")
    return None


def _structure(structure, name="structure"):
    return None if structure is None else _chain.footprint(structure, name)


def _iterations(name, iterations):
    if not isinstance(iterations, numbers.Integral):
        raise TypeError(f"{name}: iterations must be an int, got {iterations!r}")
    return int(iterations)


def _border_value(name, border_value):
    if border_value not in (0, 1, True, False):
        raise ValueError(f"{name}: border_value must be 0 or 1, got {border_value!r}")
    return bool(border_value)


def _widen(ndim, axes, structure, origin, default_rank_structure):
    """A structure (``(shape, mask)`` or None) and origin over ``axes`` as full-rank ones:
    extent 1 and origin 0 on the other axes (scipy's own expansion for ``axes=``)."""
    if axes is None:
        return structure, origin
    axes = [a % ndim if -ndim <= a < ndim else a for a in axes]
    if any(not 0 <= a < ndim for a in axes) or len(set(axes)) != len(axes):
        raise ValueError(f"axes {tuple(axes)} out of range or repeated for {ndim} axes")
    if structure is None:
        structure = default_rank_structure(len(axes))
    shape, mask = structure
    if len(shape) != len(axes):
        raise ValueError(
            f"structure has {len(shape)} axes, axes= names {len(axes)}"
        )
    full = [1] * ndim
    for a, s in zip(axes, shape):
        full[a] = s
    org = _chain.ints(origin, "origin")
    if len(org) == 1:
        org = org * len(axes)
    if len(org) != len(axes):
        raise ValueError(f"origin {origin!r}: one value or one per axis in axes")
    full_origin = [0] * ndim
    for a, o in zip(axes, org):
        full_origin[a] = o
    return (tuple(full), mask), tuple(full_origin)


def _cross(rank):
    shape, mask = _kiln.binary_structure(rank, 1)
    return tuple(shape), tuple(mask)


def _binary(name, input, structure, iterations, mask, output, border_value, origin, axes):
    iterations = _iterations(name, iterations)
    bv = _border_value(name, border_value)
    st = _structure(structure)
    axes = _chain.normalize_axes(axes)
    graph = mask is None and 1 <= iterations <= _MAX_GRAPH_ITERATIONS
    x, back = _ndcommon.truth(input, name)
    if st is not None or not (isinstance(origin, numbers.Integral) and origin == 0):
        _ndcommon.check_sorted_axes(name, axes, None if isinstance(x, Lazy) else x.ndim)
    if graph:
        s = _chain.spec(name, fp=st, origin=origin, border_value=bv, iterations=iterations)
        if isinstance(x, Lazy):
            return _ndcommon.apply(s, x, output, axes)
        out = _bool_output(name, output)
        r = _ndcommon.run((s,), axes, x, out)
        return r if out is not None else _dlpack.from_numpy(r, back)
    if isinstance(x, Lazy):
        raise ValueError(
            f"kiln.fuse: {name} with a mask or iterations outside 1..=64 is a fixpoint program, "
            "not a fusable graph"
        )
    m = None
    if mask is not None:
        m, _ = _ndcommon.truth(mask, f"{name}: mask")
        if m.shape != x.shape:
            raise ValueError(f"{name}: mask shape {m.shape} differs from input shape {x.shape}")
    st, org = _widen(x.ndim, axes, st, origin, _cross)
    org = _chain.ints(org, "origin") if not (isinstance(org, numbers.Integral) and org == 0) else ()
    r = _kiln.binary_program(name, x, m, st, iterations, bv, list(org))
    return _ndcommon.store(r, output, back)


def binary_erosion(input, structure=None, iterations=1, mask=None, output=None,
                   border_value=0, origin=0, brute_force=False, *, axes=None):
    """scipy.ndimage.binary_erosion: true where every true ``structure`` entry (default: the
    cross of radius 1) lands on true input, reads outside giving ``border_value``, repeated
    ``iterations`` times (``< 1``: until nothing changes); where ``mask`` is false the input is
    kept. Non-bool input is read as ``input != 0``. Returns bool, bit-identical to scipy.
    ``brute_force`` does not change the result and is ignored."""
    return _binary("binary_erosion", input, structure, iterations, mask, output,
                   border_value, origin, axes)


def binary_dilation(input, structure=None, iterations=1, mask=None, output=None,
                    border_value=0, origin=0, brute_force=False, *, axes=None):
    """scipy.ndimage.binary_dilation: true where the reflected ``structure`` centred there
    meets a true input element (``border_value`` outside), repeated ``iterations`` times
    (``< 1``: until nothing changes); ``mask`` limits the changed elements. Returns bool,
    bit-identical to scipy."""
    return _binary("binary_dilation", input, structure, iterations, mask, output,
                   border_value, origin, axes)


def binary_opening(input, structure=None, iterations=1, output=None, origin=0, mask=None,
                   border_value=0, brute_force=False, *, axes=None):
    """scipy.ndimage.binary_opening: ``binary_dilation(binary_erosion(x))`` with the same
    arguments (one fused kernel without ``mask``). Returns bool, bit-identical to scipy."""
    return _binary("binary_opening", input, structure, iterations, mask, output,
                   border_value, origin, axes)


def binary_closing(input, structure=None, iterations=1, output=None, origin=0, mask=None,
                   border_value=0, brute_force=False, *, axes=None):
    """scipy.ndimage.binary_closing: ``binary_erosion(binary_dilation(x))`` with the same
    arguments (one fused kernel without ``mask``). Returns bool, bit-identical to scipy."""
    return _binary("binary_closing", input, structure, iterations, mask, output,
                   border_value, origin, axes)


def _shift_structure(shape, mask, d):
    """``(shape, mask)`` padded with false entries so that, read at origin ``o``, it reads as
    the original at origin ``o + d`` (per axis: ``2d`` zeros after for ``d > 0``, ``2|d|``
    before for ``d < 0``)."""
    a = np.array(mask, bool).reshape(shape)
    pad = [(0, 2 * k) if k > 0 else (-2 * k, 0) for k in d]
    p = np.pad(a, pad)
    return tuple(int(s) for s in p.shape), tuple(bool(v) for v in p.ravel())


def binary_hit_or_miss(input, structure1=None, structure2=None, output=None, origin1=0,
                       origin2=None, *, axes=None):
    """scipy.ndimage.binary_hit_or_miss: true where ``structure1`` (default the cross) fits
    the foreground and ``structure2`` (default ``~structure1``, not reflected, outside counts
    as background) the background. One fused kernel; returns bool, bit-identical to scipy.
    An ``origin2`` other than ``origin1`` is taken by padding ``structure2`` with false
    entries (exact: padding adds no offsets)."""
    name = "binary_hit_or_miss"
    st1 = _structure(structure1, "structure1")
    st2 = _structure(structure2, "structure2")
    x, back = _ndcommon.truth(input, name)
    axes = _chain.normalize_axes(axes)
    rank = len(axes) if axes is not None else (None if isinstance(x, Lazy) else x.ndim)
    same_origin = origin2 is None or (
        _chain.ints(origin2, "origin2") == _chain.ints(origin1, "origin1")
    )
    if not same_origin:
        if rank is None:
            raise ValueError(f"{name}: origin2 != origin1 inside kiln.fuse needs axes=")
        if st1 is None:
            st1 = _cross(rank)
        if st2 is None:
            st2 = (st1[0], tuple(not v for v in st1[1]))
        o1 = _chain.ints(origin1, "origin1")
        o2 = _chain.ints(origin2, "origin2")
        o1 = o1 * rank if len(o1) == 1 else o1
        o2 = o2 * rank if len(o2) == 1 else o2
        if len(o1) != rank or len(o2) != rank or len(st2[0]) != rank:
            raise ValueError(
                f"{name}: origin1 {origin1!r}, origin2 {origin2!r} and structure2 must match "
                f"the {rank} filtered axes"
            )
        for o, s in zip(o2, st2[0]):
            if not -(s // 2) <= o <= (s - 1) // 2:
                raise ValueError(f"{name}: invalid origin2 {origin2!r} for structure2 {st2[0]}")
        st2 = _shift_structure(st2[0], st2[1], [b - a for a, b in zip(o1, o2)])
    if st1 is not None or st2 is not None or origin1 != 0:
        _ndcommon.check_sorted_axes(name, axes, None if isinstance(x, Lazy) else x.ndim)
    s = _chain.spec(name, fp=st1, origin=origin1, structure2=st2)
    if isinstance(x, Lazy):
        return _ndcommon.apply(s, x, output, axes)
    out = _bool_output(name, output)
    r = _ndcommon.run((s,), axes, x, out)
    return r if out is not None else _dlpack.from_numpy(r, back)


def binary_propagation(input, structure=None, mask=None, output=None, border_value=0,
                       origin=0, *, axes=None):
    """scipy.ndimage.binary_propagation: ``binary_dilation`` repeated until nothing changes
    (within ``mask``). Returns bool, bit-identical to scipy."""
    return _binary("binary_dilation", input, structure, -1, mask, output, border_value,
                   origin, axes)


def binary_fill_holes(input, structure=None, output=None, origin=0, *, axes=None):
    """scipy.ndimage.binary_fill_holes: true where the input is true or the background there
    is not connected (through ``structure``, default the cross) to outside the array. Returns
    bool, bit-identical to scipy."""
    name = "binary_fill_holes"
    x, back = _ndcommon.truth(input, name)
    if isinstance(x, Lazy):
        raise ValueError(f"kiln.fuse: {name} is a fixpoint program, not a fusable graph")
    st = _structure(structure)
    axes = _chain.normalize_axes(axes)
    if st is not None or not (isinstance(origin, numbers.Integral) and origin == 0):
        _ndcommon.check_sorted_axes(name, axes, x.ndim)
    st, org = _widen(x.ndim, axes, st, origin, _cross)
    org = _chain.ints(org, "origin") if not (isinstance(org, numbers.Integral) and org == 0) else ()
    return _ndcommon.store(_kiln.fill_holes(x, st, list(org)), output, back)


def _grey(name, input, size, footprint, structure, output, mode, cval, origin, axes):
    s = _ndcommon.window(name, size, footprint, structure, mode, cval, origin)
    return _ndcommon.apply(s, input, output, axes, sort_axes=s[2] is not None)


def white_tophat(input, size=None, footprint=None, structure=None, output=None,
                 mode="reflect", cval=0.0, origin=0, *, axes=None):
    """scipy.ndimage.white_tophat: ``input - grey_opening(input)`` in the input dtype
    (wrapping for integers, XOR for bool). One fused kernel, bit-identical to scipy."""
    return _grey("white_tophat", input, size, footprint, structure, output, mode, cval,
                 origin, axes)


def black_tophat(input, size=None, footprint=None, structure=None, output=None,
                 mode="reflect", cval=0.0, origin=0, *, axes=None):
    """scipy.ndimage.black_tophat: ``grey_closing(input) - input`` in the input dtype
    (wrapping for integers, XOR for bool). One fused kernel, bit-identical to scipy."""
    return _grey("black_tophat", input, size, footprint, structure, output, mode, cval,
                 origin, axes)


def morphological_gradient(input, size=None, footprint=None, structure=None, output=None,
                           mode="reflect", cval=0.0, origin=0, *, axes=None):
    """scipy.ndimage.morphological_gradient: ``grey_dilation - grey_erosion`` in the input
    dtype (wrapping for integers; bool is a ``TypeError``, as numpy's boolean subtraction).
    One fused kernel, bit-identical to scipy."""
    return _grey("morphological_gradient", input, size, footprint, structure, output, mode,
                 cval, origin, axes)


def morphological_laplace(input, size=None, footprint=None, structure=None, output=None,
                          mode="reflect", cval=0.0, origin=0, *, axes=None):
    """scipy.ndimage.morphological_laplace: ``((dilation + erosion) - input) - input`` in the
    input dtype (wrapping for integers; bool is a ``TypeError``). One fused kernel,
    bit-identical to scipy."""
    return _grey("morphological_laplace", input, size, footprint, structure, output, mode,
                 cval, origin, axes)


def generate_binary_structure(rank, connectivity):
    """scipy.ndimage.generate_binary_structure: the bool ``3^rank`` structure of the elements
    within ``connectivity`` steps of the centre (``connectivity < 1`` is 1; ``rank < 1`` gives
    ``np.array(True)``, as scipy)."""
    if rank < 1:
        return np.array(True, dtype=bool)
    shape, mask = _kiln.binary_structure(int(rank), int(max(connectivity, 1)))
    return np.array(mask, dtype=bool).reshape(shape)


def iterate_structure(structure, iterations, origin=None):
    """scipy.ndimage.iterate_structure: ``structure`` dilated by itself ``iterations - 1``
    times (bool); with ``origin``, also the origin times ``iterations``. ``iterations < 2``
    returns a copy of ``structure`` (and no origin), as scipy."""
    structure = np.asarray(structure)
    if iterations < 2:
        return structure.copy()
    st = _chain.footprint(structure, "structure")
    org = None if origin is None else list(_chain.ints(origin, "origin"))
    shape, mask, out_origin = _kiln.iterated_structure(st, int(iterations), org)
    out = np.array(mask, dtype=bool).reshape(shape)
    if origin is None:
        return out
    return out, list(out_origin)
