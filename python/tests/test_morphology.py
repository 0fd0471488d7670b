"""kiln.ndimage's morphology against scipy.ndimage, bit for bit: binary dilation, opening,
closing (iterations, mask, border_value, origin, axes), hit-or-miss, propagation, hole
filling, top-hats, gradients, non-flat structures, integer dtypes, the structure helpers,
odd layouts and output= arrays."""

import numpy as np
import pytest
import scipy.ndimage as sp

import kiln
import kiln.ndimage as kn
from conftest import assert_bits, make

INTS = [np.int8, np.uint16, np.int16, np.int32, np.uint32]
ALL = [np.float32, np.float64, np.uint8] + INTS
BINARY = ["binary_erosion", "binary_dilation", "binary_opening", "binary_closing"]
DERIVED = ["white_tophat", "black_tophat", "morphological_gradient", "morphological_laplace"]
ST = np.array([[0, 1, 1], [1, 1, 0], [0, 1, 0]], bool)


def binary_input(shape, seed):
    return np.random.default_rng(seed).random(shape) < 0.65


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("structure", [None, "st", "even"])
@pytest.mark.parametrize("iterations", [1, 2, 0])
@pytest.mark.parametrize("border_value", [0, 1])
def test_binary(name, structure, iterations, border_value):
    x = binary_input((14, 13), seed=len(name) + iterations)
    st = {None: None, "st": ST, "even": np.array([[1, 1], [0, 1]], bool)}[structure]
    kw = dict(structure=st, iterations=iterations, border_value=border_value)
    assert_bits(getattr(kn, name)(x, **kw), getattr(sp, name)(x, **kw))


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("iterations", [1, 3, -1])
def test_binary_mask_and_origin(name, iterations):
    x = binary_input((12, 15), seed=20)
    mask = binary_input((12, 15), seed=21)
    for origin in [0, (1, -1)]:
        kw = dict(structure=ST, iterations=iterations, mask=mask, origin=origin)
        if iterations < 1 and origin != 0:
            # the shifted centre is false: scipy would loop forever, kiln refuses
            with pytest.raises(ValueError, match="centre"):
                getattr(kn, name)(x, **kw)
            continue
        assert_bits(getattr(kn, name)(x, **kw), getattr(sp, name)(x, **kw))


@pytest.mark.parametrize("name", BINARY)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint8, np.int16])
def test_binary_truth_tests_other_dtypes(name, dtype):
    x = make((9, 11), dtype, seed=22)
    if np.dtype(dtype).kind == "f":
        x[x > 20] = np.nan
        x[1, 1] = -0.0
    else:
        x = x % 3
    assert_bits(getattr(kn, name)(x), getattr(sp, name)(x))
    assert_bits(getattr(kn, name)(x, iterations=-1), getattr(sp, name)(x, iterations=-1))


@pytest.mark.parametrize("name", BINARY)
def test_binary_volume_axes_and_program_path(name):
    x = binary_input((5, 6, 7), seed=23)
    for kw in [dict(), dict(axes=(1, 2)), dict(axes=(0, 2), iterations=-1),
               dict(axes=(0, 2), mask=binary_input((5, 6, 7), 24)),
               dict(iterations=70)]:
        assert_bits(getattr(kn, name)(x, **kw), getattr(sp, name)(x, **kw))


def test_binary_output_and_layouts():
    base = binary_input((16, 18), seed=25)
    for x in [base.T, base[1::2, ::3], base[::-1, ::-2], np.asfortranarray(base)]:
        for kw in [dict(), dict(iterations=0, mask=np.ones(x.shape, bool))]:
            assert_bits(kn.binary_dilation(x, **kw), sp.binary_dilation(x, **kw))
    out = np.empty(base.shape, bool)
    assert kn.binary_closing(base, output=out) is out
    assert_bits(out, sp.binary_closing(base))
    out2 = np.empty(base.shape, bool)
    assert kn.binary_propagation(base, mask=~base | base[::-1], output=out2) is out2
    assert_bits(out2, sp.binary_propagation(base, mask=~base | base[::-1]))


@pytest.mark.parametrize("case", ["default", "s1", "s2", "origin", "origin2", "axes"])
def test_binary_hit_or_miss(case):
    x = binary_input((13, 14), seed=26)
    s1 = np.array([[0, 1, 0], [1, 1, 1], [0, 0, 0]], bool)
    s2 = np.array([[1, 0, 1], [0, 0, 0], [1, 1, 1]], bool)
    kw = {
        "default": {},
        "s1": dict(structure1=s1),
        "s2": dict(structure1=s1, structure2=s2),
        "origin": dict(structure1=s1, origin1=(1, -1)),
        "origin2": dict(structure1=s1, structure2=s2, origin1=(0, 1), origin2=(-1, 0)),
        "axes": dict(structure1=s1[1], axes=(1,)),
    }[case]
    assert_bits(kn.binary_hit_or_miss(x, **kw), sp.binary_hit_or_miss(x, **kw))


