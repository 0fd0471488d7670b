"""``kiln.fuse``: trace a function of kiln operators once and run it as fused kernels.

``fuse(fn)`` calls ``fn`` on a placeholder (``Lazy``); every ``kiln.ndimage`` or
``kiln.kornia`` function given a ``Lazy`` returns a longer ``Lazy`` instead of computing, so
the trace is the chain of operators. Exactness: the fused chain equals the operators called
one by one, bit for bit (kiln fuses without changing values). Limits: ``fn`` must be a
straight chain on its one argument (no arithmetic between arrays, no branches on values),
and every operator in it must use the same ``axes``.
"""

from __future__ import annotations

import numpy as np

from . import _chain

_UNSET = object()


class Lazy:
    """A placeholder for the array a fused function receives: the operators applied so
    far."""

    __slots__ = ("specs", "axes")

    def __init__(self, specs=(), axes=_UNSET):
        self.specs = specs
        self.axes = axes

    def then(self, spec: tuple, axes) -> "Lazy":
        """This chain followed by ``spec``; every operator must use the same ``axes``."""
        if self.axes is not _UNSET and self.axes != axes:
            raise ValueError(
                f"kiln.fuse: every operator in a chain must use the same axes "
                f"({self.axes} and {axes})"
            )
        return Lazy(self.specs + (spec,), axes)

    def __array__(self, *a, **k):
        raise TypeError("kiln.fuse: the traced function may only pass its argument to kiln operators")


class Fused:
    """A traced chain of kiln operators: call it on arrays, ``dump()`` its kernels. Picklable
    (the trace, not the function), so it can be shipped to Dask workers."""

    def __init__(self, fn=None, *, specs=None, axes=None):
        if specs is None:
            if not callable(fn):
                raise TypeError("kiln.fuse: expected a callable")
            traced = fn(Lazy())
            if not isinstance(traced, Lazy) or not traced.specs:
                raise TypeError(
                    "kiln.fuse: the function must return kiln operators applied to its argument"
                )
            specs = traced.specs
            axes = None if traced.axes is _UNSET else traced.axes
        self.specs = tuple(specs)
        self.axes = axes

    @property
    def chain(self):
        """The native chain (compiled on first use per dtype and shape)."""
        return _chain.chain(self.specs, self.axes)

    def __call__(self, x, output=None):
        """Runs the fused chain on ``x``; ``output`` as scipy's (an array to write into)."""
        if isinstance(x, Lazy):
            if output is not None:
                raise ValueError("kiln.fuse: output= is not allowed inside a traced function")
            for s in self.specs:
                x = x.then(s, self.axes)
            return x
        from .ndimage import _run

        return _run(self.specs, self.axes, x, output)

    def names(self) -> list:
        """The operator names, in order."""
        return list(self.chain.names())

    def halo(self, ndim: int) -> list:
        """Per axis of an ``ndim``-d input, how far the chain reads: ``(before, after)``."""
        return list(self.chain.halo(ndim))

    def modes(self) -> list:
        """The border mode each operator reads under."""
        return list(self.chain.modes())

    def dump(self, shape=(64, 64), dtype="float32") -> str:
        """The optimised graph, the fused groups and each kernel for an input of ``shape``
        and ``dtype`` (or pass an array as ``shape``)."""
        if isinstance(shape, np.ndarray):
            shape, dtype = shape.shape, shape.dtype
        return self.chain.dump(np.dtype(dtype).name, [int(s) for s in shape])

    def __getstate__(self):
        return {"specs": self.specs, "axes": self.axes}

    def __setstate__(self, state):
        self.specs = state["specs"]
        self.axes = state["axes"]

    def __repr__(self):
        return f"kiln.Fused({' -> '.join(s[0] for s in self.specs)})"


def fuse(fn) -> Fused:
    """Traces ``fn`` (a function of one array made of kiln operators) into a fused chain:

    >>> import kiln, kiln.ndimage as ndi
    >>> f = kiln.fuse(lambda x: ndi.median_filter(ndi.grey_opening(x, 3), 3))
    >>> y = f(np.ones((32, 32), np.float32))
    """
    return Fused(fn)
