"""Type stubs of ``kiln.ndimage`` (scipy.ndimage's signatures)."""

from typing import Any, Optional, Sequence, Union

import numpy as np
from numpy.typing import ArrayLike, DTypeLike

_Size = Union[int, Sequence[int], None]
_Origin = Union[int, Sequence[int]]
_Axes = Union[int, Sequence[int], None]
_Output = Union[np.ndarray, DTypeLike, None]

def median_filter(input: ArrayLike, size: _Size = None, footprint: Optional[ArrayLike] = None,
                  output: _Output = None, mode: str = "reflect", cval: float = 0.0,
                  origin: _Origin = 0, *, axes: _Axes = None) -> Any: ...
def minimum_filter(input: ArrayLike, size: _Size = None, footprint: Optional[ArrayLike] = None,
                   output: _Output = None, mode: str = "reflect", cval: float = 0.0,
                   origin: _Origin = 0, *, axes: _Axes = None) -> Any: ...
def grey_erosion(input: ArrayLike, size: _Size = None, footprint: Optional[ArrayLike] = None,
                 structure: Optional[ArrayLike] = None, output: _Output = None,
                 mode: str = "reflect", cval: float = 0.0, origin: _Origin = 0, *,
                 axes: _Axes = None) -> Any: ...
def grey_dilation(input: ArrayLike, size: _Size = None, footprint: Optional[ArrayLike] = None,
                  structure: Optional[ArrayLike] = None, output: _Output = None,
                  mode: str = "reflect", cval: float = 0.0, origin: _Origin = 0, *,
                  axes: _Axes = None) -> Any: ...
def grey_opening(input: ArrayLike, size: _Size = None, footprint: Optional[ArrayLike] = None,
                 structure: Optional[ArrayLike] = None, output: _Output = None,
                 mode: str = "reflect", cval: float = 0.0, origin: _Origin = 0, *,
                 axes: _Axes = None) -> Any: ...
def grey_closing(input: ArrayLike, size: _Size = None, footprint: Optional[ArrayLike] = None,
                 structure: Optional[ArrayLike] = None, output: _Output = None,
                 mode: str = "reflect", cval: float = 0.0, origin: _Origin = 0, *,
                 axes: _Axes = None) -> Any: ...
def binary_erosion(input: ArrayLike, structure: Optional[ArrayLike] = None, iterations: int = 1,
                   mask: None = None, output: _Output = None, border_value: int = 0,
                   origin: _Origin = 0, brute_force: bool = False, *,
                   axes: _Axes = None) -> Any: ...
def gradient_magnitude(input: ArrayLike, mode: str = "reflect", cval: float = 0.0,
                       output: _Output = None, *, axes: _Axes = None) -> Any: ...
