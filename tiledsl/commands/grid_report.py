"""`tiledsl check --size` for a persistent kernel: how its grid shares the work at that size.

A persistent kernel runs as many blocks (or clusters) as the GPU holds, each looping over
tiles; what a size costs it depends on how its tiles fall into rounds of that grid, and on
what the kernel does with a last round that leaves some of it idle (`persistent`,
`stream_k`, `stream_k_aligned`, `split_k S`). The report evaluates the kernel's own
expressions (tiledsl.ir.grid: the tile counts, `stream_k_split`, `stream_k_piece`), the
ones the emitter prints and the interpreter runs, for every block of the grid:

    the grid at 2048x4096x11008 on 132 SMs (the H200's; no GPU here)
      128 tiles (of 2 x 1 blocks' clusters) on 66 clusters (if the GPU keeps them all
      resident): 1 round of whole tiles, then a last round of 62 tiles (94 % of the grid)
      cut along K into 66 shares of 161-162 K steps (172 a tile), each cluster's tiles
      last first; 64 clusters hand a partial sum over
"""

from __future__ import annotations

from ..ir.expr import Const, Var, evaluate
from ..ir.grid import (
    SK_MAX_FILL,
    grid_split_steps,
    grid_vars,
    padded_split_steps,
    stream_k_piece,
    stream_k_split,
    stream_k_tiles,
)
from ..ir.nodes import KernelIR

#: The SM count assumed where no GPU is visible: the H200's (sm_90), the GPU tiledsl is
#: measured on.
DEFAULT_SMS, DEFAULT_GPU = 132, "the H200's"


def visible_sms() -> tuple[int, str]:
    """(the SM count, where it comes from): the GPU's, or DEFAULT_SMS without one."""
    try:
        from ..gpu.runtime import multiprocessor_count

        return multiprocessor_count(), "this GPU's"
    except Exception:  # no CuPy or no device: the report still holds for the H200
        return DEFAULT_SMS, f"{DEFAULT_GPU}; no GPU here"


def grid_lines(kernel: KernelIR, size: tuple[int, int, int], sms: int, whose: str) -> list[str]:
    """The report's lines for a persistent or split kernel at `size` on `sms` SMs (none
    otherwise)."""
    if kernel.grid_split:
        return _split_lines(kernel, size, sms, whose)
    if not kernel.persistent:
        return []
    env, k_steps = _at_size(kernel, size)
    clustered = kernel.cluster_size > 1
    tiles = env["ctiles_m"] * env["ctiles_n"] if clustered else env["tiles_m"] * env["tiles_n"]
    blocks = sms // kernel.cluster_size  # the launch may hold fewer clusters (occupancy)
    unit = "cluster" if clustered else "block"
    cm, cn = kernel.cluster
    what = f"tiles (of {cm} x {cn} blocks' clusters)" if clustered else "tiles"
    resident = " (if the GPU keeps them all resident)" if clustered else ""
    head = f"{tiles} {what} on {blocks} {unit}s{resident}: "
    shown = "x".join(map(str, size))
    out = [f"  the grid at {shown} on {sms} SMs ({whose})"]
    if tiles == 0 or blocks == 0:
        return [*out, f"    {head}nothing to do", ""]
    rounds, last = divmod(tiles, blocks)
    fill = f"{last} tiles ({round(100 * last / blocks)} % of the grid)"
    if not kernel.stream_k or last == 0:
        if last == 0:
            text = f"{_rounds(rounds)} of whole tiles, every {unit} busy in each"
        else:
            text = (
                f"{_rounds(rounds)} of whole tiles, then a last round of {fill}: "
                f"{blocks - last} {unit}s idle in it"
            )
        return [*out, f"    {head}{text}", ""]
    return [*out, f"    {head}{_shared(kernel, tiles, blocks, k_steps, unit, fill)}", ""]


