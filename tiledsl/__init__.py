"""tiledsl: a tiling schedule in a `.tile` file, compiled to a tensor-core GEMM kernel.

    >>> import tiledsl
    >>> result = tiledsl.compile_file("examples/hgemm.tile")
    >>> print(result.source[:40])

The data's path: parse (`tiledsl.frontend.parser`) -> analyze (`tiledsl.ir.schedule`) ->
lower (`tiledsl.lowering.lower`) -> passes (`tiledsl.passes`) -> emit (`tiledsl.emit`),
then run on a GPU (`tiledsl.gpu.runtime`) or in the numpy interpreter (`tiledsl.interp.interpreter`).
"""

__version__ = "0.1.0"

from .driver import compile_file, compile_source, lower_file

__all__ = ["compile_file", "compile_source", "lower_file", "__version__"]
