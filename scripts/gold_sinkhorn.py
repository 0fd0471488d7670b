#!/usr/bin/env python3
"""Goldens for kiln's `sinkhorn` program from POT (Python Optimal Transport).

Writes tests/golden/sinkhorn/<case>/{a,b,cost,out_cost,out_f,out_g,out_niter,out_plan}.npy
and params.txt (eps, max_iter, tol, log_domain). Each sample of a batch is solved by
POT's `ot.bregman.sinkhorn_knopp` (log_domain=false) or `ot.bregman.sinkhorn_log`
(log_domain=true) with log=True; potentials are eps*log(u), eps*log(v) (standard) or
eps*log_u, eps*log_v (log form), the cost sum(M * plan), niter POT's log["niter"].

Usage: python3 -m venv .venv-gold && .venv-gold/bin/pip install pot numpy scipy
       .venv-gold/bin/python scripts/gold_sinkhorn.py
"""
import os
import warnings

import numpy as np
import ot

OUT = os.path.join(os.path.dirname(__file__), "..", "tests", "golden", "sinkhorn")


def hist(rng, batch, n, dtype, zeros=0):
    h = rng.random((batch, n)) + 0.05
    if zeros:
        h[:, rng.choice(n, zeros, replace=False)] = 0.0
    return (h / h.sum(axis=1, keepdims=True)).astype(dtype)


def grid_cost(n, m, rng, dtype):
    x = rng.random((n, 2))
    y = rng.random((m, 2))
    c = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    return c.astype(dtype)


def solve(a, b, M, eps, max_iter, tol, log_domain):
    f = ot.bregman.sinkhorn_log if log_domain else ot.bregman.sinkhorn_knopp
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plan, log = f(a, b, M, eps, numItermax=max_iter, stopThr=tol, log=True, warn=False)
    if log_domain:
        fu, gv = eps * log["log_u"], eps * log["log_v"]
    else:
        with np.errstate(divide="ignore"):
            fu, gv = eps * np.log(log["u"]), eps * np.log(log["v"])
    return np.sum(M * plan), fu, gv, log["niter"], plan


def case(name, a, b, M, eps, max_iter, tol, log_domain):
    d = os.path.join(OUT, name)
    os.makedirs(d, exist_ok=True)
    batch = a.shape[0]
    res = [
        solve(a[s], b[s], M if M.ndim == 2 else M[s], eps, max_iter, tol, log_domain)
        for s in range(batch)
    ]
    np.save(os.path.join(d, "a.npy"), a)
    np.save(os.path.join(d, "b.npy"), b)
    np.save(os.path.join(d, "cost.npy"), M)
    dt = a.dtype
    np.save(os.path.join(d, "out_cost.npy"), np.array([r[0] for r in res], dtype=dt))
    np.save(os.path.join(d, "out_f.npy"), np.stack([r[1] for r in res]).astype(dt))
    np.save(os.path.join(d, "out_g.npy"), np.stack([r[2] for r in res]).astype(dt))
    np.save(os.path.join(d, "out_niter.npy"), np.array([r[3] for r in res], dtype=np.float64))
    np.save(os.path.join(d, "out_plan.npy"), np.stack([r[4] for r in res]).astype(dt))
    with open(os.path.join(d, "params.txt"), "w") as fh:
        fh.write(f"eps={eps!r}\nmax_iter={max_iter}\ntol={tol!r}\nlog_domain={str(log_domain).lower()}\n")
    print(name, "niter", [r[3] for r in res])


def main():
    rng = np.random.default_rng(30)
    for dt, tag in [(np.float64, "f64"), (np.float32, "f32")]:
        B, n, m = 5, 16, 12
        a = hist(rng, B, n, dt)
        b = hist(rng, B, m, dt)
        M = grid_cost(n, m, rng, dt)
        tol = 1e-9 if dt == np.float64 else 1e-5
        case(f"shared_std_{tag}", a, b, M, 0.05, 1000, tol, False)
        case(f"shared_log_{tag}", a, b, M, 0.05, 1000, tol, True)
        Mb = np.stack([grid_cost(n, m, rng, dt) for _ in range(B)])
        case(f"batched_std_{tag}", a, b, Mb, 0.1, 500, tol, False)
        case(f"batched_log_{tag}", a, b, Mb, 0.1, 500, tol, True)
    # B = 11: one full tile of 8 and a partial one.
    a = hist(rng, 11, 20, np.float64)
    b = hist(rng, 11, 20, np.float64)
    M = grid_cost(20, 20, rng, np.float64)
    case("tiles_std_f64", a, b, M, 0.08, 300, 1e-10, False)
    case("tiles_log_f64", a, b, M, 0.08, 300, 1e-10, True)
    # Zero-mass bins (log form: -inf potentials, no NaN).
    a = hist(rng, 3, 10, np.float64, zeros=3)
    b = hist(rng, 3, 9, np.float64, zeros=2)
    M = grid_cost(10, 9, rng, np.float64)
    case("zero_mass_log_f64", a, b, M, 0.1, 400, 1e-9, True)
    # One bin on one side.
    a = np.ones((2, 1))
    b = hist(rng, 2, 6, np.float64)
    M = grid_cost(1, 6, rng, np.float64)
    case("one_bin_std_f64", a, b, M, 0.1, 100, 1e-9, False)
    case("one_bin_log_f64", a, b, M, 0.1, 100, 1e-9, True)
    # eps so small that exp(-M/eps) underflows: the standard form reverts and stops.
    a = hist(rng, 2, 8, np.float64)
    b = hist(rng, 2, 8, np.float64)
    M = grid_cost(8, 8, rng, np.float64) + 0.5
    case("tiny_eps_std_f64", a, b, M, 1e-4, 50, 1e-9, False)
    case("tiny_eps_log_f64", a, b, M, 1e-4, 50, 1e-9, True)


if __name__ == "__main__":
    main()
