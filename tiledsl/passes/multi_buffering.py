"""multi-buffering (`stages S ≥ 2`, `copy async|sync N`): the K loop becomes a pipeline.

The block tiles of A and B get S slots. Copies run S - 1 steps ahead of the
compute, so that while step kt is computed the tiles of the next S - 1 steps are
on their way (with `copy async`, by cp.async, without the registers):

    prologue:  for s < S - 1:   if s < T: copy tiles of step s -> slot s
                                 commit
    for kt < T:                  wait until at most S - 2 groups are in flight
                                 barrier   RAW: step kt's tiles landed, for every thread
                                           WAR: every warp is done with slot (kt - 1) % S
                                 if kt + S - 1 < T:
                                     copy tiles of step kt + S - 1 -> slot (kt + S - 1) % S
                                 commit
                                 compute step kt from slot kt % S
    (T = the number of K steps; a group is committed every step, empty or not, so
     that "S - 2 pending" always means "step kt has landed")

One barrier per step instead of smem-tiling's two. `copy sync` keeps the same
shape with plain vector copies and no commit/wait.

wgmma (`mma m64nNk16`) reads its tiles asynchronously: a step's wgmmas are one group
(fence, wgmmas, commit), and from 3 stages on one group is left in flight
(`wgmma.wait_group 1`) so that the tensor cores go on while the next step is set up.
A slot is then read until the end of the next step, so copies run S - 2 steps ahead:

    for kt < T:                  wait until at most S - 3 copy groups are in flight
                                 barrier   RAW as above; WAR: every warpgroup's wgmmas of
                                           step kt - 2 have retired (each waited, then came here)
                                 if kt + S - 2 < T: copy step kt + S - 2 -> slot (kt + S - 2) % S
                                 commit
                                 fence; wgmmas of step kt from slot kt % S; commit
                                 wait until at most 1 wgmma group is in flight
    wait until no wgmma group is in flight     (before the accumulators are read)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..ir.expr import Const, Var, substitute
from ..ir.nodes import (
    K_BLOCKS,
    AsyncCommit,
    AsyncWait,
    Barrier,
    Copy,
    For,
    If,
    KernelIR,
    LoadFrag,
    MmaCommit,
    MmaFence,
    MmaWait,
    SharedTile,
    Stmt,
    is_loop,
    map_body,
    walk,
)
from .load_order import copies_in, ordered, staged_tile


def multi_buffering(kernel: KernelIR) -> KernelIR:
    s = kernel.schedule
    stages, is_async = s.stages, s.copy_mode == "async"
    body = []
    for stmt in kernel.body:
        if is_loop(stmt, K_BLOCKS):
            body.extend(_pipeline(stmt, stages, is_async, kernel))
            if kernel.schedule.mma_depth:
                body.append(MmaWait(0))
        else:
            body.append(stmt)
    staged = {
        s.dst.buffer
        for s in walk(kernel.body)
        if isinstance(s, Copy) and s.by == "block" and isinstance(s.dst, SharedTile)
    }
    buffers = tuple(replace(b, slots=stages) if b.name in staged else b for b in kernel.buffers)
    return replace(kernel, body=tuple(body), buffers=buffers)


def _pipeline(loop: For, stages: int, is_async: bool, kernel: KernelIR):
    loc = kernel.schedule.loc("stages")
    kt, steps = Var(loop.var), loop.stop
    copies = copies_in(loop.body)
    compute: Sequence[Stmt] = [c for c in loop.body if not isinstance(c, (Copy, Barrier, If))]
    a_name, order = kernel.gemm.a.name, kernel.schedule.load_order
    names = ", ".join(sorted({staged_tile(c).buffer for c in copies}))

    def copies_of(step, slot):
        out = []
        for c in copies:
            src = replace(
                c.src, origin=tuple(substitute(e, {loop.var: step}) for e in c.src.origin)
            )
            dst = replace(c.dst, slot=slot)
            out.append(replace(c, src=src, dst=dst, mode="async" if is_async else "sync"))
        return ordered(out, a_name, order, step)

    def read_slot(stmt):
        if (
            isinstance(stmt, LoadFrag)
            and isinstance(stmt.src, SharedTile)
            and stmt.src.buffer in {c.dst.buffer for c in copies}
        ):
            return replace(stmt, src=replace(stmt.src, slot=kt % stages))
        return stmt

    commit = (AsyncCommit(),) if is_async else ()
    depth = kernel.schedule.mma_depth
    lead = stages - 1 - depth  # steps the copies run ahead of the compute
    s_var = Var("s")
    prologue = For(
        "s",
        Const(0),
        Const(lead),
        1,
        (If(s_var, "<", steps, copies_of(s_var, s_var)), *commit),
        unroll=True,
        comment=f"pipeline prologue: the first {lead} step(s) in flight",
    )
    ahead = kt + lead
    wgmma = kernel.schedule.path.reads_tiles_async
    reader = "warpgroup's wgmmas" if wgmma else "warp"
    barrier = Barrier(
        "block",
        f"RAW: step kt's tiles in {names} must have landed for every thread "
        f"before any warp reads them; WAR: every {reader} must be done with the slot "
        f"the copies below overwrite (read in step kt - {1 + depth})",
        loc,
    )
    compute = tuple(map_body(tuple(compute), read_slot))
    if wgmma:  # one asynchronous group per step (see the module's text)
        compute = (MmaFence(), *compute, MmaCommit(), MmaWait(depth))
    steady = (
        *((AsyncWait(lead - 1),) if is_async else ()),
        barrier,
        If(ahead, "<", steps, copies_of(ahead, ahead % stages)),
        *commit,
        *compute,
    )
    return prologue, replace(
        loop, body=steady, comment=f"block steps along K, {stages}-stage pipeline"
    )
