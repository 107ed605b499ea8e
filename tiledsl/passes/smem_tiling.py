"""smem-tiling (`stages 1`): stage the block's A and B tiles through shared memory.

Inside the block-step loop `kt`, every fragment load that reads a block tile of
A or B from global memory is redirected to a shared-memory copy of that tile:

    for kt:                                     for kt:
                                                  copy As[0] <- A @ (bm*BM, kt*BK)  (all threads)
                                        ==>       copy Bs[0] <- B @ (kt*BK, bn*BN)
                                                  barrier        RAW: copies before fragment loads
      load_frag a <- A @ (..) + off                load_frag a <- As[0] + off
      ...                                          ...
                                                  barrier        WAR: loads before next copies

The tile's origin (block coordinates, kt) moves into the copy; the fragment's
offset inside the tile stays as it was. `load_order` orders the copies.

A per-warp staging tile of C (`epilogue_via shared`) is then placed over the A
and B tiles (a union: the kernel needs max(A + B, C) bytes, not the sum), with
the block barriers that reuse needs: every warp must be done with As and Bs
before any warp writes Cs, and done with Cs before the first copies into As.
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from ..ir.dtypes import DTypeName
from ..ir.expr import Const, Var
from ..ir.gemm import Layout
from ..ir.nodes import (
    DTYPE_BYTES,
    K_BLOCKS,
    Barrier,
    Copy,
    For,
    GlobalTile,
    KernelIR,
    LoadFrag,
    SharedBuffer,
    SharedTile,
    is_loop,
    tiles_of,
    walk,
)
from .load_order import ordered


def smem_tiling(kernel: KernelIR) -> KernelIR:
    s, g = kernel.schedule, kernel.gemm
    bm, bn, bk = s.block
    shapes = {g.a.name: (bm, bk), g.b.name: (bk, bn)}
    body, tiles = [], []
    for stmt in kernel.body:
        if is_loop(stmt, K_BLOCKS):
            stmt, tiles = _tile_loop(stmt, kernel, shapes)
        body.append(stmt)
    staging = [b for b in kernel.buffers if b.per_warp]
    others = [b for b in kernel.buffers if not b.per_warp]
    if staging and tiles:
        body = _fence_staging(body, [b.name for b in staging], [t.name for t in tiles], kernel)
        staging = [
            replace(b, alias=tiles[0].name, purpose=b.purpose + ", over the A/B tiles")
            for b in staging
        ]
    return replace(kernel, body=tuple(body), buffers=(*others, *tiles, *staging))


def _tile_loop(loop: For, kernel: KernelIR, shapes: dict[str, tuple[int, int]]):
    s = kernel.schedule
    origins: dict[str, tuple] = {}
    for stmt in walk(loop.body):
        if (
            isinstance(stmt, LoadFrag)
            and isinstance(stmt.src, GlobalTile)
            and stmt.src.operand in shapes
        ):
            origins.setdefault(stmt.src.operand, stmt.src.origin)
    buffers, copies = [], []
    for name in sorted(origins, key=lambda n: n != kernel.gemm.a.name):
        rows, cols = shapes[name]
        op = kernel.gemm.operand(name)
        # The tile keeps the operand's layout, so copies run along its contiguous axis.
        natural = cols if op.layout == "row" else rows
        buf = SharedBuffer(
            name + "s",
            cast(DTypeName, op.dtype),  # the analysis accepted the operand's type and layout
            1,
            rows,
            cols,
            natural,
            f"block tile of {name}",
            s.loc("stages"),
            layout=cast(Layout, op.layout),
        )
        buffers.append(buf)
        copies.append(
            Copy(
                SharedTile(buf.name, Const(0), (Const(0), Const(0)), rows, cols),
                GlobalTile(name, origins[name], (Const(0), Const(0)), rows, cols),
                s.copy_bytes // DTYPE_BYTES[op.dtype],
                "block",
                "sync",
                s.loc("copy"),
                axis="cols" if op.layout == "row" else "rows",
            )
        )
    names = ", ".join(b.name for b in buffers)
    raw = Barrier(
        "block",
        f"RAW: the copies into {names} (all threads) must land before any "
        "warp's fragment loads read them",
        s.loc("stages"),
    )
    war = Barrier(
        "block",
        "WAR: every warp's fragment loads of this step must finish before "
        f"the next step's copies overwrite {names}",
        s.loc("stages"),
    )
    inner = _redirect(loop.body, {name: name + "s" for name in origins}, origins)
    steps = ordered(copies, kernel.gemm.a.name, s.load_order, Var(loop.var))
    return replace(loop, body=(*steps, raw, *inner, war)), buffers


def _redirect(body, buffer_of: dict[str, str], origins: dict[str, tuple]):
    out = []
    for stmt in body:
        if isinstance(stmt, For):
            stmt = replace(stmt, body=_redirect(stmt.body, buffer_of, origins))
        elif (
            isinstance(stmt, LoadFrag)
            and isinstance(stmt.src, GlobalTile)
            and stmt.src.operand in buffer_of
            and stmt.src.origin == origins[stmt.src.operand]
        ):
            src = stmt.src
            stmt = replace(
                stmt,
                src=SharedTile(buffer_of[src.operand], Const(0), src.offset, src.rows, src.cols),
            )
        out.append(stmt)
    return tuple(out)


def _fence_staging(body, staging: list[str], tiles: list[str], kernel: KernelIR) -> list:
    """Block barriers between the K loop and the staging that reuses its bytes."""
    loc = kernel.schedule.loc("epilogue_via")
    names = ", ".join(tiles)
    loop_at = next(i for i, s in enumerate(body) if is_loop(s, K_BLOCKS))

    def uses_staging(stmts) -> bool:
        return any(
            isinstance(t, SharedTile) and t.buffer in staging
            for s in walk(tuple(stmts))
            for t in tiles_of(s)
        )

    out = list(body)
    if uses_staging(body[loop_at + 1 :]):
        out.insert(
            loop_at + 1,
            Barrier(
                "block",
                f"WAR: every warp must be done reading {names} before any warp's staging "
                f"of C overwrites their bytes (Cs shares them)",
                loc,
            ),
        )
    if uses_staging(body[:loop_at]):
        out.insert(
            loop_at,
            Barrier(
                "block",
                f"WAR: every warp must be done with its staged C before the first copies "
                f"into {names} overwrite those bytes",
                loc,
            ),
        )
    return out
