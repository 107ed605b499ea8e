"""k-teams (`warps_k W`): W teams of the block's warps, each on K steps of its own.

On the direct path (mma.sync, stages 0) a warp's loads go from global memory to its
registers, so a warp streams only as many bytes as its own loads keep in flight. A
few-token tile (16 weight rows by 8 or 16 tokens) is one or two warps: too few to keep the
DRAM busy, and a grid of such blocks is too few blocks for the SMs (docs/probes/
direct_gemv.py: 8 teams of a 16-row tile reached 0.85-0.91 of the memory bound on an H100
where one warp a block cannot). So the block holds W copies of its warps, team
`kteam` = warp / (WARPS_M * WARPS_N) (tiledsl.ir.nodes.KernelIR.warp_coords), and team t
takes the block's K steps t, t + W, ...:

    for kt in [0, ceil(K / BK)):                 for kr in [0, ceil(ceil(K / BK) / WARPS_K)):
      ... A, B @ kt * BK ...             ==>        ... A, B @ (kr * WARPS_K + kteam) * BK ...

(a team's step past the last one reads nothing: the direct path's loads are guarded, so
its fragments are zeros and add nothing). After the loop the teams' sums meet in shared
memory, in a fixed order:

    store_frag Ks[kteam] @ (its place) <- acc           every team its own slot
    barrier.block                                       RAW: all slots written
    fill acc = 0; load_frag acc += Ks[t] @ (its place)  t = 0, 1, ... W - 1, unrolled
    store_frag C <- acc, K team 0                       the others hold the same sum

Every team adds the W slots in team order, so every team holds the same bits and team 0
stores them: **deterministic** (the order depends on W and R alone).

Under `split_k S` (tiledsl.passes.split_k, which runs first) the K loop is the block's
slice, [k_lo, k_hi), a whole number of the teams' rounds: the rounds start at k_lo, and
the teams' sums meet before the slice's fix-up, whose partial store and adds, like C's
store in the last slice's branch, are K team 0's.

`warps_k W runs R` gives the teams' steps another order: R groups of W / R teams
(RUN_TEAMS), group g on the g-th of R contiguous runs of the steps, its teams on the run's
steps in turn. With R = 1 the block reads one place along K at a time; with R = 2 two
(docs/probes/direct_read.py: a reader of the direct path's loads at 1 x 4096 x 11008 went
from 0.76 to 0.81 of the memory bound with 2 or 4 runs on an H100).
"""

from __future__ import annotations

from dataclasses import replace

from ..ir.expr import Const, Var, ceil_div, substitute, variables
from ..ir.nodes import (
    K_BLOCKS,
    Barrier,
    Fill,
    For,
    GlobalTile,
    If,
    KernelIR,
    Let,
    LoadFrag,
    PartialAdd,
    PartialStore,
    SharedBuffer,
    SharedTile,
    StoreFrag,
    expressions,
    map_body,
    walk,
)

TEAM_SUMS = "Ks"
ROUND = "kr"
TEAM = "kt_sum"  # the team whose sum is added
RUN_START = "k_run"  # `runs`: the first K step of the team's run


