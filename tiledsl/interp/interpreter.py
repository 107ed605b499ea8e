"""The numpy interpreter of the IR: the executor, and the one entry point.

    stats = interpret(kernel, arrays, sizes)   # the output array is written in place

It executes what the emitter emits: every block of the grid, in order; inside a
block every statement runs for all warps at once (numpy over a leading warp
axis), copies spread over threads or lanes exactly as the emitted loops spread
them (`copy_chunks`), and fragments held per warp. Values follow the tensor cores:
inputs are f16, products exact, sums in the accumulator's type.

Async copies (cp.async) read global memory when issued and land when a
`wait_group` retires their group; touching bytes still in flight is an error.

wgmma (`mma m64nNk16`) reads its A and B tiles asynchronously: from the issue until
the `wgmma.wait_group` that retires its group. The interpreter reads them at the issue,
refuses any write to them before that wait, and logs the reads again at the wait, so a
write by another warp that no barrier orders after the wait is a race.

The executor leans on three modules of one concern each:

    tiles       where a tile's elements are (the block's shared arena, a global array)
    contracts   what each instruction asks of its addresses (the path's pointer contracts)
    races       the race log: accesses per barrier phase, the happens-before check
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np

from ..ir.dtypes import VALUE, convert, decode, encode
from ..ir.expr import INT32, evaluate
from ..ir.grid import block_tile, grid_vars
from ..ir.nodes import (
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
from .contracts import check_fragment_pointer, check_vectors
from .errors import InterpreterError, RaceError
from .races import RaceLog
from .tiles import UNIT, Memory, checked_int

__all__ = ["InterpreterError", "RaceError", "Stats", "copy_chunks", "interpret"]


@dataclass
class Stats:
    blocks: int = 0
    block_barriers: int = 0
    warp_barriers: int = 0
    mma: int = 0
    async_groups: int = 0


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
    """One block's running state: its environment, memory and fragments, and what is in
    flight (cp.async groups landing, wgmma groups still reading)."""

    env: dict
    memory: Memory
    frags: dict[str, np.ndarray]
    inflight: np.ndarray  # per unit: an async copy is still filling it
    mma_busy: np.ndarray  # per unit: wgmma reads in flight
    uncommitted: list[_Pending] = field(default_factory=list)
    groups: list[list[_Pending]] = field(default_factory=list)
    # wgmma reads in flight: (units, issuers, stmt) per read, grouped like cp.async's
    mma_reads: list = field(default_factory=list)
    mma_groups: list[list] = field(default_factory=list)


def interpret(kernel: KernelIR, arrays: dict[str, np.ndarray], sizes: dict[str, int]) -> Stats:
    """Run `kernel` over global `arrays` (1-D, storage order; the output is written in place)."""
    return _Interpreter(kernel, arrays, sizes).run()


class _Interpreter:
    def __init__(self, kernel: KernelIR, arrays: dict[str, np.ndarray], sizes: dict[str, int]):
        self.kernel = kernel
        self.arrays = arrays
        self.sizes = dict(sizes)
        self.stats = Stats()
        self.warp_width = kernel.warp_width
        self.warps = kernel.warp_count
        self.threads = kernel.threads
        self.offsets = buffer_offsets(kernel)
        self.arena_bytes = max(
            [self.offsets[b.name] + b.size_bytes for b in kernel.buffers], default=0
        )
        self.warp_env = kernel.warp_coords()
        self.async_mma = async_mma(kernel)
        self.races = RaceLog(kernel, self.offsets)

    def run(self) -> Stats:
        grid = {
            name: checked_int(e, self.sizes, name) for name, e in grid_vars(self.kernel).items()
        }
        mapping = block_tile(self.kernel)
        batch = self.kernel.gemm.batch
        batches = int(evaluate(batch, self.sizes)) if batch is not None else 1
        blocks = grid["tiles_m"] * grid["tiles_n"]
        if blocks > INT32[1]:
            raise InterpreterError(f"{blocks} blocks: more than the grid's x axis (blockIdx.x)")
        for bz, pid in itertools.product(range(batches), range(blocks)):
            self._run_block(grid, mapping, bz, pid)
        return self.stats

    def _run_block(self, grid: dict, mapping: dict, bz: int, pid: int) -> None:
        env = {**self.sizes, **grid, "pid": pid, "bz": bz}
        for name, e in mapping.items():  # in order: each step may use the ones before
            env[name] = checked_int(e, env, name)
        env.update(self.warp_env)
        frags: dict[str, np.ndarray] = {
            f.name: np.zeros((self.warps, *f.count, f.rows, f.cols), VALUE[f.dtype])
            for f in self.kernel.fragments
        }
        units = self.arena_bytes // UNIT
        blk = _Block(
            env,
            Memory(self.kernel, self.arrays, self.offsets, self.arena_bytes, env),
            frags,
            inflight=np.zeros(units, bool),
            mma_busy=np.zeros(units, np.int32),
        )
        self.races.start_block(pid)
        self._body(blk, self.kernel.body)
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
        self.races.check_phase()
        self.stats.blocks += 1

    # ------------------------------------------------------------ statements
    def _body(self, blk: _Block, body) -> None:
        for stmt in body:
            self._execute(blk, stmt)

    def _execute(self, blk: _Block, s) -> None:
        match s:
            case For():
                self._loop(blk, s)
            case If():
                self._branch(blk, s)
            case Fill():
                frag, i, j = self._frag(blk, s.frag)
                frag[:, i, j] = s.value
            case LoadFrag():
                self._load_fragment(blk, s)
            case MmaFence():
                pass  # orders registers for the hardware; the interpreter's are always in order
            case MmaCommit():
                blk.mma_groups.append(blk.mma_reads)
                blk.mma_reads = []
            case MmaWait():
                self._retire_mmas(blk, s.pending)
            case Mma():
                self._mma(blk, s)
            case StoreFrag():
                check_fragment_pointer(blk.memory, s.dst, s, read_async=False)
                frag, i, j = self._frag(blk, s.frag)
                self._write_tile(blk, s.dst, frag[:, i, j], s)
            case Copy():
                self._copy(blk, s)
            case AsyncCommit():
                blk.groups.append(blk.uncommitted)
                blk.uncommitted = []
                self.stats.async_groups += 1
            case AsyncWait():
                self._retire_copies(blk, s.pending)
            case Barrier(scope="block"):
                self.races.check_phase()
                self.stats.block_barriers += 1
            case Barrier():
                self.races.warp_barrier()
                self.stats.warp_barriers += 1
            case _:
                raise InterpreterError(f"cannot interpret {type(s).__name__}")

    def _loop(self, blk: _Block, s: For) -> None:
        start, stop = int(evaluate(s.start, blk.env)), int(evaluate(s.stop, blk.env))
        for value in range(start, stop, s.step):
            blk.env[s.var] = value
            self._body(blk, s.body)
        blk.env.pop(s.var, None)

    def _branch(self, blk: _Block, s: If) -> None:
        lhs, rhs = evaluate(s.lhs, blk.env), evaluate(s.rhs, blk.env)
        if np.ndim(lhs) or np.ndim(rhs):  # all warps run a statement at once: one branch
            raise InterpreterError(f"`if` on a thread-dependent condition: {stmt_text(s)}")
        taken = lhs < rhs if s.op == "<" else lhs == rhs
        self._body(blk, s.then if taken else s.orelse)

    # ------------------------------------------------------------ fragments
    def _frag(self, blk: _Block, ref):
        i, j = int(evaluate(ref.i, blk.env)), int(evaluate(ref.j, blk.env))
        return blk.frags[ref.name], i, j

    def _reads_async(self, s: LoadFrag) -> bool:
        """A wgmma operand: read by the tensor cores until its group retires."""
        return bool(
            self.async_mma
            and isinstance(s.src, SharedTile)
            and self.kernel.fragment(s.frag.name).role != "accumulator"
        )

    def _load_fragment(self, blk: _Block, s: LoadFrag) -> None:
        read_async = self._reads_async(s)
        check_fragment_pointer(blk.memory, s.src, s, read_async)
        frag, i, j = self._frag(blk, s.frag)
        values = decode(self._read_tile(blk, s.src, s), blk.memory.dtype(s.src))
        frag[:, i, j] = values.astype(frag.dtype)
        if read_async:  # the tensor cores go on reading: no writes there until the wait
            _, _, units, issuers = blk.memory.warp_tile(s.src, stmt_text(s))
            blk.mma_reads.append((units, issuers, s))
            np.add.at(blk.mma_busy, units.ravel(), 1)

    def _retire_mmas(self, blk: _Block, pending: int) -> None:
        """wgmma.wait_group: the oldest groups are done reading; their reads last till here."""
        while len(blk.mma_groups) > pending:
            for units, issuers, stmt in blk.mma_groups.pop(0):
                np.add.at(blk.mma_busy, units.ravel(), -1)
                self.races.record(units, issuers, False, stmt)  # still read until here

    def _mma(self, blk: _Block, s: Mma) -> None:
        acc, ai, aj = self._frag(blk, s.acc)
        a, i, j = self._frag(blk, s.a)
        b, bi, bj = self._frag(blk, s.b)
        product = np.matmul(a[:, i, j].astype(np.float32), b[:, bi, bj].astype(np.float32))
        acc[:, ai, aj] = (acc[:, ai, aj].astype(np.float32) + product).astype(acc.dtype)
        self.stats.mma += self.warps

    # ------------------------------------------------------------ tiles
    def _read_tile(self, blk: _Block, tile: Tile, stmt) -> np.ndarray:
        data, flat, units, issuers = blk.memory.warp_tile(tile, stmt_text(stmt))
        if units is not None:
            self._not_in_flight(blk, units, stmt)
            self.races.record(units, issuers, False, stmt)
        return data[flat]

    def _write_tile(self, blk: _Block, tile: Tile, values, stmt) -> None:
        data, flat, units, issuers = blk.memory.warp_tile(tile, stmt_text(stmt))
        if units is not None:
            self._not_in_flight(blk, units, stmt)
            self._not_being_read(blk, units, stmt)
            self.races.record(units, issuers, True, stmt)
        data[flat] = encode(values, blk.memory.dtype(tile))

    def _not_in_flight(self, blk: _Block, units, stmt) -> None:
        if blk.inflight[units].any():
            raise InterpreterError(
                f"`{stmt_text(stmt)}` touches shared memory that a cp.async is "
                "still filling: a wait_group (and barrier) is missing before it"
            )

    def _not_being_read(self, blk: _Block, units, stmt) -> None:
        if (blk.mma_busy[np.asarray(units)] > 0).any():
            raise InterpreterError(
                f"`{stmt_text(stmt)}` overwrites shared memory that a wgmma may still be "
                "reading: a wgmma.wait_group (and barrier) is missing before it"
            )

    # ------------------------------------------------------------ copies
    def _copy(self, blk: _Block, c: Copy) -> None:
        rows, cols, v = copy_chunks(c)
        issuers = self._copy_issuers(c, v, cols)
        text = stmt_text(c)
        inside: list | None = [] if c.guard else None
        src, sflat, sunits = blk.memory.locate(c.src, rows, cols, text, inside)
        dst, dflat, dunits = blk.memory.locate(c.dst, rows, cols, text, inside)
        shape = np.broadcast_shapes(sflat.shape, dflat.shape, issuers.shape)
        sflat, dflat = np.broadcast_to(sflat, shape), np.broadcast_to(dflat, shape)
        issuers = np.broadcast_to(issuers, shape)
        mask, whole = self._guard(blk, c, inside, shape)
        check_vectors(blk.memory, c, c.src, sflat, whole, text)
        check_vectors(blk.memory, c, c.dst, dflat, whole, text)
        if sunits is not None:
            sunits = np.broadcast_to(sunits, (*shape, *sunits.shape[len(shape) :]))
            self._not_in_flight(blk, sunits, c)
            self.races.record(sunits, _expand(issuers, sunits), False, c)
        if c.epilogue is not None:
            values = self._epilogue(blk, c, src[sflat], dst, dflat, cols, shape)
        else:
            values = convert(src[sflat], blk.memory.dtype(c.src), blk.memory.dtype(c.dst))
        if mask is not None and dunits is not None:
            values = np.where(mask, values, np.zeros((), dst.dtype))  # a load: zero-filled
        if dunits is None:
            if mask is not None:  # a store: elements outside the operand are skipped
                dflat, values = dflat[mask], values[mask]
            dst[dflat] = values
            return
        dunits = np.broadcast_to(dunits, (*shape, *dunits.shape[len(shape) :]))
        self._land(blk, c, dst, dflat, dunits, values, _expand(issuers, dunits))

    def _copy_issuers(self, c: Copy, v: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Who moves each chunk: thread v % threads of the block, or lane v % warp width of
        every warp (`by warp`); a leading warp axis either way."""
        if c.by == "block":
            return np.broadcast_to((v % self.threads)[:, None], cols.shape)[None]
        lanes = (v % self.warp_width)[:, None]
        return (np.arange(self.warps) * self.warp_width)[:, None, None] + lanes[None]

    def _guard(self, blk: _Block, c: Copy, inside: list | None, shape) -> tuple:
        """(in-bounds mask or None, chunks moved as one vector) of a copy."""
        whole = np.ones(shape[:-1], bool)
        if not c.guard:
            return None, whole
        # As emitted: a whole vector only inside the operand and with an aligned
        # leading dimension; element by element (no alignment needed) elsewhere.
        assert inside is not None  # a guarded copy's bounds, collected by locate
        mask = np.broadcast_to(inside[0], shape)
        glob = c.src if isinstance(c.src, GlobalTile) else c.dst
        assert isinstance(glob, GlobalTile)  # a guarded copy has a global side
        ld = int(evaluate(self.kernel.gemm.operand(glob.operand).leading_dim, blk.env))
        return mask, mask.all(axis=-1) & (ld % c.vector == 0)

    def _land(self, blk: _Block, c: Copy, dst, dflat, dunits, values, issuers) -> None:
        """A copy's values into shared memory: now, or (cp.async) when its group retires."""
        self._not_in_flight(blk, dunits, c)
        self._not_being_read(blk, dunits, c)
        if c.mode == "async":
            blk.uncommitted.append(_Pending(dst, dflat, values, dunits, issuers, c))
            blk.inflight[dunits] = True
        else:
            dst[dflat] = values
            self.races.record(dunits, issuers, True, c)

    def _retire_copies(self, blk: _Block, pending: int) -> None:
        """cp.async.wait_group: the oldest groups land, and count as written here."""
        while len(blk.groups) > pending:
            for p in blk.groups.pop(0):
                p.view[p.flat] = p.values
                blk.inflight[p.units] = False
                self.races.record(p.units, p.issuers, True, p.stmt)

    def _epilogue(self, blk: _Block, c: Copy, stored, dst, dflat, cols, shape):
        """C's storage values after the epilogue: as the kernel computes them, in float32."""
        ep = c.epilogue
        assert ep is not None and isinstance(c.dst, GlobalTile)  # a store into C
        memory = blk.memory
        acc = decode(stored, memory.dtype(c.src)).astype(np.float32)
        c_old = decode(dst[dflat], memory.dtype(c.dst)) if ep.reads_c else None
        biases: dict[str, np.ndarray] = {}
        if ep.bias_operands:
            col = np.asarray(evaluate(c.dst.origin[1], blk.env)).reshape(-1, 1, 1)
            col = col + np.asarray(evaluate(c.dst.offset[1], blk.env)).reshape(-1, 1, 1) + cols
            col = np.broadcast_to(col, shape)
            for name in ep.bias_operands:
                op = self.kernel.gemm.operand(name)
                n = int(evaluate(op.dims[0], blk.env))
                values = decode(self.arrays[name], op.dtype)
                biases[name] = values[np.clip(col, 0, n - 1)]  # clipped: skipped past the edge
        return encode(ep.apply(acc, c_old, biases), memory.dtype(c.dst))


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
