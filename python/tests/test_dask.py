"""kiln.dask on a distributed.LocalCluster with two worker processes: chunked results are
bit-identical to whole-array results, for every border mode and for fused chains."""

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
distributed = pytest.importorskip("distributed")

import kiln  # noqa: E402
import kiln.dask as kd  # noqa: E402
import kiln.ndimage as kn  # noqa: E402
from conftest import assert_bits, make  # noqa: E402


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None,
        memory_limit="1GiB",
    )
    c = distributed.Client(cluster, timeout=60)
    yield c
    c.close()
    cluster.close()


@pytest.mark.parametrize("mode", ["reflect", "constant", "nearest", "mirror", "wrap"])
def test_chunked_equals_whole(client, mode):
    x = make((70, 61), np.float32, seed=40)
    f = kiln.fuse(lambda a: kn.median_filter(kn.grey_opening(a, 3, mode=mode, cval=2.0), 5,
                                             mode=mode, cval=2.0))
    d = da.from_array(x, chunks=(16, 20))
    got = kd.map_overlap(f, d).compute()
    assert_bits(got, f(x))


def test_axes_and_volumes(client):
    x = make((9, 40, 30), np.float64, seed=41)
    fn = lambda a: kn.grey_erosion(a, size=(5, 3), axes=(1, 2), origin=(1, -1))  # noqa: E731
    d = da.from_array(x, chunks=(4, 13, 11))
    depth, boundary = kd.overlap_of(fn, 3)
    assert depth == {0: 0, 1: 3, 2: 2} and boundary == "none"
    assert_bits(kd.map_overlap(fn, d).compute(), fn(x))


def test_mixed_wrap_is_refused():
    with pytest.raises(ValueError, match="wrap"):
        kd.overlap_of(lambda a: kn.median_filter(kn.grey_erosion(a, 3, mode="wrap"), 3), 2)


def test_morphology_chains_chunked(client):
    x = make((57, 66), np.float32, seed=42)
    x[x < 0] = 0
    b = x > 10
    st = np.array([[0, 1, 1], [1, 1, 0], [0, 1, 0]], bool)
    chains = [
        (lambda a: kn.binary_closing(kn.binary_opening(a, st, iterations=2), border_value=1), b),
        (lambda a: kn.binary_hit_or_miss(kn.binary_dilation(a, origin=(1, 0), structure=st)), b),
        (lambda a: kn.binary_erosion(a, iterations=3), x),  # truth-tests float chunks
        (lambda a: kn.morphological_laplace(kn.white_tophat(a, size=(3, 4), mode="mirror"),
                                            footprint=st, mode="nearest"), x),
    ]
    for fn, data in chains:
        f = kiln.fuse(fn)
        d = da.from_array(data, chunks=(13, 17))
        got = kd.map_overlap(f, d).compute()
        assert_bits(got, f(data))
