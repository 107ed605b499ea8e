"""warp-specialization (`copy tma` + `warp_specialize`, optionally `persistent`): Hopper's
producer/consumer pipeline, built from the multi-buffered kernel.

The kernel before this pass is a `stages`-deep pipeline in which every thread copies
and computes. This pass keeps its compute (the fragment steps of one K step, reading
slot `step % STAGES`), its accumulator fill and its C store, and hands the copies to a
producer warpgroup of their own (tiledsl.ir.nodes.Roles):

    role producer (one elected thread)         role consumer (the IR warps)
      for kt:                                    fill acc
        q = tl * KT + kt    (`step`)             for kt:
        wait empty[q % S] parity (q/S + 1) % 2     wait full[q % S] parity (q/S) % 2
        expect_tx full[q % S] STAGE_BYTES          wgmmas on slot q % S; commit; wait 1
        copy.tma As[q % S] <- A, on full[..]       arrive empty[(q - 1) % S]   (kt > 0)
        copy.tma Bs[q % S] <- B, on full[..]     wait 0; arrive empty[last q % S]
                                                   (persistent: the next tile reuses it)
                                                 store C from the registers

`full[s]` completes when the producer's expect_tx has arrived and the TMA unit has
delivered every announced byte; `empty[s]` when every consumer warpgroup has released
the slot (its wgmmas reading it have retired: the wait that keeps one group in flight
retires the previous step's). A fresh mbarrier is in phase 0, so the producer's first
wait on each slot (parity 1, "the phase before") passes at once: the first STAGES
steps need no release. `step` (q above) counts K steps over all of a block's tiles, so the phase
bits carry from one tile to the next without a reset.

With `epilogue_via tma` C leaves through shared memory instead: each consumer warpgroup
stages `store_columns` of its columns at a time in its own slot of Cs (the 128-byte
swizzle, stmatrix's rows spread over the banks), and one of its threads hands the
piece to the TMA unit, which writes it to C while the warpgroup goes on:

    for h:                                     (the warpgroup's columns, a piece at a time)
      tma.store_wait read                      the store of the piece before has read Cs
      barrier.warp                             ... for every lane of the warpgroup
      store_frag Cs[warp] <- acc columns h     (stmatrix)
      fence.proxy.async; barrier.warp          the lanes' writes, visible to the TMA unit
      copy.tma.store C <- Cs[warp]             (bulk group; outside C: skipped)
    ...
    tma.store_wait read                        at the end: before the block's exit

Cs has bytes of its own (after the stages, which the producer refills meanwhile), so a
persistent block's next tile starts computing while its last tile's C is still leaving.

With `persistent` the block loops over tiles `pid, pid + blocks, ...` (`blocks` is
gridDim.x, the SM count at launch), in the swizzle's order (tiledsl.ir.grid); the
producer runs ahead into the next tile's loads while the consumers store this tile's C.

With `warp_specialize pingpong` (and `persistent`) the consumer body runs twice over, as
two teams of the IR's warps (KernelIR.teams): team t takes the block's tiles t, t + 2, ...,
each a whole tile of its own, while the producer fills the stages for all of them in order.
A team waits on a stage only for its own tiles' phases, so the teams take turns (`_turns`):
before a tile's K loop, a wait on `turn[team]`; after it, a warpgroup barrier and lane 0's
arrival on the other team's turn. One team's epilogue then runs while the other computes.

With `cluster CM x CN` the blocks come in thread-block clusters on neighbouring tiles
(tiledsl.ir.grid: the swizzle orders cluster tiles; `pid` and `blocks` are the clusters').
A tile that several blocks of the cluster read is loaded once, in parts (`_multicast_part`):

    B's tile (shared by the CM blocks of a cluster column): block (crow, ccol) loads lines
      [crow * L / CM, (crow + 1) * L / CM) of its L lines, multicast to the column
    A's tile (shared by the CN blocks of a cluster row): lines by ccol, multicast to the row

Every part lands at the same offsets in each receiving block and counts on that block's
`full[s]`, which still expects the whole stage's bytes. A block's producer overwrites slot
s in every block its parts reach, so `empty[s]` counts the releases of the consumer
warpgroups of all of them (its cluster row and column: CM + CN - 1 blocks), and each
consumer's release arrives in every block it shares a tile with (`Arrive.sharers`). A
cluster barrier after the roles keeps a block from exiting while the others still arrive
on its barriers; a cluster tile past C's edge runs its pipeline (zero-filled loads) and
stores nothing from its registers (the TMA store clips it anyway).

With `persistent stream_k` (tiledsl.ir.grid.stream_k_split) each role's loop over whole
tiles runs `dp_rounds` times, and a second loop follows over the block's stream-K pieces:
tile u of its share, K steps [k_lo, k_hi), the step count carrying on from the whole tiles
(`_sk_step`). A consumer's piece ends in the fix-up (`_fix_up`):

    if 0 < k_lo:                               the piece starts inside its tile
      partial.store workspace[me] <- acc       every consumer thread, its registers
      barrier.consumers                        ... all written before
      flag.signal flags[me]                    the first thread's release
    else:                                      the tile's owner
      for c in contributors:                   the blocks after it in the tile, in order
        flag.wait flags[c]                     the first thread's acquire (and clear)
        barrier.consumers                      ... before every thread's reads
        partial.add acc += workspace[c]
      store C

With `persistent stream_k_aligned` a block takes its tiles last first (its u-th piece is
of tile `u_tile`), so that every block starts at K step 0: a piece then hands its partial
sum over where it ends inside its tile (k_hi < k_steps), and the tile's owner is the block
holding its last K step, which adds those of the blocks before it, from `c_first` on. Such
a piece is its block's first: it stores its partial sum and goes on, and its barrier and
flag come FLAG_DEFER_STEPS K steps into the block's next piece (`_deferred_flag`), the
stores draining under those steps' wgmmas; a share of one piece signals at once. Where the
stage slots can hold a partial sum, the owner's producer fetches its first contributor's
into the slots after its last step (`_fetch`), and its consumers add it from there.

With `split_k S` (no `persistent`; tiledsl.ir.grid.grid_split_steps) the grid has a block
per slice of each tile: block pid runs both roles' K loops over steps [k_lo, k_hi) of tile
pid / S (slice pid % S), and the consumers end in a fix-up that no block waits in:

    partial.store workspace[pid] <- acc        every consumer thread, its registers
    barrier.consumers                          ... all written before the ticket
    ticket = ticket tickets[tile] of S         the first thread's atomic add (acq_rel),
                                               handed to every consumer thread
    if ticket == S - 1:                        the last slice to finish, whichever it is
      fill acc 0
      for c in 0 .. S:                         every slice's partial sum, in slice order
        partial.add acc += workspace[tile * S + c]
      store C

The adds run in slice order whichever slice draws the last ticket, so C has the same bits
on every run; no block waits for another, so the grid need not be resident at once.

With `split_k S via cluster` the tile's S slices are one thread-block cluster (rank =
slice), and the partial sums go through distributed shared memory (`_cluster_fix_up`):

    if slice == 0:                             the tile's first slice
      wait.cluster sums[0] parity 0            every other slice's arrival (acquire)
      for c in 1 .. S:                         in slice order
        partial.add acc += Ps of block c       mapa + ld.shared::cluster
      barrier.warp; arrive taken[0] of each c  their shared memory may go
      store C
    else:
      partial.store Ps <- acc                  its own shared memory (Ps, BM x BN floats)
      barrier.warp; arrive sums[0] of block 0  lane 0, a release at cluster scope
      wait taken[0] parity 0                   slice 0 has read it: the block may exit

No workspace and no ticket; the same additions in the same order as the workspace's.

The kernel the pass returns has been proven (tiledsl.models.mbarrier_hazards): its
handoffs order every shared-memory access under every interleaving of the roles, and no
wait can deadlock. Each handoff statement's decision — the race or deadlock it prevents —
is the kernel's `sync_report`, for `--explain-sync`; `sync minimal` would drop one the
proof holds without (the pipeline has none).
"""

