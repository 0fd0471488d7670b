"""kiln.ot: Sinkhorn against POT (when installed; SKIP otherwise) with SEMANTICS.md's
tolerances (float64 rtol 1e-12, float32 rtol 1e-5, per element relative to |x| + max|x|,
same iteration counts), against a numpy transcription of POT's sinkhorn_knopp always, batch
== one by one bit for bit, the grid cost matrix, errors."""

import numpy as np
import pytest

import kiln.ot as kot

try:
    import ot as pot
except ImportError:  # CI installs POT; without it the POT comparisons SKIP with a reason
    pot = None

TOL = {np.float64: 1e-12, np.float32: 1e-5}


def close(got, want, tol, what):
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    scale = np.abs(want) + np.max(np.abs(want))
    bad = np.abs(got - want) > tol * scale
    assert not bad.any(), f"{what}: {bad.sum()} elements off, worst {np.max(np.abs(got - want) / scale)}"


def problem(n, m, dtype, seed):
    rng = np.random.default_rng(seed)
    a = rng.random(n) + 0.1
    b = rng.random(m) + 0.1
    x, y = rng.random((n, 2)), rng.random((m, 2))
    M = ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)
    return (a / a.sum()).astype(dtype), (b / b.sum()).astype(dtype), M.astype(dtype)


def knopp(a, b, M, reg, numItermax, stopThr):
    """POT's sinkhorn_knopp (one histogram), transcribed in numpy."""
    K = np.exp(M / (-reg))
    u = np.full(len(a), 1.0 / len(a), a.dtype)
    v = np.full(len(b), 1.0 / len(b), a.dtype)
    Kp = (1 / a).reshape(-1, 1) * K
    for ii in range(numItermax):
        uprev, vprev = u, v
        KtU = K.T @ u
        v = b / KtU
        u = 1.0 / (Kp @ v)
        if np.any(KtU == 0) or np.any(~np.isfinite(u)) or np.any(~np.isfinite(v)):
            u, v = uprev, vprev
            break
        if ii % 10 == 0:
            err = np.linalg.norm(np.einsum("i,ij,j->j", u, K, v) - b)
            if err < stopThr:
                break
    return u.reshape(-1, 1) * K * v.reshape(1, -1), ii


@pytest.mark.filterwarnings("ignore:Sinkhorn did not converge")
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
@pytest.mark.parametrize("reg", [0.05, 0.5])
def test_against_pot(dtype, method, reg):
    if pot is None:
        print("SKIP: POT is not installed (pip install pot)")
        pytest.skip("POT is not installed")
    a, b, M = problem(13, 17, dtype, seed=int(reg * 100))
    plan, log = kot.sinkhorn(a, b, M, reg, method=method, log=True)
    want, wlog = pot.sinkhorn(a, b, M, reg, method=method, log=True)
    assert plan.dtype == dtype
    close(plan, want, TOL[dtype], "plan")
    assert log["niter"] == wlog["niter"]
    cost = kot.sinkhorn2(a, b, M, reg, method=method)
    close(cost, np.sum(M.astype(np.float64) * want), max(TOL[dtype], 1e-12) * 10, "cost")


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_against_numpy_reference(dtype):
    a, b, M = problem(9, 11, dtype, seed=5)
    want, niter = knopp(a, b, M, dtype(0.1), 1000, 1e-9)
    plan, log = kot.sinkhorn(a, b, M, 0.1, log=True)
    close(plan, want, TOL[dtype], "plan")
    assert log["niter"] == niter


def test_batch_equals_one_by_one_and_is_reproducible():
    probs = [problem(7, 8, np.float64, seed=s) for s in range(11)]
    A = np.stack([p[0] for p in probs])
    B = np.stack([p[1] for p in probs])
    Ms = np.stack([p[2] for p in probs])
    shared = kot.sinkhorn_batch(A, B, probs[0][2], 0.2, grad=True)
    per = kot.sinkhorn_batch(A, B, Ms, 0.2)
    for k, (a, b, M) in enumerate(probs):
        one = kot.sinkhorn(a, b, M, 0.2)
        assert np.array_equal(one.view(np.uint64), per["plan"][k].view(np.uint64))
        one_shared = kot.sinkhorn(a, b, probs[0][2], 0.2)
        assert np.array_equal(one_shared.view(np.uint64), shared["plan"][k].view(np.uint64))
    again = kot.sinkhorn_batch(A, B, probs[0][2], 0.2, grad=True)
    for key in ["cost", "f", "g", "niter", "plan", "grad_a", "grad_b"]:
        assert np.array_equal(shared[key], again[key]), key
    assert shared["grad_a"].shape == (11, 7) and shared["plan"].shape == (11, 7, 8)
    # marginals of the converged plan
    np.testing.assert_allclose(shared["plan"].sum(2), A, rtol=1e-6)


