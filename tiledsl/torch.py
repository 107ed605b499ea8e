"""tiledsl's kernels as torch operators: `tiledsl.torch.register(path_or_kernel)` (see
tiledsl.api.torch_ops). Importing this module imports torch."""

from .api.torch_ops import register

__all__ = ["register"]
