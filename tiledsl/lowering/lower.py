"""Lowering: a checked kernel becomes the naive IR form of the spec.

Every warp computes one mma.M x mma.N fragment of C, loading its A and B
fragments straight from global memory (the write-ups' v1). The K loop is already
split into block steps (`kt`, BK wide) and fragment steps (`kk`, mma.K wide) so
that smem-tiling only has to add copies at the top of the `kt` body.

    fill acc[0][0] = 0                                  (C = ...;  C += ... loads C)
    for kt in [0, K / BK):
      for kk in [0, BK / MMA_K) unroll:
        load_frag a[0][0] <- A @ (bm * BM, kt * BK) + (wm * MMA_M, kk * MMA_K)
        load_frag b[0][0] <- B @ (kt * BK, bn * BN) + (kk * MMA_K, wn * MMA_N)
        mma acc[0][0] += a[0][0] * b[0][0]
    store_frag C @ (bm * BM, bn * BN) + (wm * MMA_M, wn * MMA_N) <- acc[0][0]

With `epilogue_via shared` (the default for f16 C) the load and store of C go
through a per-warp shared-memory tile instead (tiledsl.lowering.staging).
"""

from __future__ import annotations

from typing import cast

from ..frontend.analysis import Analysis
from ..ir.epilogue import Epilogue
from ..ir.expr import Const, Var, ceil_div
from ..ir.gemm import Layout
from ..ir.nodes import (
    K_BLOCKS,
    K_FRAGMENTS,
    EpilogueFrag,
    Fill,
    For,
    Fragment,
    FragRef,
    GlobalTile,
    KernelIR,
    LoadFrag,
    Mma,
    StoreFrag,
)
from ..ir.schedule import named_constants
from .staging import stage_epilogue

BM_VAR, BN_VAR, WM_VAR, WN_VAR = Var("bm"), Var("bn"), Var("wm"), Var("wn")


def lower(analysis: Analysis) -> KernelIR:
    g, s = analysis.gemm, analysis.schedule
    c = named_constants(s)
    kt, kk = Var("kt"), Var("kk")
    mm, mn, mk = s.mma
    a_tile = GlobalTile(
        g.a.name, (BM_VAR * c["BM"], kt * c["BK"]), (WM_VAR * c["MMA_M"], kk * c["MMA_K"]), mm, mk
    )
    b_tile = GlobalTile(
        g.b.name, (kt * c["BK"], BN_VAR * c["BN"]), (kk * c["MMA_K"], WN_VAR * c["MMA_N"]), mk, mn
    )
    c_tile = GlobalTile(
        g.c.name,
        (BM_VAR * c["BM"], BN_VAR * c["BN"]),
        (WM_VAR * c["MMA_M"], WN_VAR * c["MMA_N"]),
        mm,
        mn,
    )
    a, b, acc = FragRef("a"), FragRef("b"), FragRef("acc")
    # The direct path (mma.sync, stages 0: tiledsl.emit.mma_sync) guards its loads and its
    # stores of C, element by element where it must: it runs every size itself.
    direct = s.direct
    fragments = (
        # A fragment reads its tile in the layout the operand is stored in (which the
        # analysis accepted).
        Fragment("a", "matrix_a", s.mma, g.a.dtype, cast(Layout, g.a.layout)),
        Fragment("b", "matrix_b", s.mma, g.b.dtype, cast(Layout, g.b.layout)),
        Fragment("acc", "accumulator", s.mma, s.accumulate, None),
    )
    k_steps = For(
        "kk",
        Const(0),
        Const(s.block[2] // mk),
        1,
        (LoadFrag(a, a_tile, guard=direct), LoadFrag(b, b_tile, guard=direct), Mma(acc, a, b)),
        unroll=True,
        comment="fragment steps of one block step",
        role=K_FRAGMENTS,
    )
    main_loop = For(
        "kt",
        Const(0),
        ceil_div(g.k, c["BK"]),
        1,
        (k_steps,),
        comment="block steps along K",
        role=K_BLOCKS,
    )
    # With an epilogue (a warp-specialized `+=` always has one), `+=` reads C in the
    # epilogue (beta 1), so the accumulator starts at 0.
    init = LoadFrag(acc, c_tile) if g.accumulate and Epilogue.of(s, g) is None else Fill(acc, 0.0)
    # A warp-specialized kernel's epilogue (no staging tile) runs on the accumulators in
    # their registers, before C is stored; every stage carries it.
    ep = Epilogue.of(s, g) if s.epilogue_via != "shared" else None
    on_registers = (EpilogueFrag(acc, c_tile, ep),) if ep is not None else ()
    body = (init, main_loop, *on_registers, StoreFrag(c_tile, acc, guard=direct))
    warps = (s.block[0] // mm, s.block[1] // mn)
    kernel = KernelIR(analysis.name, g, s, analysis.target, warps, (), fragments, body)
    return stage_epilogue(kernel) if s.epilogue_via == "shared" else kernel
