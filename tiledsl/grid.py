"""The launch grid and the block id -> block tile mapping (the seam the swizzle pass fills).

One definition, as index expressions over the block id `pid` and the tile
counts `tiles_m`, `tiles_n`, serves the emitter (C), the interpreter (numpy) and
the launcher (the grid size), so all three visit the same tiles in one order.
"""

from __future__ import annotations

from .expr import Const, Expr, Var, ceil_div
from .ir import KernelIR

PID, TILES_M, TILES_N = Var("pid"), Var("tiles_m"), Var("tiles_n")


def grid_vars(kernel: KernelIR) -> dict[str, Expr]:
    """Block tiles along M and N, over the size parameters."""
    bm, bn, _ = kernel.schedule.block
    return {
        "tiles_m": ceil_div(kernel.gemm.m, Const(bm, "BM")),
        "tiles_n": ceil_div(kernel.gemm.n, Const(bn, "BN")),
    }


def grid_size(kernel: KernelIR) -> Expr:
    tiles = grid_vars(kernel)
    return tiles["tiles_m"] * tiles["tiles_n"]


def block_tile(kernel: KernelIR) -> dict[str, Expr]:
    """`bm` and `bn` of block `pid`: row-major raster order (swizzle none)."""
    return {"bm": PID // TILES_N, "bn": PID % TILES_N}
