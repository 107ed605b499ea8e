"""`epilogue_via shared`, part of lowering: C goes through a per-warp shared-memory tile.

WMMA cannot store an f32 accumulator as f16, and its own stores of one fragment
are 16 short rows; staging lets each lane convert and store whole vectors:

    store_frag C @ o + off <- acc        ==>   store_frag Cs[warp] <- acc      (warp-collective)
                                               barrier warp   RAW: fragment store before lane reads
                                               copy C @ o + off <- Cs[warp]     (lanes, converting)

and for `+=`, the accumulator's load from C goes the same way in reverse. An
`epilogue` directive rides on the copy to C (tiledsl.ir.epilogue): each element is
scaled, combined with C, biased and clamped as the lanes store it.
Each warp owns one slot of Cs, so no block-wide barrier is needed. This is part
of lowering, not a pass: WMMA cannot move an f32 fragment to f16 memory, so even
the naive form must stage an f16 C to be valid code.
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from ..ir.dtypes import DTypeName
from ..ir.epilogue import Epilogue
from ..ir.expr import Const, Var
from ..ir.gemm import Layout
from ..ir.nodes import (
    DTYPE_BYTES,
    Barrier,
    Copy,
    For,
    GlobalTile,
    KernelIR,
    LoadFrag,
    SharedBuffer,
    SharedTile,
    StoreFrag,
)

WARP = Var("warp")


def stage_epilogue(kernel: KernelIR) -> KernelIR:
    s = kernel.schedule
    acc = kernel.fragment_of("accumulator")
    rows, cols = acc.rows, acc.cols
    # staged in C's own layout, so lanes copy contiguous runs (the analysis accepted it)
    layout = cast(Layout, kernel.gemm.c.layout)
    buf = SharedBuffer(
        "Cs",
        cast(DTypeName, acc.dtype),
        kernel.warp_count,
        rows,
        cols,
        cols if layout == "row" else rows,
        "per-warp staging tile of C",
        s.loc("epilogue_via"),
        per_warp=True,
        layout=layout,
    )
    slot = SharedTile(buf.name, WARP, (Const(0), Const(0)), rows, cols)
    c_dtype = kernel.gemm.c.dtype
    # A chunk is 16 bytes of the narrower side, so both sides stay vector-aligned.
    line = buf.line_length
    vector = 16 // max(DTYPE_BYTES[c_dtype], DTYPE_BYTES[acc.dtype]) if line * 4 % 16 == 0 else 1
    axis = "cols" if layout == "row" else "rows"
    loc = s.loc("epilogue_via")
    epilogue = Epilogue.of(s, kernel.gemm)

    def stage(stmt):
        if isinstance(stmt, For):
            return (replace(stmt, body=_flat(stage(x) for x in stmt.body)),)
        if isinstance(stmt, StoreFrag) and isinstance(stmt.dst, GlobalTile):
            return (
                StoreFrag(slot, stmt.frag),
                Barrier(
                    "warp",
                    "RAW: the warp's fragment store to Cs must land before its lanes read Cs",
                    loc,
                ),
                Copy(stmt.dst, slot, vector, "warp", "sync", loc, axis, epilogue=epilogue),
            )
        if (
            isinstance(stmt, LoadFrag)
            and isinstance(stmt.src, GlobalTile)
            and stmt.src.operand == kernel.gemm.c.name
        ):
            return (
                Copy(slot, stmt.src, vector, "warp", "sync", loc, axis),
                Barrier(
                    "warp",
                    "RAW: the lanes' copy of C into Cs must land before the "
                    "warp's fragment load reads it",
                    loc,
                ),
                LoadFrag(stmt.frag, slot),
            )
        return (stmt,)

    body = _flat(stage(stmt) for stmt in kernel.body)
    return replace(kernel, body=body, buffers=(*kernel.buffers, buf))


def _flat(groups) -> tuple:
    return tuple(stmt for group in groups for stmt in group)
