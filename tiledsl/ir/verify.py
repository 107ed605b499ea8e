"""Invariants of the IR, checked after lowering and after every pass.

A failure here is a compiler bug or a schedule that crosses a target limit; it
is reported as a located TileError (the directive that asked for the offending
part), never as a crash in the emitter or on the GPU.
"""

from __future__ import annotations

import dataclasses

from ..errors import Collector
from .expr import BinOp, Const, Expr, Var, variables
from .grid import cluster_place, grid_vars
from .nodes import (
    DTYPE_BYTES,
    Barrier,
    Copy,
    Fill,
    For,
    GlobalTile,
    If,
    KernelIR,
    Let,
    LoadFrag,
    Mma,
    PartialAdd,
    PartialStore,
    Roles,
    SharedTile,
    StoreFrag,
    Ticket,
    TmaLoad,
    TmaStore,
    fragment_tile,
)

KERNEL_VARS = frozenset({"bm", "bn", "wm", "wn", "warp", "team", "kteam"})
#: What every block knows before its body: its id, the grid's blocks (persistent), its
#: batch index and its rank in a cluster (the grid's tile counts and a block's place in
#: its cluster come from tiledsl.ir.grid).
BLOCK_VARS = frozenset({"pid", "blocks", "bz", "rank"})
#: what differs between threads of one block
THREAD_VARS = frozenset({"wm", "wn", "warp", "team", "kteam"})


def limit_problems(kernel: KernelIR, stage: str, final_stage: str) -> list:
    """The target's per-block limits that the kernel to be emitted breaks (Diagnostics).

    Intermediate forms may exceed them (the naive form of a 128 x 128 block has one
    warp per fragment, 64 warps); only what is emitted must fit. The analysis refuses
    most schedules over a limit before anything is built (tiledsl.frontend.analysis); this is
    the exact count, for the pad that `pad auto` chose.
    """
    errs = Collector()
    s, t = kernel.schedule, kernel.target
    early = (
        [
            f"this is the IR after {stage}; the full pipeline ends with {final_stage}, "
            "which may fit (--stop-after a later pass)"
        ]
        if stage != final_stage
        else []
    )
    if kernel.threads > t.max_threads_per_block:
        errs.add(
            s.loc("block"),
            f"{kernel.threads} threads per block; {t.name} allows {t.max_threads_per_block}",
            *early,
            "use a smaller block tile, or coarsen warps (`coarsen 2 x 2`)",
        )
    if kernel.smem_bytes > t.max_smem_per_block:
        errs.add(
            s.loc("stages"),
            f"{kernel.smem_bytes} bytes of shared memory per block; "
            f"{t.name} allows {t.max_smem_per_block}",
            *early,
            "use fewer stages, a smaller block tile or less padding",
        )
    return errs.diagnostics


def verify(kernel: KernelIR, after: str = "lower") -> None:
    """Raise TileError if `kernel` breaks an invariant; `after` names the stage for messages."""
    check = _Verifier(kernel, after)
    check.walk(kernel.body, frozenset())
    _check_fragment_alignment(kernel, check.errs)
    for b in kernel.buffers:
        if b.pitch < b.line_length or (b.pitch * DTYPE_BYTES[b.dtype]) % 16:
            check.problem(
                f"buffer {b.name}: pitch {b.pitch} must be ≥ {b.line_length} "
                "and keep lines 16-byte aligned"
            )
    check.errs.raise_if_any()