def test_uniform_marginals_and_cost_matrix():
    C = kot.build_cost_matrix((2, 3))
    pts = np.array([(i, j) for i in range(2) for j in range(3)], np.float64)
    want = ((pts[:, None] - pts[None]) ** 2).sum(-1)
    assert np.array_equal(C, want)
    assert np.array_equal(kot.build_cost_matrix((2, 3), power=1.0), np.sqrt(want))
    plan = kot.sinkhorn([], [], C, 1.0)
    listed = kot.sinkhorn([1 / 6] * 6, [1 / 6] * 6, C.astype(np.float32), 1.0)
    assert listed.dtype == np.float32
    np.testing.assert_allclose(plan.sum(1), np.full(6, 1 / 6), rtol=1e-9)


def test_errors():
    a, b, M = problem(4, 5, np.float64, seed=1)
    with pytest.raises(TypeError, match="float32"):
        kot.sinkhorn(a, b, M.astype(np.int64), 0.1)
    with pytest.raises(TypeError, match="one float dtype"):
        kot.sinkhorn(a.astype(np.float32), b, M, 0.1)
    with pytest.raises(ValueError, match="eps"):
        kot.sinkhorn(a, b, M, 0.0)
    with pytest.raises(ValueError, match="method"):
        kot.sinkhorn(a, b, M, 0.1, method="greenkhorn")
    with pytest.raises(ValueError):
        kot.sinkhorn(a, b[:3], M, 0.1)
    with pytest.raises(ValueError, match="both"):
        kot.sinkhorn(a, np.stack([b, b]), M, 0.1)


def test_pot_goldens():
    """The POT 0.9.7 goldens of the Rust tests (tests/golden/sinkhorn/) through kiln.ot:
    every case (batches, shared and per-sample costs, zero-mass bins, one bin, eps = 1e-4),
    same iteration counts, values within SEMANTICS.md's tolerances."""
    import os

    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests",
                        "golden", "sinkhorn")
    if not os.path.isdir(root):
        print(f"SKIP: {root} not found (tests run outside a kiln checkout)")
        pytest.skip("no goldens")
    cases = sorted(os.listdir(root))
    for case in cases:
        d = os.path.join(root, case)
        if not os.path.isdir(d):
            continue
        params = dict(ln.strip().split("=") for ln in open(os.path.join(d, "params.txt")) if "=" in ln)
        ld = lambda n: np.load(os.path.join(d, n + ".npy"))  # noqa: E731
        a, b, M = ld("a"), ld("b"), ld("cost")
        method = "sinkhorn_log" if params["log_domain"] == "true" else "sinkhorn"
        r = kot.sinkhorn_batch(a, b, M, float(params["eps"]), method=method,
                               numItermax=int(params["max_iter"]), stopThr=float(params["tol"]))
        tol = TOL[np.float64 if a.dtype == np.float64 else np.float32]
        assert np.array_equal(r["niter"], ld("out_niter").astype(np.float64)), case
        for key, gold in [("plan", "out_plan"), ("cost", "out_cost"), ("f", "out_f"), ("g", "out_g")]:
            want = ld(gold)
            got = r[key]
            inf = np.isinf(want)
            assert np.array_equal(np.isinf(got), inf) and np.array_equal(got[inf], want[inf]), (case, key)
            if (~inf).any():
                close(got[~inf], want[~inf], tol, f"{case} {key}")
    assert len(cases) >= 10


@pytest.mark.parametrize("method", ["sinkhorn", "sinkhorn_log"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_grid_axes_matches_the_dense_cost(method, dtype):
    """grid_axes=2: the per-axis table (g, g) of a g x g grid against the dense (g², g²) cost
    it stands for (the separable kernel; same iteration counts, SEMANTICS.md tolerances),
    and against POT on the dense cost when POT is installed."""
    g = 6
    rng = np.random.default_rng(5)
    a = rng.random((2, g * g)) + 0.1
    b = rng.random((2, g * g)) + 0.1
    a, b = (a / a.sum(1, keepdims=True)).astype(dtype), (b / b.sum(1, keepdims=True)).astype(dtype)
    i = np.arange(g)
    c1 = (((i[:, None] - i[None, :]) ** 2) / (2.0 * (g - 1) ** 2)).astype(dtype)
    dense = (c1[:, None, :, None] + c1[None, :, None, :]).reshape(g * g, g * g)
    kw = dict(method=method, numItermax=300, stopThr=1e-9)
    sep = kot.sinkhorn_batch(a, b, c1, 0.05, grid_axes=2, **kw)
    ref = kot.sinkhorn_batch(a, b, dense, 0.05, **kw)
    np.testing.assert_array_equal(sep["niter"], ref["niter"])
    for key in ("cost", "f", "g", "plan"):
        close(sep[key], ref[key], TOL[dtype], f"{method} {key}")
    if pot is None:
        pytest.skip("POT not installed: the dense comparison above ran, POT's did not")
    for k in range(2):
        P = pot.sinkhorn(a[k], b[k], dense, 0.05, method=method, numItermax=300, stopThr=1e-9)
        close(sep["plan"][k], P, TOL[dtype], f"{method} plan vs POT")


def test_grid_axes_bad_shapes_raise():
    a = np.full((1, 24), 1 / 24)
    with pytest.raises(Exception, match="grid_axes"):
        kot.sinkhorn_batch(a, a, np.zeros((5, 5)), 0.1, grid_axes=2)
