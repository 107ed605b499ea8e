"""The resolved schedule of a kernel: every directive's value, the defaults filled in.

The front end (tiledsl.frontend.directives) reads it from a `.tile` file and remembers
where each directive was written (`loc`), so that later errors can point at the
directive that asked; everything after the front end reads the schedule, never the text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ..errors import Loc
from .expr import Const
from .paths import PATHS, InstructionName, InstructionPath
from .targets import DEFAULT_TARGET

# The closed sets of words the directives take (the grammar admits no others).
CopyMode = Literal["sync", "async", "tma"]
PadMode = Literal["auto", "none", "xor", "explicit"]
SwizzleKind = Literal["none", "grouped", "zigzag", "snake"]
SyncMode = Literal["all", "minimal"]
LoadOrder = Literal["ab", "ba", "alternate"]
EpilogueVia = Literal["direct", "shared", "tma"]
SplitVia = Literal["workspace", "cluster"]  # how `split_k S` slices add their partial sums


@dataclass(frozen=True)
class Schedule:
    block: tuple[int, int, int] = (0, 0, 0)
    mma: tuple[int, int, int] = (16, 16, 16)
    # the instruction path (tiledsl.ir.paths): "wmma" (`mma 16 x 16 x 16`), "mma.sync"
    # (`mma m16n8k16`) or "wgmma" (`mma m64nNk16`); `path` is its description
    instruction: InstructionName = "wmma"
    coarsen: tuple[int, int] = (1, 1)
    stages: int = 2
    fragment_buffers: int = 1  # 2: A and B fragments double-buffered in registers
    # `warps_k W` (stages 0): W teams of the block's warps, team t on K steps t, t + W, ...,
    # their sums added in team order through shared memory (tiledsl.lowering.k_teams)
    warps_k: int = 1
    # `warps_k W runs R`: the W teams in R groups of W / R, group g on the g-th of R
    # contiguous runs of the tile's K steps, its teams on the run's steps in turn (1: one
    # run, every team on steps t, t + W, ...)
    k_runs: int = 1
    # `blocks_per_sm N`: ptxas caps each thread's registers so that N blocks fit on one
    # multiprocessor at once (`__launch_bounds__(THREADS, N)`): more warps resident, each
    # with fewer registers (1: the floor the emitters always ask for)
    blocks_per_sm: int = 1
    copy_mode: CopyMode = "async"
    copy_bytes: int = 16
    # Hopper: a producer warpgroup issues the copies (TMA), the IR warps compute; and one
    # block per SM looping over output tiles (tiledsl.passes.warp_specialization)
    warp_specialize: bool = False
    # `warp_specialize pingpong`: two teams of consumer warpgroups (each the IR's warps, on
    # a tile of its own) take the block's tiles in turn, so that one team's epilogue runs
    # while the other computes; `cooperative` (the default): one team shares every tile
    pingpong: bool = False
    persistent: bool = False
    # `persistent stream_k`: the tiles a last, partial wave would leave to some blocks are
    # cut along K into equal shares for every block; a tile's first share (its owner) adds
    # the others' partial sums in order (tiledsl.ir.grid.stream_k_steps)
    stream_k: bool = False
    # `persistent split_k S`: stream-K's fix-up with another split (tiledsl.ir.grid): the
    # tiles of a last round that S slices each fit in the grid are cut into S slices of
    # their K steps (0: the equal shares of `stream_k`)
    split_k: int = 0
    # `split_k S` (no `persistent`): a block per slice of each tile's K steps, tiles x S
    # blocks; each slice leaves its partial sum in the workspace and takes a ticket, and
    # the slice that draws the last one adds the S partial sums in slice order and stores
    # C (tiledsl.ir.grid.grid_split_steps; 0: no split)
    grid_split: int = 0
    # `split_k S via cluster`: a tile's S slices are one thread-block cluster; slice 0 adds
    # the others' partial sums from their shared memory, no workspace and no ticket
    # ("workspace": the default, above)
    split_via: SplitVia = "workspace"
    # `persistent stream_k_aligned` (stream_k too): stream-K's shares of every last round,
    # each block taking its tiles last first, so that all start at K step 0 (tiledsl.ir.
    # grid.stream_k_piece)
    aligned: bool = False
    # `cluster CM x CN`: thread-block clusters of CM blocks along M by CN along N; the
    # tiles the blocks of a cluster share (A along a cluster row, B along a column) are
    # fetched once, each block loading a part and the TMA unit multicasting it to all
    cluster: tuple[int, int] = (1, 1)
    # `swap_operands`: the kernel computes C^T = B^T A^T (tiledsl.ir.gemm, Gemm.swapped), so
    # the block tile, fragment, coarsening and cluster count the written N's columns first
    swap_operands: bool = False
    pad: PadMode = "auto"  # explicit: `pad A n, B n`
    pad_a: int = 0
    pad_b: int = 0
    swizzle: SwizzleKind = "grouped"
    swizzle_param: int = 8
    sync: SyncMode = "minimal"
    load_order: LoadOrder = "ab"
    accumulate: str = "f32"  # a DTypeName once the analysis has accepted it
    epilogue: tuple[tuple[str, ...], ...] = ()
    epilogue_via: EpilogueVia = "direct"
    # `epilogue_via tma`: the columns of C each consumer warpgroup stages in shared memory
    # per TMA store (the analysis picks the widest that fits beside the stages)
    store_columns: int = 0
    target: str = DEFAULT_TARGET
    attributes: tuple[str, ...] = ()
    target_from_command_line: bool = False
    written: frozenset[str] = frozenset()
    invalid: frozenset[str] = frozenset()  # written, but refused by analysis: default kept
    locs: tuple[tuple[str, Loc], ...] = field(default=(), compare=False, repr=False)
    kernel_loc: Loc = field(default=Loc("<string>", 1, 1), compare=False, repr=False)

    def loc(self, directive: str) -> Loc:
        """Where a directive was written, or the kernel's name where its default applies."""
        return dict(self.locs).get(directive, self.kernel_loc)

    @property
    def path(self) -> InstructionPath:
        """The description of this schedule's instruction path."""
        return PATHS[self.instruction]

    @property
    def mma_depth(self) -> int:
        """Groups of mmas left in flight at the end of a K step (InstructionPath.async_depth)."""
        return self.path.async_depth(self.stages)

    @property
    def direct(self) -> bool:
        """The direct path: fragments loaded straight from global memory as 16-byte vectors
        (InstructionPath.direct_loads: mma.sync with `stages 0`)."""
        return self.path.direct_loads(self.stages)

    @property
    def warps(self) -> tuple[int, int]:
        bm, bn, _ = self.block
        m, n, _ = self.mma
        cm, cn = self.coarsen
        if m * cm <= 0 or n * cn <= 0:
            return 0, 0  # a shape the analysis refuses (mma m64n0k16): no warp fits
        return bm // (m * cm), bn // (n * cn)

    @property
    def split_word(self) -> str:
        """How `persistent` shares a last round, as the directive spells it: `split_k`,
        `stream_k_aligned`, `stream_k`, or '' (whole tiles)."""
        if self.split_k:
            return "split_k"
        if self.aligned:
            return "stream_k_aligned"
        return "stream_k" if self.stream_k else ""

    @property
    def cluster_size(self) -> int:
        """Blocks per thread-block cluster (1: no cluster)."""
        return self.cluster[0] * self.cluster[1]

    @property
    def teams(self) -> int:
        """Teams of consumer warpgroups, each the IR's warps on a tile of its own."""
        return 2 if self.pingpong else 1

    @property
    def consumer_warpgroups(self) -> int:
        """The warpgroups that run the IR's warp code: `teams` of the block's warps."""
        warps_m, warps_n = self.warps
        return warps_m * warps_n * self.teams


def named_constants(s: Schedule) -> dict[str, Const]:
    """The schedule's numbers under the names the emitted code declares them by."""
    (bm, bn, bk), (mm, mn, mk) = s.block, s.mma
    return {
        "BM": Const(bm, "BM"),
        "BN": Const(bn, "BN"),
        "BK": Const(bk, "BK"),
        "MMA_M": Const(mm, "MMA_M"),
        "MMA_N": Const(mn, "MMA_N"),
        "MMA_K": Const(mk, "MMA_K"),
    }
