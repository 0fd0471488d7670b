"""``kiln.ot``: entropic optimal transport (Sinkhorn) with POT's argument names, batched.

Scope: ``sinkhorn`` (the plan, as POT's ``ot.sinkhorn``), ``sinkhorn2`` (the transport cost
``<P, M>``, as POT's ``ot.sinkhorn2``), ``sinkhorn_batch`` (everything kiln's solver returns:
costs, potentials, iteration counts, plans, envelope gradients) and ``build_cost_matrix``
(a grid's cost matrix). ``method="sinkhorn"`` (or ``"sinkhorn_knopp"``) is POT's
``sinkhorn_knopp`` update order, ``method="sinkhorn_log"`` POT's ``sinkhorn_log``; ``reg`` is
POT's ``reg`` (kiln's ``eps``), ``numItermax`` and ``stopThr`` POT's (the marginal error is
checked every 10th iteration, stop when it is below ``stopThr``). ``a``/``b`` of shape
``(n,)``/``(m,)`` solve one problem; ``(B, n)``/``(B, m)`` solve B problems with one cost
``(n, m)`` or one per problem ``(B, n, m)``; an empty ``a`` or ``b`` is uniform, as in POT.

Exactness: kiln's solver sums in a fixed order with kiln's exp/log and no FMA, so results
are reproducible bit for bit across runs, threads and batch sizes; against POT they differ
by rounding only (POT sums with BLAS and numpy's pairwise order): float64 within a relative
1e-12, float32 within 1e-5 (SEMANTICS.md, "sinkhorn"), with the same iteration counts.
Limits: dense float32/float64 costs; arrays a, b and M of one dtype (``TypeError``
otherwise; lists take M's dtype);
POT's ``log=True`` dictionary holds kiln's potentials ``f = reg·log u``, ``g = reg·log v``
(not POT's ``u``, ``v``), ``niter`` and ``cost``; ``verbose``/``warn`` are accepted and
ignored; the GIL is released while the solver runs.
"""

from __future__ import annotations

import numpy as np

from . import _kiln

__all__ = ["sinkhorn", "sinkhorn2", "sinkhorn_batch", "build_cost_matrix"]

_METHODS = {"sinkhorn": False, "sinkhorn_knopp": False, "sinkhorn_log": True}


def _problem(a, b, M, grid_axes=0):
    M = np.asarray(M)
    if M.dtype not in (np.float32, np.float64):
        raise TypeError(f"sinkhorn: M must be float32 or float64, got {M.dtype}")
    if M.ndim not in (2, 3):
        raise ValueError(f"sinkhorn: M must be (n, m) or (B, n, m), got shape {M.shape}")
    n, m = M.shape[-2:]
    if grid_axes:
        # M is the per-axis table (g, g) of a grid of g**grid_axes points
        n = m = M.shape[-1] ** int(grid_axes)
    # lists (not arrays) take M's dtype, as POT's list_to_array; arrays must match it
    a = np.asarray(a if a is not None else [], dtype=None if isinstance(a, np.ndarray) else M.dtype)
    b = np.asarray(b if b is not None else [], dtype=None if isinstance(b, np.ndarray) else M.dtype)
    if a.size == 0:
        a = np.full((n,), 1.0 / n, dtype=M.dtype)
    if b.size == 0:
        b = np.full((m,), 1.0 / m, dtype=M.dtype)
    if a.ndim != b.ndim:
        raise ValueError(
            f"sinkhorn: a and b must both be 1-D or both (B, n)/(B, m), got shapes {a.shape}, "
            f"{b.shape} (POT's b of shape (m, n_hists) is not taken: pass a batch)"
        )
    single = a.ndim == 1 and M.ndim == 2
    if a.ndim == 1:
        a, b = a[None, :], b[None, :]
    if a.ndim != 2:
        raise ValueError(f"sinkhorn: a and b must be (n,)/(m,) or (B, n)/(B, m), got {a.shape}, {b.shape}")
    for name, v in (("a", a), ("b", b)):
        if v.dtype != M.dtype:
            raise TypeError(f"sinkhorn: {name} is {v.dtype}, M is {M.dtype} (one float dtype)")
    return np.ascontiguousarray(a), np.ascontiguousarray(b), np.ascontiguousarray(M), single


