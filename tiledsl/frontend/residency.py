"""The checks of `blocks_per_sm N`: N blocks of the kernel must fit one multiprocessor.

`blocks_per_sm N` emits `__launch_bounds__(THREADS, N)`: ptxas caps each thread's
registers so that N blocks are resident at once (tiledsl.models.registers.register_cap).
Without it ptxas gives each thread what it likes, which may leave the file to one or two
blocks: the direct path's 256-thread blocks take 96 registers, two blocks a multiprocessor
(whether more warps, each with its loads in flight, read faster there was measured on an
H100: they did not; docs/performance.md, the twelfth session). The registers are the
only limit ptxas can bend: the threads, the shared memory and the block slots of N blocks
are checked here against the target, with the directive's location, before anything is
built; a cap too low for the fragments is refused as the fragments' own check refuses a
block too large (tiledsl.frontend.analysis).
"""

from __future__ import annotations

from ..errors import Collector
from ..ir.schedule import Schedule
from ..ir.targets import Target


def check_blocks_per_sm(
    sched: Schedule, target: Target, threads: int, smem_bytes: int | None, errs: Collector
) -> None:
    n = sched.blocks_per_sm
    if n == 1:
        return
    loc = sched.loc("blocks_per_sm")
    if sched.warp_specialize or sched.persistent:
        what = "warp_specialize" if sched.warp_specialize else "persistent"
        errs.add(
            loc,
            f"blocks_per_sm {n} with {what}: a persistent kernel runs one block per "
            "multiprocessor, each looping over tiles (and a warp-specialized one splits the "
            "whole register file between its producer and consumers with setmaxnreg)",
            f"drop `blocks_per_sm`, or drop `{what}`",
        )
        return
    if target.vendor != "cuda":
        errs.add(
            loc,
            f"blocks_per_sm {n} on {target.name}: not built for MUSA (the S4000 write-up "
            "does not say how mcc reads __launch_bounds__'s second argument)",
            "drop `blocks_per_sm` for MUSA",
        )
        return
    limits = [
        ("threads", threads, target.max_threads_per_sm),
        ("bytes of shared memory", smem_bytes or 0, target.smem_per_sm),
    ]
    for what, per_block, per_sm in limits:
        if per_block and n * per_block > per_sm:
            errs.add(
                loc,
                f"blocks_per_sm {n}: {n} blocks of {per_block} {what} need {n * per_block}; "
                f"a {target.name} multiprocessor has {per_sm}",
                f"ask for at most {per_sm // per_block} blocks per multiprocessor, or use "
                "smaller blocks",
            )
            return
    if target.max_blocks_per_sm and n > target.max_blocks_per_sm:
        errs.add(
            loc,
            f"blocks_per_sm {n}: a {target.name} multiprocessor holds at most "
            f"{target.max_blocks_per_sm} blocks",
            f"write `blocks_per_sm {target.max_blocks_per_sm}` or fewer",
        )
