"""The launch grid and the block id -> block tile mapping (the swizzle pass's raster).

One definition, as index expressions over the block id `pid` and the tile
counts `tiles_m`, `tiles_n`, serves the emitter (C), the interpreter (numpy) and
the launcher (the grid size), so all three visit the same tiles in one order.

    none        bm = pid / tiles_n, bn = pid % tiles_n
    grouped G   blocks walk G block-rows at a time, column by column (Triton's GROUP_SIZE_M);
                the last group takes the rows that are left
    snake G     grouped G, with odd groups walking their columns right to left: the order
                never jumps, so the blocks of one wave and of the next share B's columns in
                L2 where grouped starts each group over at column 0 (a space-filling path)
    zigzag W    the grid is cut along N into panels of W block-columns (the last one may be
                narrower); blocks walk a panel row by row, and odd panels walk M in reverse
                (the S4000 write-up's N_SWIZZLE order)

With `split_k S` (`grid_split_steps`) the grid has a block per slice of each tile: block
pid computes slice pid % S of tile pid / S, the tile's place in the raster as pid's would be.

A persistent block (`persistent`) takes tiles pid, pid + blocks, ... of that order. With
`persistent stream_k` (`stream_k_split`) the tiles of a last round that would leave many
SMs idle (`last_wave`, when it fills at most SK_MAX_FILL percent of the grid) are cut
along K: their K steps, counted tile after tile, are split into `workers` equal shares,
block pid's being steps [sk_first, sk_last), after its whole tiles (`dp_rounds`, the same
for every block then). A share is at least 1/SK_PARTS of a tile's steps, so that a tile is
cut into a few pieces, not into one per block. The piece of a tile that holds its first K
step belongs to the tile's owner, the lowest block that works on it; the blocks after it
(`contributors`) each start their share inside it, add their steps into a partial sum and
hand it to the owner, which adds them in block order: one order of additions for a given
grid, so the same bits on every run. `persistent stream_k_aligned` shares every last round
so, and each block takes the tiles of its share last first (`u_tile`): all blocks start at
K step 0, and a tile's owner is the block holding its last K step, which adds the partial
sums of the blocks before it (`contributors`, `first_contributor`).
"""

from __future__ import annotations

from .expr import Const, Expr, Var, ceil_div, maximum, minimum, substitute
from .nodes import KernelIR

PID, TILES_M, TILES_N = Var("pid"), Var("tiles_m"), Var("tiles_n")
# A thread-block cluster (`cluster CM x CN`): the block's rank in it, and its place there
RANK, CROW, CCOL = Var("rank"), Var("crow"), Var("ccol")
CTILES_M, CTILES_N = Var("ctiles_m"), Var("ctiles_n")


def grid_vars(kernel: KernelIR) -> dict[str, Expr]:
    """Block tiles along M and N, over the size parameters (and, in clusters, the
    cluster tiles: CM x CN block tiles each, the last ones part outside C)."""
    bm, bn, _ = kernel.schedule.block
    tiles = {
        "tiles_m": ceil_div(kernel.gemm.m, Const(bm, "BM")),
        "tiles_n": ceil_div(kernel.gemm.n, Const(bn, "BN")),
    }
    if kernel.cluster_size > 1:
        cm, cn = kernel.cluster
        tiles["ctiles_m"] = ceil_div(tiles["tiles_m"], Const(cm, "CLUSTER_M"))
        tiles["ctiles_n"] = ceil_div(tiles["tiles_n"], Const(cn, "CLUSTER_N"))
    return tiles


def grid_size(kernel: KernelIR) -> Expr:
    """Blocks of one product: a block per tile (in clusters, every cluster tile's blocks;
    with `split_k S`, a block per slice of every tile)."""
    tiles = grid_vars(kernel)
    if kernel.grid_split:
        return tiles["tiles_m"] * tiles["tiles_n"] * Const(kernel.grid_split, "SPLIT_K")
    if kernel.cluster_size > 1:
        return tiles["ctiles_m"] * tiles["ctiles_n"] * Const(kernel.cluster_size, "CLUSTER_SIZE")
    return tiles["tiles_m"] * tiles["tiles_n"]