def sinkhorn_batch(a, b, M, reg, method="sinkhorn", numItermax=1000, stopThr=1e-9,
                   plan=True, grad=False, grid_axes=0):
    """Solves every problem of the batch; returns a dict: ``cost`` ``(B,)`` (``<P, M>``),
    ``f`` ``(B, n)``, ``g`` ``(B, m)`` (``reg·log`` of the scalings), ``niter`` ``(B,)``
    (POT's ``log["niter"]``, float64), and ``plan`` ``(B, n, m)`` when ``plan`` or ``grad``,
    ``grad_a``/``grad_b`` (the envelope gradients POT's ``ot.solve(grad="envelope")`` sets)
    when ``grad``. 1-D ``a``/``b`` with a 2-D ``M`` are a batch of one.

    ``grid_axes=k`` (k >= 1): ``a``/``b`` are histograms over a k-dimensional grid of ``g``
    points per axis (``n = m = g**k``, row-major) and ``M`` is the per-axis cost table
    ``(g, g)``: the cost is ``M[p0, q0] + M[p1, q1] + ...`` and the kernel is applied axis by
    axis (the separable form; the squared Euclidean grid cost is of this form). Results match
    the dense form on that cost to rounding."""
    if method not in _METHODS:
        raise ValueError(
            f"sinkhorn: unknown method {method!r} (sinkhorn, sinkhorn_knopp, sinkhorn_log)"
        )
    a, b, M, _ = _problem(a, b, M, grid_axes)
    return _kiln.sinkhorn_batch(a, b, M, float(reg), int(numItermax), float(stopThr),
                                _METHODS[method], bool(plan), bool(grad), int(grid_axes))


def sinkhorn(a, b, M, reg, method="sinkhorn", numItermax=1000, stopThr=1e-9, verbose=False,
             log=False, warn=True):
    """POT's ``ot.sinkhorn``: the entropic transport plan ``(n, m)`` (``(B, n, m)`` for a
    batch). With ``log=True`` returns ``(plan, log)``, ``log`` holding ``niter``, ``f``,
    ``g`` and ``cost``."""
    if numItermax < 1:
        raise ValueError(f"sinkhorn: numItermax must be at least 1, got {numItermax}")
    _, _, _, single = _problem(a, b, M)
    r = sinkhorn_batch(a, b, M, reg, method, numItermax, stopThr, plan=True)
    plan = r["plan"][0] if single else r["plan"]
    if not log:
        return plan
    pick = (lambda v: v[0]) if single else (lambda v: v)
    info = {"niter": int(r["niter"][0]) if single else r["niter"], "f": pick(r["f"]),
            "g": pick(r["g"]), "cost": pick(r["cost"])}
    return plan, info


def sinkhorn2(a, b, M, reg, method="sinkhorn", numItermax=1000, stopThr=1e-9, verbose=False,
              log=False, warn=True):
    """POT's ``ot.sinkhorn2``: the transport cost ``<P, M>`` of the entropic plan (a 0-d
    array for one problem, ``(B,)`` for a batch). With ``log=True`` returns ``(cost, log)``."""
    _, _, _, single = _problem(a, b, M)
    r = sinkhorn_batch(a, b, M, reg, method, numItermax, stopThr, plan=False)
    cost = r["cost"][0] if single else r["cost"]
    if not log:
        return cost
    pick = (lambda v: v[0]) if single else (lambda v: v)
    return cost, {"niter": int(r["niter"][0]) if single else r["niter"], "f": pick(r["f"]),
                  "g": pick(r["g"])}


def build_cost_matrix(grid_shape, power=2.0):
    """The ``(N, N)`` float64 cost between the points of a grid of ``grid_shape`` (row-major
    order, ``N = prod(grid_shape)``): ``|x_p - x_q|^power`` (2: squared Euclidean, exact
    integers; 1: IEEE square roots; otherwise kiln's exp/log)."""
    if isinstance(grid_shape, (int, np.integer)):
        grid_shape = (int(grid_shape),)
    return _kiln.grid_cost([int(s) for s in grid_shape], float(power))
