"""`persistent stream_k_aligned`: stream-K's equal shares of a last round's K steps, every
last round shared however full, each block taking its tiles last first. Every block then
starts at K step 0 (of its last tile) and ends at the end of its first, so the blocks read A
and B at two places along K at a time (the heads' front and the tails'), where stream-K's
blocks read at as many places as there are blocks. A piece that ends inside its tile hands
its partial sum to the block holding the tile's last K step, which adds those of the blocks
before it in block order.

Checked here: the split (every K step of the tiles left once, each block's running step
count, one hand-over a block at most, the owner's contributors, the two fronts); the
interpreter runs it exactly under several interleavings, partial sums counted; each
statement of the hand-over removed is caught; the proof covers the pieces; the emitted
code, the directive in a tuning set and its refusal with pingpong."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from helpers import (
    check_hand_over_removed,
    cli,
    hand_over_statements,
    interpret_exact,
    line_of,
    small_hopper,
    without,
)

from tiledsl.driver import compile_source
from tiledsl.frontend.parser import parse
from tiledsl.interp.errors import DeadlockError, InterpreterError, RaceError
from tiledsl.ir.expr import Var, evaluate
from tiledsl.ir.fetch import fetch_parts
from tiledsl.ir.grid import (
    aligned_step,
    contributors,
    first_contributor,
    stream_k_piece,
    stream_k_split,
    stream_k_tiles,
)
from tiledsl.ir.nodes import (
    HANDOFFS,
    Barrier,
    FlagWait,
    KernelIR,
    PartialAdd,
    PartialFetch,
    walk,
)
from tiledsl.models.mbarrier_hazards import HandoffProblem, prove
from tiledsl.tune.space import expand

# one consumer warpgroup on 64 x 128 tiles, C stored from its registers: quick to interpret
SMALL = small_hopper("small_aligned", "persistent stream_k_aligned")
_KERNELS: dict[str, KernelIR] = {}


def kernel(variant: str = "small") -> KernelIR:
    if variant not in _KERNELS:
        text = {
            "small": SMALL,
            "cluster": SMALL.replace("    target", "    cluster 2 x 1\n    target"),
            # 3 stages: the owner's producer fetches its first contributor's partial sum
            # (32 KB) into the two slots its last step leaves (tiledsl.ir.fetch)
            "fetched": SMALL.replace("stages  2", "stages  3"),
            "fetched cluster": SMALL.replace("stages  2", "stages  3").replace(
                "    target", "    cluster 2 x 1\n    target"
            ),
        }[variant]
        _KERNELS[variant] = compile_source(text, f"{variant}.tile").kernels[0]
    return _KERNELS[variant]


def split_env(tiles: int, blocks: int, pid: int, steps: int) -> dict:
    env = {"tiles": tiles, "blocks": blocks, "pid": pid, "K_STEPS": steps}
    for name, e in stream_k_split(Var("K_STEPS"), aligned=True).items():
        env[name] = evaluate(e, env, int32=True)
    return env


def pieces(tiles: int, blocks: int, steps: int) -> list[list[dict]]:
    """Each block's pieces in the order it takes them (tile, k_lo, k_hi, and its running
    step count at k_lo), from the kernel's own expressions."""
    out = []
    for pid in range(blocks):
        env = split_env(tiles, blocks, pid, steps)
        start, stop = (evaluate(e, env) for e in stream_k_tiles())
        mine = []
        for u in range(start, stop):
            at = {**env, "u": u}
            for name, e in stream_k_piece(aligned=True).items():
                at[name] = evaluate(e, at)
            at["at"] = evaluate(aligned_step(Var("k_lo")), at)
            mine.append(at)
        out.append(mine)
    return out


# ---------------------------------------------------------------- the split


