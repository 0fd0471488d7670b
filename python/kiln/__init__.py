"""kiln: scipy.ndimage and kornia operators compiled into fused JIT kernels.

``kiln.ndimage`` mirrors scipy.ndimage's signatures, ``kiln.kornia.median_blur`` kornia's,
``kiln.ot`` is batched Sinkhorn with POT's names, ``kiln.fuse`` chains operators lazily into
fused kernels and ``kiln.dask`` applies them to Dask arrays chunk by chunk with the exact overlap. Results are bit-identical to scipy's
where kiln promises it (see each function's docstring).
"""

from . import kornia, ndimage, ot
from ._fuse import Fused, fuse

__all__ = ["ndimage", "kornia", "ot", "fuse", "Fused"]
__version__ = "0.1.0"