from __future__ import annotations

from dataclasses import replace
from typing import cast

from ..ir.dtypes import DTypeName
from ..ir.expr import Const, Expr, Var, substitute
from ..ir.fetch import fetch_parts, part_bytes
from ..ir.grid import (
    CCOL,
    CROW,
    CTILES_M,
    CTILES_N,
    PID,
    RANK,
    TILES_M,
    TILES_N,
    U,
    aligned_step,
    contributors,
    deferred_flag_step,
    first_contributor,
    grid_split_steps,
    stream_k_piece,
    stream_k_split,
    stream_k_tiles,
    tile_steps,
)
from ..ir.nodes import (
    K_BLOCKS,
    K_FRAGMENTS,
    TILES,
    Arrive,
    Barrier,
    BarrierRef,
    Copy,
    ExpectTx,
    FlagSignal,
    FlagWait,
    For,
    FragRef,
    GlobalTile,
    If,
    KernelIR,
    Let,
    MBarrier,
    MmaCommit,
    MmaFence,
    MmaWait,
    Multicast,
    PartialAdd,
    PartialFetch,
    PartialFromPeer,
    PartialStore,
    PartialToShared,
    ProxyFence,
    Role,
    Roles,
    SharedBuffer,
    SharedTile,
    Stmt,
    StoreFrag,
    TmaLoad,
    TmaStore,
    TmaStoreWait,
    Wait,
    is_loop,
    map_body,
    swizzle_panel,
    tile_loads,
    walk,
)
from ..ir.split import ticketed_fix_up
from ..lowering.edges import guard_c_stores
from ..models import mbarrier_hazards
from ..models.registers import role_registers

Q, TL, TILE, BLOCKS, TILES_VAR = Var("step"), Var("tl"), Var("tile"), Var("blocks"), Var("tiles")
WARP, PIECE, TEAM = Var("warp"), Var("h"), Var("team")
LAST_STEP = Var("last_step")  # stream_k_aligned's fetch: the owner piece's last K step


