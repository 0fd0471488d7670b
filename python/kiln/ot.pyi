"""Type stubs of ``kiln.ot`` (POT's argument names)."""

from typing import Any, Sequence, Union

import numpy as np
from numpy.typing import ArrayLike

def sinkhorn_batch(a: ArrayLike, b: ArrayLike, M: ArrayLike, reg: float,
                   method: str = "sinkhorn", numItermax: int = 1000, stopThr: float = 1e-9,
                   plan: bool = True, grad: bool = False) -> dict[str, np.ndarray]: ...
def sinkhorn(a: ArrayLike, b: ArrayLike, M: ArrayLike, reg: float, method: str = "sinkhorn",
             numItermax: int = 1000, stopThr: float = 1e-9, verbose: bool = False,
             log: bool = False, warn: bool = True) -> Any: ...
def sinkhorn2(a: ArrayLike, b: ArrayLike, M: ArrayLike, reg: float, method: str = "sinkhorn",
              numItermax: int = 1000, stopThr: float = 1e-9, verbose: bool = False,
              log: bool = False, warn: bool = True) -> Any: ...
def build_cost_matrix(grid_shape: Union[int, Sequence[int]], power: float = 2.0) -> np.ndarray: ...
