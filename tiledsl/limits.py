"""Documented limits: what a `.tile` file may ask for, and what the generated code's
integers can hold.

The generated kernels compute tile counts, block ids and element rows and columns in
32-bit `int`s (global offsets, row × leading dimension and the batch's matrix offset,
in 64-bit `long long`), and launch one block per tile along the grid's x axis and
one product of a batch per grid row (y). A size whose arithmetic would overflow those
is refused before anything runs, with the limit it broke:

    problems = size_problems(gemm, schedule, (4096, 4096, 4096), batch=1)   # [] = fits

The largest value any of the kernel's `int`s reaches is the size rounded up to its
block tile plus one more tile (a guarded copy's `gc + VECTOR <= N` past the last
tile), the block count, and the raster's products (`GROUP_M * tiles_n`,
`PANEL_N * tiles_m`, `2 * tiles_m`); each must stay at most INT_MAX.
"""

from __future__ import annotations

import sys

INT_MAX = 2**31 - 1  # the generated code's `int`
GRID_X_MAX = 2**31 - 1  # blocks along x (compute capability 3.0 and later)
GRID_Y_MAX = 65535  # grid rows: the products of a batch
MAX_STAGES = 32  # pipeline stages: more never pays, and each one is unrolled and analysed
# A swizzle's group (grouped, snake) or panel (zigzag) of block tiles: a wider one never
# pays, and GROUP_M * tiles_n (PANEL_N * tiles_m) must fit the kernel's int at real sizes
MAX_SWIZZLE = 65536
MAX_KERNELS = 64  # kernels in one file: each is lowered, checked and emitted on its own
MAX_DIGITS = 18  # digits of a number literal (past that, no value is meaningful here)
# The most digits Python's int() reads from text (sys.set_int_max_str_digits, 4300 by
# default; none before Python 3.10.7): a longer run of digits is refused before it is read.
INT_TEXT_DIGITS = getattr(sys, "get_int_max_str_digits", lambda: 0)() or 10**9
MAX_SOURCE_BYTES = 1 << 20  # a .tile file (a schedule is a few kilobytes)
# The numpy interpreter: about 30 million multiply-adds a second on one core (1024³ took
# 36 s), and each operand is held several times over (storage, values, the oracles').
MAX_INTERPRETED_MACS = 2**31  # about a minute
MAX_INTERPRETED_STEPS = 4096  # block steps (blocks x K steps): 1024 took 36 s at 128x128x64
MAX_INTERPRETED_ELEMENTS = 2**26  # per operand: 8192 x 8192


def size_problems(gemm, schedule, size: tuple[int, int, int], batch: int = 1) -> list[str]:
    """Why `size` (and `batch` products) cannot run in the generated code, or []."""
    problems = [
        p
        for what, value, tile in zip("MNK", size, schedule.block)
        if (p := dim_problem(what, value, tile))
    ]
    if problems:
        return problems
    tiles_m, tiles_n = (-(-value // tile) for value, tile in zip(size[:2], schedule.block))
    blocks = tiles_m * tiles_n
    if blocks > GRID_X_MAX:
        problems.append(
            f"{tiles_m} x {tiles_n} block tiles = {blocks} blocks, more than a grid's x axis "
            f"holds ({GRID_X_MAX})"
        )
    kind, param = schedule.swizzle, schedule.swizzle_param
    raster = {
        "grouped": ("GROUP_M * tiles_n", param * tiles_n),
        "snake": ("GROUP_M * tiles_n", param * tiles_n),
        "zigzag": ("PANEL_N * tiles_m", param * tiles_m),
    }
    if kind in raster and raster[kind][1] > INT_MAX:
        name, value = raster[kind]
        problems.append(
            f"swizzle {kind} {param}: {name} = {value} overflows the kernel's 32-bit block "
            "arithmetic; use a smaller swizzle parameter"
        )
    if kind == "snake" and 2 * tiles_n > INT_MAX:
        problems.append(f"{tiles_n} block columns overflow the snake raster's 32-bit arithmetic")
    if kind == "zigzag" and 2 * tiles_m > INT_MAX:
        problems.append(f"{tiles_m} block rows overflow the zigzag raster's 32-bit arithmetic")
    if batch > GRID_Y_MAX:
        problems.append(
            f"a batch of {batch} products is more than a grid's y axis holds ({GRID_Y_MAX})"
        )
    return problems


def largest_dim(tile: int) -> int:
    """The largest size along a dimension of block tile `tile` that the kernel's ints hold."""
    return (INT_MAX // tile - 1) * tile


def dim_problem(what: str, value: int, tile: int) -> str | None:
    """Why `what` = `value` overflows the kernel's 32-bit indices (see the module's text)."""
    if value <= largest_dim(tile):
        return None
    return (
        f"{what} = {value} is too large for the kernel's 32-bit indices: rounded up to its "
        f"block tile ({tile}) and one tile past it, it must stay at most {INT_MAX}, so "
        f"{what} ≤ {largest_dim(tile)}"
    )


def interpreter_problem(
    block: tuple[int, int, int], size: tuple[int, int, int], batch: int = 1
) -> str | None:
    """Why the numpy interpreter would take too long, or too much memory, at `size`: it
    computes every block tile whole (edge tiles zero-filled), one block step at a time."""
    steps = [-(-value // tile) for value, tile in zip(size, block)]
    block_steps = batch * steps[0] * steps[1] * steps[2]
    macs = block_steps * block[0] * block[1] * block[2]
    m, n, k = size
    largest = batch * max(m * k, k * n, m * n)
    if (
        macs <= MAX_INTERPRETED_MACS
        and block_steps <= MAX_INTERPRETED_STEPS
        and largest <= MAX_INTERPRETED_ELEMENTS
    ):
        return None
    return (
        f"the numpy interpreter would run {block_steps} block steps ({macs:.2e} multiply-adds, "
        f"edge tiles whole) over operands of up to {largest:.2e} elements: past what it "
        f"runs in about a minute ({MAX_INTERPRETED_STEPS} steps, {MAX_INTERPRETED_MACS:.2e} "
        f"multiply-adds, {MAX_INTERPRETED_ELEMENTS:.2e} elements); run it on a GPU, or "
        "choose a smaller --size"
    )
