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
                   mask: Optional[ArrayLike] = None, output: _Output = None, border_value: int = 0,
                   origin: _Origin = 0, brute_force: bool = False, *,
                   axes: _Axes = None) -> Any: ...
def gradient_magnitude(input: ArrayLike, mode: str = "reflect", cval: float = 0.0,
                       output: _Output = None, *, axes: _Axes = None) -> Any: ...

# Morphology and distance transforms (scipy.ndimage's signatures).
_Structure = Optional[ArrayLike]

def binary_dilation(input: ArrayLike, structure: _Structure = None, iterations: int = 1,
                    mask: Optional[ArrayLike] = None, output: _Output = None,
                    border_value: int = 0, origin: _Origin = 0, brute_force: bool = False, *,
                    axes: _Axes = None) -> Any: ...
def binary_opening(input: ArrayLike, structure: _Structure = None, iterations: int = 1,
                   output: _Output = None, origin: _Origin = 0, mask: Optional[ArrayLike] = None,
                   border_value: int = 0, brute_force: bool = False, *,
                   axes: _Axes = None) -> Any: ...
def binary_closing(input: ArrayLike, structure: _Structure = None, iterations: int = 1,
                   output: _Output = None, origin: _Origin = 0, mask: Optional[ArrayLike] = None,
                   border_value: int = 0, brute_force: bool = False, *,
                   axes: _Axes = None) -> Any: ...
def binary_hit_or_miss(input: ArrayLike, structure1: _Structure = None,
                       structure2: _Structure = None, output: _Output = None,
                       origin1: _Origin = 0, origin2: Optional[_Origin] = None, *,
                       axes: _Axes = None) -> Any: ...
def binary_propagation(input: ArrayLike, structure: _Structure = None,
                       mask: Optional[ArrayLike] = None, output: _Output = None,
                       border_value: int = 0, origin: _Origin = 0, *,
                       axes: _Axes = None) -> Any: ...
def binary_fill_holes(input: ArrayLike, structure: _Structure = None, output: _Output = None,
                      origin: _Origin = 0, *, axes: _Axes = None) -> Any: ...
def white_tophat(input: ArrayLike, size: _Size = None, footprint: Optional[ArrayLike] = None,
                 structure: _Structure = None, output: _Output = None, mode: str = "reflect",
                 cval: float = 0.0, origin: _Origin = 0, *, axes: _Axes = None) -> Any: ...
def black_tophat(input: ArrayLike, size: _Size = None, footprint: Optional[ArrayLike] = None,
                 structure: _Structure = None, output: _Output = None, mode: str = "reflect",
                 cval: float = 0.0, origin: _Origin = 0, *, axes: _Axes = None) -> Any: ...
def morphological_gradient(input: ArrayLike, size: _Size = None,
                           footprint: Optional[ArrayLike] = None, structure: _Structure = None,
                           output: _Output = None, mode: str = "reflect", cval: float = 0.0,
                           origin: _Origin = 0, *, axes: _Axes = None) -> Any: ...
def morphological_laplace(input: ArrayLike, size: _Size = None,
                          footprint: Optional[ArrayLike] = None, structure: _Structure = None,
                          output: _Output = None, mode: str = "reflect", cval: float = 0.0,
                          origin: _Origin = 0, *, axes: _Axes = None) -> Any: ...
def generate_binary_structure(rank: int, connectivity: int) -> np.ndarray: ...
def iterate_structure(structure: ArrayLike, iterations: int,
                      origin: Optional[_Origin] = None) -> Union[np.ndarray, tuple[np.ndarray, list[int]]]: ...
def distance_transform_edt(input: ArrayLike, sampling: Union[float, Sequence[float], None] = None,
                           return_distances: bool = True, return_indices: bool = False,
                           distances: Optional[np.ndarray] = None,
                           indices: Optional[np.ndarray] = None) -> Any: ...
def distance_transform_cdt(input: ArrayLike, metric: Union[str, ArrayLike] = "chessboard",
                           return_distances: bool = True, return_indices: bool = False,
                           distances: Optional[np.ndarray] = None,
                           indices: Optional[np.ndarray] = None) -> Any: ...
def distance_transform_bf(input: ArrayLike, metric: str = "euclidean",
                          sampling: Union[float, Sequence[float], None] = None,
                          return_distances: bool = True, return_indices: bool = False,
                          distances: Optional[np.ndarray] = None,
                          indices: Optional[np.ndarray] = None) -> Any: ...
def rank_filter(input: ArrayLike, rank: int, size: _Size = None,
                footprint: Optional[ArrayLike] = None, output: _Output = None,
                mode: str = "reflect", cval: float = 0.0, origin: _Origin = 0, *,
                axes: _Axes = None) -> Any: ...
def percentile_filter(input: ArrayLike, percentile: float, size: _Size = None,
                      footprint: Optional[ArrayLike] = None, output: _Output = None,
                      mode: str = "reflect", cval: float = 0.0, origin: _Origin = 0, *,
                      axes: _Axes = None) -> Any: ...
