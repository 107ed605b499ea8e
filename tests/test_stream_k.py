"""`persistent stream_k`: every block takes the same whole rounds of tiles, then an equal
share of the K steps of the tiles left; a piece that starts inside a tile hands its partial
sum to the tile's owner through a workspace and a flag, and the owner adds them in block
order before it stores C.

Checked here: the split covers every K step of the tiles left exactly once, with a piece
per block at most that starts inside a tile, and the owner's contributors are exactly the
blocks after it in that tile; the interpreter runs stream-K kernels exactly (clusters, the
TMA-store epilogue, fewer tiles than blocks, partial tiles), under several interleavings,
to the same bits; every statement of the hand-over removed comes back as a race, a
deadlock or a lost partial sum; the handoff proof covers the stream-K pieces and keeps
every mbarrier handoff; the emitted code, the launch and the refusals."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from helpers import (
    check_hand_over_removed,
    cli,
    hand_over_statements,
    interpret_exact,
    small_hopper,
    without,
)

from tiledsl.driver import compile_file, compile_source
from tiledsl.emit.launch import launch_of
from tiledsl.ir.expr import Var, evaluate
from tiledsl.ir.grid import (
    SK_MAX_FILL,
    SK_PARTS,
    contributors,
    stream_k_piece,
    stream_k_split,
    stream_k_tiles,
)
from tiledsl.ir.nodes import (
    HANDOFFS,
    Barrier,
    FlagSignal,
    FlagWait,
    KernelIR,
    walk,
)
from tiledsl.models.mbarrier_hazards import HandoffProblem, prove

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "hopper" / "stream_k.tile"
TEXT = EXAMPLE.read_text()

# one consumer warpgroup on 64 x 128 tiles, C stored from its registers: quick to interpret
SMALL = small_hopper("small_stream_k", "persistent stream_k")
_KERNELS: dict[str, KernelIR] = {}


def kernel(variant: str = "small") -> KernelIR:
    if variant not in _KERNELS:
        text = {
            "small": SMALL,
            "cluster": SMALL.replace("    target", "    cluster 2 x 1\n    target"),
            "example": TEXT,
        }[variant]
        _KERNELS[variant] = compile_source(text, f"{variant}.tile").kernels[0]
    return _KERNELS[variant]


def split_env(tiles: int, blocks: int, pid: int, steps: int) -> dict:
    env = {"tiles": tiles, "blocks": blocks, "pid": pid, "K_STEPS": steps}
    for name, e in stream_k_split(Var("K_STEPS")).items():
        env[name] = evaluate(e, env)
    return env


def pieces(tiles: int, blocks: int, steps: int) -> list[list[tuple[int, int, int]]]:
    """Each block's stream-K pieces (tile, k_lo, k_hi), from the kernel's own expressions."""
    out = []
    for pid in range(blocks):
        env = split_env(tiles, blocks, pid, steps)
        start, stop = (evaluate(e, env) for e in stream_k_tiles())
        mine = []
        for u in range(start, stop):
            at = {**env, "u": u}
            piece = {name: evaluate(e, at) for name, e in stream_k_piece().items()}
            mine.append((piece["tile"], piece["k_lo"], piece["k_hi"]))
        out.append(mine)
    return out


# ---------------------------------------------------------------- the split


@pytest.mark.parametrize(
    "tiles, blocks, steps",
    [
        (t, b, s)
        for t, b, s in itertools.product(
            (1, 2, 3, 5, 7, 12, 256), (1, 2, 3, 5, 132), (1, 2, 3, 7, 64)
        )
        if t * s * b < 3_000_000
    ],
)
def test_the_split_covers_every_step_of_the_tiles_left_once(tiles, blocks, steps) -> None:
    shares = pieces(tiles, blocks, steps)
    last_wave = tiles % blocks
    # a last round fuller than SK_MAX_FILL percent runs as whole tiles
    whole = tiles if 100 * last_wave > SK_MAX_FILL * blocks else tiles - last_wave
    covered: dict[int, list[tuple[int, int, int]]] = {}
    for pid, mine in enumerate(shares):
        for tile, lo, hi in mine:
            assert whole <= tile < tiles and 0 <= lo < hi <= steps
            covered.setdefault(tile, []).append((lo, hi, pid))
        # at most one piece per block starts inside its tile: its first
        assert all(lo == 0 for _, lo, _ in mine[1:])
        # a share is at least 1/SK_PARTS of a tile (or all there is)
        total = sum(hi - lo for _, lo, hi in mine)
        assert total == 0 or total >= min(max(steps // SK_PARTS, 1), (tiles - whole) * steps)
    assert sorted(covered) == list(range(whole, tiles))
    for tile, parts in covered.items():
        parts.sort()
        assert parts[0][0] == 0 and parts[-1][1] == steps  # from the first step to the last
        assert all(a[1] == b[0] for a, b in itertools.pairwise(parts))  # no gap, no overlap
        owner = parts[0][2]
        others = [pid for _, _, pid in parts[1:]]
        assert others == list(range(owner + 1, owner + 1 + len(others)))
        env = split_env(tiles, blocks, owner, steps)
        env["u"] = tile - whole
        assert evaluate(contributors()[1], env) == owner + 1 + len(others)
    # the whole tiles: pid, pid + blocks, ... below `whole`, every one once
    rounds = [evaluate(Var("dp_rounds"), split_env(tiles, blocks, p, steps)) for p in range(blocks)]
    assert sum(rounds) == whole and max(rounds) - min(rounds) <= 1


def test_fewer_tiles_than_blocks_are_shared_by_many() -> None:
    """M = 128 of a 4096 x 4096 product in 128 x 256 tiles: 16 tiles on 132 SMs, 64 steps
    each, in shares of 16 steps or more (the whole round is empty)."""
    shares = pieces(16, 132, 64)
    busy = [s for s in shares if s]
    assert len(busy) == 64 and all(sum(hi - lo for _, lo, hi in s) == 16 for s in busy)


# ---------------------------------------------------------------- exact


@pytest.mark.parametrize("variant", ["small", "cluster"])
@pytest.mark.parametrize(
    "tiles, steps, blocks",
    [
        ((1, 1), 8, None),  # one tile, three blocks: three pieces, two partial sums
        ((2, 2), 5, None),  # a whole round and a tile in three
        ((3, 1), 6, 2),  # tiles along M only; the cluster's tile reaches past C
        ((1, 3), 1, 4),  # one K step a tile: whole tiles only
        ((2, 3), 7, 4),
    ],
)
def test_stream_k_is_exact_under_several_interleavings(variant, tiles, steps, blocks) -> None:
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
    cm = k.cluster[0]
    cluster_tiles = -(-tiles[0] // cm) * tiles[1]
    expected = (
        sum(len(mine) and mine[0][1] > 0 for mine in pieces(cluster_tiles, grid, steps))
        * k.cluster_size
    )
    assert stats.partial_sums == expected


def test_the_example_is_exact_at_partial_tiles_with_its_tma_stores() -> None:
    k = kernel("example")
    for m, n, kk in ((200, 328, 136), (128, 256, 1024)):
        check, stats = interpret_exact(k, m, n, kk, seed=1, schedules=2, blocks=4)
        assert check.ok, check.detail
        assert stats.tma_stores > 0
    assert stats.partial_sums > 0


# ---------------------------------------------------------------- the hand-over


@pytest.mark.parametrize("index", range(6))
def test_every_statement_of_the_hand_over_removed_is_caught(index) -> None:
    assert len(hand_over_statements(kernel("small"))) == 6
    check_hand_over_removed(kernel("small"), index, flag=1)


def test_the_hand_over_is_the_consumers_alone() -> None:
    k = kernel("small")
    flags = [s for s in walk(k.body) if isinstance(s, (FlagSignal, FlagWait))]
    assert [type(s) for s in flags] == [FlagSignal, FlagWait]
    roles = k.specialization
    assert roles is not None
    assert not any(isinstance(s, (FlagSignal, FlagWait)) for s in walk(roles.producer.body))


# ---------------------------------------------------------------- the proof


def test_the_proof_covers_the_pieces_and_keeps_every_handoff() -> None:
    k = kernel("example")
    prove(k)
    assert all(d.kept for d in k.sync_report)
    # the two loops' handoffs (whole rounds, stream-K pieces) and the fix-up's two barriers
    fix_up = [d for d in k.sync_report if "stream-K's or split-K's hand-over" in d.why]
    assert len(fix_up) == 2


@pytest.mark.parametrize("variant", ["small", "cluster"])
def test_every_handoff_removed_is_caught(variant) -> None:
    k = kernel(variant)
    for s in {id(s): s for s in walk(k.body) if isinstance(s, HANDOFFS)}.values():
        if isinstance(s, Barrier) and s.scope == "consumers":
            continue  # global memory: the interpreter's (above)
        with pytest.raises(HandoffProblem):
            prove(without(k, s))


# ---------------------------------------------------------------- code, launch, refusals


def test_the_emitted_code_hands_partial_sums_over_in_block_order() -> None:
    source = compile_file(EXAMPLE).source
    for line in (
        "float* __restrict__ workspace, unsigned* __restrict__ flags, int M, int N, int K, "
        "const Divisor blocks, const Divisor k_steps, const Divisor sk_tiles, int dp_tiles, "
        "int workers, const Divisor sk_blocks, int sk_quotient, int sk_remainder, "
        "const Divisor width)",
        "const int dp_rounds = (dp_tiles - pid + blocks - 1) / blocks;",
        "for (int tl = 0; tl < dp_rounds; ++tl) {",
        "for (int u = sk_first / k_steps; u < (sk_last + k_steps - 1) / k_steps; ++u) {",
        "for (int kt = k_lo; kt < k_hi; ++kt) {",
        "const int step = dp_rounds * k_steps + u * k_steps + kt - sk_first;",
        "if (threadIdx.x == 0) signal_flag(&flags[pid * CLUSTER_SIZE + rank]);",
        "if (threadIdx.x == 0) wait_flag(&flags[c * CLUSTER_SIZE + rank]);",
        "for (int c = pid + 1; c < ((u + 1) * workers - 1) / sk_tiles + 1; ++c) {",
        "const int sk_first = min(pid, workers) * sk_quotient + min(pid, workers) * sk_remainder "
        "/ sk_blocks;",
        "named_barrier(CONSUMERS_BARRIER, CONSUMER_THREADS);",
        "constexpr int PARTIAL_FLOATS = BM * BN;",
        "ld.acquire.gpu.global.u32",
    ):
        assert line in source, line


def test_the_launch_takes_every_sm_and_describes_the_workspace() -> None:
    launch = launch_of(compile_file(EXAMPLE).kernels[0])
    assert launch.stream_k and launch.partial_floats == 128 * 256
    assert [a for a in launch.args if a[0] in ("workspace", "flags")] == [
        ("workspace", "float*"),
        ("flags", "unsigned*"),
    ]
    # however few the tiles: stream-K shares their K steps among every resident block
    assert launch.grid_dims({"M": 128, "N": 256, "K": 4096}, sms=132) == (132, 1)
    described = launch.to_json()
    assert described["persistent"]["grid_x"] == "multiprocessor count / 2 * 2"
    assert described["stream_k"]["flags"].startswith("grid_x unsigned ints, zero")


def test_stream_k_and_pingpong_are_refused_together(tmp_path, capsys) -> None:
    path = tmp_path / "s.tile"
    text = ROOT.joinpath("examples", "hopper", "pingpong.tile").read_text()
    path.write_text(text.replace("    persistent\n", "    persistent stream_k\n"))
    r = cli(["compile", str(path)], capsys)
    assert r.code == 1
    line = next(i for i, x in enumerate(text.splitlines(), 1) if x.strip() == "persistent")
    assert r.err.splitlines()[0] == (
        f"{path}:{line}:5: error: persistent stream_k cuts tiles into shares of K steps, and "
        "warp_specialize pingpong gives whole tiles to its teams in turn: the two do not combine"
    ), r.err
    assert not list(tmp_path.glob("s.cu*"))


def test_persistent_takes_stream_k_or_nothing(tmp_path, capsys) -> None:
    path = tmp_path / "s.tile"
    path.write_text(TEXT.replace("persistent stream_k", "persistent streamk"))
    r = cli(["compile", str(path)], capsys)
    assert r.code == 1
    assert "stream_k" in r.err and "Traceback" not in r.err, r.err


def test_the_epilogue_runs_once_on_the_whole_sum() -> None:
    """alpha, beta (C read), bias and relu on the owner's full sum, after the partial sums
    are added: C = relu(0.5 * A B + 2 * C + D[n]) exactly, with a tile in three pieces."""
    text = ROOT.joinpath("examples", "epilogue_hopper.tile").read_text()
    k = compile_source(text.replace("    persistent\n", "    persistent stream_k\n"), "e.tile")
    check, stats = interpret_exact(k.kernels[0], 128, 256, 1024, seed=2, schedules=1)
    assert check.ok, check.detail
    assert stats.partial_sums == 2


def test_the_split_stays_in_32_bits_wherever_the_step_count_does() -> None:
    """8 tiles left on 132 blocks, 2**24 K steps a tile: 2**27 K steps to share. The
    kernel's ints hold every value of the split (b * sk_steps would not)."""
    tiles, blocks, steps = 140, 132, 2**24
    for pid in (0, 1, 65, 131):
        env = {"tiles": tiles, "blocks": blocks, "pid": pid, "K_STEPS": steps}
        for name, e in stream_k_split(Var("K_STEPS")).items():
            env[name] = evaluate(e, env, int32=True)
        env["u"] = env["sk_last"] // steps - (env["sk_last"] % steps == 0)
        evaluate(contributors()[1], env, int32=True)
    assert env["sk_last"] == 8 * steps


def test_the_roles_picture_shows_the_hand_over() -> None:
    pytest.importorskip("graphviz")
    from tiledsl.viz.handoffs import handoffs_graph

    dot = handoffs_graph(kernel("example"), "stream_k.tile")
    for text in (
        "stream-K pieces: the tiles of a last round that fills at most 75 % of the grid",
        "1. partial.store workspace[pid * CLUSTER_SIZE + rank] &lt;- acc",
        "3. flag.signal flags[pid * CLUSTER_SIZE + rank]",
        "1. flag.wait flags[c * CLUSTER_SIZE + rank]",
        "3. partial.add acc += workspace[c * CLUSTER_SIZE + rank]",
    ):
        assert text in dot, text