class _Verifier:
    """The statements' invariants, collected as located problems (every one a tiledsl bug)."""

    def __init__(self, kernel: KernelIR, after: str) -> None:
        self.kernel, self.after, self.errs = kernel, after, Collector()
        self.in_role = False  # walking a warp-specialized role's body
        self.frags = {f.name: f for f in kernel.fragments}
        self.buffers = {b.name: b for b in kernel.buffers}
        # each loop variable's inclusive range where it is known (constant bounds)
        self.bounds = {
            "wm": (0, kernel.warps[0] - 1),
            "wn": (0, kernel.warps[1] - 1),
            "warp": (0, kernel.consumer_warps - 1),
            "team": (0, kernel.teams - 1),
            "kteam": (0, kernel.k_teams - 1),
        }
        # the size parameters, what the host computes from them per launch, and what
        # every block knows before its body
        self.sizes = (
            set(kernel.gemm.size_args)
            | {v.var for v in kernel.launch_scalars}
            | BLOCK_VARS
            | set(grid_vars(kernel))
            | set(cluster_place(kernel))
        )

    def problem(self, msg: str) -> None:
        self.errs.add(
            self.kernel.schedule.kernel_loc,
            f"invalid IR after {self.after}: {msg}",
            "this is a tiledsl bug; please report it with the .tile file",
        )

    def expr(self, e: Expr, scope: frozenset[str]) -> None:
        unknown = variables(e) - scope - KERNEL_VARS - self.sizes
        if unknown:
            self.problem(f"'{sorted(unknown)[0]}' is used outside the loop that defines it")

    def uniform(self, e: Expr, what: str) -> None:
        """`e` is the same in every thread of the block (barriers inside would diverge).
        Inside a role the threads of the other role never meet this one's anyway (no block
        barrier may stand there), and pingpong's teams loop over tiles of their own."""
        if not self.in_role and variables(e) & THREAD_VARS:
            self.problem(f"{what} (barriers inside would diverge)")

    def tile(self, tile, scope: frozenset[str]) -> None:
        for e in tile.offset:
            self.expr(e, scope)
        if not isinstance(tile, SharedTile):
            for e in tile.origin:
                self.expr(e, scope)
            return
        buf = self.buffers.get(tile.buffer)
        if buf is None:
            self.problem(f"shared buffer '{tile.buffer}' is not declared")
            return
        self.expr(tile.slot, scope)
        for e, extent, limit, what in (
            (tile.offset[0], tile.rows, buf.rows, "rows"),
            (tile.offset[1], tile.cols, buf.cols, "columns"),
            (tile.slot, 1, buf.slots, "slots"),
        ):
            lo, hi = interval(e, self.bounds)
            if lo < 0 or hi + extent > limit:
                self.problem(
                    f"a {tile.rows}x{tile.cols} tile of {buf.name} reaches {what} "
                    f"[{lo}, {hi + extent}) outside [0, {limit})"
                )

    def frag(self, ref, role: str) -> None:
        f = self.frags.get(ref.name)
        if f is None:
            self.problem(f"fragment '{ref.name}' is not declared")
        elif f.role != role:
            self.problem(f"fragment '{ref.name}' is a {f.role}, used as a {role}")
        else:
            (i_lo, i_hi), (j_lo, j_hi) = interval(ref.i, self.bounds), interval(ref.j, self.bounds)
            if i_lo < 0 or j_lo < 0 or i_hi >= f.count[0] or j_hi >= f.count[1]:
                self.problem(f"fragment {ref} is outside {ref.name}[{f.count[0]}][{f.count[1]}]")

    def walk(self, body, scope: frozenset[str]) -> None:
        for stmt in body:
            match stmt:
                case Let():  # in scope for the statements after it
                    self.expr(stmt.value, scope)
                    scope = scope | {stmt.var}
                case Ticket():  # the ticket drawn, in scope for the statements after it
                    self.expr(stmt.slot, scope)
                    scope = scope | {stmt.var}
                case Roles():  # each role's body, concurrently, on what the block knows
                    self.in_role = True
                    self.walk(stmt.producer.body, scope)
                    self.walk(stmt.consumer.body, scope)
                    self.in_role = False
                case TmaLoad() | TmaStore():
                    self.tile(stmt.dst, scope)
                    self.tile(stmt.src, scope)
                case For():
                    for e in (stmt.start, stmt.stop):
                        self.expr(e, scope)
                        self.uniform(e, f"loop {stmt.var} has thread-dependent bounds")
                    if isinstance(stmt.start, Const) and isinstance(stmt.stop, Const):
                        self.bounds[stmt.var] = (stmt.start.value, stmt.stop.value - 1)
                    self.walk(stmt.body, scope | {stmt.var})
                case Copy():
                    self.tile(stmt.dst, scope)
                    self.tile(stmt.src, scope)
                    if (stmt.dst.rows, stmt.dst.cols) != (stmt.src.rows, stmt.src.cols):
                        self.problem("a copy's source and destination tiles differ in shape")
                    if stmt.src.cols % stmt.vector:
                        self.problem(
                            f"copy vector {stmt.vector} does not divide a {stmt.src.cols}-wide row"
                        )
                case LoadFrag() | StoreFrag():
                    self.fragment_access(stmt, scope)
                case Mma():
                    self.frag(stmt.acc, "accumulator")
                    self.frag(stmt.a, "matrix_a")
                    self.frag(stmt.b, "matrix_b")
                case Fill():
                    self.frag(stmt.frag, "accumulator")
                case Barrier():
                    if stmt.scope not in ("block", "warp", "cluster", "consumers"):
                        self.problem(f"unknown barrier scope '{stmt.scope}'")
                    elif stmt.scope == "cluster" and self.kernel.cluster_size == 1:
                        self.problem("a cluster barrier in a kernel without a cluster")
                    elif stmt.scope == "consumers" and not self.kernel.hands_over:
                        self.problem("a consumers' barrier outside a stream-K or split-K fix-up")
                case If():
                    for e in (stmt.lhs, stmt.rhs):
                        self.expr(e, scope)
                        self.uniform(e, "a condition depends on the thread")
                    self.walk(stmt.then, scope)
                    self.walk(stmt.orelse, scope)
                case PartialStore() | PartialAdd() if stmt.by_team0 and self.kernel.k_teams == 1:
                    self.problem("a partial sum by K team 0 in a kernel without K teams")
                case _:  # the roles' handoffs and the fix-up's: their expressions in scope
                    for e in _expressions(stmt):
                        self.expr(e, scope)

    def fragment_access(self, stmt: LoadFrag | StoreFrag, scope: frozenset[str]) -> None:
        """A fragment load or store: its tile's place and shape, and the fragment's type."""
        tile = fragment_tile(stmt)
        self.tile(tile, scope)
        f = self.frags.get(stmt.frag.name)
        window = stmt.cols if isinstance(stmt, StoreFrag) else None  # a store's columns
        cols = window[1] if window is not None else f.cols if f is not None else 0
        if f and (tile.rows, tile.cols) != (f.rows, cols):
            shape = f"{tile.rows}x{tile.cols}"
            self.problem(f"{stmt.frag} is {f.rows}x{cols} but its tile is {shape}")
        tile_dtype = (
            self.buffers[tile.buffer].dtype
            if isinstance(tile, SharedTile) and tile.buffer in self.buffers
            else self.kernel.gemm.operand(tile.operand).dtype
            if isinstance(tile, GlobalTile)
            else None
        )
        # warp specialization's consumers store C thread by thread, converting, and so do
        # the direct path's lanes (mma.sync with stages 0: tiledsl.emit.mma_sync)
        s = self.kernel.schedule
        converts = isinstance(stmt, StoreFrag) and (s.warp_specialize or s.direct)
        if f and tile_dtype and tile_dtype != f.dtype and not converts:
            self.problem(
                f"{stmt.frag} holds {f.dtype} but its tile is {tile_dtype} "
                "(WMMA loads and stores do not convert)"
            )
        if isinstance(stmt, StoreFrag):
            self.frag(stmt.frag, "accumulator")
            if stmt.guard and not isinstance(tile, GlobalTile):
                self.problem("a guarded fragment store writes shared memory (only C's are)")
            if stmt.by_team0 and self.kernel.k_teams == 1:
                self.problem("a store by K team 0 in a kernel without K teams")
        elif f is not None:
            self.frag(stmt.frag, f.role)
            if stmt.guard and not isinstance(tile, GlobalTile):
                self.problem("a guarded fragment load reads shared memory (only global's are)")
            if stmt.add and (f.role != "accumulator" or not isinstance(tile, SharedTile)):
                self.problem("a fragment load that adds is an accumulator's, from shared memory")