def _at_size(kernel: KernelIR, size: tuple[int, int, int]) -> tuple[dict, int]:
    """The kernel's grid names at the caller's M x N x K, and a tile's K steps."""
    env = kernel.gemm.as_written.size_env(*size)
    for name, e in grid_vars(kernel).items():
        env[name] = int(evaluate(e, env))
    return env, -(-int(evaluate(kernel.gemm.k, env)) // kernel.schedule.block[2])


def _split_lines(kernel: KernelIR, size: tuple[int, int, int], sms: int, whose: str) -> list[str]:
    """`split_k S`: the tiles' slices, each a block, from the kernel's own expressions
    (tiledsl.ir.grid.grid_split_steps)."""
    env, k_steps = _at_size(kernel, size)
    slices = kernel.grid_split
    tiles = env["tiles_m"] * env["tiles_n"]
    # the direct path's slices are whole rounds of its K teams (tiledsl.passes.split_k)
    direct = kernel.schedule.direct
    steps_of = (
        padded_split_steps(Const(k_steps), slices, kernel.schedule.warps_k)
        if direct
        else grid_split_steps(Const(k_steps), slices)
    )
    widths, last = set(), 0
    for pid in range(slices):  # tile 0's slices: every tile is cut the same way
        at = {"pid": pid}
        for name, e in steps_of.items():
            at[name] = int(evaluate(e, at))
        widths.add(at["k_hi"] - at["k_lo"])
        last = at["k_hi"]
    steps = f"{min(widths)}" if len(widths) == 1 else f"{min(widths)}-{max(widths)}"
    past = f"; {last - k_steps} past K, read as zeros" if last > k_steps else ""
    shown = "x".join(map(str, size))
    placed = (
        f"the hardware places each tile's {slices} slices together as a cluster ({tiles} "
        "clusters) as earlier ones finish; the slices wait only for each other, within "
        "their cluster"
        if kernel.split_cluster
        else "the hardware hands them to the SMs as earlier ones finish, and no block waits "
        "for another"
    )
    return [
        f"  the grid at {shown} on {sms} SMs ({whose})",
        f"    {tiles} tiles in {slices} slices of {steps} K steps ({k_steps} a tile{past}): "
        f"{tiles * slices} blocks, {tiles * slices / sms:.2f} per SM; {placed}",
        "",
    ]


def _rounds(count: int) -> str:
    return f"{count} round{'' if count == 1 else 's'}"


def _shared(kernel: KernelIR, tiles: int, blocks: int, k_steps: int, unit: str, fill: str) -> str:
    """What a stream-K kind does with the last round, from its own expressions."""
    aligned = kernel.aligned
    shares, handing = [], 0
    sk_tiles = 0
    for pid in range(blocks):
        env: dict = {"tiles": tiles, "blocks": blocks, "pid": pid, "K_STEPS": k_steps}
        for name, e in stream_k_split(Var("K_STEPS"), kernel.split_k, aligned).items():
            env[name] = evaluate(e, env)
        sk_tiles = env["sk_tiles"]
        start, stop = (evaluate(e, env) for e in stream_k_tiles())
        share, hands = 0, False
        for u in range(start, stop):
            at = {**env, "u": u}
            for name, e in stream_k_piece(aligned).items():
                at[name] = evaluate(e, at)
            share += at["k_hi"] - at["k_lo"]
            # a piece that does not hold its tile's owning step hands its partial sum over
            hands |= at["k_hi"] < k_steps if aligned else at["k_lo"] > 0
        shares += [share] if share else []
        handing += hands
    rounds = (tiles - sk_tiles) // blocks
    then = f"{_rounds(rounds)} of whole tiles, then a last round of " if rounds else ""
    if sk_tiles == 0:  # the last round runs whole
        why = (
            f"{kernel.split_k} slices of each do not fit the grid"
            if kernel.split_k
            else f"above SK_MAX_FILL, {SK_MAX_FILL} %"
        )
        return (
            f"{_rounds(rounds)} of whole tiles, then a last round of {fill} run whole "
            f"({why}): {blocks - tiles % blocks} {unit}s idle in it"
        )
    low, high = min(shares), max(shares)
    steps = f"{low}" if low == high else f"{low}-{high}"
    cut = (
        f"cut into {kernel.split_k} slices of {steps} K steps"
        if kernel.split_k
        else f"cut along K into {len(shares)} shares of {steps} K steps"
    )
    order = f", each {unit}'s tiles last first" if aligned else ""
    idle = blocks - len(shares)
    return (
        f"{then}{fill} {cut} ({k_steps} a tile){order}; {handing} {unit}s hand a partial sum "
        "over" + (f"; {idle} {unit}s idle" if idle else "")
    )