def cluster_place(kernel: KernelIR) -> dict[str, Expr]:
    """A block's place in its cluster from its rank (%cluster_ctarank: blockIdx.x modulo
    the cluster's size, the cluster being CLUSTER_SIZE consecutive blocks along x): its
    row `crow` along M, its column `ccol` along N."""
    if kernel.cluster_size == 1:
        return {}
    cm = Const(kernel.cluster[0], "CLUSTER_M")
    return {"crow": RANK % cm, "ccol": RANK // cm}


def sharing_ranks(kernel: KernelIR, rank: int) -> list[int]:
    """The blocks of `rank`'s cluster row and column (itself included): those that share
    a tile with it, whose releases its `empty` barriers count. What the emitter's loop over
    `r % CLUSTER_M == crow || r / CLUSTER_M == ccol` arrives on."""
    cm = kernel.cluster[0]
    return [r for r in range(kernel.cluster_size) if r % cm == rank % cm or r // cm == rank // cm]


def multicast_ranks(kernel: KernelIR, multicast: str, rank: int) -> list[int]:
    """The blocks a TMA load issued by block `rank` lands in: its cluster row (A's tile,
    the same crow), its cluster column (B's, the same ccol), or itself. The emitter's
    row_mask and column_mask have these bits."""
    cm = kernel.cluster[0]
    ranks = range(kernel.cluster_size)
    if multicast == "row":
        return [r for r in ranks if r % cm == rank % cm]
    if multicast == "column":
        return [r for r in ranks if r // cm == rank // cm]
    return [rank]


def tile_steps(kernel: KernelIR) -> dict[str, Expr]:
    """The swizzle's steps from `pid` to the block tile (`bm`, `bn`). In clusters `pid` is
    the cluster's: the swizzle orders cluster tiles (`cbm`, `cbn`, over ctiles_m x
    ctiles_n), and a block's tile is its place in its cluster's."""
    steps = raster_steps(*kernel.raster)
    if kernel.cluster_size == 1:
        return steps
    cm, cn = kernel.cluster
    names = {"bm": "cbm", "bn": "cbn"}
    over: dict[str, Expr] = {
        "tiles_m": CTILES_M,
        "tiles_n": CTILES_N,
        "bm": Var("cbm"),
        "bn": Var("cbn"),
    }
    out = {names.get(name, name): substitute(e, over) for name, e in steps.items()}
    out["bm"] = Var("cbm") * Const(cm, "CLUSTER_M") + CROW
    out["bn"] = Var("cbn") * Const(cn, "CLUSTER_N") + CCOL
    return out


def raster_steps(kind: str, param: int) -> dict[str, Expr]:
    if kind in ("grouped", "snake"):
        g = Const(param, "GROUP_M")
        width, group, first_m, group_m = (Var(n) for n in ("width", "group", "first_m", "group_m"))
        steps = {
            "width": g * TILES_N,  # blocks in one group of GROUP_M block-rows
            "group": PID // width,
            "first_m": group * g,
            "group_m": minimum(TILES_M - first_m, g),  # the last group may be shorter
            "bm": first_m + PID % width % group_m,
            "bn": PID % width // group_m,
        }
        if kind == "snake":  # odd groups walk their columns right to left
            col = Var("col")
            steps["col"] = steps.pop("bn")
            steps["bn"] = col + group % 2 * (TILES_N - 1 - col * 2)
        return steps
    if kind == "zigzag":
        w = Const(param, "PANEL_N")
        panel, idx, first_n, width, row = (
            Var(n) for n in ("panel", "idx", "first_n", "width", "row")
        )
        return {
            "panel": PID // (w * TILES_M),
            "idx": PID % (w * TILES_M),
            "first_n": panel * w,
            "width": minimum(TILES_N - first_n, w),  # the last panel may be narrower
            "row": idx // width,
            "bm": row + panel % 2 * (TILES_M - 1 - row * 2),  # odd panels walk M in reverse
            "bn": first_n + idx % width,
        }
    return {"bm": PID // TILES_N, "bn": PID % TILES_N}


def grid_split_steps(steps: Expr, slices: int) -> dict[str, Expr]:
    """`split_k S`: named steps from the block's `pid` to its tile (`tile`, in the raster
    order) and its slice of the tile's K steps (`steps`, the name k_steps), [k_lo, k_hi).
    Block pid is slice pid % S of tile pid / S, so a tile's slices are neighbours in the
    grid (the hardware starts them together, and they read the tile's rows of A at once);
    slice s takes steps [s * k_steps / S, (s + 1) * k_steps / S), none when K has fewer
    steps than slices. Each slice's partial sum is workspace slot pid."""
    count, k_steps, piece = Const(slices, "SPLIT_K"), Var("k_steps"), Var("slice")
    return {
        "tile": PID // count,
        "slice": PID % count,
        "k_steps": steps,
        "k_lo": piece * k_steps // count,
        "k_hi": (piece + 1) * k_steps // count,
    }


def padded_split_steps(steps: Expr, slices: int, teams: int = 1) -> dict[str, Expr]:
    """`split_k S` on the direct path (tiledsl.passes.split_k): like `grid_split_steps`, but
    every slice is `slice_steps` long, ceil(k_steps / S) rounded up to a multiple of the
    block's K teams (`warps_k W`), so that each team's rounds over the slice end where the
    slice does; the last slices reach past K, where the direct path's guarded loads read
    zeros. Slice s takes steps [k_lo, k_hi) = [s * slice_steps, (s + 1) * slice_steps)."""
    count, k_steps, piece = Const(slices, "SPLIT_K"), Var("k_steps"), Var("slice")
    length = ceil_div(k_steps, count)
    if teams > 1:  # named apart from WARPS_K, which exists once the k-teams pass has run
        multiple = Const(teams, "SLICE_MULTIPLE")
        length = ceil_div(length, multiple) * multiple
    return {
        "tile": PID // count,
        "slice": PID % count,
        "k_steps": steps,
        "slice_steps": length,
        "k_lo": piece * Var("slice_steps"),
        "k_hi": Var("k_lo") + Var("slice_steps"),
    }


#: A stream-K share is at least 1/SK_PARTS of a tile's K steps (or one step).
SK_PARTS = 4
#: Stream-K takes the last round's tiles only when they would fill at most SK_MAX_FILL
#: percent of the grid; a fuller last round runs as a round of whole tiles. Measured on
#: the H200 (bench/results/stream-k-unbounded-h200-2026-12-02.json, docs/performance.md):
#: with the last round 76-94 % full, the partial sums' traffic and the blocks' K steps out
#: of step with each other (L2 serves fewer of their loads) cost more than the idle SMs
#: (down to 0.67x at 2048 x 4096 x 11008), and at 27-70 % full stream-K wins 1-3 %.
SK_MAX_FILL = 75
#: `stream_k_aligned`: a block's first piece, where it hands its partial sum over, stores it
#: and goes on; its barrier and flag come FLAG_DEFER_STEPS K steps into the block's next
#: piece (at its last step if it has fewer), so that the stores drain under those steps'
#: wgmmas instead of holding every consumer thread at the barrier until the release's
#: fence has seen them: 2.1 µs of the hand-over's 10 at 2048 x 4096 x 11008 on an H100
#: (bench/results/fixup-timeline-h100-2026-12-06.txt). The owner waits for the flag at its
#: own piece's end (or its producer after its last load), far later.
FLAG_DEFER_STEPS = 2
U = Var("u")  # a block's stream-K pieces: the u-th (of the tiles left after the whole rounds)


def stream_k_split(steps: Expr, split_k: int = 0, aligned: bool = False) -> dict[str, Expr]:
    """Named steps from the block's `pid`, the grid's `blocks`, the `tiles` and the K steps
    of a tile (`steps`, the name k_steps) to its whole tiles (`dp_rounds` of the first
    `dp_tiles`) and its stream-K share [sk_first, sk_last) of the K steps of the
    `sk_tiles` after them, each over the names before it.

    With `split_k` S (`persistent split_k S`), the tiles of a last round are cut into
    `slices` = min(S, k_steps) each when that many pieces fit in the grid (last_wave *
    slices <= blocks: fewer tiles than blocks / S, few tokens), else they run whole; the
    workers are then sk_tiles * slices, so share b = t * slices + s starts at
    floor(b * k_steps / slices) = t * k_steps + floor(s * k_steps / slices): slice s of
    tile t, never across a tile's edge, its first slice's block the owner.

    With `aligned` (`persistent stream_k_aligned`) every last round is shared, however
    full: its blocks take their tiles last first (stream_k_piece), so they read A and B at
    the same K steps as each other (two fronts: the heads' and the tails'), which is what
    SK_MAX_FILL keeps stream-K from.

    Share b starts at floor(b * sk_steps / workers), computed as b * quotient +
    b * remainder / workers: no product exceeds sk_steps (or workers²), so the kernel's
    32-bit ints hold it wherever they hold a tile loop's step count."""
    tiles, blocks, k_steps = Var("tiles"), Var("blocks"), Var("k_steps")
    last_wave, sk_tiles, dp_tiles = Var("last_wave"), Var("sk_tiles"), Var("dp_tiles")
    sk_steps, workers, sharers = Var("sk_steps"), Var("workers"), Var("sk_blocks")
    quotient, remainder = Var("sk_quotient"), Var("sk_remainder")
    before, through = minimum(PID, workers), minimum(PID + 1, workers)
    if split_k:
        slices = Var("slices")
        fits = maximum(minimum(blocks // slices - last_wave + 1, 1), 0)  # 1: it fits
        split: dict[str, Expr] = {
            "slices": minimum(Const(split_k, "SPLIT_K"), k_steps),
            "sk_tiles": last_wave * fits,  # 0 when S slices of each do not fit
            "dp_tiles": tiles - sk_tiles,
            "dp_rounds": (dp_tiles - PID + blocks - 1) // blocks,
            "sk_steps": sk_tiles * k_steps,
            "workers": sk_tiles * slices,  # a block per slice
        }
    else:
        share = maximum(k_steps // Const(SK_PARTS, "SK_PARTS"), 1)
        fill = Const(100) * last_wave // (Const(SK_MAX_FILL, "SK_MAX_FILL") * blocks + 1)
        split = {
            # 0 when that round is full (stream_k_aligned: never)
            "sk_tiles": last_wave if aligned else last_wave * maximum(Const(1) - fill, 0),
            "dp_tiles": tiles - sk_tiles,
            "dp_rounds": (dp_tiles - PID + blocks - 1) // blocks,  # this block's whole tiles
            "sk_steps": sk_tiles * k_steps,  # the K steps of the tiles left
            "workers": minimum(blocks, sk_steps // share),  # blocks with a share
        }
    return {
        "k_steps": steps,
        "last_wave": tiles - tiles // blocks * blocks,  # the tiles of a last, partial round
        **split,
        "sk_blocks": maximum(workers, 1),
        "sk_quotient": sk_steps // sharers,
        "sk_remainder": sk_steps % sharers,
        "sk_first": before * quotient + before * remainder // sharers,
        "sk_last": through * quotient + through * remainder // sharers,
    }


def stream_k_piece(aligned: bool = False) -> dict[str, Expr]:
    """The block's u-th stream-K piece: the tile's index in the raster order, and the
    block's K steps of it [k_lo, k_hi). Stream-K takes a share's tiles in order;
    `stream_k_aligned` takes them last first (`u_tile`, the tile among those left), so that
    every block starts at K step 0 of its last tile: its other pieces end at their tiles'
    last step (`aligned_step`)."""
    k_steps, first, last = Var("k_steps"), Var("sk_first"), Var("sk_last")
    tile = Var("u_tile") if aligned else U  # the piece's tile among the tiles left
    mapping: dict[str, Expr] = {}
    if aligned:
        start, stop = stream_k_tiles()
        mapping["u_tile"] = start + stop - 1 - U
    return {
        **mapping,
        "tile": Var("dp_tiles") + tile,
        "k_lo": maximum(first - tile * k_steps, 0),
        "k_hi": minimum(last - tile * k_steps, k_steps),
    }


def deferred_flag_step() -> dict[str, Expr]:
    """`stream_k_aligned`: the Lets of the K step of a block's second piece (u = start + 1)
    after whose release its first piece's flag is signalled (FLAG_DEFER_STEPS), and
    whether that first piece handed its partial sum over (`handed` < k_steps: its k_hi,
    sk_last less the K steps before its tile, the share's last, is inside that tile)."""
    k_steps = Var("k_steps")
    _, stop = stream_k_tiles()
    return {
        "flag_at": minimum(
            Var("k_lo") + Const(FLAG_DEFER_STEPS, "FLAG_DEFER_STEPS"), Var("k_hi") - 1
        ),
        "handed": Var("sk_last") - (stop - 1) * k_steps,
    }


def stream_k_tiles() -> tuple[Expr, Expr]:
    """The range of `u`: the tiles the block's share [sk_first, sk_last) touches."""
    k_steps = Var("k_steps")
    return Var("sk_first") // k_steps, (Var("sk_last") + k_steps - 1) // k_steps


def aligned_step(kt: Expr) -> Expr:
    """`stream_k_aligned`: the steps of a block's share before step kt of its u-th piece,
    in the order the block takes them (its tiles last first): those of the tiles after
    this one, then kt - k_lo."""
    k_steps = Var("k_steps")
    after = maximum(Var("sk_last") - (Var("u_tile") + 1) * k_steps, 0)
    return after + kt - Var("k_lo")


def contributors(aligned: bool = False) -> tuple[Expr, Expr]:
    """The blocks whose partial sums of the piece's tile its owner adds, [begin, end), in
    that order.

    Stream-K (owner: the block holding the tile's first K step): the blocks after it,
    pid + 1 up to the largest c whose share starts before the tile's end, c * sk_steps /
    workers < (u + 1) * k_steps, which (sk_steps being sk_tiles * k_steps) is
    c = ((u + 1) * workers - 1) / sk_tiles.

    `stream_k_aligned` (owner: the block holding the tile's last K step): the blocks before
    it, from the one holding the tile's first step up to pid. That one is `c_base`, the
    first c whose share ends at or past the tile's start, (c + 1) * sk_steps / workers >=
    u_tile * k_steps, i.e. c + 1 >= ceil(u_tile * workers / sk_tiles), or the block after
    it where c_base's share ends right there (`c_first`). No product exceeds sk_tiles *
    workers or a share's start."""
    if not aligned:
        return PID + 1, ((U + 1) * Var("workers") - 1) // Var("sk_tiles") + 1
    return Var("c_first"), PID


def first_contributor() -> dict[str, Expr]:
    """`stream_k_aligned`: the Lets of `contributors`'s first block (c_base, c_first)."""
    workers, sk_tiles, sharers = Var("workers"), Var("sk_tiles"), Var("sk_blocks")
    c_base = Var("c_base")
    share_end = (c_base + 1) * Var("sk_quotient") + (c_base + 1) * Var("sk_remainder") // sharers
    tile_start = Var("u_tile") * Var("k_steps")
    return {
        "c_base": maximum((Var("u_tile") * workers + sk_tiles - 1) // sk_tiles, 1) - 1,
        "c_first": c_base + minimum(maximum(tile_start + 1 - share_end, 0), 1),
    }
