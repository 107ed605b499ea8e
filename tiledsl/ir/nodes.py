"""The tiledsl IR: one kernel as a frozen tree of tiles, fragments, loops and barriers.

    KernelIR  = name, Gemm (operands, sizes, op), Schedule, Target,
                warps (WM x WN of warp_width lanes), SharedBuffer*, Fragment*, body: Stmt*,
                LaunchScalar* (var = value, computed by the host per launch; passed as an
                int, as a Divisor, or not at all)
    Stmt      = For(var, start, stop, step, body, unroll)
              | Copy(dst: Tile, src: Tile, vector, by: block|warp, mode: sync|async, guard)
              | Fill(frag, value)
              | LoadFrag(frag, src: Tile, guard, add)
                                                    warp-collective (guard: zero outside the
                                                    operand; add: frag += the tile)
              | Mma(acc, a, b)                      warp-collective: acc += a * b
              | StoreFrag(dst: Tile, frag, cols, guard, by_team0)
                                                    warp-collective (cols: a column window;
                                                    by_team0: K team 0's warps only)
              | Barrier(scope: block|warp|cluster|consumers, reason)
              | If(lhs op rhs, then, orelse)         a block-uniform condition (op: < or ==)
              | AsyncCommit()                       close a group of async copies (cp.async)
              | AsyncWait(pending)                  wait until at most `pending` groups fly
              | MmaFence() | MmaCommit() | MmaWait(pending)
                                                    wgmma's asynchronous groups (`mma m64nNk16`):
                                                    fence the registers, close a group, wait
              | Let(var, value)                     const int var = value (block-uniform)
              | Roles(producer: Role, consumer: Role)
                                                    warp specialization: one if/else on the
                                                    warpgroup; the consumers are the IR warps,
                                                    the producer one more warpgroup
              | TmaLoad(dst, src, bar)              the TMA unit copies a tile, counted on bar
              | ExpectTx(bar, bytes) | Arrive(bar) | Wait(bar, parity)
                                                    mbarrier handoffs (Hopper)
              | ProxyFence(reason)                  this thread's shared writes, visible to
                                                    the async proxy (a TMA store reads them)
              | TmaStore(dst, src)                  the TMA unit copies a shared tile to C
              | TmaStoreWait(reason)                until this warp's TMA stores have read
                                                    their shared tiles
              | EpilogueFrag(frag, tile, epilogue)  the epilogue on an accumulator in its
                                                    registers, for the C elements of `tile`
              | PartialStore(slot) | PartialAdd(slot, staged)
                                                    stream-K: the accumulators into, or plus,
                                                    slot `slot` of the global workspace (or
                                                    its copy in the stage slots)
              | PartialFetch(slot, part, step, bar) the producer fetches part of a partial
                                                    sum into a stage slot, counted on bar
              | FlagSignal(slot) | FlagWait(slot)   stream-K: one consumer thread releases, or
                                                    acquires (and clears), flags[slot]
    Tile      = GlobalTile(operand, origin (r, c), offset (r, c), rows, cols)
              | SharedTile(buffer, slot, offset (r, c), rows, cols)
    FragRef   = fragment name [i][j]     (i, j: constants or unrolled loop variables)

Index expressions (tiledsl.ir.expr) may use: `bm`, `bn` (the block's tile, after the
swizzle), `wm`, `wn`, `warp` (the warp's place), loop variables, and the operand
dims (`M`, `N`, `K`). Copies are cooperative: `by=block` spreads vector chunks over
all threads of the block, `by=warp` over the lanes of each warp (each warp its own
tile). A GlobalTile keeps the block tile's origin apart from the offset inside it,
so that smem-tiling can turn "A at origin o, offset x" into "As, offset x".

Nodes are frozen; passes build new trees with `dataclasses.replace`. Locations
(`loc`, the `.tile` directive that asked for a node) are excluded from equality.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Literal, TypeGuard

from ..errors import NOWHERE, Loc
from .dtypes import C_TYPES, DTYPE_BYTES, DTypeName  # noqa: F401 (sizes, C names)
from .expr import ZERO, BinOp, Expr, floordiv, lift, mod, mul, to_c, xor
from .gemm import Gemm, Layout
from .schedule import CopyMode, Schedule
from .targets import Target

if TYPE_CHECKING:
    from .epilogue import Epilogue

# __syncthreads, the IR warp's own barrier, every thread of every block of the cluster, or
# (stream-K's fix-up) every consumer warpgroup of the block, a named barrier without the
# producer
BarrierScope = Literal["block", "warp", "cluster", "consumers"]
Passed = Literal["int", "divisor", "host"]  # how a LaunchScalar reaches the kernel
# A TMA load's destinations in a thread-block cluster: the issuing block alone, or every
# block of its cluster row (same bm: they share A's tile) or cluster column (same bn: B's)
Multicast = Literal["", "row", "column"]
CopyIssuer = Literal["block", "warp"]  # all threads of the block, or each warp's lanes
FragmentRole = Literal["matrix_a", "matrix_b", "accumulator"]
Axis = Literal["cols", "rows"]

#: The loops a pass looks for: the block steps along K and, inside, the fragment steps.
LoopRole = Literal["", "k_blocks", "k_fragments", "tiles"]
RoleName = Literal["producer", "consumer"]
K_BLOCKS: LoopRole = "k_blocks"
TILES: LoopRole = "tiles"  # a persistent block's loop over its output tiles
K_FRAGMENTS: LoopRole = "k_fragments"


@dataclass(frozen=True)
class GlobalTile:
    operand: str
    origin: tuple[Expr, Expr]
    offset: tuple[Expr, Expr]
    rows: int
    cols: int


@dataclass(frozen=True)
class SharedTile:
    buffer: str
    slot: Expr
    offset: tuple[Expr, Expr]
    rows: int
    cols: int


Tile = GlobalTile | SharedTile


@dataclass(frozen=True)
class FragRef:
    name: str
    i: Expr = ZERO
    j: Expr = ZERO

    def __str__(self) -> str:
        return f"{self.name}[{to_c(self.i)}][{to_c(self.j)}]"


@dataclass(frozen=True)
class SharedBuffer:
    """`slots` tiles of rows x cols elements.

    `layout` row: each row is contiguous and rows are `pitch` elements apart;
    `layout` col: each column is contiguous and columns are `pitch` elements apart
    (a column-major operand's tile, copied along its contiguous axis).
    """

    name: str
    dtype: DTypeName
    slots: int
    rows: int
    cols: int
    pitch: int
    purpose: str  # what it holds, for the IR text and the emitted comment
    loc: Loc = field(default=NOWHERE, compare=False)
    per_warp: bool = False  # one slot per warp, indexed by `warp`
    layout: Layout = "row"
    alias: str | None = None  # shares the bytes of this buffer (a union), e.g. Cs over As
    xor: bool = False  # `pad xor`: each line's 16-byte chunks permuted (see xor_geometry)
    # wgmma's 128-byte swizzle: each line cut into `panel`-element pieces (128 bytes), the
    # pieces stored panel by panel (all lines' first panel, then the second...); 0: whole lines
    panel: int = 0

    @property
    def lines(self) -> int:
        """Rows of a row-major tile, columns of a column-major one."""
        return self.rows if self.layout == "row" else self.cols

    @property
    def line_kind(self) -> str:
        """What a line is: "rows" of a row-major tile, "cols" of a column-major one."""
        return "rows" if self.layout == "row" else "cols"

    @property
    def line_length(self) -> int:
        """Elements of one contiguous line: what `pitch` pads."""
        return self.cols if self.layout == "row" else self.rows

    @property
    def size_bytes(self) -> int:
        return self.slots * self.lines * self.pitch * DTYPE_BYTES[self.dtype]

    def element(self, slot, row, col):
        """Index (in elements from the buffer's start) of (row, col) of `slot`.

        Works on index expressions and numpy arrays alike; every reader of shared
        memory (emitter, interpreter, bank model, hazard analysis) goes through it.
        """
        line, pos = (row, col) if self.layout == "row" else (col, row)
        if self.panel:
            panels = self.line_length // self.panel
            if isinstance(pos, Expr) or isinstance(line, Expr):
                piece, within = (
                    floordiv(lift(pos), lift(self.panel)),
                    mod(lift(pos), lift(self.panel)),
                )
                first = (lift(slot) * panels + piece) * self.lines + lift(line)
                return first * self.panel + self.swizzled(line, within)
            piece, within = pos // self.panel, pos % self.panel
            return ((slot * panels + piece) * self.lines + line) * self.panel + self.swizzled(
                line, within
            )
        return (slot * self.lines + line) * self.pitch + self.swizzled(line, pos)

    def swizzled(self, line, pos):
        """Where element `pos` of `line` is stored within its line: `pos` itself, or under
        `pad xor` its 16-byte chunk
        XORed with the line's group number, so that 8 consecutive lines put the same
        chunk in 8 different 16-byte bank groups (what ldmatrix's 8 row reads need)."""
        if not self.xor:
            return pos
        chunk, groups, repeat = xor_geometry(self.panel or self.line_length, self.dtype)
        if isinstance(line, Expr) or isinstance(pos, Expr):
            key = mul(mod(floordiv(lift(line), lift(repeat)), lift(groups)), lift(chunk))
            return xor(lift(pos), key)
        return pos ^ (line // repeat % groups * chunk)

    def line_span(self, slot, line):
        """First and one-past-last element of one whole line (what `pad xor` may touch);
        a panelled line is spread over its slot, so the span is the slot's."""
        if self.panel:
            return slot * self.lines * self.pitch, (slot + 1) * self.lines * self.pitch
        start = (slot * self.lines + line) * self.pitch
        return start, start + self.line_length


def xor_geometry(line_length: int, dtype: str) -> tuple[int, int, int]:
    """(chunk, groups, repeat) of the XOR swizzle of lines of `line_length` elements.

    A chunk is 16 bytes (what one cp.async and one ldmatrix row move). The chunk index
    is XORed with (line / repeat) % groups: `groups`, the largest power of two ≤ 8
    dividing the chunks of a line, keeps every chunk inside its line; `repeat` = 8 /
    groups spreads 8 consecutive lines over 8 bank groups even when a line has fewer
    than 8 chunks (a 64-byte line: pairs of lines share a key, and their halves differ).
    groups == 1 means the line cannot be swizzled (one chunk, or an odd count).
    """
    chunk = 16 // DTYPE_BYTES[dtype]
    chunks = line_length // chunk if line_length % chunk == 0 else 1
    groups = next(g for g in (8, 4, 2, 1) if chunks % g == 0)
    return chunk, groups, 8 // groups


@dataclass(frozen=True)
class Fragment:
    """A WMMA fragment array `name[count_i][count_j]`, held by each warp."""

    name: str
    role: FragmentRole
    shape: tuple[int, int, int]
    dtype: str  # the inputs' type, or the accumulator's
    layout: Layout | None  # for matrix_a/b; None for the accumulator
    count: tuple[int, int] = (1, 1)

    @property
    def rows(self) -> int:
        m, n, k = self.shape
        return {"matrix_a": m, "matrix_b": k, "accumulator": m}[self.role]

    @property
    def cols(self) -> int:
        m, n, k = self.shape
        return {"matrix_a": k, "matrix_b": n, "accumulator": n}[self.role]


@dataclass(frozen=True)
class For:
    var: str
    start: Expr
    stop: Expr
    step: int
    body: tuple[Stmt, ...]
    unroll: bool = False
    comment: str = ""
    # what the loop is to the passes (K_BLOCKS, K_FRAGMENTS), so that they find it by
    # its place in the GEMM, not by its variable's name; "" for the others
    role: LoopRole = ""


@dataclass(frozen=True)
class Copy:
    dst: Tile
    src: Tile
    vector: int  # elements per chunk (one vector load/store)
    by: CopyIssuer
    mode: CopyMode = "sync"
    loc: Loc = field(default=NOWHERE, compare=False)
    axis: Axis = "cols"  # vectors run along a row ("cols") or down a column ("rows")
    # Edge tiles: elements of the global side outside the operand are not touched; a load
    # fills them with zeros (they add nothing to the product), a store skips them.
    guard: bool = False
    # The epilogue (tiledsl.ir.epilogue.Epilogue) applied to each element on its way to C.
    epilogue: Epilogue | None = None


@dataclass(frozen=True)
class Fill:
    frag: FragRef
    value: float = 0.0


@dataclass(frozen=True)
class LoadFrag:
    """A fragment from a tile. `guard`: elements outside the operand read as zero (the
    direct path's loads from global memory, mma.sync with stages 0: it runs every size).
    `add`: the fragment plus the tile, element by element (an accumulator adding a K
    team's sum: tiledsl.passes.k_teams)."""

    frag: FragRef
    src: Tile
    guard: bool = False
    add: bool = False


@dataclass(frozen=True)
class Mma:
    acc: FragRef
    a: FragRef
    b: FragRef


@dataclass(frozen=True)
class StoreFrag:
    """A fragment into a tile; with `cols` = (first, width) only that window of the
    fragment's columns (the tile is `width` wide): C staged a piece at a time. A guarded
    store into C writes only its elements inside C: the partial tiles of a kernel whose
    loads are TMA's (tiledsl.lowering.edges.guard_c_stores)."""

    dst: Tile
    frag: FragRef
    cols: tuple[Expr, int] | None = None
    guard: bool = False
    # `warps_k`: only K team 0's warps store (every team holds the same sum by then)
    by_team0: bool = False


@dataclass(frozen=True)
class Barrier:
    scope: BarrierScope  # "block": __syncthreads; "warp": the IR warp's (__syncwarp)
    reason: str
    loc: Loc = field(default=NOWHERE, compare=False)


@dataclass(frozen=True)
class If:
    """`if (lhs op rhs) then else orelse`; the condition must be the same for every thread."""

    lhs: Expr
    op: str  # "<" or "=="
    rhs: Expr
    then: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()


@dataclass(frozen=True)
class AsyncCommit:
    """Close the group of this thread's async copies issued since the last commit."""


@dataclass(frozen=True)
class AsyncWait:
    """Wait until at most `pending` of this thread's committed groups are still in flight."""

    pending: int


@dataclass(frozen=True)
class MmaFence:
    """wgmma.fence: order this warpgroup's earlier register accesses before the wgmmas below."""


@dataclass(frozen=True)
class MmaCommit:
    """Close the group of wgmmas issued since the last commit (wgmma.commit_group)."""


@dataclass(frozen=True)
class MmaWait:
    """Wait until at most `pending` wgmma groups are in flight: the older ones have read
    their shared-memory tiles and written their accumulators."""

    pending: int


@dataclass(frozen=True)
class MBarrier:
    """An array of `slots` mbarriers in shared memory (8 bytes each). A phase completes when
    `arrivals` arrivals and every byte announced by ExpectTx have come in; a Wait names
    the phase by its parity (PTX ISA, "mbarrier")."""

    name: str
    slots: int
    arrivals: int
    purpose: str


@dataclass(frozen=True)
class BarrierRef:
    name: str
    slot: Expr

    def __str__(self) -> str:
        return f"{self.name}[{to_c(self.slot)}]"


@dataclass(frozen=True)
class TmaLoad:
    """cp.async.bulk.tensor: the TMA unit copies global tile `src` into shared tile `dst`
    (in the 128-byte swizzle, one box per 64-element panel), asynchronously; its bytes
    count on `bar`. Issued by one thread; elements outside the operand arrive as zeros.

    `multicast` row / column (`cluster`): the bytes land in `dst` of every block of the
    issuing block's cluster row / column, each counting on its own `bar` (the same
    offsets in every block's shared memory)."""

    dst: SharedTile
    src: GlobalTile
    bar: BarrierRef
    multicast: Multicast = ""


@dataclass(frozen=True)
class TmaStore:
    """cp.async.bulk.tensor from shared to global: the TMA unit writes shared tile `src`
    (in the 128-byte swizzle, one box per 64-element panel) to global tile `dst`, elements
    outside the operand skipped. Issued by one thread of each IR warp, and committed as a
    bulk group: it reads `src` until a TmaStoreWait of that thread."""

    dst: GlobalTile
    src: SharedTile


@dataclass(frozen=True)
class TmaStoreWait:
    """cp.async.bulk.wait_group.read 0 by each IR warp's issuing thread: its TMA stores
    have read their shared tiles (which may now be written again)."""

    reason: str = ""


@dataclass(frozen=True)
class EpilogueFrag:
    """The epilogue (alpha, beta, bias, relu; tiledsl.ir.epilogue) applied to accumulator
    `frag` in its registers, each element one rounded f32 step at a time: `tile` is the
    part of C the fragment becomes (its rows and columns: a bias's column, beta's C_old).
    Elements outside C read nothing (their values are never stored)."""

    frag: FragRef
    tile: GlobalTile
    epilogue: Epilogue


@dataclass(frozen=True)
class ProxyFence:
    """fence.proxy.async.shared::cta by every thread: its earlier writes to shared memory
    are visible to the async proxy (the TMA unit) once a barrier hands them over."""

    reason: str = ""


@dataclass(frozen=True)
class ExpectTx:
    """mbarrier.arrive.expect_tx by the issuing thread: one arrival on `bar`, and `bytes`
    bytes still to come from the TMA copies counted on it."""

    bar: BarrierRef
    bytes: int
    reason: str = ""


@dataclass(frozen=True)
class Arrive:
    """mbarrier.arrive by one thread of each IR warp (warpgroup) that runs it, after the
    warpgroup is done with what the barrier hands back.

    `sharers` (`cluster`): one arrival on `bar` in each block of the cluster that shares a
    tile with this one (its cluster row and column, itself included) — a remote arrive on
    the other blocks' barriers, whose slots this block's producer multicasts into."""

    bar: BarrierRef
    reason: str = ""
    sharers: bool = False
    # `split_k S via cluster`: the arrival is on `bar` of the cluster's block of this rank
    # alone (mapa + mbarrier.arrive.release.cluster), handing over what the warpgroup wrote
    # to, or read from, shared memory before it
    rank: Expr | None = None


@dataclass(frozen=True)
class Wait:
    """Wait (mbarrier.try_wait.parity, in a loop) until the phase of `bar` whose parity is
    `parity` has completed; everything written before that phase's arrivals is visible."""

    bar: BarrierRef
    parity: Expr
    reason: str = ""
    # an acquire at cluster scope: what another block of the cluster wrote before its
    # arrival (`Arrive.rank`) is visible to this thread's reads of it
    cluster: bool = False


@dataclass(frozen=True)
class PartialStore:
    """Stream-K: every consumer thread writes its accumulators, as they are in its
    registers, to slot `slot` of the global workspace (f32; the same thread of the owner
    block reads them back, so no layout but the registers' own is needed)."""

    slot: Expr
    reason: str = ""
    by_team0: bool = False  # `warps_k`: K team 0's warps alone (every team holds the sum)


@dataclass(frozen=True)
class PartialAdd:
    """Stream-K: every consumer thread adds slot `slot` of the workspace to its accumulators;
    with `staged`, the copy of it its producer fetched into the stage slots of steps
    staged, staged + 1, ... (PartialFetch; tiledsl.ir.fetch), from shared memory."""

    slot: Expr
    reason: str = ""
    staged: Expr | None = None
    by_team0: bool = False  # `warps_k`: K team 0's warps alone (they store C)


@dataclass(frozen=True)
class PartialToShared:
    """`split_k S via cluster`: every consumer thread writes its accumulators, as they are
    in its registers, to its block's `Ps` buffer (f32, 16 bytes of every consumer thread
    at a time, as a workspace slot holds them), for slice 0 of the tile to read."""

    reason: str = ""


@dataclass(frozen=True)
class PartialFromPeer:
    """`split_k S via cluster`: every consumer thread adds the partial sum in `Ps` of the
    cluster's block of rank `rank` (distributed shared memory: mapa + ld.shared::cluster)
    to its accumulators, the same thread's values that block's thread stored."""

    rank: Expr
    reason: str = ""


@dataclass(frozen=True)
class PartialFetch:
    """`stream_k_aligned`, the producer's thread: part `part` of workspace slot `slot` (a
    partial sum whose flag it acquired) copied by the TMA unit (1-D cp.async.bulk) into the
    stage slot of step `step`, one bulk copy per stage buffer it reaches
    (tiledsl.ir.fetch), its bytes counting on `bar`."""

    slot: Expr
    part: int
    step: Expr
    bar: BarrierRef
    reason: str = ""


@dataclass(frozen=True)
class FlagSignal:
    """Stream-K: the first consumer thread sets flags[slot] (a release at GPU scope): what
    the consumers wrote before their last `consumers` barrier is visible to the block
    that acquires it."""

    slot: Expr
    reason: str = ""


@dataclass(frozen=True)
class FlagWait:
    """Stream-K: the first consumer thread waits until flags[slot] is set (an acquire at GPU
    scope) and clears it for the next launch; a `consumers` barrier after it orders the
    other threads' reads. In the producer role (`stream_k_aligned`'s fetch) its thread
    waits, then fences the async proxy: its TMA copies read what the acquire made visible."""

    slot: Expr
    reason: str = ""
    by_producer: bool = False


#: `split_k`: the shared word that hands the ticket to the consumer threads (8 bytes, so
#: that what follows stays 8-byte aligned).
TICKET_BOX_BYTES = 8


@dataclass(frozen=True)
class Ticket:
    """`split_k S`: the first consumer thread takes tile `slot`'s next ticket, an atomic
    add at GPU scope that both releases (this block's partial sum, written before the
    consumers' barrier ahead of it, for the tickets after it) and acquires (the partial
    sums of the tickets before it); the one that draws the last ticket, `slices` - 1,
    resets the counter for the next launch. It hands the ticket to every consumer thread
    as `var` through shared memory and the consumers' named barrier, so the reads after
    it are ordered after its acquire."""

    slot: Expr
    slices: int
    var: str = "ticket"
    reason: str = ""


@dataclass(frozen=True)
class Let:
    """A block-uniform name for a value: `const int var = value;`."""

    var: str
    value: Expr


@dataclass(frozen=True)
class LaunchScalar:
    """A grid-wide value the host computes once per launch (tiledsl.passes.launch_scalars),
    over the size parameters, the tile counts, the launch's `blocks` and the scalars
    before it; what the kernel would otherwise compute in every block, dividing at run time.

    `passed`: "int" (a kernel parameter), "divisor" (a `Divisor` parameter: the value with
    its multiply-shift constants, tiledsl.ir.divisors, because the kernel divides by it) or
    "host" (a step of the host's towards the others only). `blocks` itself is the launch's
    grid (in clusters: its clusters), its value the launcher's: `value` is Var("blocks")."""

    var: str
    value: Expr
    passed: Passed


@dataclass(frozen=True)
class Role:
    """One side of a warp-specialized block: its body and the registers per thread it asks
    for (setmaxnreg). The producer's statements are issued by one elected thread."""

    name: RoleName
    registers: int
    body: tuple[Stmt, ...]


@dataclass(frozen=True)
class Roles:
    """Warp specialization: the consumer warpgroups (the IR warps) and one producer
    warpgroup after them run different bodies concurrently, handing stages over through
    mbarriers."""

    producer: Role
    consumer: Role

    @property
    def roles(self) -> tuple[Role, Role]:
        return (self.producer, self.consumer)


Stmt = (
    For
    | Copy
    | Fill
    | LoadFrag
    | Mma
    | StoreFrag
    | Barrier
    | If
    | AsyncCommit
    | AsyncWait
    | MmaFence
    | MmaCommit
    | MmaWait
    | Let
    | Roles
    | TmaLoad
    | ExpectTx
    | Arrive
    | Wait
    | TmaStore
    | TmaStoreWait
    | ProxyFence
    | EpilogueFrag
    | PartialStore
    | PartialAdd
    | PartialFetch
    | PartialToShared
    | PartialFromPeer
    | FlagSignal
    | FlagWait
    | Ticket
)


@dataclass(frozen=True)
class KernelIR:
    name: str
    gemm: Gemm
    schedule: Schedule
    target: Target
    warps: tuple[int, int]  # warps along M and N
    buffers: tuple[SharedBuffer, ...]
    fragments: tuple[Fragment, ...]
    body: tuple[Stmt, ...]
    passes: tuple[str, ...] = ()  # the passes applied so far, in order
    # block id -> tile order: none, grouped G, snake G, zigzag W
    raster: tuple[str, int] = ("none", 0)
    sync_report: tuple = ()  # sync-elimination's decision per barrier (hazards.SyncDecision)
    mbarriers: tuple[MBarrier, ...] = ()  # after the shared buffers (warp specialization)
    producer_warps: int = 0  # warpgroups beside the IR warps (warp specialization's producer)
    teams: int = 1  # copies of the IR warps, each on a tile of its own (`warp_specialize pingpong`)
    # `warps_k W`: copies of the IR warps, each on K steps of its own (`kteam`: tiledsl.
    # passes.k_teams); their sums meet in shared memory
    k_teams: int = 1
    persistent: bool = False  # gridDim.x blocks (the SM count), each looping over tiles
    stream_k: bool = False  # `persistent stream_k`: the last wave's tiles cut along K
    split_k: int = 0  # `persistent split_k S` (stream_k too): cut into S slices each
    aligned: bool = False  # `persistent stream_k_aligned` (stream_k too): last tile first
    # `split_k S` (no `persistent`): tiles x S blocks, a slice each, the last ticket adds
    grid_split: int = 0
    # `split_k S via cluster`: a tile's grid_split slices are one thread-block cluster (rank
    # = slice), adding their partial sums through shared memory (no workspace, no tickets)
    split_cluster: bool = False
    cluster: tuple[int, int] = (1, 1)  # blocks per thread-block cluster along M, N (`cluster`)
    # The guarded twin for sizes that are not multiples of the block tile (tiledsl.lowering.edges);
    # this kernel, unguarded, is the fast path for sizes that are.
    edge: KernelIR | None = None
    # grid-wide values the host computes per launch, in order (tiledsl.passes.launch_scalars)
    launch_scalars: tuple[LaunchScalar, ...] = ()

    @property
    def hands_over(self) -> bool:
        """Whether blocks hand partial sums to each other through the global workspace
        (stream-K's and split-K's fix-ups)."""
        return self.stream_k or self.tickets

    @property
    def tickets(self) -> bool:
        """`split_k S` through the workspace: its slices take tickets of their tile."""
        return self.grid_split > 0 and not self.split_cluster

    @property
    def blocks_per_cluster(self) -> int:
        """Blocks of one thread-block cluster (`__cluster_dims__`): `cluster CM x CN`'s, or
        a tile's slices (`split_k S via cluster`); 1: no cluster."""
        return self.grid_split if self.split_cluster else self.cluster_size

    @property
    def maps_own_tiles(self) -> bool:
        """Whether the body maps the block to its tiles itself (a persistent loop's, or a
        split's tile = pid / SPLIT_K), rather than the block's pid being its tile."""
        return self.persistent or self.grid_split > 0

    @property
    def warp_count(self) -> int:
        return self.warps[0] * self.warps[1]

    @property
    def cluster_size(self) -> int:
        return self.cluster[0] * self.cluster[1]

    @property
    def warp_width(self) -> int:
        """Threads of the IR's `warp`: the target's warp, or wgmma's warpgroup of 4 warps."""
        return lanes_per_warp(self.schedule, self.target)

    @property
    def consumer_warps(self) -> int:
        """The warps (warpgroups) that run the IR's warp code: `teams` (or `k_teams`) of the
        IR's warps."""
        return self.warp_count * self.teams * self.k_teams

    @property
    def agent_warps(self) -> int:
        """The IR warps one body runs for at once (the interpreter's agent): the block's,
        every K team's (`warps_k`); a pingpong team's alone."""
        return self.warp_count * self.k_teams

    @property
    def threads(self) -> int:
        """Threads of the block: the IR warps' (every team's), and the producer's if any."""
        return (self.consumer_warps + self.producer_warps) * self.warp_width

    @property
    def smem_bytes(self) -> int:
        """Dynamic shared memory to ask for at launch (plus the path's slack that lets the
        kernel round its base up to its alignment, which the launch does not promise)."""
        offsets = buffer_offsets(self)
        used = max((_aligned(offsets[b.name] + b.size_bytes) for b in self.buffers), default=0)
        used += 8 * sum(m.slots for m in self.mbarriers)
        used += TICKET_BOX_BYTES if self.tickets else 0
        return used + self.schedule.path.smem_slack if used else used

    @property
    def specialization(self) -> Roles | None:
        """The warp-specialized block's roles (the body's top-level Roles), or None."""
        return next((s for s in self.body if isinstance(s, Roles)), None)

    def mbarrier(self, name: str) -> MBarrier:
        return next(m for m in self.mbarriers if m.name == name)

    def mbarrier_offsets(self) -> dict[str, int]:
        """Byte offset of each mbarrier array: after the shared buffers, 8-byte aligned."""
        offsets = buffer_offsets(self)
        at = max((_aligned(offsets[b.name] + b.size_bytes) for b in self.buffers), default=0)
        out = {}
        for m in self.mbarriers:
            out[m.name] = at
            at += 8 * m.slots
        return out

    def ticket_box_offset(self) -> int:
        """`split_k`: the byte offset of the word that hands the ticket from the first
        thread to the others (tiledsl.ir.nodes.Ticket), after the shared buffers and the
        mbarriers (8-byte aligned)."""
        offsets = buffer_offsets(self)
        at = max((_aligned(offsets[b.name] + b.size_bytes) for b in self.buffers), default=0)
        return at + 8 * sum(m.slots for m in self.mbarriers)

    def warp_coords(self) -> dict:
        """`warp`, `wm`, `wn` (and, with teams, `team`; with K teams, `kteam`) of every warp
        of a block that runs the IR's warp code, as numpy arrays, as the emitted prologue
        computes them: wm = warp % WARPS / WARPS_N, wn = warp % WARPS_N, team = kteam =
        warp / WARPS."""
        import numpy as np

        warp = np.arange(self.consumer_warps)
        coords = {
            "warp": warp,
            "wm": warp % self.warp_count // self.warps[1],
            "wn": warp % self.warps[1],
        }
        if self.teams > 1:
            coords["team"] = warp // self.warp_count
        if self.k_teams > 1:
            coords["kteam"] = warp // self.warp_count
        return coords

    def tile_bytes(self, tile: SharedTile) -> int:
        """Bytes of a tile of one of the shared buffers (what a TMA copy of it announces)."""
        return tile.rows * tile.cols * DTYPE_BYTES[self.buffer(tile.buffer).dtype]

    def buffer(self, name: str) -> SharedBuffer:
        for b in self.buffers:
            if b.name == name:
                return b
        raise KeyError(name)

    def fragment_of(self, role: str) -> Fragment:
        """The fragment array of `role` ("matrix_a", "matrix_b" or "accumulator")."""
        return next(f for f in self.fragments if f.role == role)

    def fragment(self, name: str) -> Fragment:
        for f in self.fragments:
            if f.name == name:
                return f
        raise KeyError(name)


#: What a consumer warpgroup issues from its lane 0 alone (the emitter's `if (lane == 0)`);
#: the producer issues everything from one elected thread.
ELECTED = (Arrive, ExpectTx, TmaLoad, TmaStore, TmaStoreWait)
#: What one thread of the whole block issues: the producer's elected lane in a
#: warp-specialized kernel, thread 0 in one without roles (`copy tma` alone).
BLOCK_ELECTED = (ExpectTx, TmaLoad)
#: The statements that order a warp-specialized kernel's roles and lanes: what the handoff
#: proof (tiledsl.models.mbarrier_hazards) decides about, one at a time.
HANDOFFS = (Wait, Arrive, ExpectTx, Barrier, ProxyFence, TmaStoreWait)


def async_mma(kernel: KernelIR) -> bool:
    """Whether the kernel's wgmmas read A and B asynchronously: once multi-buffering has
    grouped them (MmaCommit); before it the IR's mma is synchronous (interpretable, not yet
    emittable)."""
    return any(isinstance(s, MmaCommit) for s in walk(kernel.body))


# Buffers end on 128-byte boundaries (16 is needed for vectors; 128 keeps rows in phase);
# each path says where they start (InstructionPath.smem_align: wgmma's swizzle, 1024).
SMEM_ALIGN = 128
#: Bytes of one line of the 128-byte swizzle: what wgmma's descriptors and a TMA box read.
SWIZZLE_LINE = 128


def swizzle_panel(dtype: str) -> int:
    """Elements of `dtype` in one 128-byte swizzle line (SharedBuffer.panel): 64 of f16 or
    bf16, 32 of f32 — the widest TMA box the 128-byte swizzle allows."""
    return SWIZZLE_LINE // DTYPE_BYTES[dtype]


def lanes_per_warp(schedule: Schedule, target: Target) -> int:
    """The threads one IR warp stands for (a warpgroup of 4 warps on wgmma)."""
    return schedule.path.lanes(target)


def _aligned(nbytes: int, align: int = SMEM_ALIGN) -> int:
    return -(-nbytes // align) * align


def buffer_offsets(kernel: KernelIR) -> dict[str, int]:
    """Byte offset of each shared buffer inside the kernel's dynamic shared memory."""
    align = kernel.schedule.path.smem_align
    offsets: dict[str, int] = {}
    at = 0
    for b in kernel.buffers:
        if b.alias is not None:
            offsets[b.name] = offsets[b.alias]  # a union: the bytes of an earlier buffer
            continue
        offsets[b.name] = at
        at += _aligned(b.size_bytes, align)
    return offsets


def tiles_of(stmt: Stmt) -> tuple[Tile, ...]:
    """The tiles a statement touches: a copy's source and destination, a fragment load's
    source, a fragment store's destination; none for the rest."""
    match stmt:
        case Copy():
            return (stmt.src, stmt.dst)
        case LoadFrag():
            return (stmt.src,)
        case StoreFrag():
            return (stmt.dst,)
        case TmaLoad() | TmaStore():
            return (stmt.src, stmt.dst)
    return ()


def fragment_tile(stmt: LoadFrag | StoreFrag) -> Tile:
    """The memory side of a fragment load or store."""
    return stmt.src if isinstance(stmt, LoadFrag) else stmt.dst


def tile_loads(body: tuple[Stmt, ...]) -> list[tuple[SharedTile, GlobalTile]]:
    """(shared tile, global tile) of every copy of an operand's tile into shared memory in
    `body` (nested statements included), in order: what a TMA pipeline loads instead."""
    return [
        (x.dst, x.src)
        for x in walk(body)
        if isinstance(x, Copy) and isinstance(x.dst, SharedTile) and isinstance(x.src, GlobalTile)
    ]


def global_side(copy: Copy) -> GlobalTile | None:
    """The global-memory tile of a copy (its source or destination), or None."""
    return next((t for t in (copy.src, copy.dst) if isinstance(t, GlobalTile)), None)


def is_loop(stmt: Stmt, role: LoopRole) -> TypeGuard[For]:
    return isinstance(stmt, For) and stmt.role == role


def walk(body: tuple[Stmt, ...]):
    """Every statement, depth first, loops and conditions before their bodies."""
    for s in body:
        yield s
        if isinstance(s, For):
            yield from walk(s.body)
        elif isinstance(s, If):
            yield from walk(s.then)
            yield from walk(s.orelse)
        elif isinstance(s, Roles):
            for role in s.roles:
                yield from walk(role.body)


def map_body(body: tuple[Stmt, ...], fn) -> tuple[Stmt, ...]:
    """Rebuild `body` bottom-up: `fn(stmt)` returns a statement or a tuple of statements."""
    out: list[Stmt] = []
    for s in body:
        if isinstance(s, For):
            s = replace(s, body=map_body(s.body, fn))
        elif isinstance(s, If):
            s = replace(s, then=map_body(s.then, fn), orelse=map_body(s.orelse, fn))
        elif isinstance(s, Roles):
            s = Roles(
                replace(s.producer, body=map_body(s.producer.body, fn)),
                replace(s.consumer, body=map_body(s.consumer.body, fn)),
            )
        result = fn(s)
        out.extend(result if isinstance(result, tuple) else (result,))
    return tuple(out)


def expressions(node) -> Iterator[Expr]:
    """Every index expression in statements (loop bounds, tiles, conditions, Lets, ...)
    and every sub-expression of each."""
    if isinstance(node, Expr):
        yield node
        if isinstance(node, BinOp):
            yield from expressions(node.lhs)
            yield from expressions(node.rhs)
    elif isinstance(node, tuple):
        for item in node:
            yield from expressions(item)
    elif dataclasses.is_dataclass(node) and not isinstance(node, type):
        for f in dataclasses.fields(node):
            yield from expressions(getattr(node, f.name))


def with_launch_scalars(kernel: KernelIR, env: dict) -> dict:
    """`env` (the sizes, the tile counts, `blocks`) with the kernel's launch scalars added,
    as the host computes them (tiledsl.passes.launch_scalars): where a model runs the body."""
    from .expr import evaluate

    for v in kernel.launch_scalars:
        env[v.var] = evaluate(v.value, env)
    return env
