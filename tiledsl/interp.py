"""The numpy interpreter of the IR, with a shared-memory race detector.

It executes what the emitter emits: every block of the grid, in order; inside a
block every statement runs for all warps at once (numpy over a leading warp
axis), copies spread over threads or lanes exactly as the emitted loops spread
them, and fragments held per warp. Values follow the tensor cores: inputs are
f16, products exact, sums in the accumulator's type.

Races: every shared-memory access is logged with its issuer — a thread for
copies, the whole warp for warp-collective fragment ops (their lane mapping is
unspecified) — and the warp-barrier epoch of its warp. At each block barrier
the phase's log is checked: two accesses to one element, one a write, race when
they come from different warps, or from different issuers of one warp with no
`__syncwarp` between them. The execution order inside a phase cannot hide a
race, since the check is on happens-before, not on the values seen.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .expr import Expr, evaluate
from .grid import block_tile, grid_vars
from .ir import (
    DTYPE_BYTES,
    Barrier,
    Copy,
    Fill,
    For,
    KernelIR,
    LoadFrag,
    Mma,
    SharedTile,
    StoreFrag,
    Tile,
    buffer_offsets,
)
from .printer import stmt_text

NP_DTYPES = {"f16": np.float16, "f32": np.float32, "bf16": np.float32}


class InterpreterError(Exception):
    """The IR did something the GPU would fault on or race on."""


class RaceError(InterpreterError):
    pass


@dataclass
class Stats:
    blocks: int = 0
    block_barriers: int = 0
    warp_barriers: int = 0
    mma: int = 0


@dataclass
class _Access:
    elems: np.ndarray  # flat element indices into the buffer
    issuers: np.ndarray  # thread id, or threads + warp for warp-collective ops
    warps: np.ndarray
    epochs: np.ndarray  # warp-barrier epoch of the issuing warp
    write: bool
    stmt: int


@dataclass
class _Block:
    env: dict
    smem: dict[str, np.ndarray]
    frags: dict[str, np.ndarray]
    epochs: np.ndarray
    log: dict[str, list[_Access]] = field(default_factory=dict)


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
        self.ww = kernel.target.warp_width
        self.nwarps = kernel.warp_count
        self.offsets = buffer_offsets(kernel)
        warp = np.arange(self.nwarps)
        self.warp_env = {"warp": warp, "wm": warp // kernel.warps[1], "wn": warp % kernel.warps[1]}

    def run(self) -> Stats:
        grid = {name: int(evaluate(e, self.sizes)) for name, e in grid_vars(self.k).items()}
        mapping = block_tile(self.k)
        for pid in range(grid["tiles_m"] * grid["tiles_n"]):
            env = {**self.sizes, **grid, "pid": pid}
            env.update({name: int(evaluate(e, env)) for name, e in mapping.items()})
            env.update(self.warp_env)
            smem = {
                b.name: np.full((b.slots, b.rows, b.pitch), np.nan, NP_DTYPES[b.dtype])
                for b in self.k.buffers
            }
            frags = {
                f.name: np.zeros((self.nwarps, *f.count, f.rows, f.cols), NP_DTYPES[f.dtype])
                for f in self.k.fragments
            }
            block = _Block(env, smem, frags, np.zeros(self.nwarps, np.int64))
            self._body(block, self.k.body)
            self._check_phase(block)
            self.stats.blocks += 1
        return self.stats

    # ------------------------------------------------------------ statements
    def _body(self, blk: _Block, body) -> None:
        for stmt in body:
            self._stmt(blk, stmt)

    def _stmt(self, blk: _Block, s) -> None:
        if isinstance(s, For):
            start, stop = int(evaluate(s.start, blk.env)), int(evaluate(s.stop, blk.env))
            for value in range(start, stop, s.step):
                blk.env[s.var] = value
                self._body(blk, s.body)
            blk.env.pop(s.var, None)
        elif isinstance(s, Fill):
            blk.frags[s.frag.name][:, s.frag.i, s.frag.j] = s.value
        elif isinstance(s, LoadFrag):
            self._check_fragment_pointer(blk, s.src, s)
            values = self._read_tile(blk, s.src, self._warp_issuers(), s)
            frag = blk.frags[s.frag.name]
            frag[:, s.frag.i, s.frag.j] = values.astype(frag.dtype)
        elif isinstance(s, Mma):
            acc = blk.frags[s.acc.name]
            a = blk.frags[s.a.name][:, s.a.i, s.a.j].astype(np.float32)
            b = blk.frags[s.b.name][:, s.b.i, s.b.j].astype(np.float32)
            total = acc[:, s.acc.i, s.acc.j].astype(np.float32) + np.matmul(a, b)
            acc[:, s.acc.i, s.acc.j] = total.astype(acc.dtype)
            self.stats.mma += self.nwarps
        elif isinstance(s, StoreFrag):
            self._check_fragment_pointer(blk, s.dst, s)
            frag = blk.frags[s.frag.name][:, s.frag.i, s.frag.j]
            self._write_tile(blk, s.dst, frag, self._warp_issuers(), s)
        elif isinstance(s, Copy):
            self._copy(blk, s)
        elif isinstance(s, Barrier):
            if s.scope == "block":
                self._check_phase(blk)
                self.stats.block_barriers += 1
            else:
                blk.epochs += 1
                self.stats.warp_barriers += 1
        else:
            raise InterpreterError(f"cannot interpret {type(s).__name__}")

    def _warp_issuers(self) -> np.ndarray:
        """Warp-collective ops are issued by the whole warp: ids after the thread ids."""
        return self.nwarps * self.ww + np.arange(self.nwarps)

    # ------------------------------------------------------------ tiles
    def _coords(self, blk: _Block, tile: Tile, rows, cols):
        """Per-warp row and column indices: arrays broadcast to (warps, *shape of rows)."""
        r0 = np.asarray(evaluate(tile.offset[0], blk.env)).reshape(-1, *([1] * rows.ndim))
        c0 = np.asarray(evaluate(tile.offset[1], blk.env)).reshape(-1, *([1] * cols.ndim))
        return r0 + rows, c0 + cols

    def _locate(self, blk: _Block, tile: Tile, rows, cols, what):
        """(array, flat indices) of elements (rows, cols) of `tile`, bounds-checked."""
        r, c = self._coords(blk, tile, rows, cols)
        if isinstance(tile, SharedTile):
            buf = self.k.buffer(tile.buffer)
            slot = np.asarray(evaluate(tile.slot, blk.env)).reshape(-1, *([1] * rows.ndim))
            if (
                (r < 0).any()
                or (r >= buf.rows).any()
                or (c < 0).any()
                or (c >= buf.cols).any()
                or (slot < 0).any()
                or (slot >= buf.slots).any()
            ):
                raise InterpreterError(f"{what} reaches outside shared buffer {buf.name}")
            return blk.smem[buf.name].reshape(-1), (slot * buf.rows + r) * buf.pitch + c
        op = self.k.gemm.operand(tile.operand)
        gr = r + np.asarray(evaluate(tile.origin[0], blk.env)).reshape(-1, *([1] * rows.ndim))
        gc = c + np.asarray(evaluate(tile.origin[1], blk.env)).reshape(-1, *([1] * cols.ndim))
        n_rows, n_cols = (int(evaluate(d, blk.env)) for d in op.dims[-2:])
        if (gr < 0).any() or (gr >= n_rows).any() or (gc < 0).any() or (gc >= n_cols).any():
            raise InterpreterError(
                f"{what} reaches outside {op.name} ({n_rows} x {n_cols}) in block {blk.env['pid']}"
            )
        flat = np.asarray(evaluate(op.offset(_V("r"), _V("c")), {**blk.env, "r": gr, "c": gc}))
        return self.arrays[op.name], flat

    def _read_tile(self, blk: _Block, tile: Tile, issuers, stmt) -> np.ndarray:
        rows, cols = np.arange(tile.rows)[:, None], np.arange(tile.cols)[None, :]
        data, flat = self._locate(blk, tile, rows, cols, stmt_text(stmt))
        flat = np.broadcast_to(flat, (self.nwarps, tile.rows, tile.cols))
        if isinstance(tile, SharedTile):
            self._log(blk, tile.buffer, flat, issuers[:, None, None], False, stmt)
        return data[flat]

    def _write_tile(self, blk: _Block, tile: Tile, values, issuers, stmt) -> None:
        rows, cols = np.arange(tile.rows)[:, None], np.arange(tile.cols)[None, :]
        data, flat = self._locate(blk, tile, rows, cols, stmt_text(stmt))
        flat = np.broadcast_to(flat, (self.nwarps, tile.rows, tile.cols))
        if isinstance(tile, SharedTile):
            self._log(blk, tile.buffer, flat, issuers[:, None, None], True, stmt)
        data[flat] = values.astype(data.dtype)

    def _copy(self, blk: _Block, c: Copy) -> None:
        row_vecs = c.src.cols // c.vector
        v = np.arange(c.src.rows * row_vecs)
        rows = (v // row_vecs)[:, None]
        cols = ((v % row_vecs) * c.vector)[:, None] + np.arange(c.vector)[None, :]
        rows = np.broadcast_to(rows, cols.shape)
        if c.by == "block":
            issuers = np.broadcast_to((v % self.k.threads)[:, None], cols.shape)[None]
        else:
            lanes = (v % self.ww)[:, None]
            issuers = (np.arange(self.nwarps) * self.ww)[:, None, None] + lanes[None]
        text = stmt_text(c)
        src, sflat = self._locate(blk, c.src, rows, cols, text)
        dst, dflat = self._locate(blk, c.dst, rows, cols, text)
        shape = np.broadcast_shapes(sflat.shape, dflat.shape, issuers.shape)
        sflat, dflat = np.broadcast_to(sflat, shape), np.broadcast_to(dflat, shape)
        issuers = np.broadcast_to(issuers, shape)
        for tile, flat in ((c.src, sflat), (c.dst, dflat)):
            self._check_alignment(tile, flat[..., 0], c.vector, text)
        if isinstance(c.src, SharedTile):
            self._log(blk, c.src.buffer, sflat, issuers, False, c)
        if isinstance(c.dst, SharedTile):
            self._log(blk, c.dst.buffer, dflat, issuers, True, c)
        dst[dflat] = src[sflat].astype(dst.dtype)

    def _check_fragment_pointer(self, blk: _Block, tile: Tile, stmt) -> None:
        """WMMA wants a 32-byte aligned pointer and a leading dimension of whole 16 bytes."""
        zero = np.zeros((1, 1), np.int64)
        _, flat = self._locate(blk, tile, zero, zero, stmt_text(stmt))
        if isinstance(tile, SharedTile):
            buf = self.k.buffer(tile.buffer)
            size, base, ld = DTYPE_BYTES[buf.dtype], self.offsets[buf.name], buf.pitch
        else:
            op = self.k.gemm.operand(tile.operand)
            size, base, ld = DTYPE_BYTES[op.dtype], 0, int(evaluate(op.leading_dim, blk.env))
        if ((base + flat * size) % 32).any() or (ld * size) % 16:
            raise InterpreterError(
                f"`{stmt_text(stmt)}`: WMMA needs a 32-byte aligned pointer "
                f"and a leading dimension of whole 16 bytes (ld = {ld})"
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
    def _log(self, blk: _Block, buffer: str, flat, issuers, write: bool, stmt) -> None:
        flat = np.asarray(flat)
        issuers = np.broadcast_to(issuers, flat.shape)
        warps = issuers % (self.nwarps * self.ww) // self.ww
        warps = np.where(issuers >= self.nwarps * self.ww, issuers - self.nwarps * self.ww, warps)
        sid = self.stmt_ids.setdefault(id(stmt), len(self.stmts))
        if sid == len(self.stmts):
            self.stmts.append(stmt_text(stmt))
        blk.log.setdefault(buffer, []).append(
            _Access(
                flat.ravel(), issuers.ravel(), warps.ravel(), blk.epochs[warps.ravel()], write, sid
            )
        )

    def _check_phase(self, blk: _Block) -> None:
        for buffer, accesses in blk.log.items():
            self._check_buffer(blk, buffer, accesses)
        blk.log = {}

    def _check_buffer(self, blk: _Block, buffer: str, accesses: list[_Access]) -> None:
        elems = np.concatenate([a.elems for a in accesses])
        issuers = np.concatenate([a.issuers for a in accesses])
        warps = np.concatenate([a.warps for a in accesses])
        epochs = np.concatenate([a.epochs for a in accesses])
        writes = np.concatenate([np.full(a.elems.size, a.write) for a in accesses])
        written = np.unique(elems[writes])
        if written.size == 0:
            return
        # (a) one element touched by two warps, one of them writing: only a block barrier orders.
        pairs = np.unique(elems * self.nwarps + warps)
        elem_of, counts = np.unique(pairs // self.nwarps, return_counts=True)
        racy = np.intersect1d(elem_of[counts > 1], written)
        if racy.size == 0:
            # (b) within one warp and warp-epoch: two issuers (lanes vs the warp), one writing.
            epoch_span = int(epochs.max()) + 1
            group = (elems * self.nwarps + warps) * epoch_span + epochs
            group_pairs = np.unique(np.stack([group, issuers], axis=1), axis=0)
            g, gcounts = np.unique(group_pairs[:, 0], return_counts=True)
            written_groups = np.unique(group[writes])
            racy_groups = np.intersect1d(g[gcounts > 1], written_groups)
            if racy_groups.size == 0:
                return
            racy = np.array([racy_groups[0] // epoch_span // self.nwarps])
        self._report(blk, buffer, int(racy[0]), accesses)

    def _report(self, blk: _Block, buffer: str, elem: int, accesses: list[_Access]) -> None:
        buf = self.k.buffer(buffer)
        slot, rest = divmod(elem, buf.rows * buf.pitch)
        row, col = divmod(rest, buf.pitch)
        hits = []
        for a in accesses:
            mask = a.elems == elem
            if mask.any():
                who = a.issuers[mask][0]
                threads = self.nwarps * self.ww
                actor = f"warp {who - threads}" if who >= threads else f"thread {who}"
                hits.append(
                    f"{'write' if a.write else 'read'} by {actor} in `{self.stmts[a.stmt]}`"
                )
        write = next(h for h in hits if h.startswith("write"))
        actor = write.split(" in ")[0].split(" by ")[1]
        other = next((h for h in hits if f"by {actor} in" not in h), hits[-1])
        raise RaceError(
            f"shared-memory race on {buffer}[{slot}][{row}][{col}] in block {blk.env['pid']}: "
            f"{write} and {other}, with no barrier between them"
        )


def _V(name: str) -> Expr:
    from .expr import Var

    return Var(name)
