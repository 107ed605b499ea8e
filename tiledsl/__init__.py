"""tiledsl: a tiling schedule in a `.tile` file, compiled to a tensor-core GEMM kernel.

    >>> import tiledsl
    >>> result = tiledsl.compile_file("examples/hgemm.tile")
    >>> print(result.source[:40])
    >>> k = tiledsl.load("examples/hgemm.tile")     # a callable: C = k(A, B)
    >>> op = tiledsl.torch.register(k)              # torch.ops.tiledsl.hgemm (imports torch)

The data's path, one subpackage a stage: `frontend` (parse, read the directives, analyze,
refuse what is not built) -> `lowering` (the naive IR) -> `passes` -> `emit` (CUDA or
MUSA and a launch description); the IR (`ir`) is what flows between them, `models` the
analyses passes ask, and the result runs on a GPU (`gpu`) or in the numpy interpreter
(`interp`); `commands`, `tune` and `viz` are the command line's work, `driver` the door.
"""

__version__ = "0.1.0"

from .api import ArgumentError, load
from .driver import compile_file, compile_source, lower_file
from .errors import TileWarning

__all__ = [
    "ArgumentError",
    "TileWarning",
    "compile_file",
    "compile_source",
    "load",
    "lower_file",
    "__version__",
]


def __getattr__(name: str):
    """`tiledsl.torch` on first use: importing tiledsl does not import torch."""
    if name == "torch":
        import importlib

        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module 'tiledsl' has no attribute '{name}'")