def warp_specialization(kernel: KernelIR) -> KernelIR:
    s = kernel.schedule
    kernel = replace(kernel, cluster=s.cluster)  # the tile order is the clusters'
    k_loop = next(st for st in kernel.body if is_loop(st, K_BLOCKS))
    loads, stage_bytes = _stage_loads(kernel, k_loop)
    producer_tile, consumer_tile = _role_bodies(kernel, k_loop, loads, stage_bytes)
    staging: tuple[SharedBuffer, ...] = ()
    if s.epilogue_via == "tma":
        staging = (_staging_buffer(kernel),)
        drain = TmaStoreWait("the TMA stores have read Cs before the block exits")
        consumer_tile = (*consumer_tile, drain)
    split = role_registers(kernel.warp_count * s.teams, kernel.target)
    assert split is not None  # frontend/hopper.py refuses a split the target cannot make
    roles = Roles(
        Role("producer", split.producer, producer_tile),
        Role("consumer", split.consumer, consumer_tile),
    )
    used = {t.dst.buffer for t in loads}
    shared_partial = (_partial_buffer(kernel),) if s.split_via == "cluster" else ()
    specialized = replace(
        kernel,
        body=(*_grid_lets(kernel, k_loop), roles, *_cluster_exit(kernel)),
        buffers=(*(b for b in kernel.buffers if b.name in used), *staging, *shared_partial),
        mbarriers=_mbarriers(kernel),
        producer_warps=1,
        teams=s.teams,
        persistent=s.persistent,
        stream_k=s.stream_k,
        split_k=s.split_k,
        aligned=s.aligned,
        grid_split=s.grid_split,
        split_cluster=s.grid_split > 0 and s.split_via == "cluster",
    )
    # The pipeline's block barriers are gone: the handoffs order the roles' accesses, and
    # the proof says so (or refuses the kernel), with what each handoff statement prevents.
    # TMA loads zero-fill partial tiles; C's stores from registers are guarded for them
    return mbarrier_hazards.proven(guard_c_stores(specialized))


def _stage_loads(kernel: KernelIR, k_loop: For) -> tuple[tuple[TmaLoad, ...], int]:
    """The K loop's tile loads as TMA copies into slot `step % STAGES`, each counting on that
    slot's `full` barrier and cut into its cluster's multicast part; and a stage's bytes."""
    slot = Q % Const(kernel.schedule.stages, "STAGES")
    tiles = [
        TmaLoad(
            replace(dst, slot=slot),
            replace(src, origin=(_at_step(src.origin[0], k_loop), _at_step(src.origin[1], k_loop))),
            BarrierRef("full", slot),
        )
        for dst, src in tile_loads(kernel.body[: kernel.body.index(k_loop)])
    ]
    stage_bytes = sum(kernel.tile_bytes(t.dst) for t in tiles)
    return tuple(_multicast_part(kernel, t) for t in tiles), stage_bytes


def _role_bodies(
    kernel: KernelIR, k_loop: For, loads: tuple[TmaLoad, ...], stage_bytes: int
) -> tuple[tuple[Stmt, ...], tuple[Stmt, ...]]:
    """(the producer's body, the consumers' body): one tile's K loop each, looped over the
    block's tiles when persistent, then over its stream-K pieces."""
    s = kernel.schedule
    position = kernel.body.index(k_loop)
    step = Let("step", TL * k_loop.stop + Var(k_loop.var) if s.persistent else Var(k_loop.var))
    producer_tile = _producer(kernel, k_loop, step, loads, stage_bytes)
    consumer_tile = _consumer(kernel, k_loop, step, position)
    if s.grid_split:
        # the block's slice of its tile: steps [k_lo, k_hi), the stages from step 0 on
        piece = replace(k_loop, start=Var("k_lo"), stop=Var("k_hi"))
        sliced = Let("step", Var(k_loop.var) - Var("k_lo"))
        producer_tile = _producer(kernel, piece, sliced, loads, stage_bytes)
        consumer_tile = _consumer(kernel, piece, sliced, position)
    if s.persistent:
        producer_tile = _tile_loop(kernel, producer_tile)
        # pingpong: team t takes the block's tiles t, t + TEAMS, ...; the producer all
        consumer_tile = _tile_loop(kernel, consumer_tile, s.teams)
    if s.stream_k:
        # after the whole rounds, the block's share of the K steps of the tiles left
        piece = replace(k_loop, start=Var("k_lo"), stop=Var("k_hi"))
        sk_step = Let("step", _sk_step(Var(k_loop.var), s.aligned))
        producer_tile += _stream_k_loop(
            kernel, (*_producer(kernel, piece, sk_step, loads, stage_bytes), *_fetch(kernel))
        )
        consumer_tile += _stream_k_loop(kernel, _consumer(kernel, piece, sk_step, position))
    return producer_tile, consumer_tile


def _grid_lets(kernel: KernelIR, k_loop: For) -> tuple[Stmt, ...]:
    """What every block knows of the grid before its roles: the tile count (persistent) and
    stream-K's split of the last round."""
    s = kernel.schedule
    if s.grid_split:  # the block's tile and slice, then the tile's place in the raster
        slices = grid_split_steps(k_loop.stop, s.grid_split)
        mapping = {name: substitute(e, {PID.name: TILE}) for name, e in tile_steps(kernel).items()}
        return tuple(Let(name, e) for name, e in {**slices, **mapping}.items())
    if not s.persistent:
        return ()
    tiles = CTILES_M * CTILES_N if kernel.cluster_size > 1 else TILES_M * TILES_N
    lets: tuple[Stmt, ...] = (Let("tiles", tiles),)
    if s.stream_k:
        shares = stream_k_split(k_loop.stop, s.split_k, s.aligned)
        lets += tuple(Let(name, e) for name, e in shares.items())
    return lets


