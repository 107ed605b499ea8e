"""fragment-buffering (`fragment_buffers 2`): A and B fragments double-buffered in registers.

After multi-buffering, every block step starts with a barrier and then loads its
first fragments: the tensor cores wait for the slowest warp and then for shared
memory. With two sets of fragment registers, the loads of fragment step kk + 1 are
issued before the mma of step kk, and the barrier moves to the last fragment step
of a block step, where it sits between the last loads from this slot and the first
loads from the next; the mma of the last fragment step (its fragments already in
registers) then overlaps the barrier and the next slot's first loads:

    wait; barrier; load fragments (kt = 0, kk = 0) -> set 0
    for kt < T:
      for kk < KS (unrolled):
        if kk == 0:       if kt + S - 1 < T: copy step kt + S - 1 -> slot (kt + S - 1) % S
                          commit
        if kk == KS - 1:  wait until step kt + 1 landed; barrier
        load fragments of fragment step kk + 1 (or kk = 0 of slot kt + 1) -> set (kk + 1) % 2
        mma with set kk % 2

The copies are still issued S - 1 steps ahead, into the slot read in step kt - 1,
whose last reads all came before that step's barrier. KS = BK / mma.K must be even,
so that the set of fragment step kk is kk % 2 in every block step: a constant after
unrolling, so the fragments stay in registers.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir.expr import Const, Var, add, floordiv, mod, mul, substitute
from ..ir.nodes import (
    K_BLOCKS,
    K_FRAGMENTS,
    AsyncCommit,
    AsyncWait,
    Barrier,
    For,
    FragRef,
    If,
    KernelIR,
    LoadFrag,
    Mma,
    SharedTile,
    Stmt,
    is_loop,
    map_body,
    walk,
)

#: Which index of a fragment array the second set extends: A's along i, B's along j.
_SET_AXIS = {"matrix_a": 0, "matrix_b": 1}


def fragment_buffering(kernel: KernelIR) -> KernelIR:
    counts = {f.name: f.count for f in kernel.fragments if f.role in _SET_AXIS}
    axes = {f.name: _SET_AXIS[f.role] for f in kernel.fragments if f.role in _SET_AXIS}
    body = []
    for stmt in kernel.body:
        if is_loop(stmt, K_BLOCKS):
            body.extend(_buffered(stmt, kernel, counts, axes))
        else:
            body.append(stmt)
    fragments = tuple(
        replace(f, count=_doubled(f.count, axes[f.name])) if f.name in axes else f
        for f in kernel.fragments
    )
    return replace(kernel, body=tuple(body), fragments=fragments)


def _doubled(count: tuple[int, int], axis: int) -> tuple[int, int]:
    return (2 * count[0], count[1]) if axis == 0 else (count[0], 2 * count[1])


def _in_set(ref: FragRef, which, counts, axes) -> FragRef:
    """`ref` in fragment set `which` (0 or 1, an expression of kk)."""
    if ref.name not in axes:
        return ref
    size = Const(counts[ref.name][axes[ref.name]])
    shift = mul(which, size)
    if axes[ref.name] == 0:
        return replace(ref, i=add(shift, ref.i))
    return replace(ref, j=add(shift, ref.j))


def _buffered(loop: For, kernel: KernelIR, counts, axes):
    stages = kernel.schedule.stages
    steps = next(x for x in loop.body if is_loop(x, K_FRAGMENTS))
    kt, kk = Var(loop.var), Var(steps.var)
    waits = [x for x in loop.body if isinstance(x, AsyncWait)]
    barrier = next(x for x in loop.body if isinstance(x, Barrier))
    issue: list[Stmt] = [x for x in loop.body if isinstance(x, (If, AsyncCommit))]
    assert isinstance(steps.stop, Const)  # lowering's K_FRAGMENTS loop runs to a constant
    frag_steps = steps.stop.value
    staged = {
        x.src.buffer
        for x in walk(steps.body)
        if isinstance(x, LoadFrag) and isinstance(x.src, SharedTile)
    }
    names = ", ".join(sorted(staged))

    def loads_of(step_kt, step_kk, which):
        """The fragment loads of fragment step (step_kt, step_kk), into set `which`."""

        def fn(stmt):
            if isinstance(stmt, LoadFrag) and isinstance(stmt.src, SharedTile):
                src = stmt.src
                offset = tuple(substitute(e, {steps.var: step_kk}) for e in src.offset)
                src = replace(src, offset=offset, slot=mod(step_kt, Const(stages)))
                return replace(stmt, src=src, frag=_in_set(stmt.frag, which, counts, axes))
            return stmt

        return map_body(_loads(steps.body), fn)

    def mmas_of(which):
        def fn(stmt):
            if isinstance(stmt, Mma):
                return replace(
                    stmt,
                    a=_in_set(stmt.a, which, counts, axes),
                    b=_in_set(stmt.b, which, counts, axes),
                )
            return stmt

        return map_body(_computes(steps.body), fn)

    first = (
        *waits,
        replace(
            barrier,
            reason=f"RAW: step 0's tiles in {names} must have landed for every thread "
            "before any warp loads the first fragments",
        ),
        *loads_of(Const(0), Const(0), Const(0)),
    )
    next_kk = add(kk, Const(1))
    at_last: tuple[Stmt, ...] = (
        *waits,
        replace(
            barrier,
            reason=f"RAW: step kt + 1's tiles in {names} must have landed for every thread "
            "before any warp loads its first fragments (below); WAR: every warp must be "
            f"done reading slot kt % {stages} before step kt + 1's copies overwrite it",
        ),
    )
    body = (
        If(kk, "==", Const(0), tuple(issue)),
        If(kk, "==", Const(frag_steps - 1), at_last),
        *loads_of(
            add(kt, floordiv(next_kk, Const(frag_steps))),
            mod(next_kk, Const(frag_steps)),
            mod(next_kk, Const(2)),
        ),
        *mmas_of(mod(kk, Const(2))),
    )
    new_steps = replace(
        steps,
        body=body,
        comment="fragment steps of one block step; the next step's fragments load "
        "while this one computes (fragment_buffers 2)",
    )
    return (*first, replace(loop, body=(new_steps,)))


def _loads(body) -> tuple:
    """The statements of `body` that load fragments (loops around them kept)."""
    return tuple(x for x in body if any(isinstance(y, LoadFrag) for y in walk((x,))))


def _computes(body) -> tuple:
    return tuple(x for x in body if not any(isinstance(y, LoadFrag) for y in walk((x,))))
