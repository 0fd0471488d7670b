"""scipy.ndimage's distance transforms: ``distance_transform_edt``, ``distance_transform_cdt``
and ``distance_transform_bf``, with scipy's signatures and output rules.

Scope: argument checks and scipy's ``return_distances``/``return_indices``/``distances=``/
``indices=`` handling in Python; the transforms are kiln's (``kiln._kiln.edt``/``cdt``/``bf``,
GIL released). Exactness: the input is read as ``input != 0`` (scipy's reading); distances
(float64 for EDT and Euclidean BF, int32 for CDT, uint32 for taxicab/chessboard BF) and int32
indices are bit for bit scipy 1.17's (kiln's goldens). Limits: every axis is spatial (scipy
has no ``axes=`` here); 1 to 8 axes; a ``metric`` array for the CDT is read as ``!= 0`` (scipy
reads a non-bool array's bytes as bool, scipy issue #18878); argument errors that scipy
reports as ``RuntimeError`` are ``ValueError`` here; ``distances=``/``indices=`` must have
the result's dtype and shape.
"""

from __future__ import annotations

import numbers

import numpy as np

from . import _dlpack, _kiln, _ndcommon
from ._fuse import Lazy


def _input(name, input):
    if isinstance(input, Lazy):
        raise ValueError(f"kiln.fuse: {name} is not a fusable graph operator")
    return _ndcommon.truth(input, name)


def _check(name, distances, indices, return_distances, return_indices):
    problems = []
    if not return_distances and not return_indices:
        problems.append("at least one of return_distances/return_indices must be True")
    if distances is not None and not return_distances:
        problems.append("return_distances must be True if distances is supplied")
    if indices is not None and not return_indices:
        problems.append("return_indices must be True if indices is supplied")
    if problems:
        raise ValueError(f"{name}: " + ", ".join(problems))


def _sampling(name, sampling, ndim):
    if sampling is None:
        return None
    if isinstance(sampling, numbers.Real):
        return [float(sampling)] * ndim
    s = [float(v) for v in np.asarray(sampling, dtype=np.float64).ravel()]
    if len(s) != ndim:
        raise ValueError(f"{name}: sampling has {len(s)} entries, the input has {ndim} axes")
    return s


def _finish(name, d, i, distances, indices, return_distances, return_indices, back):
    """scipy's result: the computed arrays not written into a given output (in the input's
    library), a tuple when two, one array when one, None when none."""
    result = []
    if return_distances:
        if distances is None:
            result.append(_dlpack.from_numpy(d, back))
        else:
            _ndcommon.store(d, _writable(distances), name="distances")
    if return_indices:
        if indices is None:
            result.append(_dlpack.from_numpy(i, back))
        else:
            _ndcommon.store(i, _writable(indices), name="indices")
    if len(result) == 2:
        return tuple(result)
    return result[0] if result else None


def _writable(a):
    if isinstance(a, np.ndarray) or _dlpack.is_dlpack(a):
        return a
    raise TypeError(f"an output must be an array, got {type(a).__name__}")


def distance_transform_edt(input, sampling=None, return_distances=True,
                           return_indices=False, distances=None, indices=None):
    """scipy.ndimage.distance_transform_edt: for every non-zero element, the Euclidean
    distance (float64, axes scaled by ``sampling``) to the nearest zero element, and with
    ``return_indices`` that element's index (int32, ``(ndim,) + shape``). Bit-identical to
    scipy 1.17 (exact squared distances, one rounding in the square root)."""
    name = "distance_transform_edt"
    _check(name, distances, indices, return_distances, return_indices)
    x, back = _input(name, input)
    s = _sampling(name, sampling, x.ndim)
    d, i = _kiln.edt(x, s, bool(return_indices))
    return _finish(name, d, i, distances, indices, return_distances, return_indices,
                   back)


def distance_transform_cdt(input, metric="chessboard", return_distances=True,
                           return_indices=False, distances=None, indices=None):
    """scipy.ndimage.distance_transform_cdt: chamfer distances (int32; -1 everywhere when
    the input has no zero element) under ``metric`` (``'chessboard'``, ``'taxicab'``,
    ``'cityblock'``, ``'manhattan'`` or a ``3^ndim`` structure), and with ``return_indices``
    the int32 indices of the nearest zero element. Bit-identical to scipy 1.17."""
    name = "distance_transform_cdt"
    _check(name, distances, indices, return_distances, return_indices)
    x, back = _input(name, input)
    st = None
    if isinstance(metric, str):
        m = metric.lower()
    else:
        m = "structure"
        st = np.asarray(metric)
        if np.iscomplexobj(st):
            raise TypeError(f"{name}: complex metric is not supported")
        st = st != 0 if st.dtype != np.bool_ else st
    d, i = _kiln.cdt(x, m, st, bool(return_indices))
    return _finish(name, d, i, distances, indices, return_distances, return_indices,
                   back)


def distance_transform_bf(input, metric="euclidean", sampling=None, return_distances=True,
                          return_indices=False, distances=None, indices=None):
    """scipy.ndimage.distance_transform_bf: brute-force distances to the nearest zero element
    under ``metric`` (``'euclidean'``: float64 with ``sampling``; ``'taxicab'``/
    ``'cityblock'``/``'manhattan'``/``'chessboard'``: uint32, sampling ignored) and with
    ``return_indices`` the int32 indices. Bit-identical to scipy 1.17."""
    name = "distance_transform_bf"
    _check(name, distances, indices, return_distances, return_indices)
    x, back = _input(name, input)
    if not isinstance(metric, str):
        raise TypeError(f"{name}: metric must be a string, got {metric!r}")
    s = _sampling(name, sampling, x.ndim)
    d, i = _kiln.bf(x, metric.lower(), s, bool(return_indices))
    return _finish(name, d, i, distances, indices, return_distances, return_indices,
                   back)
