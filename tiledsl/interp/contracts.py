"""The pointer contracts: what each instruction asks of the addresses it is given.

The GPU faults, or silently reads the wrong bytes, when an address breaks its
instruction's contract, and a numpy gather would not notice; so the interpreter checks
every contract before it moves the data. Which contract a fragment load or store is under
is the path description's to say (`kernel.schedule.path`, see tiledsl.ir.paths):
`.operands` for A and B fragments, `.accumulators` for C's.

    wmma_pointer   a WMMA base pointer: 32-byte aligned, a leading dimension of whole 16 bytes
    lane_rows      ldmatrix: each lane's 16-byte line address aligned to 16 bytes
    lane_pairs     an accumulator lane's two elements of a row-major row, aligned to two
    lane_total     the fma path's accumulator: the warp's total, one element moved by one lane
    descriptor     wgmma's shared-memory descriptor: a 128-byte-swizzled tile starting on a
                   line in 8s and 16 bytes, in a buffer on 1024 bytes

Copies have one more: each vector access aligned to its width, over contiguous elements.
A TMA copy (`check_tma`) has the tensor map's: boxes of at most 256 lines stored as the
operand is (no transpose), and the 128-byte swizzle laid out by address, which matches the
buffer's panels only on a 1024-byte base. (Rows that are not a whole 16 bytes are staged
by the launcher, tiledsl.gpu.staging.)
"""

from __future__ import annotations

import numpy as np

from ..ir.expr import evaluate
from ..ir.nodes import (
    DTYPE_BYTES,
    Copy,
    GlobalTile,
    LoadFrag,
    SharedTile,
    Tile,
    TmaLoad,
    TmaStore,
)
from ..ir.printer import stmt_text
from .errors import InterpreterError
from .tiles import Memory


def check_fragment_pointer(memory: Memory, tile: Tile, stmt, read_async: bool) -> None:
    """The contract of a fragment load or store `stmt` of `tile`, as the path asks.

    `read_async`: a wgmma operand, read through a descriptor. An IR not yet pipelined
    reads its operands synchronously, so it has no descriptor to check.
    """
    if getattr(stmt, "guard", False) and isinstance(stmt, LoadFrag):
        return  # the direct path: each vector checks its own alignment (element by element if not)
    size, base = _element_and_base(memory, tile)
    path = memory.kernel.schedule.path
    role = memory.kernel.fragment(stmt.frag.name).role
    match path.accumulators if role == "accumulator" else path.operands:
        case "descriptor":
            if read_async:
                assert isinstance(tile, SharedTile)  # wgmma reads its operands from shared
                _check_descriptor(memory, tile, stmt, size, base)
        case "lane_rows" | "lane_pairs":
            _check_lane_pointers(memory, tile, stmt, size, base)
        case "lane_total":  # the fma path's warp total: one element by one lane
            pass
        case _:  # "wmma_pointer"
            _check_wmma_pointer(memory, tile, stmt, size, base)


def check_vectors(memory: Memory, c: Copy, tile: Tile, flat, whole, text: str) -> None:
    """A copy's vector accesses to `tile`: the chunks `whole` marks of `flat` (each chunk's
    flat element indices, along the last axis) move as one vector, which must be aligned to
    its bytes and cover contiguous elements, as one vector load or store needs."""
    if c.vector == 1:
        return  # element by element: nothing to align, nothing to keep together
    chunks = flat[whole]
    size, base = _element_and_base(memory, tile)
    if ((base + chunks[..., 0] * size) % (c.vector * size)).any():
        raise InterpreterError(f"{text}: a {c.vector * size}-byte vector access is misaligned")
    if (np.diff(chunks, axis=-1) != 1).any():
        raise InterpreterError(
            f"{text}: a vector's elements are not contiguous "
            f"in {tile.buffer if isinstance(tile, SharedTile) else tile.operand}"
        )


def check_tma(memory: Memory, copy: TmaLoad | TmaStore, text: str) -> None:
    """The tensor map and the shared side of a TMA copy, a load or a store
    (cuTensorMapEncodeTiled's limits; PTX ISA, "cp.async.bulk.tensor", and the 128-byte
    swizzle's address pattern)."""
    kernel = memory.kernel
    glob, tile = (copy.src, copy.dst) if isinstance(copy, TmaLoad) else (copy.dst, copy.src)
    op = kernel.gemm.operand(glob.operand)
    buf = kernel.buffer(tile.buffer)
    size = DTYPE_BYTES[buf.dtype]
    # A leading dimension that is not a whole 16 bytes is no problem here: the launcher
    # copies such an operand into lines padded to 128 bytes (tiledsl.gpu.staging), which
    # hold the same elements at the same coordinates, and the map reads the copy.
    problems = []
    if op.layout != buf.layout:
        problems.append(
            f"{op.name} is {op.layout}-major and {buf.name} {buf.layout}-major: a TMA box "
            "lands as it is stored"
        )
    rows, cols = tile.rows, tile.cols
    lines, length = (rows, cols) if buf.layout == "row" else (cols, rows)
    pos = evaluate(tile.offset[1] if buf.layout == "row" else tile.offset[0], memory.env)
    if lines > 256:
        problems.append(f"a box of {lines} lines (at most 256)")
    if buf.panel:
        if buf.panel * size != 128 or not buf.xor:
            problems.append(f"{buf.name}'s panels are not the 128-byte swizzle")
        if memory.offsets[buf.name] % 1024 or buf.lines % 8:
            problems.append(
                f"{buf.name}'s panels do not start on 1024 bytes (the swizzle is by address)"
            )
        if length % buf.panel or np.any(np.asarray(pos) % buf.panel):
            problems.append(f"the tile is not whole {buf.panel}-element panels")
    elif buf.xor or buf.pitch != length or (length * size) % 16:
        problems.append(
            f"{buf.name} is not a dense box of whole 16-byte lines (TMA writes no padding "
            "and no XOR but the 128-byte swizzle)"
        )
    if problems:
        raise InterpreterError(f"`{text}`: a TMA copy cannot do this: " + "; ".join(problems))