def _expressions(stmt) -> list[Expr]:
    """The index expressions a statement holds in its fields (barrier slots, parities,
    workspace slots, ...), not those of statements nested in it."""
    out: list[Expr] = []

    def collect(value) -> None:
        if isinstance(value, Expr):
            out.append(value)
        elif isinstance(value, tuple):
            for v in value:
                collect(v)
        elif dataclasses.is_dataclass(value) and not isinstance(value, type):
            for f in dataclasses.fields(value):
                collect(getattr(value, f.name))

    for f in dataclasses.fields(stmt):
        collect(getattr(stmt, f.name))
    return out


def interval(e: Expr, bounds: dict[str, tuple[int, int]]) -> tuple[int, int]:
    """Smallest and largest value of `e` over the variables' inclusive bounds."""
    if isinstance(e, Const):
        return e.value, e.value
    if isinstance(e, Var):
        return bounds.get(e.name, (0, 0))
    assert isinstance(e, BinOp)
    (a, b), (c, d) = interval(e.lhs, bounds), interval(e.rhs, bounds)
    if e.op == "+":
        return a + c, b + d
    if e.op == "-":
        return a - d, b - c
    if e.op == "min":
        return min(a, c), min(b, d)
    if e.op == "max":
        return max(a, c), max(b, d)
    if e.op == "*":
        products = (a * c, a * d, b * c, b * d)
        return min(products), max(products)
    if e.op == "/":
        return a // max(d, 1), b // max(c, 1)
    return 0, d - 1  # e % positive constant


