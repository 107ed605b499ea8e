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
offset inside the tile stays as it was. `load_order ba` copies B before A.
"""

from __future__ import annotations

from dataclasses import replace

from ..expr import Const
from ..ir import (
    DTYPE_BYTES,
    Barrier,
    Copy,
    For,
    GlobalTile,
    KernelIR,
    LoadFrag,
    SharedBuffer,
    SharedTile,
)


def smem_tiling(kernel: KernelIR) -> KernelIR:
    s, g = kernel.schedule, kernel.gemm
    bm, bn, bk = s.block
    shapes = {g.a.name: (bm, bk), g.b.name: (bk, bn)}
    body = []
    buffers = list(kernel.buffers)
    for stmt in kernel.body:
        if isinstance(stmt, For) and stmt.var == "kt":
            stmt, new_buffers = _tile_loop(stmt, kernel, shapes)
            buffers.extend(new_buffers)
        body.append(stmt)
    return replace(kernel, body=tuple(body), buffers=tuple(buffers))


def _tile_loop(loop: For, kernel: KernelIR, shapes: dict[str, tuple[int, int]]):
    s = kernel.schedule
    origins: dict[str, tuple] = {}
    for tile in _global_fragment_sources(loop.body):
        if tile.operand in shapes:
            origins.setdefault(tile.operand, tile.origin)
    order = sorted(origins, key=lambda name: name != kernel.gemm.a.name)
    if s.load_order == "ba":
        order.reverse()
    buffers, copies = [], []
    for name in order:
        rows, cols = shapes[name]
        op = kernel.gemm.operand(name)
        buf = SharedBuffer(
            name + "s", op.dtype, 1, rows, cols, cols, f"block tile of {name}", s.loc("stages")
        )
        buffers.append(buf)
        vector = s.copy_bytes // DTYPE_BYTES[op.dtype]
        copies.append(
            Copy(
                SharedTile(buf.name, Const(0), (Const(0), Const(0)), rows, cols),
                GlobalTile(name, origins[name], (Const(0), Const(0)), rows, cols),
                vector,
                "block",
                "sync",
                s.loc("copy"),
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
        f"WAR: every warp's fragment loads of this step must finish before "
        f"the next step's copies overwrite {names}",
        s.loc("stages"),
    )
    inner = _redirect(loop.body, {name: name + "s" for name in origins}, origins)
    return replace(loop, body=(*copies, raw, *inner, war)), buffers


def _global_fragment_sources(body):
    for stmt in body:
        if isinstance(stmt, For):
            yield from _global_fragment_sources(stmt.body)
        elif isinstance(stmt, LoadFrag) and isinstance(stmt.src, GlobalTile):
            yield stmt.src


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
