"""Helpers shared by ``kiln.ndimage``'s operator modules: running a chain of specs on an
array (or recording it inside ``kiln.fuse``), scipy's window arguments, scipy's ``output=``
rules and truth-testing for the binary operators.

Exactness: nothing here touches values except ``truth`` (numpy's ``x != 0``, exactly scipy's
reading of a non-bool binary input: NaN is true, -0.0 false) and ``store`` (one copy into the
caller's array, bit for bit). Limits: ``output=`` must have the result's dtype.
"""

from __future__ import annotations

import math

import numpy as np

from . import _chain, _dlpack
from ._fuse import Lazy


def is_binary(spec) -> bool:
    """Whether ``spec`` is a binary operator (bool result, truth-tested input)."""
    return spec[0].startswith("binary_")


def run(specs, axes, input, output):
    """Runs the chain ``specs`` on ``input`` under scipy's ``output`` rules. A chain starting
    with a binary operator truth-tests a non-bool input first (scipy's reading); a binary
    operator after a non-binary one needs bool data there (a chain keeps one dtype)."""
    x, back = _dlpack.to_numpy(input)
    if x.dtype != np.bool_ and any(is_binary(s) for s in specs):
        if not is_binary(specs[0]):
            first = next(s[0] for s in specs if is_binary(s))
            raise ValueError(
                f"{first}: in a chain on {x.dtype} data a binary operator must come first "
                "(a chain keeps one dtype; pass bool data)"
            )
        x, _ = truth(x, specs[0][0])
    if x.dtype.kind in "iub":
        check_int_cval(specs, x.dtype)
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
            check_output_dtype(output, x.dtype, "kiln computes in the input's dtype")
    result = _chain.chain(specs, axes).run(x, out)
    return output if out is not None else _dlpack.from_numpy(result, back)


def check_int_cval(specs, dtype):
    """On integer data a ``constant`` border's ``cval`` must truncate into the dtype's range:
    scipy converts it with a C cast, undefined (and platform-dependent) for NaN and values
    out of range, so kiln refuses those rather than pick one answer. On bool data it must be
    0 or 1 (scipy's cast stores other values as non-canonical bool bytes)."""
    lo, hi = (0, 1) if dtype == np.bool_ else (np.iinfo(dtype).min, np.iinfo(dtype).max)
    for s in specs:
        if s[5] in ("constant", "grid-constant"):
            c = s[6]
            ok = math.isfinite(c) and lo <= math.trunc(c) <= hi
            if dtype == np.bool_:
                ok = c in (0.0, 1.0)
            if not ok:
                raise ValueError(
                    f"{s[0]}: cval {c!r} is not representable in {np.dtype(dtype).name} "
                    "(scipy's C cast is undefined there)"
                )


def check_output_dtype(output, dtype, why):
    """``output`` given as a dtype must be ``dtype``."""
    try:
        dt = np.dtype(output)
    except TypeError:
        raise TypeError(f"output: must be an array or a dtype, got {output!r}") from None
    if dt != dtype:
        raise TypeError(f"output: dtype {dt} differs from the result's {np.dtype(dtype)} ({why})")


def store(result, output, back=None, name="output"):
    """scipy's ``output=`` for a result computed outside a chain: ``None`` returns it (in the
    input's library), a dtype must be the result's, an array (or DLPack tensor) of the
    result's shape and dtype is written and returned."""
    if output is None:
        return _dlpack.from_numpy(result, back) if back is not None else result
    target = output
    if not isinstance(output, np.ndarray):
        if _dlpack.is_dlpack(output):
            target = _dlpack.writable_view(output)
        else:
            check_output_dtype(output, result.dtype, "scipy's output dtype for this function")
            return _dlpack.from_numpy(result, back) if back is not None else result
    if target.dtype != result.dtype:
        raise TypeError(f"{name}: dtype {target.dtype} differs from the result's {result.dtype}")
    if target.shape != result.shape:
        raise ValueError(f"{name}: shape {target.shape} differs from the result's {result.shape}")
    if not target.flags.writeable:
        raise ValueError(f"{name}: not writable (read-only)")
    np.copyto(target, result)
    return output


def check_sorted_axes(name, axes, ndim):
    """scipy maps a footprint's (structure's) dimensions onto the axes in increasing order but
    origins in the order given; kiln takes one order, so it asks for increasing axes there."""
    if axes is None:
        return
    norm = [a % ndim if ndim and -ndim <= a < ndim else a for a in axes]
    if norm != sorted(norm):
        raise ValueError(
            f"{name}: with a footprint or structure (and in median_filter) give axes in "
            f"increasing order, got {axes}"
        )


def apply(spec, input, output, axes, sort_axes=False):
    """One operator: recorded on a ``Lazy``, run otherwise."""
    axes = _chain.normalize_axes(axes)
    if sort_axes:
        check_sorted_axes(spec[0], axes, None if isinstance(input, Lazy) else np.ndim(input))
    if isinstance(input, Lazy):
        if output is not None:
            raise ValueError("kiln.fuse: output= is not allowed inside a traced function")
        return input.then(spec, axes)
    return run((spec,), axes, input, output)


def window(name, size, footprint, structure, mode, cval, origin):
    """The spec of a windowed grey operator from scipy's ``size``/``footprint``/``structure``
    (an all-zero structure is flat: a footprint; a non-flat one passes its values)."""
    values = None
    if structure is not None:
        st = np.asarray(structure)
        if st.ndim == 0 or st.size == 0:
            raise ValueError(f"{name}: structure must be a non-empty array")
        if np.iscomplexobj(st):
            raise TypeError(f"{name}: complex structure is not supported")
        if footprint is None:
            footprint = np.ones(st.shape, dtype=bool)
        elif np.shape(footprint) != st.shape:
            raise ValueError(
                f"{name}: structure shape {st.shape} differs from footprint shape "
                f"{np.shape(footprint)}"
            )
        if np.any(st != 0):
            values = st.astype(np.float64).ravel()
    if footprint is not None:
        fp = _chain.footprint(footprint)
        return _chain.spec(name, fp=fp, origin=origin, mode=mode, cval=cval, values=values)
    if size is None:
        raise ValueError(f"{name}: no footprint or filter size provided")
    return _chain.spec(name, size=size, origin=origin, mode=mode, cval=cval)


def truth(input, name):
    """A binary operator's input as bool (scipy's ``input != 0``); a ``Lazy`` passes."""
    if isinstance(input, Lazy):
        return input, None
    x, back = _dlpack.to_numpy(input)
    if x.dtype != np.bool_:
        if np.iscomplexobj(x):
            raise TypeError(f"{name}: complex input is not supported")
        if x.dtype == object:
            raise TypeError(f"{name}: object arrays are not supported")
        x = x != 0
    return x, back
