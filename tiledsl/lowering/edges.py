"""Edge tiles: a guarded twin of each kernel, for sizes that are not multiples of the tile.

    twin = edge_twin(analysis, kernel, build)     # KernelIR named `<name>_edge`, or None
    fast = not needs_twin(kernel, sizes)           # which of the two a size runs
    kernel, launch = variant(kernel, launch, size) # ... and the pair that runs it

The kernel the passes produce assumes M, N and K are multiples of BM, BN and BK:
its steady-state loop has no bounds checks at all. For every other size the
launcher runs its twin, built from the same schedule with two changes:

* C goes through the per-warp staging tile (`epilogue_via shared`), because a
  WMMA store cannot be predicated element by element;
* every copy between global and shared memory is guarded (`Copy.guard`): a load
  fills elements outside the operand with zeros, which add nothing to the
  product (a partial K step is a zero-padded one), and a store skips them.

The grid already covers ceil(M / BM) x ceil(N / BN) tiles and the K loop runs
ceil(K / BK) steps, so nothing else changes: the same passes, barriers and
pipeline, verified the same way. In the emitted code a guarded copy still moves
whole vectors where a vector lies inside the operand and the operand's leading
dimension keeps it aligned; elsewhere it moves single elements
(`vector_fallbacks` says which operands need that for a given size).

A kernel whose every load is a TMA copy (`copy tma`) runs every size itself, and has
no twin: TMA fills the elements of a box outside the operand with zeros, a TMA store of
C (`epilogue_via tma`) skips them, and a store of C straight from registers is guarded
element by element (`guard_c_stores`: a compare per element of the epilogue, nothing in
the K loop; a pair of elements is stored as one word only where C's leading dimension
keeps it aligned). Where an operand's rows are not a whole 16 bytes
(`tma_strides_aligned` is false) no tensor map can address them as they lie: the
launcher copies that operand into rows padded to 128 bytes first (`tiledsl.gpu.staging`:
a copy at memory speed, against a twin that moves every element on its own).

Schedules whose fragments read global memory directly (`stages 0`) have no twin. On
WMMA, which cannot guard a fragment load, they run multiples of the block tile only; on
mma.sync (the direct path, tiledsl.emit.mma_sync) every fragment load and store of C is
guarded (`LoadFrag.guard`, `StoreFrag.guard`), so the kernel runs every size itself
(`tiledsl.ir.partial_tiles.guards_fragments`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..frontend.analysis import Analysis
from ..ir.expr import evaluate
from ..ir.gemm import OperandInfo
from ..ir.nodes import (
    DTYPE_BYTES,
    Copy,
    GlobalTile,
    KernelIR,
    LoadFrag,
    StoreFrag,
    TmaStore,
    fragment_tile,
    global_side,
    map_body,
    walk,
)
from ..ir.partial_tiles import loads_by_tma, runs_every_size, stores_c_directly

EDGE_SUFFIX = "_edge"


def edge_twin(analysis: Analysis, build: Callable[[Analysis], KernelIR]) -> KernelIR | None:
    """The guarded twin of `analysis`'s kernel, or None when its fragments read global memory
    (WMMA's stages 0; the direct path is never asked: it runs every size itself).

    `build` lowers and runs the pass pipeline (the driver's, so the twin is verified
    after every stage like the kernel itself).
    """
    staged = replace(
        analysis,
        name=analysis.name + EDGE_SUFFIX,
        schedule=_classic(replace(analysis.schedule, epilogue_via="shared")),
    )
    kernel = build(staged)
    if any(
        isinstance(s, LoadFrag | StoreFrag) and isinstance(fragment_tile(s), GlobalTile)
        for s in walk(kernel.body)
    ):
        return None
    return guard_copies(kernel)


def _classic(schedule):
    """A TMA schedule's twin (warp-specialized or not) is the classic cp.async pipeline of
    the same tiles: it runs the sizes whose tiles are partial or whose rows TMA cannot
    address."""
    if schedule.copy_mode != "tma":
        return schedule
    return replace(
        schedule,
        copy_mode="async",
        copy_bytes=16,
        warp_specialize=False,
        pingpong=False,
        persistent=False,
        cluster=(1, 1),
    )


def guard_copies(kernel: KernelIR) -> KernelIR:
    """Every copy with a global side checks the operand's bounds."""

    def guard(stmt):
        if isinstance(stmt, Copy) and (
            isinstance(stmt.src, GlobalTile) or isinstance(stmt.dst, GlobalTile)
        ):
            return replace(stmt, guard=True)
        return stmt

    return replace(kernel, body=map_body(kernel.body, guard), passes=(*kernel.passes, "edges"))


def fits_block_tile(kernel: KernelIR, sizes: dict[str, int]) -> bool:
    """Whether M, N and K (at these sizes) are multiples of BM, BN and BK: the fast path."""
    g = kernel.gemm
    return all(
        int(evaluate(dim, sizes)) % tile == 0
        for dim, tile in zip((g.m, g.n, g.k), kernel.schedule.block)
    )


def guarded_vectors(kernel: KernelIR) -> list[tuple[OperandInfo, int]]:
    """(operand, elements per vector) of the twin's guarded vector copies, each pair once.

    A vector of V elements is aligned when the operand's leading dimension is a
    multiple of V (tiles start at multiples of V along the contiguous axis).
    """
    out = []
    for stmt in walk(kernel.body):
        if isinstance(stmt, Copy) and stmt.guard and stmt.vector > 1:
            tile = global_side(stmt)
            assert tile is not None  # a guarded copy has a global side
            pair = (kernel.gemm.operand(tile.operand), stmt.vector)
            if pair not in out:
                out.append(pair)
    return out


def vector_fallbacks(kernel: KernelIR, sizes: dict[str, int]) -> list[str]:
    """Operands whose guarded copies fall back to single elements at these sizes."""
    out = []
    for op, vector in guarded_vectors(kernel):
        ld = int(evaluate(op.leading_dim, sizes))
        if ld % vector:
            out.append(
                f"{op.name}: leading dimension {ld} is not a multiple of {vector} "
                f"elements, so its copies move single elements instead of "
                f"{vector}-element vectors"
            )
    return out


def guard_c_stores(kernel: KernelIR) -> KernelIR:
    """A kernel whose every load is a TMA copy stores C only inside C (its fragment stores
    or staged copies into C, guarded element by element), so that TMA's zero-filled boxes
    and these stores run its partial tiles without the twin. Other kernels are returned
    unchanged: their loads need the twin's guards anyway."""
    stmts = list(walk(kernel.body))
    if not loads_by_tma(stmts):
        return kernel

    def guard(stmt):
        return replace(stmt, guard=True) if stores_c_directly(stmt) else stmt

    return replace(kernel, body=map_body(kernel.body, guard))


def partial_tiles_how(kernel: KernelIR) -> str:
    """How a `tma_only` kernel runs partial tiles (the words of `tiledsl check`)."""
    if any(isinstance(s, TmaStore) for s in walk(kernel.body)):
        return "TMA zero-fills partial boxes and clips its stores"
    return "TMA zero-fills partial boxes; C's stores are guarded element by element"


def tma_strides_aligned(kernel: KernelIR, sizes: dict[str, int]) -> bool:
    """Whether every operand's rows (its leading dimension) are a whole 16 bytes: what
    cuTensorMapEncodeTiled asks of a stride."""
    g = kernel.gemm
    return all(
        int(evaluate(op.leading_dim, sizes)) * DTYPE_BYTES[op.dtype] % 16 == 0
        for op in (g.a, g.b, g.c)
    )


def needs_twin(kernel: KernelIR, sizes: dict[str, int]) -> bool:
    """Whether `sizes` run on the guarded twin: off the tile grid, unless TMA does the
    edges (`tma_only`), or its fragment loads are guarded (the direct path): such a kernel
    runs every size itself, and has no twin."""
    return not (fits_block_tile(kernel, sizes) or runs_every_size(kernel))


def variant(kernel: KernelIR, launch, size: tuple[int, int, int]):
    """(kernel, launch) that runs `size`: the kernel itself where it can (multiples of the
    tile, or TMA's edges), else the twin. `size` is the caller's M x N x K."""
    sizes = kernel.gemm.as_written.size_env(*size)
    if not needs_twin(kernel, sizes) or kernel.edge is None:
        return kernel, launch
    return kernel.edge, launch.edge if launch is not None else None