def _cluster_exit(kernel: KernelIR) -> tuple[Stmt, ...]:
    """In a cluster, the other blocks arrive on this block's barriers and multicast into its
    shared memory until their last release: no block exits before all are done."""
    if kernel.cluster_size == 1:
        return ()
    why = "the cluster's blocks are done with each other's barriers and stages before any exits"
    return (Barrier("cluster", why),)


def _multicast_part(kernel: KernelIR, load: TmaLoad) -> TmaLoad:
    """In a cluster, this block's part of a tile its cluster row (A) or column (B) shares:
    1/CN of A's lines (the block's column `ccol` picks which) or 1/CM of B's (its row
    `crow`), multicast to every block that shares the tile. Whole tiles otherwise."""
    cm, cn = kernel.cluster
    is_a = load.src.operand == kernel.gemm.a.name
    multicast: Multicast = "row" if is_a else "column"
    parts, part = (cn, CCOL) if is_a else (cm, CROW)
    if parts == 1:
        return load
    along_rows = kernel.buffer(load.dst.buffer).layout == "row"  # the lines are its rows
    lines = (load.dst.rows if along_rows else load.dst.cols) // parts
    shift = part * Const(lines)

    def cut(tile):
        r, c = tile.offset
        if along_rows:
            return replace(tile, offset=(r + shift, c), rows=lines)
        return replace(tile, offset=(r, c + shift), cols=lines)

    return replace(load, dst=cut(load.dst), src=cut(load.src), multicast=multicast)


