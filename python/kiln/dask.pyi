"""Type stubs of ``kiln.dask``."""

from typing import Any, Callable, Union

from ._fuse import Fused

def overlap_of(fn: Union[Fused, Callable[[Any], Any]], ndim: int) -> tuple[dict[int, int], str]: ...
def map_overlap(fn: Union[Fused, Callable[[Any], Any]], array: Any) -> Any: ...
