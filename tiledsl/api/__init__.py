"""The kernels as Python callables (`tiledsl.load`): tiledsl.api.kernel, the arrays they take
(tiledsl.api.operands), their launch on the GPU (tiledsl.api.gpu)."""

from .kernel import Kernel, load
from .operands import ArgumentError

__all__ = ["ArgumentError", "Kernel", "load"]
