"""A bank-conflict model of shared-memory accesses (32 banks of 4 bytes).

A warp's shared-memory request is served in phases of 128 bytes; accesses of
one phase that fall into the same bank (or, for 16-byte vectors, the same
16-byte bank group) at different addresses are serialized: the number of
passes is the access's "ways" (1 = conflict-free).

- Copies into shared memory: a vector of w bytes per thread; a phase is 128 / w
  consecutive lanes. The lanes' chunks follow the emitted copy loop.
- Fragment loads of f16 A/B tiles: `load_matrix_sync` compiles to ldmatrix-like
  loads (the mma.sync path calls ldmatrix itself), whose phases read 8 rows of 16
  bytes (one 8 x 8 block of the fragment); the 8 row addresses conflict when they
  share a 16-byte bank group. `pad xor` tiles are modelled through their swizzle.

Offsets that differ between instructions shift all addresses of a phase by the
same multiple of 16 bytes, which moves no two addresses into or out of a group,
so the model evaluates each access at offset zero.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, replace

from ..ir.nodes import DTYPE_BYTES, Copy, KernelIR, LoadFrag, SharedTile, walk

PAD_CANDIDATES = (0, 8, 16, 24, 32)  # elements: multiples of 16 bytes keep vectors aligned


@dataclass(frozen=True)
class AccessConflicts:
    what: str  # "copy into As" / "fragment load of a from As"
    buffer: str
    ways: int
    instructions: int  # warp-level instructions per block step, to weigh the cost


def _ways(addresses: list[int], unit: int, groups: int) -> int:
    """Passes needed to serve one phase: distinct addresses per bank (group)."""
    per_group = Counter((a // unit) % groups for a in set(addresses))
    return max(per_group.values(), default=1)


def copy_ways(kernel: KernelIR, copy: Copy, pitch: int) -> int:
    assert isinstance(copy.dst, SharedTile)  # a copy into a shared buffer
    buf = kernel.buffer(copy.dst.buffer)
    size = DTYPE_BYTES[buf.dtype]
    width = copy.vector * size
    # In storage terms: a tile is `lines` contiguous runs `pitch` apart (rows, or columns
    # of a column-major tile), and the copy's chunks walk along each run.
    length, lines = _storage_shape(buf, copy.dst.rows, copy.dst.cols)
    row_vecs = length // copy.vector
    lanes = kernel.warp_width
    phase = max(1, 128 // width)
    worst = 1
    for start in range(0, lanes, phase):
        addrs = []
        for v in range(start, min(start + phase, lines * row_vecs)):
            r, c = divmod(v, row_vecs)
            if buf.panel:  # wgmma's panels: where SharedBuffer.element puts the chunk
                rc = (r, c * copy.vector) if buf.layout == "row" else (c * copy.vector, r)
                addrs.append(buf.element(0, *rc) * size)
                continue
            addrs.append((r * pitch + buf.swizzled(r, c * copy.vector)) * size)
        worst = max(
            worst, _ways(addrs, min(width, 16) if width >= 16 else 4, 8 if width >= 16 else 32)
        )
    return worst


def fragment_ways(kernel: KernelIR, load: LoadFrag, pitch: int) -> int:
    assert isinstance(load.src, SharedTile)  # a load from a shared buffer
    buf = kernel.buffer(load.src.buffer)
    size = DTYPE_BYTES[buf.dtype]
    cols, rows = _storage_shape(buf, load.src.rows, load.src.cols)
    worst = 1
    # At offset zero, as for padding: fragment tiles start at multiples of 8 lines and
    # 16 bytes, where the XOR keys of 8 lines are the same 8 values in another order.
    for r0 in range(0, rows, 8):
        for c0 in range(0, cols, 16 // size):
            addrs = [
                ((r0 + r) * pitch + buf.swizzled(r0 + r, c0)) * size
                for r in range(min(8, rows - r0))
            ]
            worst = max(worst, _ways(addrs, 16, 8))
    return worst


def _storage_shape(buf, rows: int, cols: int) -> tuple[int, int]:
    """(length of one contiguous run, number of runs) of a rows x cols tile of `buf`."""
    return (cols, rows) if buf.layout == "row" else (rows, cols)


def conflicts(kernel: KernelIR, buffer: str, pitch: int | None = None) -> list[AccessConflicts]:
    """The modelled ways of every copy into and fragment load from `buffer`."""
    buf = kernel.buffer(buffer)
    pitch = buf.pitch if pitch is None else pitch
    out = []
    seen = set()
    for stmt in walk(kernel.body):
        if (
            isinstance(stmt, Copy)
            and isinstance(stmt.dst, SharedTile)
            and stmt.dst.buffer == buffer
            and stmt.by == "block"
        ):
            key = ("copy", buffer)
            chunks = stmt.dst.rows * stmt.dst.cols // stmt.vector
            count = -(-chunks // kernel.warp_width)
            if key not in seen:
                seen.add(key)
                out.append(
                    AccessConflicts(
                        f"{stmt.mode} copy into {buffer}",
                        buffer,
                        copy_ways(kernel, stmt, pitch),
                        count,
                    )
                )
        elif (
            isinstance(stmt, LoadFrag)
            and isinstance(stmt.src, SharedTile)
            and stmt.src.buffer == buffer
            and buf.dtype != "f32"
            # operands read by the tensor cores through descriptors (wgmma), not by
            # lanes: no bank model (the 128-byte swizzle is the hardware's own)
            and kernel.schedule.path.operands != "descriptor"
        ):
            key = ("frag", stmt.frag.name)
            if key not in seen:
                seen.add(key)
                frag = kernel.fragment(stmt.frag.name)
                count = kernel.warp_count * frag.count[0] * frag.count[1] * _inner_steps(kernel)
                out.append(
                    AccessConflicts(
                        f"fragment load of {stmt.frag.name} from {buffer}",
                        buffer,
                        fragment_ways(kernel, stmt, pitch),
                        count,
                    )
                )
    return out


def _inner_steps(kernel: KernelIR) -> int:
    m, n, k = kernel.schedule.mma
    return kernel.schedule.block[2] // k


def cost(kernel: KernelIR, buffer: str, pitch: int) -> int:
    """Serialized passes per block step: instructions x ways, over the buffer's accesses."""
    return sum(a.instructions * a.ways for a in conflicts(kernel, buffer, pitch))


