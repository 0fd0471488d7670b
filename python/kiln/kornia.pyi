"""Type stubs of ``kiln.kornia``."""

from typing import Any, Union

from numpy.typing import ArrayLike

def median_blur(input: ArrayLike, kernel_size: Union[int, tuple[int, int]]) -> Any: ...