@pytest.mark.parametrize(
    "tiles, blocks, steps",
    list(
        itertools.product((1, 2, 5, 7, 40, 124, 133, 256), (1, 3, 4, 66, 132), (1, 2, 5, 64, 172))
    ),
)
def test_the_split_covers_every_step_of_the_last_round_once(tiles, blocks, steps) -> None:
    shares = pieces(tiles, blocks, steps)
    whole = tiles - tiles % blocks  # every last round is shared, however full
    covered: dict[int, list[tuple[int, int, int]]] = {}
    handing_over = []
    for pid, mine in enumerate(shares):
        done = 0
        for p in mine:
            assert whole <= p["tile"] < tiles and 0 <= p["k_lo"] < p["k_hi"] <= steps
            assert p["at"] == done  # the running step count: no gap, in the order taken
            done += p["k_hi"] - p["k_lo"]
            covered.setdefault(p["tile"], []).append((p["k_lo"], p["k_hi"], pid))
            if p["k_hi"] < steps:
                handing_over.append(pid)
        # its tiles last first: each piece but the first ends at its tile's last step
        assert all(p["k_hi"] == steps for p in mine[1:])
        assert [p["tile"] for p in mine] == sorted((p["tile"] for p in mine), reverse=True)
    assert len(handing_over) == len(set(handing_over))  # one workspace slot a block
    assert sorted(covered) == list(range(whole, tiles))
    for tile, parts in covered.items():
        parts.sort()
        assert parts[0][0] == 0 and parts[-1][1] == steps
        assert all(a[1] == b[0] for a, b in itertools.pairwise(parts))  # no gap, no overlap
        owner = parts[-1][2]  # the block holding the tile's last step
        others = [pid for _, _, pid in parts[:-1]]
        env = {**split_env(tiles, blocks, owner, steps), "u_tile": tile - whole}
        for name, e in first_contributor().items():
            env[name] = evaluate(e, env, int32=True)
        begin, end = (evaluate(e, env) for e in contributors(aligned=True))
        assert list(range(begin, end)) == others


def test_the_blocks_read_k_at_two_fronts() -> None:
    """2048 x 4096 x 11008 in 128 x 256 tiles and clusters of 2 x 1 on the H200: 128 cluster
    tiles of 172 K steps on 66 clusters, a last round of 62 (94 % full). Aligned, every
    cluster whose share crosses a tile's edge reads K step t of its last tile at time t,
    then K step t + 10 (the share is 161.6 steps, 10.4 short of a tile) of its first: two
    places along K at a time, but for the few shares inside one tile. Stream-K's blocks
    start their shares all along K."""
    tiles, blocks, steps = 128, 66, 172
    aligned = pieces(tiles, blocks, steps)
    inside = sum(len(mine) == 1 and mine[0]["k_lo"] > 0 for mine in aligned)
    for time in (0, 40, 120, 155):
        fronts = set()
        for mine in aligned:
            for p in mine:
                if p["at"] <= time < p["at"] + p["k_hi"] - p["k_lo"]:
                    fronts.add(p["k_lo"] + time - p["at"])
        assert len(fronts) <= 2 + inside
    assert inside <= 5
    starts = {mine[0]["k_lo"] for mine in aligned if mine}
    assert starts - {0} == {mine[0]["k_lo"] for mine in aligned if len(mine) == 1} - {0}
    classic = [split_env(tiles, blocks, pid, steps)["sk_first"] % steps for pid in range(blocks)]
    assert len(set(classic)) > 30  # stream-K's blocks start all along K


# ---------------------------------------------------------------- exact


