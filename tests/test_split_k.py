"""`persistent split_k S`: stream-K's fix-up with a fixed split. The tiles of a last round
(all of them when there are fewer than blocks) are cut into S slices of their K steps, a
block per slice, when that many slices fit in the grid; else they run as whole tiles. A
slice after a tile's first hands its partial sum to the first slice's block (the owner),
which adds them in slice order.

Checked here: the split (every K step of the split tiles once, S slices a tile, none
across a tile's edge, the owner's contributors the tile's other slices); the interpreter
runs split-K kernels exactly under several interleavings, with the partial sums counted;
removing the hand-over is caught; the proof covers the slices; the emitted code, the
directive's errors and its tuning set."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from helpers import cli, interpret_exact, line_of, small_hopper, without

from tiledsl.driver import compile_source
from tiledsl.frontend.parser import parse
from tiledsl.interp.errors import DeadlockError, RaceError
from tiledsl.ir.expr import Var, evaluate
from tiledsl.ir.grid import contributors, stream_k_piece, stream_k_split, stream_k_tiles
from tiledsl.ir.nodes import (
    HANDOFFS,
    Arrive,
    Barrier,
    FlagSignal,
    FlagWait,
    KernelIR,
    walk,
)
from tiledsl.models.mbarrier_hazards import HandoffProblem, prove
from tiledsl.tune.space import expand

SMALL = small_hopper("small_split_k", "persistent split_k 2")
_KERNELS: dict[str, KernelIR] = {}


def kernel(split: int = 2, cluster: bool = False) -> KernelIR:
    key = f"{split}{cluster}"
    if key not in _KERNELS:
        text = SMALL.replace("split_k 2", f"split_k {split}")
        if cluster:
            text = text.replace("    target", "    cluster 2 x 1\n    target")
        _KERNELS[key] = compile_source(text, "small.tile").kernels[0]
    return _KERNELS[key]


def env_of(split: int, tiles: int, blocks: int, pid: int, steps: int) -> dict:
    env = {"tiles": tiles, "blocks": blocks, "pid": pid, "K_STEPS": steps}
    for name, e in stream_k_split(Var("K_STEPS"), split).items():
        env[name] = evaluate(e, env)
    return env


def slices_of(split, tiles, blocks, steps) -> list[list[tuple[int, int, int]]]:
    """Each block's pieces (tile, k_lo, k_hi), from the kernel's own expressions."""
    out = []
    for pid in range(blocks):
        env = env_of(split, tiles, blocks, pid, steps)
        start, stop = (evaluate(e, env) for e in stream_k_tiles())
        mine = []
        for u in range(start, stop):
            piece = {n: evaluate(e, {**env, "u": u}) for n, e in stream_k_piece().items()}
            mine.append((piece["tile"], piece["k_lo"], piece["k_hi"]))
        out.append(mine)
    return out


# ---------------------------------------------------------------- the split


@pytest.mark.parametrize(
    "split, tiles, blocks, steps",
    list(itertools.product((2, 3, 4), (1, 2, 5, 7, 40, 133), (1, 4, 6, 132), (1, 2, 5, 64))),
)
def test_the_split_cuts_each_tile_of_the_last_round_into_s_slices(
    split, tiles, blocks, steps
) -> None:
    shares = slices_of(split, tiles, blocks, steps)
    last_wave = tiles % blocks
    slices = min(split, steps)
    split_tiles = last_wave if last_wave * slices <= blocks else 0
    whole = tiles - split_tiles
    covered: dict[int, list[tuple[int, int, int]]] = {}
    for pid, mine in enumerate(shares):
        assert len(mine) <= 1  # a block per slice: one piece at most
        for tile, lo, hi in mine:
            assert whole <= tile < tiles and 0 <= lo < hi <= steps
            covered.setdefault(tile, []).append((lo, hi, pid))
    assert sorted(covered) == list(range(whole, tiles))
    for tile, parts in covered.items():
        parts.sort()
        assert len(parts) == slices
        # slice s is [floor(s * steps / S), floor((s + 1) * steps / S)): no gap, no overlap
        assert [(lo, hi) for lo, hi, _ in parts] == [
            (s * steps // slices, (s + 1) * steps // slices) for s in range(slices)
        ]
        owner = parts[0][2]
        assert [pid for *_, pid in parts] == list(range(owner, owner + slices))
        env = {**env_of(split, tiles, blocks, owner, steps), "u": tile - whole}
        assert evaluate(contributors()[1], env) == owner + slices
    rounds = [
        evaluate(Var("dp_rounds"), env_of(split, tiles, blocks, p, steps)) for p in range(blocks)
    ]
    assert sum(rounds) == whole


def test_few_tokens_split_every_tile() -> None:
    """M = 16 of 16 x 4096 x 4096 in 64 x 64 tiles: 64 tiles on 132 SMs, 64 K steps each,
    split_k 2: 128 blocks with 32 steps each, 4 idle."""
    shares = slices_of(2, 64, 132, 64)
    busy = [s for s in shares if s]
    assert len(busy) == 128 and all(hi - lo == 32 for ((_, lo, hi),) in busy)


# ---------------------------------------------------------------- exact


@pytest.mark.parametrize(
    "split, cluster, tiles, steps, blocks",
    [
        (2, False, (1, 1), 8, 2),  # one tile in two slices
        (3, False, (1, 2), 7, 6),  # two tiles in three uneven slices
        (2, False, (2, 2), 5, 3),  # a whole round of three tiles, then one in two slices
        (4, False, (1, 1), 2, 4),  # fewer K steps than slices: two slices
        (2, True, (1, 1), 6, 4),  # clusters of two, the cluster tile past C's edge
    ],
)
def test_split_k_is_exact_under_several_interleavings(split, cluster, tiles, steps, blocks) -> None:
    k = kernel(split, cluster)
    bm, bn, bk = k.schedule.block
    check, stats = interpret_exact(
        k, tiles[0] * bm, tiles[1] * bn, steps * bk, seed=steps, schedules=2, blocks=blocks
    )
    assert check.ok, check.detail
    grid = blocks // k.cluster_size
    cluster_tiles = -(-tiles[0] // k.cluster[0]) * tiles[1]
    handed = sum(bool(m) and m[0][1] > 0 for m in slices_of(split, cluster_tiles, grid, steps))
    assert handed > 0 and stats.partial_sums == handed * k.cluster_size


@pytest.mark.parametrize("kind", [FlagSignal, FlagWait])
def test_the_hand_over_removed_is_caught(kind) -> None:
    k = kernel(2)
    (statement,) = [s for s in walk(k.body) if isinstance(s, kind)]
    bm, bn, bk = k.schedule.block
    error = {FlagSignal: DeadlockError, FlagWait: RaceError}[kind]
    with pytest.raises(error):
        interpret_exact(without(k, statement), bm, bn, 4 * bk, seed=2, schedules=1, blocks=2)


def test_the_proof_covers_the_slices() -> None:
    """Every handoff is needed but one: a block's slice is its last work (a block per
    slice), so the consumers' release after the slice's last step frees a stage no load
    waits for; `sync minimal` drops it, and the proof holds without it."""
    k = kernel(3)
    prove(k)
    dropped = [d for d in k.sync_report if not d.kept]
    assert len(dropped) == 1 and isinstance(dropped[0].barrier, Arrive)
    assert dropped[0].barrier.reason == "the last step's wgmmas have retired"
    assert "k_hi" in str(dropped[0].barrier.bar.slot)  # the slice's last step
    kept = [d.barrier for d in k.sync_report if d.kept]
    for s in {id(s): s for s in walk(k.body) if isinstance(s, HANDOFFS)}.values():
        if isinstance(s, Barrier) and s.scope == "consumers":
            continue  # global memory: the interpreter's (above)
        if any(s is b for b in kept):
            with pytest.raises(HandoffProblem):
                prove(without(k, s))


# ---------------------------------------------------------------- code, errors, spaces


def test_the_emitted_code_names_the_split() -> None:
    compiled = compile_source(SMALL, "small.tile")
    source = compiled.source
    for line in (
        "constexpr int SPLIT_K = 2;",
        "for (int c = pid + 1; c < ((u + 1) * workers - 1) / sk_tiles + 1; ++c) {",
        "const Divisor sk_tiles, int dp_tiles, int workers,",
    ):
        assert line in source, line
    assert "SK_PARTS" not in source
    # the split's grid-wide steps are the host's, once per launch (launch-scalars)
    described = compiled.launches[0].to_json()["launch_scalars"]
    values = {v["name"]: (v["value"], v["passed"]) for v in described}
    assert values["slices"] == ("min(2, k_steps)", "host")
    assert values["sk_tiles"] == (
        "last_wave * max(min(blocks / slices - last_wave + 1, 1), 0)",
        "divisor",
    )
    assert values["workers"] == ("sk_tiles * slices", "int")


@pytest.mark.parametrize(
    "value, message",
    [
        ("1", "'persistent' takes integers ≥ 2, found 1"),
        ("65", "'persistent' takes integers ≤ 64, found 65"),
    ],
)
def test_a_split_of_fewer_than_two_or_too_many_slices_is_refused(
    tmp_path: Path, capsys, value, message
) -> None:
    path = tmp_path / "s.tile"
    path.write_text(SMALL.replace("split_k 2", f"split_k {value}"))
    r = cli(["compile", str(path)], capsys)
    assert r.code == 1
    line = line_of(SMALL, "persistent split_k")
    assert r.err.splitlines()[0] == f"{path}:{line}:24: error: {message}", r.err
    assert not list(tmp_path.glob("s.cu*"))


def test_split_k_and_pingpong_are_refused_together(tmp_path: Path, capsys) -> None:
    path = tmp_path / "s.tile"
    text = SMALL.replace("warp_specialize\n", "warp_specialize pingpong\n")
    path.write_text(text)
    r = cli(["compile", str(path)], capsys)
    assert r.code == 1
    assert (
        f"{path}:{line_of(text, 'persistent split_k')}:5: error: persistent split_k cuts tiles"
        in r.err
    ), r.err


def test_the_slices_are_a_tuning_set_and_split_k_a_choice_of_the_loop() -> None:
    points = expand(parse(SMALL.replace("split_k 2", "split_k {2, 4}"), "space.tile"))
    assert [p.label for p in points] == ["persistent split_k 2", "persistent split_k 4"]
    assert compile_source(points[1].text, "p.tile").kernels[0].schedule.split_k == 4
    space = SMALL.replace("persistent split_k 2", "persistent {tiles, split_k 3, stream_k}")
    (d,) = [d for d in parse(space, "space.tile").kernel().directives if d.name == "persistent"]
    assert str(d.args[0]) == "{tiles, split_k 3, stream_k}"
    points = expand(parse(space, "space.tile"))
    assert [p.label for p in points] == [
        "persistent",
        "persistent split_k 3",
        "persistent stream_k",
    ]
    schedules = [compile_source(p.text, "p.tile").kernels[0].schedule for p in points]
    assert [(s.stream_k, s.split_k) for s in schedules] == [(False, 0), (True, 3), (True, 0)]
    for point in points:
        assert parse(point.text, "p.tile") == point.program
