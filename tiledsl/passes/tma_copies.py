"""tma-copies (`copy tma` without `warp_specialize`): the multi-buffered pipeline with its
tiles loaded by the Tensor Memory Accelerator, every warp still computing.

The kernel before this pass is a `stages`-deep pipeline whose copies are the block's
(sync copies, step q into slot q % STAGES, `lead` steps ahead of the compute) and whose K
step starts with a block barrier (RAW: the step's tiles are in; WAR: every warpgroup is
done with the slot the copies overwrite). This pass keeps that shape and changes who
copies and how the compute learns the tiles are in:

    thread 0: for s < lead: expect_tx full[s] STAGE_BYTES; copy.tma As[s], Bs[s] on full[s]
    for kt:
      barrier.block                           WAR: every warpgroup's wgmmas of step
                                              kt - (STAGES - lead) have retired
      thread 0: expect_tx full[q % S], copy.tma into slot q % S     (q = kt + lead)
      wait full[kt % S] parity kt / S % 2     RAW: step kt's bytes have landed
      wgmmas on slot kt % S; commit; wait
    wait 0; store C from the registers

It is Hopper's first rung (`examples/hopper/tma.tile`): TMA and mbarriers, no producer
warpgroup. The expect_tx and the copies are one thread's (tiledsl.ir.nodes.BLOCK_ELECTED:
the emitter wraps them in `if (threadIdx.x == 0)`); the wait is every thread's. The kernel
the pass returns has been proven by the handoff proof (tiledsl.models.mbarrier_hazards),
which traces the block's warpgroups in lock step at the block barriers, and its
`sync_report` holds each handoff statement's decision.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir.expr import Const, Var
from ..ir.nodes import (
    K_BLOCKS,
    Barrier,
    BarrierRef,
    Copy,
    ExpectTx,
    GlobalTile,
    KernelIR,
    MBarrier,
    MmaFence,
    SharedTile,
    Stmt,
    TmaLoad,
    Wait,
    is_loop,
    map_body,
    tile_loads,
)
from ..lowering.edges import guard_c_stores
from ..models import mbarrier_hazards


def tma_copies(kernel: KernelIR) -> KernelIR:
    stages = Const(kernel.schedule.stages, "STAGES")

    def by_tma(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
        """A run of the block's copies into one slot: thread 0 announces their bytes on
        that slot's `full` barrier, then the TMA unit copies them."""
        copies = [s for s in body if _block_copy(s)]
        if not copies:
            return body
        tiles = tile_loads(tuple(copies))
        bar = BarrierRef("full", tiles[0][0].slot)
        loads = [TmaLoad(d, g, bar) for d, g in tiles]
        step_bytes = sum(kernel.tile_bytes(d) for d, _ in tiles)
        first = body.index(copies[0])
        rest = tuple(s for s in body if not _block_copy(s))
        announce = ExpectTx(bar, step_bytes, "this step's tiles, by TMA")
        return (*rest[:first], announce, *loads, *rest[first:])

    def convert(stmt):
        for field in ("then", "body"):
            inner = getattr(stmt, field, None)
            if isinstance(inner, tuple) and any(_block_copy(s) for s in inner):
                stmt = replace(stmt, **{field: by_tma(inner)})
        if is_loop(stmt, K_BLOCKS):
            stmt = replace(stmt, body=_wait_before_compute(stmt.body, Var(stmt.var), stages))
        return stmt

    body = map_body(kernel.body, convert)
    tma = replace(
        kernel,
        body=body,
        mbarriers=(
            MBarrier(
                "full",
                kernel.schedule.stages,
                1,
                "slot s's tiles have landed: thread 0's expect_tx and the TMA bytes",
            ),
        ),
    )
    # TMA loads zero-fill partial tiles; C's stores are guarded for them
    return mbarrier_hazards.proven(guard_c_stores(tma))


def _wait_before_compute(body: tuple[Stmt, ...], kt: Var, stages: Const) -> tuple[Stmt, ...]:
    """The K step's compute waits for its tiles on `full`: step kt is in slot kt % S, in
    that barrier's phase kt / S."""
    wait = Wait(BarrierRef("full", kt % stages), kt // stages % 2, "this step's tiles have landed")
    at = next(i for i, s in enumerate(body) if isinstance(s, MmaFence))
    # the barrier keeps the WAR half of its reason: the RAW half is the wait's now
    body = tuple(
        replace(s, reason=s.reason.split("; ", 1)[-1].replace("the copies", "the TMA copies"))
        if isinstance(s, Barrier) and s.scope == "block" and s.reason.startswith("RAW")
        else s
        for s in body
    )
    return (*body[:at], wait, *body[at:])


def _block_copy(stmt) -> bool:
    return (
        isinstance(stmt, Copy)
        and stmt.by == "block"
        and isinstance(stmt.dst, SharedTile)
        and isinstance(stmt.src, GlobalTile)
    )