def best_pad(kernel: KernelIR, buffer: str) -> int:
    """The smallest pad (in elements) that minimizes the modelled cost."""
    buf = kernel.buffer(buffer)
    step = 16 // DTYPE_BYTES[buf.dtype]
    candidates = [p for p in PAD_CANDIDATES if p % step == 0]
    return min(candidates, key=lambda p: (cost(kernel, buffer, buf.line_length + p), p))


def unpadded(kernel: KernelIR) -> KernelIR:
    """The same kernel with every A/B tile at its natural pitch, for before/after reports."""
    return replace(
        kernel,
        buffers=tuple(
            replace(b, pitch=b.line_length) if not b.per_warp else b for b in kernel.buffers
        ),
    )


# ------------------------------------------------------------ the report's rows


@dataclass(frozen=True)
class BankRow:
    access: str
    buffer: str
    pitch_before: int  # the natural pitch: the tile's columns
    pitch_after: int  # the kernel's pitch
    ways_before: int
    ways_after: int
    instructions: int  # warp-level instructions of the whole block per K step


def tile_buffers(kernel: KernelIR) -> list[str]:
    """The A and B tile buffers of the kernel (none for stages 0)."""
    g = kernel.gemm
    names = (g.a.name + "s", g.b.name + "s")
    return [b.name for b in kernel.buffers if b.name in names and not b.per_warp]


def unaligned_async_rows(kernel: KernelIR) -> list[tuple[str, int]]:
    """(buffer, row pitch in bytes) of each tile that cp.async writes in rows whose pitch is
    not a multiple of 128 bytes. The bank model counts such stores conflict-free (each
    8-lane phase hits 8 distinct 16-byte bank groups), but on the H200 Nsight Compute
    measured them at 2.0-2.6x their ideal shared-memory wavefronts (pads of 8 to 56
    elements, and 64-byte XOR-swizzled lines), against 1.0x at a 128-byte multiple
    (docs/performance.md, "why WMMA stops"). wgmma's panels are 128
    bytes: never listed."""
    written = {
        s.dst.buffer
        for s in walk(kernel.body)
        if isinstance(s, Copy) and s.mode == "async" and isinstance(s.dst, SharedTile)
    }
    rows = []
    for name in tile_buffers(kernel):
        buf = kernel.buffer(name)
        pitch = buf.pitch * DTYPE_BYTES[buf.dtype]
        if name in written and not buf.panel and pitch % 128:
            rows.append((name, pitch))
    return rows


def bank_rows(kernel: KernelIR) -> list[BankRow]:
    rows = []
    for name in tile_buffers(kernel):
        buf = kernel.buffer(name)
        before = conflicts(kernel, name, buf.line_length)
        after = {a.what: a for a in conflicts(kernel, name, buf.pitch)}
        for a in before:
            b = after[a.what]
            rows.append(
                BankRow(a.what, name, buf.line_length, buf.pitch, a.ways, b.ways, a.instructions)
            )
    return rows
