"""Arrays from other libraries through DLPack: torch (CPU) tensors in and out without copies.

Scope: an input (or ``output=``) that is not a numpy array but speaks DLPack
(``__dlpack__`` and ``__dlpack_device__``: torch, JAX, CuPy, ...) is viewed as a numpy array
with ``np.from_dlpack`` (no copy), and the result is handed back to the input's library
through its ``from_dlpack`` (no copy), so ``kiln.ndimage.median_filter(torch_tensor, 3)``
returns a torch tensor sharing memory with kiln's result. Exactness: only views are made;
values pass bit for bit. Limits: CPU memory only (DLPack device type 1); a tensor on another
device is a ``ValueError`` until kiln's CUDA path runs from Python; a library without a
module-level ``from_dlpack`` gets the numpy array back.
"""

from __future__ import annotations

import sys

import numpy as np

_CPU = 1  # DLPack's kDLCPU


def is_dlpack(obj) -> bool:
    """Whether ``obj`` is a non-numpy DLPack producer."""
    return (
        not isinstance(obj, np.ndarray)
        and hasattr(obj, "__dlpack__")
        and hasattr(obj, "__dlpack_device__")
    )


def to_numpy(obj, name: str = "input"):
    """``obj`` as a numpy array (a view for DLPack producers) and the function that turns a
    numpy result back into ``obj``'s library (``None`` for numpy and array-likes)."""
    if not is_dlpack(obj):
        return np.asarray(obj), None
    device = obj.__dlpack_device__()
    if int(device[0]) != _CPU:
        raise ValueError(
            f"{name}: a tensor on DLPack device {tuple(int(d) for d in device)}; kiln runs "
            "on CPU memory only from Python (move it with .cpu() first)"
        )
    try:
        x = np.from_dlpack(obj)
    except (BufferError, TypeError, RuntimeError) as e:
        raise TypeError(f"{name}: cannot be viewed through DLPack: {e}") from None
    root = type(obj).__module__.split(".")[0]
    back = getattr(sys.modules.get(root), "from_dlpack", None)
    return x, back


def writable_view(obj, name: str = "output"):
    """A writeable numpy view of a DLPack producer's CPU memory, for ``output=``.
    ``np.from_dlpack`` views are read-only under numpy 2; torch's ``__array__`` (and any
    producer's) is accepted when it views the same memory as the DLPack export, so kiln
    writes in place; anything else is a ``ValueError`` rather than a silent copy."""
    view, _ = to_numpy(obj, name)
    if view.flags.writeable:
        return view
    alt = np.asarray(obj)
    if (
        alt.flags.writeable
        and alt.shape == view.shape
        and alt.dtype == view.dtype
        and alt.strides == view.strides
        and alt.__array_interface__["data"][0] == view.__array_interface__["data"][0]
    ):
        return alt
    raise ValueError(f"{name}: the tensor's memory is exported read-only; pass a numpy array")


def from_numpy(result, back):
    """The numpy ``result`` in the caller's library (no copy), or as is."""
    return result if back is None else back(result)
