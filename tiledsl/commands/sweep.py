"""The feasibility sweep as a table (`tiledsl check --sweep`): the S4000 write-up's
Tables 1-3, computed by tiledsl.models.feasibility."""

from __future__ import annotations

from ..ir.nodes import KernelIR
from ..models.feasibility import SweepRow, staging_dtype
from .tables import text_table


def render_sweep(kernel: KernelIR, rows: list[SweepRow], reserve: int = 0) -> str:
    sched, target = kernel.schedule, kernel.target
    m, n, k = sched.mma
    cm, cn = sched.coarsen
    staging = staging_dtype(sched)
    out = [
        f"  feasibility sweep, the S4000 write-up's method (its Tables 1-3) on {target.name}",
        f"    {cm * cn} MMAs of {m}x{n}x{k} per warp; registers: accumulators + one A and "
        f"{cn} B fragment{'s' if cn != 1 else ''} per warp, one register per element"
        + (f", plus {reserve} reserved per thread" if reserve else ""),
        f"    shared memory: A+B tiles of one {k}-deep K slice (no padding, one stage) "
        f"against C staging ({staging}, one fragment per warp); the union takes the larger",
    ]
    table = []
    for r in rows:
        table.append(
            [
                f"  {m}",
                str(n),
                str(k),
                str(cm * cn),
                str(r.blocks_per_mp),
                str(r.threads),
                str(r.warp_count),
                str(r.registers_per_thread),
                str(r.registers_per_block),
                str(r.ab_bytes),
                str(r.c_bytes),
                str(r.smem_bytes),
                "TRUE" if r.feasible else "FALSE",
                ", ".join(r.binding),
            ]
        )
    headers = [
        "  MMA_M",
        "MMA_N",
        "MMA_K",
        "MMA/warp",
        "blocks/MP",
        "threads/block",
        "warps/block",
        "regs/thread",
        "regs/block",
        "A+B bytes",
        "C bytes",
        "smem/block",
        "feasible",
        "over the limit",
    ]
    out += text_table(headers, table, right=set(range(14)) - {0, 12, 13}, indent="  ")
    lim = [
        f"{target.max_threads_per_block} threads/block",
        f"{target.max_threads_per_sm} threads/MP",
        f"{target.registers_per_sm} registers/MP",
        f"{target.smem_per_sm} bytes shared/MP",
    ]
    if target.max_blocks_per_sm:
        lim.append(f"{target.max_blocks_per_sm} blocks/MP")
    out.append("    limits: " + ", ".join(lim))
    return "\n".join(out) + "\n"
