"""warp-coarsening (`coarsen CM x CN`): each warp computes CM x CN fragments.

Fewer warps, more work each: the block's BM x BN tile is split into
(BM / (MMA_M·CM)) x (BN / (MMA_N·CN)) warps. Per fragment step a warp loads its
CM fragments of A and CN of B once and reuses them across CM·CN mma ops:

    load_frag a[0][0] <- As + (wm * MMA_M, ..)
    load_frag b[0][0] <- Bs + (.., wn * MMA_N)
    mma acc[0][0] += a[0][0] * b[0][0]
        ==>
    for i < CM: load_frag a[i][0] <- As + ((wm * CM + i) * MMA_M, ..)
    for j < CN: load_frag b[0][j] <- Bs + (.., (wn * CN + j) * MMA_N)
    for i, j:   mma acc[i][j] += a[i][0] * b[0][j]

Everything that handles C (the accumulator's fill, load and store, with any
staging) runs once per fragment: each such run of statements is wrapped in one
`for i, j` nest, and a per-warp staging slot gets a `__syncwarp` at the end of
each turn, since the next fragment reuses it.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir.expr import Const, Var, substitute
from ..ir.nodes import (
    Barrier,
    Copy,
    EpilogueFrag,
    Fill,
    For,
    FragRef,
    KernelIR,
    LoadFrag,
    Mma,
    StoreFrag,
    map_body,
)

I, J = Var("i"), Var("j")


def warp_coarsening(kernel: KernelIR) -> KernelIR:
    cm, cn = kernel.schedule.coarsen
    wm_to = {"wm": Var("wm") * cm + I}
    wn_to = {"wn": Var("wn") * cn + J}
    loc = kernel.schedule.loc("coarsen")
    a, b, acc = (kernel.fragment_of(r).name for r in ("matrix_a", "matrix_b", "accumulator"))

    def tile(t, bindings):
        return replace(t, offset=tuple(substitute(e, bindings) for e in t.offset))

    def inner(stmt):
        """Fragment loads and mma ops inside the K loop."""
        if isinstance(stmt, LoadFrag) and stmt.frag.name == a:
            return For(
                "i",
                Const(0),
                Const(cm),
                1,
                (replace(stmt, frag=FragRef(a, I), src=tile(stmt.src, wm_to)),),
                unroll=True,
            )
        if isinstance(stmt, LoadFrag) and stmt.frag.name == b:
            return For(
                "j",
                Const(0),
                Const(cn),
                1,
                (replace(stmt, frag=FragRef(b, Const(0), J), src=tile(stmt.src, wn_to)),),
                unroll=True,
            )
        if isinstance(stmt, Mma):
            mma = Mma(FragRef(acc, I, J), FragRef(a, I), FragRef(b, Const(0), J))
            return For(
                "i",
                Const(0),
                Const(cm),
                1,
                (For("j", Const(0), Const(cn), 1, (mma,), unroll=True),),
                unroll=True,
            )
        return stmt

    body: list = []
    run: list = []

    def flush():
        # Block barriers at the edges of a run fence the whole run, not each fragment.
        lead = []
        while run and isinstance(run[0], Barrier) and run[0].scope == "block":
            lead.append(run.pop(0))
        trail = []
        while run and isinstance(run[-1], Barrier) and run[-1].scope == "block":
            trail.insert(0, run.pop())
        body.extend(lead)
        if run:
            body.append(_per_fragment(tuple(run), kernel, {**wm_to, **wn_to}, loc))
            run.clear()
        body.extend(trail)

    for stmt in kernel.body:
        if isinstance(stmt, For):
            flush()
            body.append(replace(stmt, body=map_body(stmt.body, inner)))
        else:
            run.append(stmt)
    flush()
    warps = (kernel.warps[0] // cm, kernel.warps[1] // cn)
    count = warps[0] * warps[1]
    buffers = tuple(replace(b, slots=count) if b.per_warp else b for b in kernel.buffers)
    fragments = tuple(
        replace(f, count={"matrix_a": (cm, 1), "matrix_b": (1, cn)}.get(f.role, (cm, cn)))
        for f in kernel.fragments
    )
    return replace(kernel, warps=warps, buffers=buffers, fragments=fragments, body=tuple(body))


def _per_fragment(run, kernel: KernelIR, bindings, loc):
    """Wrap a run of accumulator statements (and its staging) in `for i, j`."""
    acc = kernel.fragment_of("accumulator").name

    def rebind(stmt):
        if isinstance(stmt, (Fill, LoadFrag, StoreFrag, EpilogueFrag)) and stmt.frag.name == acc:
            stmt = replace(stmt, frag=FragRef(acc, I, J))

        def moved(t):
            return replace(t, offset=tuple(substitute(e, bindings) for e in t.offset))

        match stmt:
            case Copy():
                return replace(stmt, src=moved(stmt.src), dst=moved(stmt.dst))
            case LoadFrag():
                return replace(stmt, src=moved(stmt.src))
            case StoreFrag():
                return replace(stmt, dst=moved(stmt.dst))
            case EpilogueFrag():
                return replace(stmt, tile=moved(stmt.tile))
        return stmt

    body = tuple(rebind(s) for s in run)
    staged = any(isinstance(s, Copy) and s.by == "warp" for s in body)
    if staged:
        body += (
            Barrier(
                "warp",
                "WAR: the lanes' use of the warp's Cs slot must finish before "
                "the next fragment's turn overwrites it",
                loc,
            ),
        )
    cm, cn = kernel.schedule.coarsen
    return For(
        "i",
        Const(0),
        Const(cm),
        1,
        (For("j", Const(0), Const(cn), 1, body, unroll=True),),
        unroll=True,
        comment="once per fragment of the warp",
    )
