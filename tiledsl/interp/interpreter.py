"""The numpy interpreter of the IR, with a shared-memory race detector.

It executes what the emitter emits: every block of the grid, in order; inside a
block every statement runs for all warps at once (numpy over a leading warp
axis), copies spread over threads or lanes exactly as the emitted loops spread
them, and fragments held per warp. Values follow the tensor cores: inputs are
f16, products exact, sums in the accumulator's type.

Shared memory is one byte arena, as on the GPU, so buffers that alias (a C
staging tile over the A/B tiles) share bytes; it starts as all-ones bytes (NaN
in f16 and f32), so reading what nothing wrote shows in the result.

Async copies (cp.async) read global memory when issued and land when a
`wait_group` retires their group; touching bytes still in flight is an error.

wgmma (`mma m64nNk16`) reads its A and B tiles asynchronously: from the issue until
the `wgmma.wait_group` that retires its group. The interpreter reads them at the issue,
refuses any write to them before that wait, and logs the reads again at the wait, so a
write by another warp that no barrier orders after the wait is a race.

Races: every shared-memory access is logged, in 2-byte units, with its issuer — a
thread for copies, the whole warp for warp-collective fragment ops (their lane
mapping is unspecified) — and the warp-barrier epoch of its warp. At each block
barrier the phase's log is checked: two accesses to one unit, one a write, race
when they come from different warps, or from different issuers of one warp with
no `__syncwarp` between them. The check is on happens-before, so the order in
which the interpreter runs a phase cannot hide a race.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ..ir.dtypes import STORAGE, VALUE, convert, decode, encode
from ..ir.expr import INT32, IntOverflow, Var, evaluate
from ..ir.grid import block_tile, grid_vars
from ..ir.nodes import (
    DTYPE_BYTES,
    AsyncCommit,
    AsyncWait,
    Barrier,
    Copy,
    Fill,
    For,
    GlobalTile,
    If,
    KernelIR,
    LoadFrag,
    Mma,
    MmaCommit,
    MmaFence,
    MmaWait,
    SharedTile,
    StoreFrag,
    Tile,
    async_mma,
    buffer_offsets,
)
from ..ir.printer import stmt_text

NP_DTYPES = STORAGE  # how each element type sits in the byte arena (bf16: its bits)
UNIT = 2  # bytes: the race log's granule (the smallest element)


class InterpreterError(Exception):
    """The IR did something the GPU would fault on, race on, or read garbage from."""


class RaceError(InterpreterError):
    pass


@dataclass
class Stats:
    blocks: int = 0
    block_barriers: int = 0
    warp_barriers: int = 0
    mma: int = 0
    async_groups: int = 0


@dataclass
class _Access:
    units: np.ndarray  # 2-byte units of the arena
    issuers: np.ndarray  # thread id, or threads + warp for warp-collective ops
    warps: np.ndarray
    epochs: np.ndarray  # warp-barrier epoch of the issuing warp
    write: bool
    stmt: int


@dataclass
class _Pending:
    """One async copy: where it lands, what it carries, who issued it."""

    view: np.ndarray
    flat: np.ndarray
    values: np.ndarray
    units: np.ndarray
    issuers: np.ndarray
    stmt: Copy


@dataclass
class _Block:
    env: dict
    arena: np.ndarray
    views: dict[str, np.ndarray]
    frags: dict[str, np.ndarray]
    epochs: np.ndarray
    inflight: np.ndarray  # per unit: an async copy is still filling it
    log: list[_Access] = field(default_factory=list)
    uncommitted: list[_Pending] = field(default_factory=list)
    groups: list[list[_Pending]] = field(default_factory=list)
    # wgmma reads in flight: (units, issuers, stmt) per read, grouped like cp.async's
    mma_reads: list = field(default_factory=list)
    mma_groups: list[list] = field(default_factory=list)
    mma_busy: np.ndarray | None = None  # per unit: wgmma reads in flight


def interpret(kernel: KernelIR, arrays: dict[str, np.ndarray], sizes: dict[str, int]) -> Stats:
    """Run `kernel` over global `arrays` (1-D, storage order; the output is written in place)."""
    return _Interpreter(kernel, arrays, sizes).run()


class _Interpreter:
    def __init__(self, kernel: KernelIR, arrays: dict[str, np.ndarray], sizes: dict[str, int]):
        self.k = kernel
        self.arrays = arrays
        self.sizes = dict(sizes)
        self.stats = Stats()
        self.stmts: list[str] = []
        self.stmt_ids: dict[int, int] = {}
        self.ww = kernel.warp_width
        self.nwarps = kernel.warp_count
        self.threads = kernel.threads
        self.offsets = buffer_offsets(kernel)
        self.arena_bytes = max(
            [self.offsets[b.name] + b.size_bytes for b in kernel.buffers], default=0
        )
        self.warp_env = kernel.warp_coords()
        self.mma_groups = async_mma(kernel)

    def run(self) -> Stats:
        grid = {name: self._int(e, self.sizes, name) for name, e in grid_vars(self.k).items()}
        mapping = block_tile(self.k)
        batch = self.k.gemm.batch
        batches = int(evaluate(batch, self.sizes)) if batch is not None else 1
        blocks = grid["tiles_m"] * grid["tiles_n"]
        if blocks > INT32[1]:
            raise InterpreterError(f"{blocks} blocks: more than the grid's x axis (blockIdx.x)")
        for bz, pid in itertools.product(range(batches), range(blocks)):
            env = {**self.sizes, **grid, "pid": pid, "bz": bz}
            for name, e in mapping.items():  # in order: each step may use the ones before
                env[name] = self._int(e, env, name)
            env.update(self.warp_env)
            arena = np.full(self.arena_bytes, 0xFF, np.uint8)
            views = {
                b.name: arena[self.offsets[b.name] : self.offsets[b.name] + b.size_bytes]
                .view(NP_DTYPES[b.dtype])
                .reshape(-1)
                for b in self.k.buffers
            }
            frags = {
                f.name: np.zeros((self.nwarps, *f.count, f.rows, f.cols), VALUE[f.dtype])
                for f in self.k.fragments
            }
            blk = _Block(
                env,
                arena,
                views,
                frags,
                np.zeros(self.nwarps, np.int64),
                np.zeros(self.arena_bytes // UNIT, bool),
            )
            blk.mma_busy = np.zeros(self.arena_bytes // UNIT, np.int32)
            self._body(blk, self.k.body)
            if blk.mma_reads or any(blk.mma_groups):
                raise InterpreterError(
                    "wgmmas were issued but never waited for "
                    f"(block {pid}): a wgmma.wait_group is missing"
                )
            if blk.uncommitted or any(blk.groups):
                raise InterpreterError(
                    "async copies were issued but never waited for "
                    f"(block {pid}): a cp.async.wait_group is missing"
                )
            self._check_phase(blk)
            self.stats.blocks += 1
        return self.stats

    @staticmethod
    def _int(e, env: dict, what: str):
        """`e` as the generated code computes it: in a 32-bit int, which must not overflow."""
        try:
            return evaluate(e, env, int32=True)
        except IntOverflow as err:
            raise InterpreterError(
                f"{what}: {err} in the generated code (tiledsl.limits refuses such sizes)"
            ) from None

    # ------------------------------------------------------------ statements
    def _body(self, blk: _Block, body) -> None:
        for stmt in body:
            self._stmt(blk, stmt)

    def _frag(self, blk: _Block, ref):
        i, j = int(evaluate(ref.i, blk.env)), int(evaluate(ref.j, blk.env))
        return blk.frags[ref.name], i, j

    def _stmt(self, blk: _Block, s) -> None:
        if isinstance(s, For):
            start, stop = int(evaluate(s.start, blk.env)), int(evaluate(s.stop, blk.env))
            for value in range(start, stop, s.step):
                blk.env[s.var] = value
                self._body(blk, s.body)
            blk.env.pop(s.var, None)
        elif isinstance(s, If):
            lhs, rhs = evaluate(s.lhs, blk.env), evaluate(s.rhs, blk.env)
            if np.ndim(lhs) or np.ndim(rhs):
                raise InterpreterError(f"`if` on a thread-dependent condition: {stmt_text(s)}")
            taken = lhs < rhs if s.op == "<" else lhs == rhs
            self._body(blk, s.then if taken else s.orelse)
        elif isinstance(s, Fill):
            frag, i, j = self._frag(blk, s.frag)
            frag[:, i, j] = s.value
        elif isinstance(s, LoadFrag):
            self._check_fragment_pointer(blk, s.src, s)
            frag, i, j = self._frag(blk, s.frag)
            values = decode(self._read_tile(blk, s.src, s), self._dtype(s.src))
            frag[:, i, j] = values.astype(frag.dtype)
            if self._async_read(s):
                _, _, units, issuers = self._warp_tile(blk, s.src, s)
                blk.mma_reads.append((units, issuers, s))
                np.add.at(blk.mma_busy, units.ravel(), 1)
        elif isinstance(s, MmaFence):
            pass  # orders registers for the hardware; the interpreter's are always in order
        elif isinstance(s, MmaCommit):
            blk.mma_groups.append(blk.mma_reads)
            blk.mma_reads = []
        elif isinstance(s, MmaWait):
            while len(blk.mma_groups) > s.pending:
                for units, issuers, stmt in blk.mma_groups.pop(0):
                    np.add.at(blk.mma_busy, units.ravel(), -1)
                    self._log(blk, units, issuers, False, stmt)  # still read until here
        elif isinstance(s, Mma):
            acc, ai, aj = self._frag(blk, s.acc)
            a, i, j = self._frag(blk, s.a)
            b, bi, bj = self._frag(blk, s.b)
            product = np.matmul(a[:, i, j].astype(np.float32), b[:, bi, bj].astype(np.float32))
            acc[:, ai, aj] = (acc[:, ai, aj].astype(np.float32) + product).astype(acc.dtype)
            self.stats.mma += self.nwarps
        elif isinstance(s, StoreFrag):
            self._check_fragment_pointer(blk, s.dst, s)
            frag, i, j = self._frag(blk, s.frag)
            self._write_tile(blk, s.dst, frag[:, i, j], s)
        elif isinstance(s, Copy):
            self._copy(blk, s)
        elif isinstance(s, AsyncCommit):
            blk.groups.append(blk.uncommitted)
            blk.uncommitted = []
            self.stats.async_groups += 1
        elif isinstance(s, AsyncWait):
            while len(blk.groups) > s.pending:
                for p in blk.groups.pop(0):
                    p.view[p.flat] = p.values
                    blk.inflight[p.units] = False
                    self._log(blk, p.units, p.issuers, True, p.stmt)
        elif isinstance(s, Barrier):
            if s.scope == "block":
                self._check_phase(blk)
                self.stats.block_barriers += 1
            else:
                blk.epochs += 1
                self.stats.warp_barriers += 1
        else:
            raise InterpreterError(f"cannot interpret {type(s).__name__}")

    # ------------------------------------------------------------ tiles
    def _locate(self, blk: _Block, tile: Tile, rows, cols, what, inside=None):
        """(flat array, flat indices, 2-byte units or None) of elements (rows, cols) of `tile`.

        Offsets may differ per warp, so results carry a leading warp axis (or 1).
        With `inside` (a guarded copy's global side), elements outside the operand are
        pointed at element 0 instead of refused, and `inside[0]` gets the in-bounds mask.
        """

        def per_warp(e):
            return np.asarray(evaluate(e, blk.env)).reshape(-1, *([1] * rows.ndim))

        r, c = per_warp(tile.offset[0]) + rows, per_warp(tile.offset[1]) + cols
        if isinstance(tile, SharedTile):
            buf = self.k.buffer(tile.buffer)
            slot = per_warp(tile.slot)
            if (
                (r < 0).any()
                or (r >= buf.rows).any()
                or (c < 0).any()
                or (c >= buf.cols).any()
                or (slot < 0).any()
                or (slot >= buf.slots).any()
            ):
                raise InterpreterError(f"{what} reaches outside shared buffer {buf.name}")
            flat = buf.element(slot, r, c)
            size = DTYPE_BYTES[buf.dtype]
            first = (self.offsets[buf.name] + flat * size) // UNIT
            units = (
                first
                if size == UNIT
                else np.stack([first + u for u in range(size // UNIT)], axis=-1)
            )
            return blk.views[buf.name], flat, units
        op = self.k.gemm.operand(tile.operand)
        gr, gc = per_warp(tile.origin[0]) + r, per_warp(tile.origin[1]) + c
        for name, value in (("the row", gr), ("the column", gc)):  # ints in the kernel
            self._int(Var("x"), {"x": value}, f"{what}: {name} in {op.name}")
        n_rows, n_cols = (int(evaluate(d, blk.env)) for d in op.dims[-2:])
        if inside is not None:
            mask = (gr >= 0) & (gr < n_rows) & (gc >= 0) & (gc < n_cols)
            inside.append(mask)
            gr, gc = np.where(mask, gr, 0), np.where(mask, gc, 0)
        elif (gr < 0).any() or (gr >= n_rows).any() or (gc < 0).any() or (gc >= n_cols).any():
            raise InterpreterError(
                f"{what} reaches outside {op.name} ({n_rows} x {n_cols}) in block {blk.env['pid']}"
            )
        flat = np.asarray(evaluate(op.offset(Var("r"), Var("c")), {**blk.env, "r": gr, "c": gc}))
        if op.batch is not None:  # this block's product of the batch
            flat = flat + blk.env["bz"] * int(evaluate(op.matrix_elements, blk.env))
        return self.arrays[op.name], flat, None

    def _warp_tile(self, blk, tile, stmt):
        rows, cols = np.arange(tile.rows)[:, None], np.arange(tile.cols)[None, :]
        data, flat, units = self._locate(blk, tile, rows, cols, stmt_text(stmt))
        flat = np.broadcast_to(flat, (self.nwarps, tile.rows, tile.cols))
        if units is not None:
            units = np.broadcast_to(units, (self.nwarps, *units.shape[1:]))
        # Warp-collective: the issuer is the whole warp (ids after the thread ids).
        issuers = (
            (self.threads + np.arange(self.nwarps)).reshape(-1, *([1] * (units.ndim - 1)))
            if units is not None
            else None
        )
        return data, flat, units, issuers

    def _read_tile(self, blk: _Block, tile: Tile, stmt) -> np.ndarray:
        data, flat, units, issuers = self._warp_tile(blk, tile, stmt)
        if units is not None:
            self._not_in_flight(blk, units, stmt)
            self._log(blk, units, issuers, False, stmt)
        return data[flat]

    def _write_tile(self, blk: _Block, tile: Tile, values, stmt) -> None:
        data, flat, units, issuers = self._warp_tile(blk, tile, stmt)
        if units is not None:
            self._not_in_flight(blk, units, stmt)
            self._not_being_read(blk, units, stmt)
            self._log(blk, units, issuers, True, stmt)
        data[flat] = encode(values, self._dtype(tile))

    def _dtype(self, tile: Tile) -> str:
        if isinstance(tile, SharedTile):
            return self.k.buffer(tile.buffer).dtype
        return self.k.gemm.operand(tile.operand).dtype

    def _copy(self, blk: _Block, c: Copy) -> None:
        rows, cols, v = copy_chunks(c)
        if c.by == "block":
            issuers = np.broadcast_to((v % self.threads)[:, None], cols.shape)[None]
        else:
            lanes = (v % self.ww)[:, None]
            issuers = (np.arange(self.nwarps) * self.ww)[:, None, None] + lanes[None]
        text = stmt_text(c)
        inside: list = [] if c.guard else None
        src, sflat, sunits = self._locate(blk, c.src, rows, cols, text, inside)
        dst, dflat, dunits = self._locate(blk, c.dst, rows, cols, text, inside)
        shape = np.broadcast_shapes(sflat.shape, dflat.shape, issuers.shape)
        sflat, dflat = np.broadcast_to(sflat, shape), np.broadcast_to(dflat, shape)
        issuers = np.broadcast_to(issuers, shape)
        whole = np.ones(shape[:-1], bool)  # chunks moved as one vector
        mask = None
        if c.guard:
            # As emitted: a whole vector only inside the operand and with an aligned
            # leading dimension; element by element (no alignment needed) elsewhere.
            mask = np.broadcast_to(inside[0], shape)
            glob = c.src if isinstance(c.src, GlobalTile) else c.dst
            ld = int(evaluate(self.k.gemm.operand(glob.operand).leading_dim, blk.env))
            whole = mask.all(axis=-1) & (ld % c.vector == 0)
        for tile, flat in ((c.src, sflat), (c.dst, dflat)):
            self._check_alignment(tile, flat[whole][..., 0], c.vector, text)
            if c.vector > 1 and (np.diff(flat[whole], axis=-1) != 1).any():
                raise InterpreterError(
                    f"{text}: a vector's elements are not contiguous "
                    f"in {getattr(tile, 'buffer', None) or tile.operand}"
                )
        if sunits is not None:
            sunits = np.broadcast_to(sunits, (*shape, *sunits.shape[len(shape) :]))
            self._not_in_flight(blk, sunits, c)
            self._log(blk, sunits, _expand(issuers, sunits), False, c)
        if c.epilogue is not None:
            values = self._epilogue(blk, c, src[sflat], dst, dflat, cols, shape)
        else:
            values = convert(src[sflat], self._dtype(c.src), self._dtype(c.dst))
        if mask is not None and dunits is not None:
            values = np.where(mask, values, np.zeros((), dst.dtype))  # a load: zero-filled
        if dunits is None:
            if mask is not None:  # a store: elements outside the operand are skipped
                dflat, values = dflat[mask], values[mask]
            dst[dflat] = values
            return
        dunits = np.broadcast_to(dunits, (*shape, *dunits.shape[len(shape) :]))
        self._not_in_flight(blk, dunits, c)
        self._not_being_read(blk, dunits, c)
        if c.mode == "async":
            blk.uncommitted.append(
                _Pending(dst, dflat, values, dunits, _expand(issuers, dunits), c)
            )
            blk.inflight[dunits] = True
        else:
            dst[dflat] = values
            self._log(blk, dunits, _expand(issuers, dunits), True, c)

    def _epilogue(self, blk: _Block, c: Copy, stored, dst, dflat, cols, shape):
        """C's storage values after the epilogue: as the kernel computes them, in float32."""
        ep = c.epilogue
        acc = decode(stored, self._dtype(c.src)).astype(np.float32)
        c_old = decode(dst[dflat], self._dtype(c.dst)) if ep.reads_c else None
        biases = {}
        if ep.bias_operands:
            col = np.asarray(evaluate(c.dst.origin[1], blk.env)).reshape(-1, 1, 1)
            col = col + np.asarray(evaluate(c.dst.offset[1], blk.env)).reshape(-1, 1, 1) + cols
            col = np.broadcast_to(col, shape)
            for name in ep.bias_operands:
                op = self.k.gemm.operand(name)
                n = int(evaluate(op.dims[0], blk.env))
                values = decode(self.arrays[name], op.dtype)
                biases[name] = values[np.clip(col, 0, n - 1)]  # clipped: skipped past the edge
        return encode(ep.apply(acc, c_old, biases), self._dtype(c.dst))

    def _not_in_flight(self, blk: _Block, units, stmt) -> None:
        if blk.inflight[units].any():
            raise InterpreterError(
                f"`{stmt_text(stmt)}` touches shared memory that a cp.async is "
                "still filling: a wait_group (and barrier) is missing before it"
            )

    def _async_read(self, s) -> bool:
        """A wgmma operand: read by the tensor cores until its group retires."""
        return (
            self.mma_groups
            and isinstance(s, LoadFrag)
            and isinstance(s.src, SharedTile)
            and self.k.fragment(s.frag.name).role != "accumulator"
        )

    def _not_being_read(self, blk: _Block, units, stmt) -> None:
        if (blk.mma_busy[np.asarray(units)] > 0).any():
            raise InterpreterError(
                f"`{stmt_text(stmt)}` overwrites shared memory that a wgmma may still be "
                "reading: a wgmma.wait_group (and barrier) is missing before it"
            )

    def _check_fragment_pointer(self, blk: _Block, tile: Tile, stmt) -> None:
        """The path's pointer contract (InstructionPath.operands / .accumulators): a WMMA
        pointer 32-byte aligned with a leading dimension of whole 16 bytes; each lane's own
        address aligned (`_check_lane_pointers`); or a descriptor's tile."""
        if isinstance(tile, SharedTile):
            buf = self.k.buffer(tile.buffer)
            size, base, ld = DTYPE_BYTES[buf.dtype], self.offsets[buf.name], buf.pitch
        else:
            op = self.k.gemm.operand(tile.operand)
            size, base, ld = DTYPE_BYTES[op.dtype], 0, int(evaluate(op.leading_dim, blk.env))
        path = self.k.schedule.path
        role = self.k.fragment(stmt.frag.name).role
        access = path.accumulators if role == "accumulator" else path.operands
        if access == "descriptor":  # an IR not yet pipelined reads synchronously: no descriptor
            if self._async_read(stmt):
                self._check_descriptor(blk, tile, stmt, size, base)
            return
        if access in ("lane_rows", "lane_pairs"):
            self._check_lane_pointers(blk, tile, stmt, size, base)
            return
        zero = np.zeros((1, 1), np.int64)
        _, flat, _ = self._locate(blk, tile, zero, zero, stmt_text(stmt))
        if ((base + flat * size) % 32).any() or (ld * size) % 16:
            raise InterpreterError(
                f"`{stmt_text(stmt)}`: WMMA needs a 32-byte aligned pointer "
                f"and a leading dimension of whole 16 bytes (ld = {ld})"
            )

    def _check_descriptor(self, blk: _Block, tile: SharedTile, stmt, size: int, base: int):
        """wgmma's descriptor: a 128-byte-swizzled tile whose first line is a multiple of 8
        (the swizzle's phase), its first element on 16 bytes, the buffer on 1024 bytes."""
        buf = self.k.buffer(tile.buffer)
        if not buf.panel:
            return  # before padding: an IR to interpret, not yet to emit as wgmma
        line_e, pos_e = tile.offset if buf.layout == "row" else tile.offset[::-1]
        line = np.asarray(evaluate(line_e, blk.env))
        pos = np.asarray(evaluate(pos_e, blk.env))
        if base % 1024 or (line % 8).any() or ((pos * size) % 16).any():
            raise InterpreterError(
                f"`{stmt_text(stmt)}`: a wgmma descriptor needs a 128-byte-swizzled tile "
                "starting on a line in 8s and 16 bytes, in a buffer on 1024 bytes"
            )

    def _check_lane_pointers(self, blk: _Block, tile: Tile, stmt, size: int, base: int) -> None:
        """mma.sync: ldmatrix reads whole 16-byte lines, and an accumulator lane moves two
        elements of a row-major row at once; each such address must be aligned to its width."""
        frag = self.k.fragment(stmt.frag.name)
        if isinstance(tile, SharedTile):
            layout = self.k.buffer(tile.buffer).layout
        else:
            layout = self.k.gemm.operand(tile.operand).layout
        width = 2 * size if frag.role == "accumulator" else 16
        if frag.role == "accumulator" and layout == "col":
            return  # stored element by element
        step = width // size
        if layout == "row":
            rows, cols = np.arange(tile.rows), np.arange(0, tile.cols, step)
        else:
            rows, cols = np.arange(0, tile.rows, step), np.arange(tile.cols)
        _, flat, _ = self._locate(
            blk, tile, rows.reshape(-1, 1), cols.reshape(1, -1), stmt_text(stmt)
        )
        if ((base + flat * size) % width).any():
            raise InterpreterError(
                f"`{stmt_text(stmt)}`: mma.sync needs each lane's {width}-byte access aligned"
            )

    def _check_alignment(self, tile: Tile, first: np.ndarray, vector: int, what: str) -> None:
        if isinstance(tile, SharedTile):
            buf = self.k.buffer(tile.buffer)
            size = DTYPE_BYTES[buf.dtype]
            addr = self.offsets[buf.name] + first * size
        else:
            size = DTYPE_BYTES[self.k.gemm.operand(tile.operand).dtype]
            addr = first * size
        if vector > 1 and (addr % (vector * size)).any():
            raise InterpreterError(f"{what}: a {vector * size}-byte vector access is misaligned")

    # ------------------------------------------------------------ races
    def _log(self, blk: _Block, units, issuers, write: bool, stmt) -> None:
        units = np.asarray(units)
        issuers = np.broadcast_to(issuers, units.shape)
        threads = self.threads
        warps = np.where(issuers >= threads, issuers - threads, issuers // self.ww)
        sid = self.stmt_ids.setdefault(id(stmt), len(self.stmts))
        if sid == len(self.stmts):
            self.stmts.append(stmt_text(stmt))
        flat_warps = warps.ravel()
        blk.log.append(
            _Access(units.ravel(), issuers.ravel(), flat_warps, blk.epochs[flat_warps], write, sid)
        )

    def _check_phase(self, blk: _Block) -> None:
        if blk.log:
            self._check_units(blk, blk.log)
        blk.log = []

    def _check_units(self, blk: _Block, accesses: list[_Access]) -> None:
        units = np.concatenate([a.units for a in accesses])
        issuers = np.concatenate([a.issuers for a in accesses])
        warps = np.concatenate([a.warps for a in accesses])
        epochs = np.concatenate([a.epochs for a in accesses])
        writes = np.concatenate([np.full(a.units.size, a.write) for a in accesses])
        written = np.unique(units[writes])
        if written.size == 0:
            return
        # (a) one unit touched by two warps, one of them writing: only a block barrier orders.
        pairs = np.unique(units * self.nwarps + warps)
        unit_of, counts = np.unique(pairs // self.nwarps, return_counts=True)
        racy = np.intersect1d(unit_of[counts > 1], written)
        if racy.size == 0:
            # (b) within one warp and warp-epoch: two issuers (lanes vs the warp), one writing.
            span = int(epochs.max()) + 1
            group = (units * self.nwarps + warps) * span + epochs
            group_pairs = np.unique(np.stack([group, issuers], axis=1), axis=0)
            g, gcounts = np.unique(group_pairs[:, 0], return_counts=True)
            racy_groups = np.intersect1d(g[gcounts > 1], np.unique(group[writes]))
            if racy_groups.size == 0:
                return
            racy = np.array([racy_groups[0] // span // self.nwarps])
        self._report(blk, int(racy[0]), accesses)

    def _report(self, blk: _Block, unit: int, accesses: list[_Access]) -> None:
        hits = []
        for a in accesses:
            mask = a.units == unit
            if mask.any():
                who = int(a.issuers[mask][0])
                actor = f"warp {who - self.threads}" if who >= self.threads else f"thread {who}"
                hits.append((a.write, actor, self.stmts[a.stmt]))
        write = next(h for h in hits if h[0])
        other = next((h for h in hits if h[1] != write[1]), hits[-1])
        kind = "write" if other[0] else "read"
        raise RaceError(
            f"shared-memory race on {self._where(unit * UNIT, write[2])} in block "
            f"{blk.env['pid']}: write by {write[1]} in `{write[2]}` and {kind} by {other[1]} in "
            f"`{other[2]}`, with no barrier between them"
        )

    def _where(self, byte: int, text: str) -> str:
        """Buffer[slot][row][col] of a byte; of the buffers sharing it, the one `text` names."""
        places = []
        for b in self.k.buffers:
            start = self.offsets[b.name]
            if start <= byte < start + b.size_bytes:
                elem = (byte - start) // DTYPE_BYTES[b.dtype]
                slot, rest = divmod(elem, b.lines * b.pitch)
                row, col = divmod(rest, b.pitch)
                if b.layout == "col":
                    row, col = col, row
                places.append((f"{b.name}[" not in text, f"{b.name}[{slot}][{row}][{col}]"))
        return min(places)[1] if places else f"byte {byte}"


def copy_chunks(c: Copy):
    """(rows, cols, chunk ids): the elements each chunk of a copy moves, as the emitted
    loop spreads them; chunk v goes to thread (or lane) v % workers."""
    if c.axis == "cols":
        per_line = c.src.cols // c.vector
        v = np.arange(c.src.rows * per_line)
        cols = ((v % per_line) * c.vector)[:, None] + np.arange(c.vector)[None, :]
        rows = np.broadcast_to((v // per_line)[:, None], cols.shape)
    else:
        per_line = c.src.rows // c.vector
        v = np.arange(c.src.cols * per_line)
        rows = ((v % per_line) * c.vector)[:, None] + np.arange(c.vector)[None, :]
        cols = np.broadcast_to((v // per_line)[:, None], rows.shape)
    return rows, cols, v


def _expand(issuers, units):
    """Issuers broadcast over the trailing unit axis of a multi-unit (f32) element."""
    extra = units.ndim - issuers.ndim
    return np.broadcast_to(issuers.reshape(*issuers.shape, *([1] * extra)), units.shape)