def _element_and_base(memory: Memory, tile: Tile) -> tuple[int, int]:
    """(bytes of one element, byte offset of the tile's array): a shared buffer's place in
    the arena, or 0 for a global operand (cudaMalloc's 256 bytes cover a global contract)."""
    if isinstance(tile, SharedTile):
        buf = memory.kernel.buffer(tile.buffer)
        return DTYPE_BYTES[buf.dtype], memory.offsets[buf.name]
    return DTYPE_BYTES[memory.kernel.gemm.operand(tile.operand).dtype], 0


def _check_wmma_pointer(memory: Memory, tile: Tile, stmt, size: int, base: int) -> None:
    """load/store_matrix_sync: the tile's first element on 32 bytes, and its leading
    dimension a whole number of 16 bytes."""
    if isinstance(tile, SharedTile):
        ld = memory.kernel.buffer(tile.buffer).pitch
    else:
        ld = int(evaluate(memory.kernel.gemm.operand(tile.operand).leading_dim, memory.env))
    zero = np.zeros((1, 1), np.int64)
    _, flat, _ = memory.locate(tile, zero, zero, stmt_text(stmt))
    if ((base + flat * size) % 32).any() or (ld * size) % 16:
        raise InterpreterError(
            f"`{stmt_text(stmt)}`: WMMA needs a 32-byte aligned pointer "
            f"and a leading dimension of whole 16 bytes (ld = {ld})"
        )


def _check_descriptor(memory: Memory, tile: SharedTile, stmt, size: int, base: int) -> None:
    """wgmma's descriptor: a 128-byte-swizzled tile whose first line is a multiple of 8
    (the swizzle's phase), its first element on 16 bytes, the buffer on 1024 bytes."""
    buf = memory.kernel.buffer(tile.buffer)
    if not buf.panel:
        return  # before padding: an IR to interpret, not yet to emit as wgmma
    line_e, pos_e = tile.offset if buf.layout == "row" else tile.offset[::-1]
    line = np.asarray(evaluate(line_e, memory.env))
    pos = np.asarray(evaluate(pos_e, memory.env))
    if base % 1024 or (line % 8).any() or ((pos * size) % 16).any():
        raise InterpreterError(
            f"`{stmt_text(stmt)}`: a wgmma descriptor needs a 128-byte-swizzled tile "
            "starting on a line in 8s and 16 bytes, in a buffer on 1024 bytes"
        )


def _check_lane_pointers(memory: Memory, tile: Tile, stmt, size: int, base: int) -> None:
    """mma.sync: ldmatrix reads whole 16-byte lines, and an accumulator lane moves two
    elements of a row-major row at once; each such address must be aligned to its width."""
    kernel = memory.kernel
    frag = kernel.fragment(stmt.frag.name)
    layout: str
    if isinstance(tile, SharedTile):
        layout = kernel.buffer(tile.buffer).layout
    else:
        layout = kernel.gemm.operand(tile.operand).layout
    width = 2 * size if frag.role == "accumulator" else 16
    if frag.role == "accumulator" and layout == "col":
        return  # stored element by element
    guarded = getattr(stmt, "guard", False)
    if frag.role == "accumulator" and guarded and isinstance(tile, GlobalTile):
        ld = int(evaluate(kernel.gemm.operand(tile.operand).leading_dim, memory.env))
        if ld % 2:
            return  # a guarded store into an odd leading dimension: element by element too
    step = width // size
    if layout == "row":
        rows, cols = np.arange(tile.rows), np.arange(0, tile.cols, step)
    else:
        rows, cols = np.arange(0, tile.rows, step), np.arange(tile.cols)
    inside: list | None = [] if getattr(stmt, "guard", False) else None  # C's partial tiles
    _, flat, _ = memory.locate(
        tile, rows.reshape(-1, 1), cols.reshape(1, -1), stmt_text(stmt), inside
    )
    if inside:
        flat = flat[np.broadcast_to(inside[0], flat.shape)]  # only what is stored is checked
    if ((base + flat * size) % width).any():
        raise InterpreterError(
            f"`{stmt_text(stmt)}`: mma.sync needs each lane's {width}-byte access aligned"
        )