def k_teams(kernel: KernelIR) -> KernelIR:
    s = kernel.schedule
    teams = Const(s.warps_k, "WARPS_K")
    loc = s.loc("warps_k")
    at = next(i for i, st in enumerate(kernel.body) if isinstance(st, For) and st.role == K_BLOCKS)
    k_loop = kernel.body[at]
    assert isinstance(k_loop, For)
    first: tuple[Let, ...] = ()
    # the block's K steps [start, stop): every step of K, or its slice (`split_k` on the
    # direct path, tiledsl.passes.split_k, whose slices are whole rounds of the teams)
    start, steps = k_loop.start, k_loop.stop - k_loop.start
    if s.k_runs == 1:
        step = start + Var(ROUND) * teams + Var("kteam")
        stop = ceil_div(steps, teams)
        first_step = "" if start == Const(0) else f"{start} + "
        comment = (
            f"rounds of the K teams: team kteam takes K step {first_step}{ROUND} * WARPS_K + kteam"
        )
    else:
        run, stop = _runs(steps, s.warps_k, s.k_runs)
        group = Const(s.warps_k // s.k_runs, "RUN_TEAMS")
        first = (Let(RUN_START, start + run),)
        step = Var(RUN_START) + Var(ROUND) * group + Var("kteam") % group
        comment = (
            f"rounds of the K teams: team kteam takes step {RUN_START} + {ROUND} * RUN_TEAMS + "
            "kteam % RUN_TEAMS, its run's steps in turn"
        )
    rounds = replace(
        k_loop,
        var=ROUND,
        start=Const(0),
        stop=stop,
        body=map_body(k_loop.body, lambda st: _moved(st, {k_loop.var: step})),
        comment=comment,
    )
    after = kernel.body[at + 1 :]
    c = kernel.gemm.c.name

    def to_c(st) -> bool:
        return isinstance(st, StoreFrag) and isinstance(st.dst, GlobalTile) and st.dst.operand == c

    def sums(slot):
        return lambda st: StoreFrag(_slot(st.dst, slot), st.frag) if to_c(st) else st

    def added(st):
        if not to_c(st):
            return st
        adds = LoadFrag(st.frag, _slot(st.dst, Var(TEAM)), add=True)
        every = For(TEAM, Const(0), teams, 1, (adds,), unroll=True, comment="in team order")
        return (Fill(st.frag, 0.0), every)

    def by_team0(st):
        handed = isinstance(st, (PartialStore, PartialAdd))  # split_k's fix-up
        return replace(st, by_team0=True) if to_c(st) or handed else st

    # The teams' sums meet right after the K loop, from the places of C's stores (under a
    # split's fix-up: in the branch of the slice that finishes last); what leaves the block
    # after that, C or a partial sum, leaves from K team 0.
    stores = _c_stores(after, to_c)
    body = (
        *kernel.body[:at],
        *first,
        rounds,
        *map_body(stores, sums(Var("kteam"))),
        Barrier("block", "RAW: every K team's sum in Ks before the teams add them", loc),
        *map_body(stores, added),
        *map_body(after, by_team0),
    )
    bm, bn, _ = s.block
    lines_f32 = 16 // 4  # a line of whole 16 bytes (the fma path's tiles may be 1 wide)
    buffer = SharedBuffer(
        TEAM_SUMS,
        "f32",
        s.warps_k,
        bm,
        bn,
        -(-bn // lines_f32) * lines_f32,
        "the K teams' sums, a slot per team",
        loc,
    )
    return replace(kernel, body=body, buffers=(*kernel.buffers, buffer), k_teams=s.warps_k)


def _c_stores(body, to_c) -> tuple:
    """The statements of `body` that store C (with their fragment loops), looking inside
    branches: the stores of a split's last slice (tiledsl.passes.split_k)."""
    out: list = []
    for st in body:
        if isinstance(st, If):
            out += _c_stores(st.then, to_c) + _c_stores(st.orelse, to_c)
        elif any(to_c(x) for x in walk((st,))):
            out.append(st)
    return tuple(out)


def _runs(steps, teams: int, runs: int):
    """(the first K step of team `kteam`'s run, the rounds) with the teams in `runs` groups
    of RUN_TEAMS: group g on the g-th run of the steps, each run RUN_TEAMS x rounds steps
    long (the runs cover every step once; a step past the last reads zeros through the
    guarded loads, as a team's last round does without runs)."""
    group = Const(teams // runs, "RUN_TEAMS")
    rounds = ceil_div(ceil_div(steps, Const(runs, "K_RUNS")), group)
    return Var("kteam") // group * (rounds * group), rounds


def _moved(st, bindings):
    """A statement of the K loop with its step's index rebound (loads and loop bounds)."""
    if isinstance(st, LoadFrag):
        src = st.src
        return replace(
            st,
            src=replace(
                src,
                origin=tuple(substitute(e, bindings) for e in src.origin),
                offset=tuple(substitute(e, bindings) for e in src.offset),
            ),
        )
    if isinstance(st, For):
        return replace(st, start=substitute(st.start, bindings), stop=substitute(st.stop, bindings))
    # the direct path's K loop holds loads, mmas and loops only: nothing else reads the step
    assert not any(set(bindings) & variables(e) for e in expressions(st)), st
    return st


def _slot(tile: GlobalTile, slot) -> SharedTile:
    """The place of a tile of C inside the block's tile, in slot `slot` of Ks."""
    return SharedTile(TEAM_SUMS, slot, tile.offset, tile.rows, tile.cols)
