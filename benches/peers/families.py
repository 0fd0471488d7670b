"""Peers of the morphology, distance and Sinkhorn families (issues 28, 29, 30) for compare.py.

Scope: the structured inputs of src/bench/inputs.rs (blobs with holes, sparse seeds, histograms,
the normalised grid cost), reproduced bit for bit in numpy (compare.py checks kiln's input
checksums), the peers of each family workload and the issues' goals with their verdicts.

Peers (same inputs; every function takes the workload's inputs in kiln's order):
- scipy.ndimage: binary_fill_holes, binary_propagation, distance_transform_edt (with indices),
  distance_transform_cdt(taxicab), median_filter; `edt(m) - edt(~m)` for the signed distance. The
  images' batch and channel axes are looped over (scipy on a [1, 1, H, W] array would treat the
  size-1 axes as spatial: fill_holes would then see every pixel at the border). scipy is one
  thread and slow on these rows: it is timed with ONE cold call (`once`), stated in the table.
- OpenCV: distanceTransform(DIST_L2, DIST_MASK_PRECISE) in float32 (checked with a tolerance:
  float32 against kiln's float64, not bit-exact; the ratio is the point), DIST_L1 (mask 3:
  exact integers), medianBlur where it has the dtype and size: no int16 medianBlur ("no such
  op"); the CT row also times medianBlur on the int16 data mapped to uint16 by flipping the sign
  bit (order-preserving, so the median is the same element; the mapping is done outside the
  timing and undone for the check), and u16 only up to 5x5 (no peer for the 31x31 row).
- POT 0.9.7 `ot.sinkhorn(method='sinkhorn')` and `method='sinkhorn_log'`, one call per sample
  (POT batches only a shared `a`; here every sample has its own), numItermax as kiln's max_iter,
  stopThr=0: POT stops only when `err < stopThr` (checked every 10th iteration), never true for
  0, so both run every iteration (as kiln with tol=0). Output: the transport cost Σ P∘M.
- numpy f32 reference (`numpy_sinkhorn`): the plain batched loop `v = b / (u @ K)`,
  `u = a / (v @ K.T)`, K = exp(-M/eps), cost Σ_ij u_i K_ij M_ij v_j; numpy's BLAS, limited to
  the row's thread count by threadpoolctl. POT and the reference are checked against kiln's
  cost within rtol 1e-4 (f32, different summation orders).
"""

import numpy as np

# ---------------------------------------------------------------- inputs (= src/bench/inputs.rs)
SEED_THRESHOLD = 4096