@pytest.mark.parametrize("structure", [None, "full"])
@pytest.mark.parametrize("border_value", [0, 1])
def test_binary_propagation(structure, border_value):
    x = binary_input((15, 16), seed=27) & (np.random.default_rng(28).random((15, 16)) < 0.1)
    mask = binary_input((15, 16), seed=29)
    st = None if structure is None else np.ones((3, 3), bool)
    kw = dict(structure=st, mask=mask, border_value=border_value)
    assert_bits(kn.binary_propagation(x, **kw), sp.binary_propagation(x, **kw))


@pytest.mark.parametrize("kw", [{}, dict(structure=np.ones((3, 3))), dict(origin=(1, 0))])
def test_binary_fill_holes(kw):
    ring = np.zeros((12, 12), bool)
    ring[2:9, 2:9] = True
    ring[4:7, 4:7] = False
    ring[9:, 0:3] = True
    for x in [ring, ring.astype(np.float32), binary_input((9, 10), seed=30)]:
        assert_bits(kn.binary_fill_holes(x, **kw), sp.binary_fill_holes(x, **kw))
    v = binary_input((5, 6, 7), seed=31)
    assert_bits(kn.binary_fill_holes(v), sp.binary_fill_holes(v))
    assert_bits(kn.binary_fill_holes(v, axes=(1, 2)), sp.binary_fill_holes(v, axes=(1, 2)))


@pytest.mark.parametrize("name", DERIVED)
@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("mode", ["reflect", "constant", "nearest", "mirror", "wrap"])
def test_derived_grey(name, dtype, mode):
    x = make((11, 12), dtype, seed=len(name) + len(mode))
    kw = dict(size=(3, 2), mode=mode, cval=7)
    assert_bits(getattr(kn, name)(x, **kw), getattr(sp, name)(x, **kw))


