"""``kiln.kornia``: kornia's filters with kornia's semantics, on numpy arrays.

numpy arrays, or torch (CPU) tensors through DLPack without copies (a torch tensor in gives a
torch tensor out).
"""

from __future__ import annotations

import numbers

import numpy as np

from . import _chain, _dlpack
from ._fuse import Lazy

__all__ = ["median_blur"]


def median_blur(input, kernel_size):
    """kornia.filters.median_blur on a ``(B, C, H, W)`` float32/float64 array: zero padding,
    the lower median (sorted index ``(ky*kx - 1) // 2``, as torch.median), NaN where the
    window (padding excluded) holds NaN or an infinity. ``kernel_size``: ``k`` or
    ``(ky, kx)``."""
    if isinstance(kernel_size, numbers.Integral):
        k = (int(kernel_size), int(kernel_size))
    else:
        k = tuple(int(v) for v in kernel_size)
        if len(k) != 2:
            raise ValueError(f"median_blur: kernel_size must be k or (ky, kx), got {kernel_size!r}")
    s = _chain.spec("median_blur", size=k)
    if isinstance(input, Lazy):
        return input.then(s, None)
    x, back = _dlpack.to_numpy(input)
    if x.ndim != 4:
        raise ValueError(f"median_blur: input must be (B, C, H, W), got shape {x.shape}")
    return _dlpack.from_numpy(_chain.chain((s,), None).run(x, None), back)
