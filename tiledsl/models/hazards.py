"""Which barriers a kernel needs: a hazard analysis over its shared-memory accesses.

Following TVM's ThreadSync, Triton's Membar and MLIR's gpu-eliminate-barriers:
every shared-memory access is modelled as (byte range, write or read, issuer),
where the issuer is a thread (block copies), a lane (warp copies) or a whole warp
(WMMA ops, whose lane mapping is unspecified). Two accesses need a barrier
between them when they may touch one byte, one writes, and different threads
may issue them: a block barrier when they may come from different warps, a warp
barrier when only from one warp (a warp's own staging slot). Anything not
provably disjoint overlaps; byte ranges make aliased buffers (Cs over As) meet.

The accesses come from straight-line traces of one block: loops with constant
bounds are unrolled, and the K loop is run for T = 1, 2, … S + 2 steps with its
conditions decided (the prologue's `s < T`, the steady state's `kt + S - 1 < T`),
which covers the prologue, the steady state with every slot in use, and the
drain: the accesses depend on kt only through kt % S and on T only near the end.
An async copy writes from its issue until the wait that retires its group, so
it is ordered after earlier accesses at its issue and before later ones at that
wait; an access in between is a missing wait, which no barrier mends. wgmma's reads
of its A and B tiles are asynchronous the same way, from the issue until the
`wgmma.wait_group` that retires their group.

A barrier is redundant when every hazard it orders is also ordered by another
barrier that stays. One buffer outside shared memory is traced the same way: split_k's
workspace on the direct path, written by every warp's partial store and released by
thread 0's ticket, which a block barrier must order. Each barrier's decision comes with
the hazard that keeps it (or the reason it goes), for `tiledsl compile --explain-sync`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..errors import error
from ..ir.expr import evaluate
from ..ir.grid import grid_vars
from ..ir.nodes import (
    DTYPE_BYTES,
    AsyncCommit,
    AsyncWait,
    Barrier,
    Copy,
    For,
    If,
    KernelIR,
    Let,
    LoadFrag,
    MmaCommit,
    MmaWait,
    PartialStore,
    SharedTile,
    Stmt,
    StoreFrag,
    Ticket,
    async_mma,
    buffer_offsets,
    fragment_tile,
    walk,
)
from ..ir.printer import stmt_text

INF = 1 << 60
#: The byte range the trace gives split_k's workspace: apart from every shared buffer's.
WORKSPACE = (-1, 0)


@dataclass
class _Access:
    start: int  # position of the access (for an async copy: its issue)
    end: int  # position where it is complete (for an async copy: the retiring wait)
    lo: int
    hi: int  # byte range [lo, hi)
    write: bool
    issuer: str  # "threads", "lanes", "warp" or "thread 0" (split_k's ticket)
    private: bool  # inside the issuing warp's own slot of a per-warp buffer
    signature: tuple  # copies with one signature give each element to the same thread
    stmt: object
    buffer: str


@dataclass(frozen=True)
class Hazard:
    kind: str  # RAW, WAR or WAW
    scope: str  # "block" or "warp"
    first: str
    second: str
    buffer: str


@dataclass(frozen=True)
class SyncDecision:
    index: int  # barriers numbered in program order, from 1
    barrier: Stmt  # a Barrier (or, for a warp-specialized kernel, any handoff statement)
    kept: bool
    why: str


class _Trace:
    def __init__(self, kernel: KernelIR, steps: int):
        self.k = kernel
        self.offsets = buffer_offsets(kernel)
        bm, bn, bk = kernel.schedule.block
        sizes = kernel.gemm.size_env(bm, bn, steps * bk)
        # block 0 (a split's Lets map it to its tile and slice)
        grid = {name: evaluate(e, sizes) for name, e in grid_vars(kernel).items()}
        self.env = {**sizes, **grid, "pid": 0, "bm": 0, "bn": 0, **kernel.warp_coords()}
        self.pos = 0
        self.accesses: list[_Access] = []
        self.barriers: list[tuple[int, Barrier]] = []
        self.pending: list[list[_Access]] = []  # committed groups in flight
        self.uncommitted: list[_Access] = []
        self.mma_pending: list[list[_Access]] = []  # wgmma groups in flight
        self.mma_uncommitted: list[_Access] = []
        self.async_mma = async_mma(kernel)

    def run(self, body) -> None:
        for s in body:
            self.pos += 1
            match s:
                case For():
                    start, stop = int(evaluate(s.start, self.env)), int(evaluate(s.stop, self.env))
                    for v in range(start, stop, s.step):
                        self.env[s.var] = v
                        self.run(s.body)
                    self.env.pop(s.var, None)
                case If():
                    lhs, rhs = evaluate(s.lhs, self.env), evaluate(s.rhs, self.env)
                    self.run(s.then if (lhs < rhs if s.op == "<" else lhs == rhs) else s.orelse)
                case Let():
                    self.env[s.var] = evaluate(s.value, self.env)
                case PartialStore():  # split_k's hand-over (tiledsl.passes.split_k)
                    self._workspace(s, write=True, issuer="warp")
                case Ticket():  # its release; then the last slice's branch, which stores C
                    self._workspace(s, write=False, issuer="thread 0")
                    self.env[s.var] = s.slices - 1
                case Barrier():
                    self.barriers.append((self.pos, s))
                case AsyncCommit():
                    self.pending.append(self.uncommitted)
                    self.uncommitted = []
                case AsyncWait():
                    while len(self.pending) > s.pending:
                        for a in self.pending.pop(0):
                            a.end = self.pos
                case Copy():
                    for tile, write in ((s.src, False), (s.dst, True)):
                        if isinstance(tile, SharedTile):
                            issuer = "threads" if s.by == "block" else "lanes"
                            sig = (s.by, tile.rows, tile.cols, s.vector)
                            a = self._access(tile, write, issuer, sig, s)
                            if write and s.mode == "async":
                                a.end = INF
                                self.uncommitted.append(a)
                case MmaCommit():
                    self.mma_pending.append(self.mma_uncommitted)
                    self.mma_uncommitted = []
                case MmaWait():
                    while len(self.mma_pending) > s.pending:
                        for a in self.mma_pending.pop(0):
                            a.end = self.pos
                case LoadFrag() | StoreFrag():
                    tile = fragment_tile(s)
                    if isinstance(tile, SharedTile):
                        a = self._access(tile, isinstance(s, StoreFrag), "warp", (), s)
                        role = self.k.fragment(s.frag.name).role
                        if self.async_mma and isinstance(s, LoadFrag) and role != "accumulator":
                            a.end = INF  # read by the tensor cores until its group retires
                            self.mma_uncommitted.append(a)

    def _workspace(self, stmt, write: bool, issuer: str) -> None:
        """split_k's partial sum in the global workspace, as one more buffer (its bytes
        apart from shared memory's): every warp writes it, thread 0's ticket releases it
        to the other slices, so a block barrier must order the two."""
        a = _Access(self.pos, self.pos, *WORKSPACE, write, issuer, False, (), stmt, "workspace")
        self.accesses.append(a)

    def _access(self, tile: SharedTile, write: bool, issuer: str, sig: tuple, stmt) -> _Access:
        buf = self.k.buffer(tile.buffer)
        lo, hi = tile_bytes(self.k, self.offsets, tile, self.env)
        private = buf.per_warp and str(tile.slot) == "warp"
        a = _Access(self.pos, self.pos, lo, hi, write, issuer, private, sig, stmt, buf.name)
        self.accesses.append(a)
        return a


def tile_bytes(kernel: KernelIR, offsets: dict[str, int], tile: SharedTile, env) -> tuple[int, int]:
    """The byte range [lo, hi) of the block's shared memory that `tile` may touch in `env`
    (over every warp when the env's warp coordinates are arrays)."""
    buf = kernel.buffer(tile.buffer)
    size = DTYPE_BYTES[buf.dtype]
    # ints where the env holds one warp's coordinates (the mbarrier proof's actors: most
    # of a warp-specialized compile's time is here), arrays over every warp otherwise
    slot = evaluate(tile.slot, env)
    r0 = evaluate(tile.offset[0], env)
    c0 = evaluate(tile.offset[1], env)
    if buf.xor:
        # Swizzled chunks stay inside their line, not inside the tile's columns:
        # the footprint is the tile's whole lines (a superset, so no hazard is missed).
        l0, count = (r0, tile.rows) if buf.layout == "row" else (c0, tile.cols)
        first = buf.line_span(slot, l0)[0]
        last = buf.line_span(slot, l0 + count - 1)[1] - 1
    else:
        first = buf.element(slot, r0, c0)
        last = buf.element(slot, r0 + tile.rows - 1, c0 + tile.cols - 1)
    base = offsets[buf.name]
    return base + _least(first) * size, base + (_most(last) + 1) * size


def _least(value) -> int:
    return int(value.min()) if isinstance(value, np.ndarray) else int(value)


def _most(value) -> int:
    return int(value.max()) if isinstance(value, np.ndarray) else int(value)


def _needs(p: _Access, q: _Access) -> str | None:
    """The barrier scope that must order p before q, or None."""
    if not (p.write or q.write) or p.hi <= q.lo or q.hi <= p.lo:
        return None
    if (
        p.issuer == q.issuer
        and p.signature == q.signature
        and p.issuer != "lanes"
        and (p.issuer == "threads" or p.private and q.private)
    ):
        return None  # the same thread (or the same warp, in its own slot) in program order
    if p.private and q.private:
        if p.issuer == q.issuer == "lanes" and p.signature == q.signature:
            return None
        return "warp"
    return "block"


def _hazards(kernel: KernelIR, steps: int):
    """(hazard, ids of the barriers between the two accesses that can order them)."""
    trace = _Trace(kernel, steps)
    trace.run(kernel.body)
    out = []
    accesses = trace.accesses
    for qi, q in enumerate(accesses):
        for p in accesses[:qi]:
            scope = _needs(p, q)
            if scope is None:
                continue
            if p.end > q.start:  # p is asynchronous and still in flight when q runs
                what = "reading" if not p.write else "copying into"
                wait = "wgmma.wait_group" if not p.write else "cp.async wait"
                raise HazardError(
                    f"`{stmt_text(q.stmt)}` touches {q.buffer} while "
                    f"`{stmt_text(p.stmt)}` may still be {what} it: a "
                    f"{wait} is missing, and no barrier can mend that"
                )
            covers = frozenset(
                id(b)
                for at, b in trace.barriers
                if p.end < at < q.start and (scope == "warp" or b.scope == "block")
            )
            kind = "WAW" if p.write and q.write else ("RAW" if p.write else "WAR")
            out.append((Hazard(kind, scope, _who(p, kernel), _who(q, kernel), q.buffer), covers))
    return out


class HazardError(Exception):
    """An access races with an async copy in flight: no barrier can order it."""


def _who(a: _Access, kernel: KernelIR) -> str:
    """The access, who issues it, and the `.tile` directive it comes from."""
    actor = {
        "threads": "all threads",
        "lanes": "the warp's lanes",
        "warp": "each warp",
        "thread 0": "thread 0",
    }[a.issuer]
    s = kernel.schedule
    if isinstance(a.stmt, Copy):
        loc = a.stmt.loc
    elif a.buffer == "workspace":  # the split's hand-over
        loc = s.loc("split_k")
    else:  # fragment ops: the mma directive (or, by default, the kernel)
        loc = s.loc("mma")
    return f"`{stmt_text(a.stmt)}` ({actor}; from {loc})"


def decide(kernel: KernelIR, remove: bool) -> tuple[tuple[SyncDecision, ...], frozenset[int]]:
    """A decision per barrier; with `remove`, the ids of those proven redundant.

    Raises TileError (at the `stages` directive) when an access meets an async copy
    in flight, which no barrier can order.
    """
    try:
        return _decide(kernel, remove)
    except HazardError as err:
        raise error(
            kernel.schedule.loc("stages"),
            str(err),
            "this is a tiledsl bug in the pipeline it built; please report it",
        ) from None


def _decide(kernel: KernelIR, remove: bool):
    barriers = [s for s in walk(kernel.body) if isinstance(s, Barrier)]
    unique = list({id(b): b for b in barriers}.values())
    stages = max(kernel.schedule.stages, 1)
    hazards = []
    for steps in range(1, stages + 3):
        hazards.extend(_hazards(kernel, steps))
    removed: set[int] = set()
    decisions = []
    for index, b in enumerate(unique, 1):
        only = [h for h, covers in hazards if id(b) in covers and not (covers - removed - {id(b)})]
        if only:
            h = only[0]
            decisions.append(
                SyncDecision(
                    index,
                    b,
                    True,
                    f"needed: {h.kind} on {h.buffer} ({h.scope} scope) — "
                    f"{h.first} then {h.second}; no other barrier orders "
                    "them",
                )
            )
            continue
        crossing = [h for h, covers in hazards if id(b) in covers]
        if remove:
            removed.add(id(b))
        if crossing:
            h = crossing[0]
            why = (
                f"redundant: every hazard it orders (e.g. {h.kind} on {h.buffer}: {h.first} "
                f"then {h.second}) is also ordered by another barrier"
            )
        else:
            why = "redundant: no shared-memory hazard crosses it"
        decisions.append(SyncDecision(index, b, not remove, why))
    return tuple(decisions), frozenset(removed)