def pow2_alignment(e: Expr, known: dict[str, int]) -> int:
    """The largest power of two that divides `e` for every value of its variables.

    `known` gives what is known of a variable (a size parameter is a multiple of
    its block tile, since other sizes are refused at run time); others count as 1.
    """
    if isinstance(e, Const):
        return e.value & -e.value if e.value else 1 << 30
    if isinstance(e, Var):
        return known.get(e.name, 1)
    assert isinstance(e, BinOp)
    a, b = pow2_alignment(e.lhs, known), pow2_alignment(e.rhs, known)
    if e.op in ("+", "-"):
        return min(a, b)
    if e.op == "*":
        return min(a * b, 1 << 30)
    if e.op == "^":
        return min(a, b)  # XOR keeps every low bit both operands have clear
    return 1


def _check_descriptor_tile(kernel, stmt, tile, base: int, known: dict, errs: Collector) -> None:
    """A wgmma descriptor points at a tile of a 128-byte-swizzled buffer: the buffer on
    1024 bytes, the tile's first line a multiple of 8 (the swizzle's phase) and its first
    element on 16 bytes; anything else reads other elements than the IR says."""
    s = kernel.schedule
    if not isinstance(tile, SharedTile) or not kernel.buffer(tile.buffer).panel:
        return  # before padding: the IR is interpretable, not yet emittable as wgmma
    buf = kernel.buffer(tile.buffer)
    line, pos = tile.offset if buf.layout == "row" else tile.offset[::-1]
    chunk = 16 // DTYPE_BYTES[buf.dtype]
    if base % 1024 or pow2_alignment(line, known) < 8 or pow2_alignment(pos, known) < chunk:
        errs.add(
            s.loc("mma"),
            f"a wgmma tile of {buf.name} starts at line {line}, element {pos} (buffer at "
            f"byte {base}): descriptors need lines in 8s, 16-byte elements and 1024-byte "
            "buffers",
            "this is a tiledsl bug in the pipeline it built; please report it",
        )


def _check_fragment_alignment(kernel: KernelIR, errs: Collector) -> None:
    """WMMA loads and stores need 32-byte aligned pointers and 16-byte multiples of ldm."""
    from .nodes import buffer_offsets
    from .nodes import walk as walk_stmts

    s, g = kernel.schedule, kernel.gemm
    bm, bn, bk = s.block
    known = {  # what the tile grid says of each size parameter: a multiple of a power of 2
        e.name: tile & -tile for e, tile in zip((g.m, g.n, g.k), (bm, bn, bk)) if isinstance(e, Var)
    }
    offsets = buffer_offsets(kernel)
    ld: Expr
    for stmt in walk_stmts(kernel.body):
        if not isinstance(stmt, (LoadFrag, StoreFrag)):
            continue
        tile = fragment_tile(stmt)
        if isinstance(tile, SharedTile):
            buf = kernel.buffer(tile.buffer)
            size, ld = DTYPE_BYTES[buf.dtype], Const(buf.pitch)
            element = buf.element(tile.slot, tile.offset[0], tile.offset[1])
            base = offsets[buf.name]
        else:
            op = g.operand(tile.operand)
            size, ld = DTYPE_BYTES[op.dtype], op.leading_dim
            element = op.offset(tile.origin[0] + tile.offset[0], tile.origin[1] + tile.offset[1])
            base = 0
        frag = kernel.fragment(stmt.frag.name)
        access = s.path.accumulators if frag.role == "accumulator" else s.path.operands
        if access == "descriptor":
            _check_descriptor_tile(kernel, stmt, tile, base, known, errs)
            continue
        if access == "lane_total":  # the fma path: one element, moved by one lane
            continue
        pointer = min(pow2_alignment(element, known) * size, base & -base if base else 1 << 30)
        ldm = pow2_alignment(ld, known) * size
        if access in ("lane_rows", "lane_pairs"):
            # ldmatrix reads 16-byte rows; accumulators move 2 elements per lane and row.
            need = 16 if access == "lane_rows" else 2 * size
            if pointer < need or ldm < need:
                name = tile.buffer if isinstance(tile, SharedTile) else tile.operand
                errs.add(
                    s.loc("mma"),
                    f"{frag.role} fragments of {name} would be reached through pointers only "
                    f"{pointer}-byte aligned (rows {ldm} bytes apart); mma.sync's "
                    f"{'ldmatrix rows' if need == 16 else 'lanes'} need {need}",
                    "use tile sizes that are multiples of 8 elements",
                )
                return
            continue
        if pointer < 32 or ldm < 16:
            name = tile.buffer if isinstance(tile, SharedTile) else tile.operand
            m, n, k = s.mma
            errs.add(
                s.loc("mma"),
                f"{m} x {n} x {k} fragments of {name} would be loaded from "
                f"pointers only {pointer}-byte aligned (ldm {ldm} bytes); WMMA needs "
                "32-byte aligned pointers and ldm a multiple of 16 bytes",
                "use 16 x 16 x 16 fragments, or a shape whose fragments sit 32 bytes apart",
            )
            return