def blobs(shape, seed, hash32):
    """Disks/balls and rings/shells over the spatial axes (all but the first two), unioned."""
    shape = tuple(shape)
    out = np.zeros(shape, dtype=bool)
    if len(shape) < 3 or out.size == 0:
        return out
    sp = shape[2:][-6:]
    nd = len(sp)
    side = min(sp)
    rmax = max(side // 16, 2)
    rmin = max(side // 64, 1)
    count = max(int(np.prod(sp)) // rmax ** nd // 2, 1)
    imgs = out.reshape((-1,) + sp)
    for img in range(imgs.shape[0]):
        s = (seed + img) & 0xFFFFFFFF
        h = hash32(np.arange(8 * count, dtype=np.uint32), s).astype(np.int64).reshape(count, 8)
        for k in range(count):
            c = [int(h[k, j] % sp[j]) for j in range(nd)]
            r = rmin + int(h[k, 6] % (rmax - rmin + 1))
            hole = (r // 2) ** 2 if int(h[k, 7]) & 1 else -1
            box = tuple(slice(max(cj - r, 0), min(cj + r, e - 1) + 1) for cj, e in zip(c, sp))
            grids = np.ogrid[box]
            d2 = sum((g.astype(np.int64) - cj) ** 2 for g, cj in zip(grids, c))
            imgs[img][box] |= (d2 <= r * r) & (d2 > hole)
    return out


def histogram(dtype, shape, seed, hash32):
    n = int(np.prod(shape))
    w = (hash32(np.arange(n, dtype=np.uint32), seed) >> np.uint32(20)).astype(np.int64) + 1
    w = w.reshape(-1, shape[-1])
    s = w.sum(axis=1, keepdims=True)
    t = np.float32 if dtype == "f32" else np.float64
    return (w.astype(t) / s.astype(t)).reshape(shape)


def grid_cost(dtype, shape):
    d = shape[-1]
    g = int(round(d ** 0.5))
    p = np.arange(d)
    y, x = p // g, p % g
    c = ((y[:, None] - y[None, :]) ** 2 + (x[:, None] - x[None, :]) ** 2).astype(np.float64)
    m = float(2 * (g - 1) ** 2) if g > 1 else 1.0
    return (c / m).astype(np.float32 if dtype == "f32" else np.float64)


def axis_cost(dtype, shape):
    """The per-axis table [g, g] of grid_cost's g x g grid (kiln's Gen::AxisCost)."""
    g = shape[-1]
    i = np.arange(g)
    m = float(2 * (g - 1) ** 2) if g > 1 else 1.0
    c = ((i[:, None] - i[None, :]) ** 2).astype(np.float64) / m
    return c.astype(np.float32 if dtype == "f32" else np.float64)


def dense_of_axes(c1):
    """The dense cost M[(y, x), (y', x')] = C[y, y'] + C[x, x'] of a per-axis table, in its
    dtype (what kiln's grid_axes=2 means)."""
    g = c1.shape[0]
    return (c1[:, None, :, None] + c1[None, :, None, :]).reshape(g * g, g * g)


def make_input(spec, hash32, plain):
    """One input of a kiln row's `inputs` list (`plain` = compare.py's hash generator)."""
    dtype, shape, seed, gen = spec["dtype"], tuple(spec["shape"]), spec["seed"], spec.get("gen", "hash")
    if gen == "hash":
        return plain(dtype, shape, seed)
    if gen == "blobs":
        return blobs(shape, seed, hash32)
    if gen == "seeds":
        n = int(np.prod(shape))
        h = hash32(np.arange(n, dtype=np.uint32), seed)
        return ((h >> np.uint32(8)) < np.uint32(SEED_THRESHOLD)).reshape(shape)
    if gen == "histogram":
        return histogram(dtype, shape, seed, hash32)
    if gen == "grid_cost":
        return grid_cost(dtype, shape)
    if gen == "axis_cost":
        return axis_cost(dtype, shape)
    raise ValueError(gen)


# ---------------------------------------------------------------- peers
def per_image(f, x, nd, *rest):
    """f on each [S1..Sd] image of [B, C, S..] arrays (x and the arrays in rest), stacked;
    a tuple result gives a tuple of stacks."""
    lead = x.shape[: x.ndim - nd]
    xs = [a.reshape((-1,) + a.shape[a.ndim - nd:]) for a in (x,) + rest]
    outs = [f(*(a[i] for a in xs)) for i in range(xs[0].shape[0])]
    if isinstance(outs[0], tuple):
        return tuple(np.stack([o[k] for o in outs]).reshape(lead + outs[0][k].shape) for k in range(len(outs[0])))
    return np.stack(outs).reshape(lead + outs[0].shape)


def numpy_sinkhorn(a, b, M, eps, iters):
    """The plain numpy f32 loop (see the module docs); returns the cost per sample."""
    K = np.exp(M / M.dtype.type(-eps))
    u = np.full(a.shape, 1.0 / a.shape[1], dtype=a.dtype)
    v = np.full(b.shape, 1.0 / b.shape[1], dtype=b.dtype)
    for _ in range(iters):
        v = b / (u @ K)
        u = a / (v @ K.T)
    return np.einsum("bi,ij,bj->b", u, K * M, v)


def pot_sinkhorn(ot, a, b, M, eps, iters, method):
    """POT, one call per sample; the cost Σ P∘M per sample."""
    cost = np.empty(a.shape[0], dtype=a.dtype)
    for k in range(a.shape[0]):
        P = ot.sinkhorn(a[k], b[k], M, eps, method=method, numItermax=iters, stopThr=0.0, warn=False)
        cost[k] = np.sum(P * M)
    return cost


def close(rtol, label=None):
    return {"kind": "close", "rtol": rtol, "label": label or f"close(rtol={rtol:g})"}


def family_peers(row, libs):
    """[(library, fn(*inputs), check, mode)] for a family row, or None for other rows.
    `check` is one check or a list (one per kiln output, None = not compared); `mode` is
    'once' (one cold call), 'single' (single-threaded: timed at the first thread count, one
    warm-up and at least one call), 'few' (every thread count, one warm-up and at least one
    call: seconds per call) or 'threads' (every thread count, at least 3 calls). Libraries without the operation get a
    ('lib', None, 'no such op: why', None) entry."""
    name = row["name"]
    p = row.get("params", {})
    nd = len(row["shape"]) - 2
    ndi, cv2, ot = libs.get("scipy"), libs.get("cv2"), libs.get("ot")
    P = []
    if name.startswith("fill_holes"):
        if ndi is not None:
            P.append(("scipy", lambda x: per_image(ndi.binary_fill_holes, x, nd), "exact", "once"))
    elif name.startswith("propagation"):
        if ndi is not None:
            P.append(("scipy", lambda m, k: per_image(lambda a, b: ndi.binary_propagation(a, mask=b), m, nd, k),
                      "exact", "once"))
    elif name.startswith("median3_i16"):
        size = (1,) * (len(row["shape"]) - nd) + (3,) * nd
        if ndi is not None:
            P.append(("scipy", lambda x: ndi.median_filter(x, size=size, mode="nearest"), "exact", "once"))
        P.append(("opencv", None, "no such op: medianBlur has no int16 (CV_16S) form", None))
        if cv2 is not None:
            held = {}

            def timed(x):
                # The sign flip is prepared once, outside the timed calls.
                if held.get("src") is not x:
                    held["src"], held["u"] = x, x.view(np.uint16) ^ np.uint16(0x8000)
                u = held["u"]
                out = np.empty_like(u)
                pl, po = u.reshape(-1, *u.shape[-2:]), out.reshape(-1, *u.shape[-2:])
                for i in range(pl.shape[0]):
                    cv2.medianBlur(pl[i], 3, dst=po[i])
                return out

            unflip = lambda o: (o ^ np.uint16(0x8000)).view(np.int16)  # noqa: E731
            P.append(("opencv-u16flip", timed, {"kind": "exact", "post": unflip}, "threads"))
    elif name.startswith("median31"):
        if ndi is not None:
            P.append(("scipy", lambda x: ndi.median_filter(x, size=(1, 1, 31, 31)), "exact", "once"))
        P.append(("opencv", None, "no such op: medianBlur takes uint16 only up to 5x5", None))
    elif name.startswith("edt_") or name.startswith("signed_distance") or name.startswith("cdt_"):
        indices = p.get("return_indices") == "1"
        if name.startswith("cdt_"):
            if ndi is not None:
                P.append(("scipy", lambda x: per_image(lambda a: ndi.distance_transform_cdt(a, metric="taxicab"), x, nd),
                          "exact", "once"))
            if cv2 is not None and nd == 2:
                P.append(("opencv", lambda x: per_image(
                    lambda a: cv2.distanceTransform(a.view(np.uint8), cv2.DIST_L1, 3), x, nd),
                    {"kind": "exact", "post": lambda o: o.astype(np.int32)}, "threads"))
        elif name.startswith("signed_distance"):
            if ndi is not None:
                P.append(("scipy", lambda x: per_image(
                    lambda a: ndi.distance_transform_edt(a) - ndi.distance_transform_edt(~a), x, nd), "exact", "once"))
            if cv2 is not None and nd == 2:
                def cv_signed(a):
                    u = a.view(np.uint8)
                    return (cv2.distanceTransform(u, cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
                            - cv2.distanceTransform(1 - u, cv2.DIST_L2, cv2.DIST_MASK_PRECISE))

                P.append(("opencv", lambda x: per_image(cv_signed, x, nd), close(1e-6, "close(f32)"), "threads"))
        else:
            if ndi is not None:
                if indices:
                    P.append(("scipy", lambda x: per_image(
                        lambda a: ndi.distance_transform_edt(a, return_indices=True), x, nd),
                        ["exact", "exact"], "once"))
                else:
                    P.append(("scipy", lambda x: per_image(ndi.distance_transform_edt, x, nd), "exact", "once"))
            if cv2 is not None and nd == 2 and not indices:
                P.append(("opencv", lambda x: per_image(
                    lambda a: cv2.distanceTransform(a.view(np.uint8), cv2.DIST_L2, cv2.DIST_MASK_PRECISE), x, nd),
                    close(1e-6, "close(f32)"), "threads"))
            elif indices:
                P.append(("opencv", None, "no such op: distanceTransform gives no nearest-pixel indices", None))
            else:
                P.append(("opencv", None, "no such op: distanceTransform is 2-D only", None))
    elif name.startswith("sinkhorn"):
        eps = float(p.get("eps", "0.1"))
        iters = int(p.get("max_iter", "1000"))
        log = p.get("log_domain", "false") in ("1", "true", "True")
        chk = [close(1e-4), None, None, None]
        # grid_axes=2: kiln takes the per-axis table; the peers the dense cost it stands for.
        dense = dense_of_axes if p.get("grid_axes", "0") == "2" else (lambda M: M)
        if ot is not None:
            method = "sinkhorn_log" if log else "sinkhorn"
            # sinkhorn_log is numpy element-wise work (one thread, ~30 s a call at d = 1024):
            # one cold call at the first thread count.
            P.append(("pot-log" if log else "pot", lambda a, b, M: pot_sinkhorn(ot, a, b, dense(M), eps, iters, method),
                      chk, "once" if log else "few"))
        if not log:
            P.append(("numpy-ref", lambda a, b, M: numpy_sinkhorn(a, b, dense(M), eps, iters), chk, "threads"))
    else:
        return None
    return P


# ---------------------------------------------------------------- goals (issues 28-30, 2 threads)
# name -> [(peer, relation, value, text)]: "<=" means kiln/peer <= value, ">=" means
# peer/kiln >= value (a speed-up), "kiln:ROW" compares with another kiln row's time.
GOALS = {
    "white_tophat15_2048": [("opencv", "<=", 0.5, "<= 0.5x OpenCV morphologyEx(TOPHAT)")],
    "u8_morph_gradient3_2048": [("opencv", "<=", 0.5, "<= 0.5x OpenCV MORPH_GRADIENT")],
    "fill_holes_2048": [("scipy", ">=", 30, ">= 30x faster than scipy")],
    "propagation_2048": [("scipy", ">=", 30, ">= 30x faster than scipy")],
    "median31_u16_2048": [("scipy", ">=", 20, ">= 20x faster than scipy (OpenCV: no u16 31x31)")],
    "median3_i16_ct": [("opencv-u16flip", "<=", 1.0, "<= 1.0x OpenCV per plane (no i16 medianBlur: u16 via sign flip)")],
    "edt_2048": [("opencv", "<=", 0.5, "<= 0.5x OpenCV DIST_L2 PRECISE"), ("scipy", ">=", 50, ">= 50x scipy")],
    "edt_indices_2048": [("scipy", ">=", 30, ">= 30x scipy")],
    "cdt_taxicab_2048": [("opencv", "<=", 0.5, "<= 0.5x OpenCV DIST_L1")],
    "edt_128cube": [("scipy", ">=", 30, ">= 30x scipy")],
    "signed_distance_2048": [("kiln:edt_2048", "<", 2.0, "< 2x a single EDT (kiln edt_2048)")],
    "sinkhorn_d1024_b16": [("numpy-ref", "<=", 0.33, "<= 0.33x numpy f32 reference"), ("pot", ">=", 20, ">= 20x POT")],
    "sinkhorn_log_d1024_b16": [("pot-log", ">=", 10, ">= 10x POT sinkhorn_log")],
    "sinkhorn_grid32_b1_1000it": [("pot", ">=", 15, ">= 15x POT")],
    "sinkhorn_grid32_axes_b1_1000it": [("pot", ">=", 15, ">= 15x POT (kiln: separable kernel, grid_axes=2)")],
}


def goal_rows(results, threads=2):
    """Rows (workload, goal, kiln ms, peer ms, ratio, verdict) for the goals at `threads`."""
    kiln_ms = {}
    peers = {}
    for r in results:
        k = r["kiln"]
        if k["threads"] == threads and k["status"] == "ok":
            kiln_ms[k["name"]] = k["time"]["median_ms"]
        for lib, st in r["peers"].items():
            if st is not None and (k["threads"] == threads or lib not in peers.get(k["name"], {})):
                peers.setdefault(k["name"], {})[lib] = st["median_ms"]
    rows = []
    for name, goals in GOALS.items():
        for peer, rel, value, text in goals:
            km = kiln_ms.get(name)
            if km is None:
                status = next((r["kiln"] for r in results if r["kiln"]["name"] == name), None)
                why = "not run" if status is None else f"{status['status']}: {status['reason'][:60]}"
                rows.append([name, text, "-", "-", "-", why])
                continue
            pm = kiln_ms.get(peer[5:]) if peer.startswith("kiln:") else peers.get(name, {}).get(peer)
            if pm is None:
                rows.append([name, text, f"{km:.3f}", "-", "-", f"no {peer} time"])
                continue
            if rel == ">=":
                ratio = pm / km
                ok = ratio >= value
                cell = f"{ratio:.1f}x faster"
            else:
                ratio = km / pm
                ok = ratio <= value if rel == "<=" else ratio < value
                cell = f"{ratio:.2f}x"
            rows.append([name, text, f"{km:.3f}", f"{pm:.3f}", cell, "met" if ok else "MISSED"])
    return rows