@pytest.mark.parametrize("name", DERIVED + ["grey_erosion", "grey_dilation", "grey_opening",
                                            "grey_closing"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_non_flat_structure(name, dtype):
    x = make((10, 9), dtype, seed=32)
    st = np.array([[0.0, 1.0, 0.0], [1.0, 2.5, 1.0], [0.0, 1.0, 0.0]])
    fp = np.array([[1, 1, 1], [1, 0, 1], [1, 1, 1]], bool)
    for kw in [dict(structure=st), dict(structure=st, footprint=fp, mode="constant", cval=1.5),
               dict(structure=np.array([[0.5, 1.0], [0.0, 3.0]]), origin=(-1, 0))]:
        assert_bits(getattr(kn, name)(x, **kw), getattr(sp, name)(x, **kw))


@pytest.mark.parametrize("name", ["white_tophat", "black_tophat"])
def test_tophat_of_bool_is_xor(name):
    x = binary_input((10, 11), seed=33)
    assert_bits(getattr(kn, name)(x, size=3), getattr(sp, name)(x, size=3))


@pytest.mark.parametrize("name", DERIVED)
def test_derived_footprint_origin_axes_layouts(name):
    fp = np.array([[1, 1, 1], [1, 0, 1], [1, 1, 1]], bool)
    base = make((14, 15), np.float32, seed=34)
    for x in [base, base.T, base[::-1, 1::2], np.asfortranarray(base)]:
        for kw in [dict(footprint=fp), dict(size=3, origin=(-1, 1), mode="nearest")]:
            assert_bits(getattr(kn, name)(x, **kw), getattr(sp, name)(x, **kw))
    v = make((4, 5, 6), np.uint16, seed=35)
    assert_bits(getattr(kn, name)(v, size=3, axes=(0, 2)), getattr(sp, name)(v, size=3, axes=(0, 2)))
    out = np.empty_like(base)
    assert getattr(kn, name)(base, size=3, output=out) is out
    assert_bits(out, getattr(sp, name)(base, size=3))


@pytest.mark.parametrize("name", ["median_filter", "grey_erosion", "grey_dilation",
                                  "grey_opening", "grey_closing"])
@pytest.mark.parametrize("dtype", INTS)
@pytest.mark.parametrize("mode", ["reflect", "constant", "wrap"])
def test_filters_over_integer_dtypes(name, dtype, mode):
    x = make((9, 10), dtype, seed=36)
    kw = dict(size=(3, 4), mode=mode, cval=-5 if np.dtype(dtype).kind == "i" else 5)
    assert_bits(getattr(kn, name)(x, **kw), getattr(sp, name)(x, **kw))


def test_structure_helpers():
    for rank in [1, 2, 3]:
        for conn in [0, 1, 2, 3, 4]:
            assert_bits(kn.generate_binary_structure(rank, conn),
                        sp.generate_binary_structure(rank, conn))
    assert_bits(kn.generate_binary_structure(0, 1), sp.generate_binary_structure(0, 1))
    st = sp.generate_binary_structure(2, 1)
    for it in [1, 2, 3]:
        assert_bits(kn.iterate_structure(st, it), sp.iterate_structure(st, it))
    even = np.array([[1, 1], [0, 1]], bool)
    got, org = kn.iterate_structure(even, 3, origin=(1, -1))
    want, worg = sp.iterate_structure(even, 3, origin=(1, -1))
    assert_bits(got, want)
    assert list(org) == list(worg)


def test_fuse_records_graph_forms_and_refuses_programs():
    x = binary_input((20, 21), seed=37)
    f = kiln.fuse(lambda v: kn.binary_closing(kn.binary_opening(v, iterations=2)))
    assert_bits(f(x), sp.binary_closing(sp.binary_opening(x, iterations=2)))
    g = kiln.fuse(lambda v: kn.morphological_gradient(kn.white_tophat(v, size=3), size=(3, 5)))
    y = make((20, 21), np.float64, seed=38)
    assert_bits(g(y), sp.morphological_gradient(sp.white_tophat(y, size=3), size=(3, 5)))
    with pytest.raises(ValueError, match="fixpoint"):
        kiln.fuse(lambda v: kn.binary_dilation(v, iterations=-1))
    with pytest.raises(ValueError, match="fuse"):
        kiln.fuse(lambda v: kn.distance_transform_edt(v))


def test_morphology_errors():
    x = binary_input((6, 7), seed=39)
    with pytest.raises(TypeError, match="bool"):
        kn.morphological_gradient(x, size=3)
    with pytest.raises(TypeError, match="non-flat"):
        kn.grey_erosion(make((5, 5), np.uint8), structure=np.ones((3, 3)))
    with pytest.raises(TypeError, match="int64"):
        kn.white_tophat(np.zeros((4, 4), np.int64), size=3)
    with pytest.raises(ValueError, match="mask shape"):
        kn.binary_dilation(x, mask=np.ones((3, 3), bool))
    with pytest.raises(ValueError, match="border_value"):
        kn.binary_dilation(x, border_value=2)
    with pytest.raises(TypeError, match="iterations"):
        kn.binary_erosion(x, iterations=1.5)
    with pytest.raises(ValueError):
        kn.binary_erosion(x, structure=ST, origin=5)
    with pytest.raises(ValueError):
        kn.binary_erosion(x, structure=ST, iterations=0, origin=5, mask=x)
    with pytest.raises(ValueError, match="origin2"):
        kn.binary_hit_or_miss(x, structure2=np.ones((3, 3)), origin2=(4, 0))
    with pytest.raises(TypeError, match="bool"):
        kn.binary_erosion(x, output=np.empty((6, 7), np.uint8))
    with pytest.raises(TypeError, match="bool"):
        kn.binary_fill_holes(x, output=np.empty((6, 7), np.float32))
    with pytest.raises(ValueError, match="read-only"):
        ro = np.empty((6, 7), bool)
        ro.flags.writeable = False
        kn.binary_fill_holes(x, output=ro)
    with pytest.raises(ValueError):
        kn.binary_fill_holes(np.zeros((0, 3), bool))


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint32, np.int32])
def test_integer_cval_truncates_or_is_refused(dtype):
    x = make((6, 7), dtype, seed=40)
    for cval in [2.7, -2.0, 100.9]:
        if cval < 0 and np.dtype(dtype).kind == "u":
            continue
        kw = dict(size=3, mode="constant", cval=cval)
        for name in ["grey_erosion", "median_filter", "white_tophat"]:
            assert_bits(getattr(kn, name)(x, **kw), getattr(sp, name)(x, **kw))
    info = np.iinfo(dtype)
    for cval in [float("nan"), float(info.max) + 1, float(info.min) - 1]:
        with pytest.raises(ValueError, match="not representable"):
            kn.grey_dilation(x, size=3, mode="constant", cval=cval)
