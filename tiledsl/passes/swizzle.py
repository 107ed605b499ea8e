"""swizzle (`swizzle grouped G`, `swizzle snake G`, `swizzle zigzag W`): the order in
which blocks visit tiles.

The pass records the raster in the IR; `tiledsl.ir.grid` turns it into the block
id -> (bm, bn) expressions that the emitter, the interpreter and the launcher
share. Every order is a bijection for any grid (tests/test_swizzle.py).
"""

from __future__ import annotations

from dataclasses import replace

from ..ir.nodes import KernelIR


def swizzle(kernel: KernelIR) -> KernelIR:
    s = kernel.schedule
    return replace(kernel, raster=(s.swizzle, s.swizzle_param))