def _producer(
    kernel: KernelIR, k_loop: For, step: Let, loads, stage_bytes: int
) -> tuple[Stmt, ...]:
    """One tile's K loop of the producer: claim a slot (empty), announce, load (full).
    In a cluster the slot is claimed in every block that shares a tile with this one (its
    empty barrier counts their releases), and `stage_bytes` (whole tiles) land in each."""
    stages = Const(kernel.schedule.stages, "STAGES")
    slot = Q % stages
    body: tuple[Stmt, ...] = (
        step,
        Wait(
            BarrierRef("empty", slot),
            (Q // stages + 1) % 2,
            "the consumers have released the slot (its phase before this use has completed)",
        ),
        ExpectTx(BarrierRef("full", slot), stage_bytes, "this step's tiles, by TMA"),
        *loads,
    )
    return (replace(k_loop, body=body, comment="block steps along K: claim a slot, load it"),)


def _consumer(kernel: KernelIR, k_loop: For, step: Let, position: int) -> tuple[Stmt, ...]:
    """One tile of the consumers: the fill, the K loop (wait full, compute, release the
    previous step's slot), the last release when a next tile follows, the C store."""
    s = kernel.schedule
    stages, steps = Const(s.stages, "STAGES"), k_loop.stop
    fills = tuple(st for st in kernel.body[:position] if not _copies(st))
    stores: tuple[Stmt, ...] = tuple(
        st for st in kernel.body[position + 1 :] if not isinstance(st, MmaWait)
    )
    clustered = kernel.cluster_size > 1  # a release reaches every block it shares a tile with
    body = _consumer_step(kernel, k_loop, step)
    # the last step's release: only a persistent block's next tile reuses the slot
    piece = isinstance(k_loop.start, Var)  # a stream-K piece: steps [k_lo, k_hi) of a tile
    deferred: tuple[Stmt, ...] = ()
    if piece and s.aligned and not s.grid_split:
        deferred = tuple(Let(name, e) for name, e in deferred_flag_step().items())
        body = (*body, _deferred_flag(kernel, Var(k_loop.var)))
    last_step = _sk_step(k_loop.stop - 1, s.aligned) if piece else TL * steps + steps - 1
    release = If(
        k_loop.start,
        "<",
        k_loop.stop,
        (
            Arrive(
                BarrierRef("empty", last_step % stages),
                "the last step's wgmmas have retired",
                sharers=clustered,
            ),
        ),
    )
    turn, handoff = _turns(kernel)
    if clustered:
        # a cluster tile may reach past C (tiles_m not a multiple of CLUSTER_M): its blocks
        # there run the pipeline with their sharers (zero-filled loads) and store nothing
        stores = (If(Var("bm"), "<", TILES_M, (If(Var("bn"), "<", TILES_N, stores),)),)
    if s.epilogue_via == "tma":
        stores = _tma_epilogue(kernel, stores)
    return (
        *fills,
        *turn,
        *deferred,
        replace(k_loop, body=body, comment="block steps along K: wait, compute, release"),
        *handoff,  # every lane has passed its waits; its last wgmmas may still run
        MmaWait(0),
        *((release,) if s.persistent else ()),
        # with an epilogue, its EpilogueFrags (from lowering) come first; a stream-K piece
        # adds the partial sums of the tile's other pieces first, or hands its own over
        *(
            _cluster_fix_up(kernel, stores)
            if s.grid_split and s.split_via == "cluster"
            else _ticketed_fix_up(kernel, fills, stores)
            if s.grid_split
            else _fix_up(kernel, stores)
            if piece
            else stores
        ),
    )


def _consumer_step(kernel: KernelIR, k_loop: For, step: Let) -> tuple[Stmt, ...]:
    """A consumer K step: wait for the slot's tiles, the wgmmas on it, then the release of
    the previous step's slot once its wgmmas have retired."""
    stages = Const(kernel.schedule.stages, "STAGES")
    slot = Q % stages
    compute = tuple(
        map_body((st,), lambda x: _read_slot(x, slot))[0]
        for st in k_loop.body
        if isinstance(st, (MmaFence, MmaCommit)) or is_loop(st, K_FRAGMENTS)
    )
    release = Arrive(
        BarrierRef("empty", (Q + stages - 1) % stages),
        "the previous step's wgmmas have retired: its slot is free",
        sharers=kernel.cluster_size > 1,
    )
    return (
        step,
        Wait(BarrierRef("full", slot), Q // stages % 2, "this step's tiles have landed"),
        *compute,
        MmaWait(1),
        If(k_loop.start, "<", Var(k_loop.var), (release,)),
    )


def _sk_step(kt: Expr, aligned: bool) -> Expr:
    """A stream-K piece's K step `kt` as the block's running step count: after its whole
    rounds' steps, the steps of its share before this one (`stream_k_aligned`: in the
    order it takes them, its last tile first)."""
    k_steps = Var("k_steps")
    whole = Var("dp_rounds") * k_steps
    if aligned:
        return whole + aligned_step(kt)
    return whole + U * k_steps + kt - Var("sk_first")


def _fetched_steps(kernel: KernelIR) -> list[Expr]:
    """`stream_k_aligned` with a fetched hand-over (tiledsl.ir.fetch): the steps after an
    owner piece's last whose stage slots its first contributor's partial sum fills."""
    return [LAST_STEP + (1 + p) for p in range(fetch_parts(kernel))]


def _last_step() -> Let:
    """An aligned piece's last K step, as the block's running step count."""
    return Let(LAST_STEP.name, _sk_step(Var("k_hi") - 1, True))


def _fetch(kernel: KernelIR) -> tuple[Stmt, ...]:
    """The producer, after an aligned owner piece's last load (module text): it acquires
    the first contributor's flag and fetches that partial sum into the slots of the steps
    after the piece's last, as more steps of its pipeline (claim the slot, expect the bytes,
    bulk-copy a part); its consumers wait on those `full` barriers and add from there."""
    steps = _fetched_steps(kernel)
    if not steps:
        return ()
    stages = Const(kernel.schedule.stages, "STAGES")
    theirs = _slot(Var("c_first"), kernel)
    fetches: list[Stmt] = []
    for part, step in enumerate(steps):
        slot = step % stages
        fetches += [
            Wait(
                BarrierRef("empty", slot),
                (step // stages + 1) % 2,
                "the consumers have retired the slot's last wgmmas (no load refills it)",
            ),
            ExpectTx(
                BarrierRef("full", slot),
                part_bytes(kernel, part),
                f"part {part} of the partial sum, by TMA",
            ),
            PartialFetch(theirs, part, step, BarrierRef("full", slot), f"part {part}"),
        ]
    first = tuple(Let(name, e) for name, e in first_contributor().items())
    acquire = FlagWait(
        theirs,
        "block c_first's partial sum of this tile is in the workspace (acquire, for the TMA unit)",
        by_producer=True,
    )
    return (
        If(
            Var("k_hi"),
            "==",
            Var("k_steps"),
            (*first, If(Var("c_first"), "<", PID, (_last_step(), acquire, *fetches))),
        ),
    )


def _signal(kernel: KernelIR, deferred: bool = False) -> tuple[Stmt, ...]:
    """A piece's hand-over after its partial sum's stores: the consumers' barrier, then the
    first thread's release of the block's flag (`deferred`: the block's first piece's, in
    its next piece)."""
    written, sum_ = (
        ("every consumer thread's part of the first piece's partial sum", "the first piece's")
        if deferred
        else ("every consumer thread's partial sum", "the")
    )
    return (
        Barrier("consumers", f"{written} is written before the flag"),
        FlagSignal(_slot(PID, kernel), f"{sum_} partial sum is in the workspace (release)"),
    )


def _deferred_flag(kernel: KernelIR, kt: Expr) -> Stmt:
    """`stream_k_aligned`, in a piece's K loop after the step's release: at step `flag_at`
    of the block's second piece, the first piece's barrier and flag, if it handed its
    partial sum over (tiledsl.ir.grid.FLAG_DEFER_STEPS; the first piece stored it and went
    on)."""
    start, _ = stream_k_tiles()
    handed = If(Var("handed"), "<", Var("k_steps"), _signal(kernel, deferred=True))
    return If(kt, "==", Var("flag_at"), (If(U, "==", start + 1, (handed,)),))


def _slot(block: Expr, kernel: KernelIR) -> Expr:
    """The workspace slot and flag of a block: its index in the grid (`block` is the
    cluster's, in clusters, the same rank in every cluster pairing up)."""
    size = kernel.cluster_size
    return block * Const(size, "CLUSTER_SIZE") + RANK if size > 1 else block


def _fix_up(kernel: KernelIR, stores: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """The end of a stream-K piece (module text): a piece that starts inside its tile hands
    its partial sum to the tile's owner; the owner's piece (k_lo = 0) adds the partial sums
    of the blocks after it that reach into the tile, in block order, then stores C.
    `stream_k_aligned` turns it around: a piece that ends inside its tile hands over, and
    the owner (k_hi = k_steps) adds the partial sums of the blocks before it."""
    aligned = kernel.schedule.aligned
    mine, theirs = _slot(PID, kernel), _slot(Var("c"), kernel)
    begin, end = contributors(aligned)
    store = PartialStore(mine, "this piece's partial sum, for the tile's owner")
    # stream_k_aligned: the block's next piece signals (_deferred_flag); a share's only one now
    hand_over = (
        (store, If(U + 1, "==", stream_k_tiles()[1], _signal(kernel)))
        if aligned
        else (store, *_signal(kernel))
    )
    gather = For(
        "c",
        begin,
        end,
        1,
        (
            FlagWait(theirs, "block c's partial sum of this tile is in the workspace (acquire)"),
            Barrier("consumers", "the first thread's acquire, before every thread's reads"),
            PartialAdd(theirs, "block c's partial sum, in block order"),
        ),
        comment=(
            "the blocks before this one whose shares reach into the tile, in order"
            if aligned
            else "the blocks after this one whose shares reach into the tile, in order"
        ),
    )
    if aligned:  # the owner holds the tile's last step; c_first holds its first
        first: tuple[Stmt, ...] = tuple(Let(n, e) for n, e in first_contributor().items())
        steps = _fetched_steps(kernel)
        if steps:  # c_first's partial sum from the stage slots its producer fetched it into
            stages = Const(kernel.schedule.stages, "STAGES")
            landed = tuple(
                Wait(
                    BarrierRef("full", step % stages),
                    step // stages % 2,
                    f"part {part} of block c_first's partial sum has landed",
                )
                for part, step in enumerate(steps)
            )
            staged = PartialAdd(
                _slot(Var("c_first"), kernel),
                "block c_first's partial sum, fetched by the producer",
                staged=steps[0],
            )
            fetched = If(Var("c_first"), "<", PID, (_last_step(), *landed, staged))
            gather = replace(gather, start=Var("c_first") + 1)
            first = (*first, fetched)
        return (If(Var("k_hi"), "<", Var("k_steps"), hand_over, (*first, gather, *stores)),)
    return (If(Const(0), "<", Var("k_lo"), hand_over, (gather, *stores)),)


def _ticketed_fix_up(
    kernel: KernelIR, fills: tuple[Stmt, ...], stores: tuple[Stmt, ...]
) -> tuple[Stmt, ...]:
    """The end of a `split_k S` slice (tiledsl.ir.split): the consumers' named barrier
    orders their partial stores before the first consumer thread's ticket."""
    why = "every consumer thread's partial sum is written before the ticket"
    return ticketed_fix_up(kernel.schedule.grid_split, Barrier("consumers", why), fills, stores)


def _cluster_fix_up(kernel: KernelIR, stores: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """The end of a `split_k S via cluster` slice (module text): the tile's slices are one
    cluster (rank = slice). Every slice but the first leaves its partial sum in its own
    `Ps` and tells slice 0 (an arrival on its `sums`), then waits until slice 0 has read
    it (`taken`), so that its shared memory outlives the reads; slice 0 waits for them all,
    adds them in slice order from their shared memory, hands each back, and stores C."""
    count = Const(kernel.schedule.grid_split, "SPLIT_K")
    peers = (Const(1), count)  # the slices after the first, in order
    gather = For(
        "c",
        *peers,
        1,
        (PartialFromPeer(Var("c"), "slice c's partial sum, from its shared memory"),),
        unroll=True,
        comment="the other slices' partial sums, in slice order",
    )
    returned = For(
        "c",
        *peers,
        1,
        (
            Arrive(
                BarrierRef("taken", Const(0)),
                "slice c's partial sum is read: its block may exit",
                rank=Var("c"),
            ),
        ),
        unroll=True,
        comment="each other slice's shared memory, handed back",
    )
    owner = (
        Wait(
            BarrierRef("sums", Const(0)),
            Const(0),
            "every other slice's partial sum is in its shared memory (acquire, cluster scope)",
            cluster=True,
        ),
        gather,
        Barrier("warp", "every lane of the warpgroup has read the other slices' partial sums"),
        returned,
        *stores,
    )
    contributor = (
        PartialToShared("this slice's partial sum, for slice 0 of the tile"),
        Barrier("warp", "every lane's part of the partial sum is in Ps before lane 0's arrival"),
        Arrive(
            BarrierRef("sums", Const(0)),
            "this slice's partial sum is in its shared memory (release, cluster scope)",
            rank=Const(0),
        ),
        Wait(
            BarrierRef("taken", Const(0)),
            Const(0),
            "slice 0 has read this slice's partial sum: the block may exit",
        ),
    )
    return (If(Var("slice"), "==", Const(0), owner, contributor),)


def _partial_buffer(kernel: KernelIR) -> SharedBuffer:
    """Ps: `split_k S via cluster`'s partial sum of the block, BM x BN floats in its own
    bytes (the stage slots may still be read by another warpgroup's last wgmmas)."""
    bm, bn, _ = kernel.schedule.block
    return SharedBuffer(
        "Ps",
        "f32",
        1,
        bm,
        bn,
        bn,
        "split_k via cluster: this slice's partial sum, for slice 0 to read",
        kernel.schedule.loc("split_k"),
    )


def _stream_k_loop(kernel: KernelIR, piece: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """A block's stream-K tiles (tiledsl.ir.grid.stream_k_split): tile u of its share, the
    tile's raster place and the block's K steps of it, then `piece` on them."""
    mapping = tuple(Let(name, e) for name, e in stream_k_piece(kernel.schedule.aligned).items())
    tiles = tuple(
        Let(name, substitute(e, {PID.name: TILE})) for name, e in tile_steps(kernel).items()
    )
    start, stop = stream_k_tiles()
    return (
        For(
            U.name,
            start,
            stop,
            1,
            (*mapping, *tiles, *piece),
            comment="this block's share of the K steps of the tiles left (stream-K)",
            role=TILES,
        ),
    )


def _turns(kernel: KernelIR) -> tuple[tuple[Stmt, ...], tuple[Stmt, ...]]:
    """pingpong: a team's wait for its turn at the stages, and its handoff to the other.

    A team waits on a stage only for the phases of its own tiles, so its wait on parity x
    could pass on the phase two before the one it means (a fresh barrier passes parity 1
    at once). Taking turns rules that out: a team starts a tile's K loop only once the
    other team's K loop of the tile before has passed its waits, so every earlier phase of
    every stage has completed. Team t's j-th turn (its tile tl = t + 2j) waits on turn[t]
    for parity (j + t + 1) % 2: team 0's first passes at once, team 1's waits for team
    0's first handoff. The handoff comes as soon as every lane of the team has passed its
    last wait (a warpgroup barrier, then lane 0 arrives), so the other team issues its
    first wgmmas while this team's last ones drain."""
    s = kernel.schedule
    if s.teams == 1:
        return (), ()
    teams = Const(s.teams, "TEAMS")
    wait = Wait(
        BarrierRef("turn", TEAM),
        (TL // teams + TEAM + 1) % 2,
        "the other team's K loop of the tile before has passed its waits: this team's turn",
    )
    joined = Barrier(
        "warp",
        "every lane of the warpgroup has passed its waits on the stages (lane 0 hands over)",
    )
    handoff = Arrive(
        BarrierRef("turn", (TEAM + 1) % teams),
        "this team's K loop has passed its waits: the other team's turn (this team's last "
        "wgmmas drain meanwhile)",
    )
    return (wait,), (joined, handoff)


def _staging_buffer(kernel: KernelIR) -> SharedBuffer:
    """Cs: per consumer warpgroup, its rows by `store_columns` of C, in 64-element panels
    with the 128-byte swizzle (the TMA store's box, stmatrix without bank conflicts)."""
    s = kernel.schedule
    rows, cols = s.mma[0] * s.coarsen[0], s.store_columns
    return SharedBuffer(
        "Cs",
        cast(DTypeName, kernel.gemm.c.dtype),
        kernel.warp_count * s.teams,
        rows,
        cols,
        cols,
        "per-warpgroup staging of C for the TMA store",
        s.loc("epilogue_via"),
        per_warp=True,
        xor=True,
        panel=swizzle_panel(kernel.gemm.c.dtype),
    )


def _tma_epilogue(kernel: KernelIR, tile: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """The consumers' tile with its C store through Cs and the TMA unit (module text)."""
    s = kernel.schedule
    (m, n, _), (cm, cn), width = s.mma, s.coarsen, s.store_columns
    rows = m * cm
    acc = next(f.name for f in kernel.fragments if f.role == "accumulator")
    stores = []
    columns = Const(width, "STORE_COLUMNS")
    for i in range(cm):
        if width <= n:  # a window of one fragment's columns
            first = PIECE * columns % Const(n, "MMA_N")
            frag = FragRef(acc, Const(i), PIECE * columns // Const(n, "MMA_N"))
            dst = SharedTile("Cs", WARP, (Const(i * m), Const(0)), m, width)
            stores.append(StoreFrag(dst, frag, (first, width)))
            continue
        per = width // n  # whole fragments side by side
        for q in range(per):
            frag = FragRef(acc, Const(i), PIECE * Const(per) + Const(q))
            dst = SharedTile("Cs", WARP, (Const(i * m), Const(q * n)), m, n)
            stores.append(StoreFrag(dst, frag))
    c = kernel.gemm.c.name
    origin = (Var("bm") * Const(s.block[0], "BM"), Var("bn") * Const(s.block[1], "BN"))
    mma_m, mma_n = Const(m, "MMA_M"), Const(n, "MMA_N")
    offset = (
        Var("wm") * Const(cm) * mma_m,
        Var("wn") * Const(cn) * mma_n + PIECE * columns,
    )
    piece: tuple[Stmt, ...] = (
        TmaStoreWait("the TMA store of the piece before has read Cs[warp]"),
        Barrier("warp", "WAR: Cs[warp] is free again for every lane of the warpgroup"),
        *stores,
        ProxyFence("the lanes' writes to Cs, visible to the TMA unit's reads"),
        Barrier("warp", "RAW: every lane's part of the piece is in Cs before the TMA store"),
        TmaStore(
            GlobalTile(c, origin, offset, rows, width),
            SharedTile("Cs", WARP, (Const(0), Const(0)), rows, width),
        ),
    )
    kept = _without_stores(tile)  # the register epilogue stays
    loop = For(
        PIECE.name,
        Const(0),
        Const(n * cn // width),
        1,
        piece,
        unroll=True,
        comment=f"C leaves by TMA, {width} columns of the warpgroup's at a time",
    )
    return (*kept, loop)


def _without_stores(body: tuple[Stmt, ...]) -> tuple[Stmt, ...]:
    """`body` without its fragment stores, and without the loops and the guards they leave
    empty (the guard of a tile past C: a TMA store clips its box to C by itself)."""

    def emptied(st: Stmt) -> bool:
        return (isinstance(st, For) and not st.body) or (
            isinstance(st, If) and not st.then and not st.orelse
        )

    stripped = map_body(body, lambda st: () if isinstance(st, StoreFrag) else st)
    return map_body(stripped, lambda st: () if emptied(st) else st)


def _mbarriers(kernel: KernelIR) -> tuple[MBarrier, ...]:
    stages, teams = kernel.schedule.stages, kernel.schedule.teams
    cm, cn = kernel.cluster
    sharers = cm + cn - 1  # the blocks of this block's cluster row and column
    turn = MBarrier(
        "turn",
        teams,
        kernel.warp_count,
        "team t's turn at the stages: one arrival per warpgroup of the other team",
    )
    return (
        MBarrier("full", stages, 1, "slot s's tiles have landed: the expect_tx and the TMA bytes"),
        MBarrier(
            "empty",
            stages,
            kernel.warp_count * sharers,
            "slot s is free again: one arrival per consumer warpgroup"
            + (" of the team whose tile it held" if teams > 1 else "")
            + (
                f" in each of the {sharers} blocks of the cluster whose tiles this block's "
                "loads reach"
                if sharers > 1
                else ""
            ),
        ),
        *((turn,) if teams > 1 else ()),
        *(_split_barriers(kernel) if kernel.schedule.split_via == "cluster" else ()),
    )


def _split_barriers(kernel: KernelIR) -> tuple[MBarrier, ...]:
    """`split_k S via cluster`: slice 0's `sums` (an arrival per consumer warpgroup of each
    other slice) and every other slice's `taken` (one per consumer warpgroup of slice 0)."""
    others = kernel.schedule.grid_split - 1
    return (
        MBarrier(
            "sums",
            1,
            kernel.warp_count * others,
            "slice 0's: the other slices' partial sums are in their Ps (an arrival per "
            "consumer warpgroup of each)",
        ),
        MBarrier(
            "taken",
            1,
            kernel.warp_count,
            "the other slices': slice 0 has read this block's Ps (an arrival per consumer "
            "warpgroup of slice 0)",
        ),
    )


def _tile_loop(kernel: KernelIR, body: tuple[Stmt, ...], teams: int = 1) -> tuple[Stmt, ...]:
    """A persistent block's loop over its tiles: pid, pid + blocks, ... in raster order
    (with teams, each team's share of them: the block's tiles team, team + teams, ...)."""
    mapping = tuple(
        Let(name, substitute(e, {PID.name: TILE})) for name, e in tile_steps(kernel).items()
    )
    # stream-K: the whole tiles before the shares (tiledsl.ir.grid.stream_k_split)
    count: Expr = (
        Var("dp_rounds") if kernel.schedule.stream_k else (TILES_VAR - PID + BLOCKS - 1) // BLOCKS
    )
    return (
        For(
            TL.name,
            TEAM if teams > 1 else Const(0),
            count,
            teams,
            (Let(TILE.name, PID + TL * BLOCKS), *mapping, *body),
            comment=(
                "this team's tiles: every other one of the block's pid, pid + blocks, ... "
                "(pingpong)"
                if teams > 1
                else "this block's whole tiles: pid, pid + blocks, ..., dp_rounds of them "
                "(the first dp_tiles; stream-K shares the rest)"
                if kernel.schedule.stream_k
                else "this block's tiles: pid, pid + blocks, ... (persistent)"
            ),
            role=TILES,
        ),
    )


def _copies(stmt: Stmt) -> bool:
    return any(isinstance(x, Copy) for x in walk((stmt,)))


def _at_step(e: Expr, k_loop: For) -> Expr:
    """A prologue copy's coordinate (at step `s`) at the K loop's step instead."""
    return substitute(e, {"s": Var(k_loop.var)})


def _read_slot(stmt: Stmt, slot: Expr) -> Stmt:
    from ..ir.nodes import LoadFrag

    if isinstance(stmt, LoadFrag) and isinstance(stmt.src, SharedTile):
        return replace(stmt, src=replace(stmt.src, slot=slot))
    return stmt