@pytest.mark.parametrize("variant", ["small", "cluster", "fetched", "fetched cluster"])
@pytest.mark.parametrize(
    "tiles, steps, blocks",
    [
        ((1, 1), 8, None),  # one tile, three blocks: three pieces, two partial sums
        ((2, 2), 5, None),  # a whole round and a tile in three
        ((3, 1), 6, 2),  # tiles along M only; the cluster's tile reaches past C
        ((1, 3), 1, 4),  # one K step a tile: whole tiles only
        ((2, 3), 7, 4),  # a last round of two tiles in four shares
        ((3, 3), 9, 8),  # ... of one tile in eight
    ],
)
def test_aligned_stream_k_is_exact_under_several_interleavings(
    variant, tiles, steps, blocks
) -> None:
    k = kernel(variant)
    bm, bn, bk = k.schedule.block
    if blocks is not None and blocks % k.cluster_size:
        blocks = k.cluster_size
    seed = steps + tiles[0]
    check, stats = interpret_exact(
        k, tiles[0] * bm, tiles[1] * bn, steps * bk, seed, seed=seed, schedules=2, blocks=blocks
    )
    assert check.ok, check.detail
    grid = blocks // k.cluster_size if blocks else -(-3 // k.cluster_size)  # the default
    cluster_tiles = -(-tiles[0] // k.cluster[0]) * tiles[1]
    handed = sum(
        len(mine) > 0 and mine[0]["k_hi"] < steps for mine in pieces(cluster_tiles, grid, steps)
    )
    assert stats.partial_sums == handed * k.cluster_size


def test_odd_sizes_are_exact() -> None:
    k = kernel("cluster")
    for m, n, kk in ((127, 61, 37), (200, 300, 450), (1, 1, 1)):
        check, _ = interpret_exact(k, m, n, kk, seed=m, schedules=2, blocks=6)
        assert check.ok, (m, n, kk, check.detail)


# ---------------------------------------------------------------- the hand-over


@pytest.mark.parametrize("index", range(8))
def test_every_statement_of_the_hand_over_removed_is_caught(index) -> None:
    """Two tiles of 8 K steps in three shares: block 0's one piece hands over and signals at
    once (its share has no next piece); block 1's first piece (tile 1, steps [0, 2)) hands
    over and signals FLAG_DEFER_STEPS steps into its second (tile 0, steps [5, 8)), which
    owns tile 0 and adds block 0's; block 2 owns tile 1 and adds block 1's."""
    statements = hand_over_statements(kernel("small"))
    kinds = [type(s).__name__ for s in statements]
    assert kinds == [
        "Barrier", "FlagSignal",  # the deferred signal, in the second piece's K loop
        "PartialStore", "Barrier", "FlagSignal",  # the store; a share's only piece signals
        "FlagWait", "Barrier", "PartialAdd",
    ]  # fmt: skip
    check_hand_over_removed(kernel("small"), index, flag={1: 1, 4: 0}, tiles=(1, 2))


def test_the_fetch_fills_the_slots_after_the_owner_piece() -> None:
    k = kernel("fetched")
    assert fetch_parts(k) == 2 and fetch_parts(kernel("small")) == 0  # 2 stages: no room
    fetches = [s for s in walk(k.body) if isinstance(s, PartialFetch)]
    assert [f.part for f in fetches] == [0, 1]
    staged = [s for s in walk(k.body) if isinstance(s, PartialAdd) and s.staged is not None]
    assert len(staged) == 1
    waits = [s for s in walk(k.body) if isinstance(s, FlagWait) and s.by_producer]
    assert len(waits) == 1  # the producer's acquire of the first contributor's flag


@pytest.mark.parametrize(
    "kind, error",
    [
        (FlagWait, (RaceError, "fetches workspace slot .* without waiting on flags")),
        (PartialFetch, (DeadlockError, "part 1 of block c_first.s partial sum has landed")),
        (PartialAdd, (InterpreterError, "fetched from workspace slot .* is never added")),
    ],
)
def test_every_statement_of_the_fetch_removed_is_caught(kind, error) -> None:
    """Without the producer's acquire, a race; without a part's copy, the consumers wait on
    bytes that never come; without the staged add, a sum left behind."""
    k = kernel("fetched")
    s = next(
        s
        for s in walk(k.body)
        if isinstance(s, kind)
        and (
            (isinstance(s, FlagWait) and s.by_producer)
            or (isinstance(s, PartialFetch) and s.part == 1)
            or (isinstance(s, PartialAdd) and s.staged is not None)
        )
    )
    bm, bn, bk = k.schedule.block
    with pytest.raises(error[0], match=error[1]):
        interpret_exact(without(k, s), bm, bn, 8 * bk, seed=3, schedules=1, blocks=3)


# ---------------------------------------------------------------- the proof


@pytest.mark.parametrize("variant", ["small", "cluster", "fetched", "fetched cluster"])
def test_the_proof_covers_the_pieces_and_every_handoff_removed_is_caught(variant) -> None:
    k = kernel(variant)
    prove(k)
    assert all(d.kept for d in k.sync_report)
    for s in {id(s): s for s in walk(k.body) if isinstance(s, HANDOFFS)}.values():
        if isinstance(s, Barrier) and s.scope == "consumers":
            continue  # global memory: the interpreter's (above)
        with pytest.raises(HandoffProblem):
            prove(without(k, s))


# ---------------------------------------------------------------- code, spaces, refusals


def test_the_emitted_code_takes_the_tiles_last_first() -> None:
    source = compile_source(SMALL, "small.tile").source
    for line in (
        "constexpr int SK_PARTS = 4, FLAG_DEFER_STEPS = 2;  // persistent stream_k_aligned",
        "const int u_tile = sk_first / k_steps + (sk_last + k_steps - 1) / k_steps - 1 - u;",
        "const int step = dp_rounds * k_steps + (max(sk_last - (u_tile + 1) * k_steps, 0) "
        "+ kt - k_lo);",
        "if (k_hi < k_steps) {",
        "for (int c = c_first; c < pid; ++c) {",
        "if (threadIdx.x == 0) signal_flag(&flags[pid]);",
    ):
        assert line in source, line
    assert "SK_MAX_FILL" not in source


def test_stream_k_aligned_is_a_choice_of_the_loop() -> None:
    space = SMALL.replace(
        "persistent stream_k_aligned", "persistent {tiles, stream_k, stream_k_aligned}"
    )
    points = expand(parse(space, "space.tile"))
    assert [p.label for p in points] == [
        "persistent",
        "persistent stream_k",
        "persistent stream_k_aligned",
    ]
    schedules = [compile_source(p.text, "p.tile").kernels[0].schedule for p in points]
    assert [(s.stream_k, s.aligned) for s in schedules] == [
        (False, False),
        (True, False),
        (True, True),
    ]
    for point in points:
        assert parse(point.text, "p.tile") == point.program


def test_stream_k_aligned_and_pingpong_are_refused_together(tmp_path: Path, capsys) -> None:
    path = tmp_path / "s.tile"
    text = SMALL.replace("warp_specialize\n", "warp_specialize pingpong\n")
    path.write_text(text)
    r = cli(["compile", str(path)], capsys)
    assert r.code == 1
    line = line_of(text, "persistent stream_k_aligned")
    assert (
        f"{path}:{line}:5: error: persistent stream_k_aligned cuts tiles into shares of K "
        "steps, and warp_specialize pingpong gives whole tiles to its teams in turn" in r.err
    ), r.err
    assert "drop `stream_k_aligned`" in r.err
    assert not list(tmp_path.glob("s.cu*"))


def test_the_roles_picture_shows_the_hand_over_turned_around() -> None:
    pytest.importorskip("graphviz")
    from tiledsl.viz.handoffs import handoffs_graph

    dot = handoffs_graph(kernel("cluster"), "small.tile")
    for text in (
        "stream-K pieces, aligned: the tiles of a last round cut along K, each block&#x27;s "
        "last tile first",
        "a piece that ends inside its tile hands its partial sum over:",
        "the tile&#x27;s owner, for each block before it in the tile, in block order:",
        "1. flag.wait flags[c * CLUSTER_SIZE + rank]",
    ):
        assert text in dot, text
