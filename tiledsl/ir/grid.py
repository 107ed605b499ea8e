"""The launch grid and the block id -> block tile mapping (the swizzle pass's raster).

One definition, as index expressions over the block id `pid` and the tile
counts `tiles_m`, `tiles_n`, serves the emitter (C), the interpreter (numpy) and
the launcher (the grid size), so all three visit the same tiles in one order.

    none        bm = pid / tiles_n, bn = pid % tiles_n
    grouped G   blocks walk G block-rows at a time, column by column (Triton's GROUP_SIZE_M);
                the last group takes the rows that are left
    snake G     grouped G, with odd groups walking their columns right to left: the order
                never jumps, so the blocks of one wave and of the next share B's columns in
                L2 where grouped starts each group over at column 0 (a space-filling path)
    zigzag W    the grid is cut along N into panels of W block-columns (the last one may be
                narrower); blocks walk a panel row by row, and odd panels walk M in reverse
                (the S4000 write-up's N_SWIZZLE order)
"""

from __future__ import annotations

from .expr import Const, Expr, Var, ceil_div, minimum
from .nodes import KernelIR

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
    """Named steps from `pid` to `bm` and `bn`, each over the names before it."""
    return raster_steps(*kernel.raster)


def raster_steps(kind: str, param: int) -> dict[str, Expr]:
    if kind in ("grouped", "snake"):
        g = Const(param, "GROUP_M")
        width, group, first_m, group_m = (Var(n) for n in ("width", "group", "first_m", "group_m"))
        steps = {
            "width": g * TILES_N,  # blocks in one group of GROUP_M block-rows
            "group": PID // width,
            "first_m": group * g,
            "group_m": minimum(TILES_M - first_m, g),  # the last group may be shorter
            "bm": first_m + PID % width % group_m,
            "bn": PID % width // group_m,
        }
        if kind == "snake":  # odd groups walk their columns right to left
            col = Var("col")
            steps["col"] = steps.pop("bn")
            steps["bn"] = col + group % 2 * (TILES_N - 1 - col * 2)
        return steps
    if kind == "zigzag":
        w = Const(param, "PANEL_N")
        panel, idx, first_n, width, row = (
            Var(n) for n in ("panel", "idx", "first_n", "width", "row")
        )
        return {
            "panel": PID // (w * TILES_M),
            "idx": PID % (w * TILES_M),
            "first_n": panel * w,
            "width": minimum(TILES_N - first_n, w),  # the last panel may be narrower
            "row": idx // width,
            "bm": row + panel % 2 * (TILES_M - 1 - row * 2),  # odd panels walk M in reverse
            "bn": first_n + idx % width,
        }
    return {"bm": PID // TILES_N, "bn": PID % TILES_N}
