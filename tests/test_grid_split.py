"""`split_k S` (no `persistent`): a block per slice of every tile's K steps, the slice that
draws its tile's last ticket adding the S partial sums in slice order.

Checked here: the grid's slices (every K step of every tile once, block pid slice pid % S of
tile pid / S); the interpreter runs the kernel exactly in several block orders (so that
different slices draw the last ticket) with every partial sum read once; the hand-over's
parts removed are caught, and so is an order of adds that depends on which slice came last;
the proof; the emitted code and launch; the directive's errors and its tuning set; on a GPU,
both oracles, the same bits on every launch and the tickets left at zero."""

from __future__ import annotations

import dataclasses
import itertools
from pathlib import Path

import numpy as np
import pytest
from helpers import check_split_on_the_gpu, cli, interpret_exact, line_of, small_hopper, without

from tiledsl.driver import compile_source
from tiledsl.frontend.parser import parse
from tiledsl.gpu.runtime import gpu_available
from tiledsl.interp.errors import InterpreterError, RaceError
from tiledsl.interp.interpreter import interpret
from tiledsl.interp.oracle import to_storage
from tiledsl.ir.expr import Const, Var, evaluate
from tiledsl.ir.grid import grid_size, grid_split_steps, grid_vars
from tiledsl.ir.nodes import (
    Barrier,
    For,
    KernelIR,
    PartialAdd,
    PartialStore,
    Ticket,
    map_body,
    walk,
)
from tiledsl.models.mbarrier_hazards import prove
from tiledsl.tune.space import expand

SMALL = small_hopper("small_grid_split", "split_k 2")
_KERNELS: dict[int, KernelIR] = {}


def kernel(split: int = 2) -> KernelIR:
    if split not in _KERNELS:
        text = SMALL.replace("split_k 2", f"split_k {split}")
        _KERNELS[split] = compile_source(text, "small.tile").kernels[0]
    return _KERNELS[split]


# ---------------------------------------------------------------- the grid


@pytest.mark.parametrize("split, steps", list(itertools.product((2, 3, 4, 7), (1, 2, 5, 64, 172))))
def test_the_slices_cover_each_tile_once(split, steps) -> None:
    tiles = 5
    covered: dict[int, list[tuple[int, int]]] = {}
    for pid in range(tiles * split):
        env = {"pid": pid}
        for name, e in grid_split_steps(Const(steps), split).items():
            env[name] = evaluate(e, env)
        assert (env["tile"], env["slice"]) == divmod(pid, split)
        covered.setdefault(env["tile"], []).append((env["k_lo"], env["k_hi"]))
    assert sorted(covered) == list(range(tiles))
    for parts in covered.values():
        steps_seen = [k for lo, hi in parts for k in range(lo, hi)]
        assert steps_seen == list(range(steps))  # in slice order, no gap, no overlap
        assert all(lo <= hi for lo, hi in parts)  # an empty slice when steps < slices


def test_the_grid_has_a_block_per_slice() -> None:
    k = kernel(3)
    env = k.gemm.size_env(3 * 64, 2 * 128, 640)
    tiles = {name: evaluate(e, env) for name, e in grid_vars(k).items()}
    assert evaluate(grid_size(k), {**env, **tiles}) == 3 * 2 * 3


# ---------------------------------------------------------------- exact


@pytest.mark.parametrize(
    "split, m, n, steps",
    [
        (2, 64, 128, 8),  # one tile in two slices
        (3, 64, 256, 7),  # two tiles in three uneven slices
        (2, 128, 256, 5),  # four tiles
        (4, 64, 128, 2),  # fewer K steps than slices: two empty slices
        (3, 70, 200, 5),  # partial tiles along M and N (TMA's zeros, guarded C stores)
    ],
)
def test_split_k_is_exact_in_every_block_order(split, m, n, steps) -> None:
    k = kernel(split)
    bk = k.schedule.block[2]
    # schedule 0 runs the blocks forward, 1 backward, 2 and 3 shuffled: the results agree
    check, stats = interpret_exact(k, m, n, steps * bk - 3, seed=steps, schedules=4)
    assert check.ok, check.detail
    tiles = -(-m // 64) * -(-n // 128)
    assert stats.partial_sums == tiles * split  # every slice's partial sum, read once


def _one(k: KernelIR, kind) -> object:
    (statement,) = {id(s): s for s in walk(k.body) if isinstance(s, kind)}.values()
    return statement


def test_the_barrier_before_the_ticket_removed_is_a_race() -> None:
    k = kernel(2)
    body = map_body(
        k.body,
        lambda s: (
            ()
            if isinstance(s, Barrier) and s.scope == "consumers" and s.reason.endswith("ticket")
            else s
        ),
    )
    assert body != k.body
    with pytest.raises(RaceError, match="takes a ticket .* `barrier.consumers` between"):
        interpret_exact(dataclasses.replace(k, body=body), 64, 128, 256, schedules=1)


def test_the_partial_store_removed_is_caught() -> None:
    """The first block's slot was never written, so no ticket released it to the last."""
    k = kernel(2)
    with pytest.raises(RaceError, match="reads workspace slot 0 without .* drawing a ticket"):
        interpret_exact(without(k, _one(k, PartialStore)), 64, 128, 256, schedules=1)


def test_the_adds_removed_leave_partial_sums_unread() -> None:
    k = kernel(2)
    body = map_body(k.body, lambda s: () if isinstance(s, For) and s.var == "c" else s)
    assert body != k.body
    with pytest.raises(InterpreterError, match="is never added"):
        interpret_exact(dataclasses.replace(k, body=body), 64, 128, 256, schedules=1)


def test_an_order_of_adds_that_depends_on_the_last_slice_is_caught() -> None:
    """The last slice adding the partial sums from its own round to the one before it:
    every sum, in an order that depends on which slice finished last. On values that
    round, two block orders give other bits."""
    k = kernel(3)
    slices = Const(3, "SPLIT_K")
    mine_first = Var("tile") * slices + (Var("slice") + Var("c")) % slices

    def reorder(s):
        if isinstance(s, PartialAdd):
            return dataclasses.replace(s, slot=mine_first)
        return s

    changed = dataclasses.replace(k, body=map_body(k.body, reorder))
    g = k.gemm
    m, n, kk = 64, 128, 7 * k.schedule.block[2]
    rng = np.random.default_rng(5)
    arrays = {
        g.a.name: to_storage(g.a, rng.standard_normal((m, kk))),
        g.b.name: to_storage(g.b, rng.standard_normal((kk, n))),
        g.c.name: to_storage(g.c, np.zeros((m, n))),
    }
    sizes = g.size_env(m, n, kk)
    interpret(k, {a: v.copy() for a, v in arrays.items()}, sizes, schedules=3)  # agrees
    with pytest.raises(InterpreterError, match="differs between interleavings"):
        interpret(changed, arrays, sizes, schedules=3)


def test_the_proof_covers_a_slice_that_draws_either_ticket() -> None:
    k = kernel(3)
    prove(k)
    assert any(isinstance(s, Ticket) for s in walk(k.body))
    kept = [d for d in k.sync_report if d.kept]
    assert kept and all(d.why for d in kept)


# ---------------------------------------------------------------- code, errors, spaces


def test_the_emitted_code_takes_a_ticket_and_adds_in_slice_order() -> None:
    compiled = compile_source(SMALL, "small.tile")
    source = compiled.source
    for line in (
        "constexpr int SPLIT_K = 2;",
        "const int pid = blockIdx.x;  // a slice of a tile: tiles_m x tiles_n x SPLIT_K blocks",
        "const int tile = pid / SPLIT_K;",
        "const int k_lo = slice * k_steps / SPLIT_K;",
        "for (int kt = k_lo; kt < k_hi; ++kt) {",
        "if (threadIdx.x == 0) *ticket_box = take_ticket(&tickets[tile], SPLIT_K);",
        "const int ticket = *ticket_box;",
        "if (ticket + 1 == SPLIT_K) {",
        "for (int c = 0; c < SPLIT_K; ++c) {",
        "(tile * SPLIT_K + c) * (PARTIAL_FLOATS / 4)",
    ):
        assert line in source, line
    assert "wait_flag(" not in source.split('extern "C"')[1]  # no block waits for another
    launch = compiled.launches[0]
    described = launch.to_json()
    assert described["split_k"]["slices"] == 2
    assert described["grid"]["x"] == "(M + 63) / 64 * ((N + 127) / 128) * 2"
    assert ("workspace", "float*") in launch.args and ("tickets", "unsigned*") in launch.args
    assert launch.grid_dims({"M": 130, "N": 256, "K": 64}) == (3 * 2 * 2, 1)


def _refusal(tmp_path: Path, capsys, text: str) -> list[str]:
    path = tmp_path / "s.tile"
    path.write_text(text)
    r = cli(["compile", str(path)], capsys)
    assert r.code == 1
    assert not list(tmp_path.glob("s.cu*"))
    return [line.replace(f"{path}:", "") for line in r.err.splitlines()]


@pytest.mark.parametrize(
    "value, message",
    [
        ("0", "'split_k' takes integers ≥ 1, found 0"),
        ("65", "'split_k' takes integers ≤ 64, found 65"),
    ],
)
def test_a_split_of_no_or_too_many_slices_is_refused(tmp_path, capsys, value, message) -> None:
    err = _refusal(tmp_path, capsys, SMALL.replace("split_k 2", f"split_k {value}"))
    assert err[0] == f"{line_of(SMALL, 'split_k 2')}:13: error: {message}", err


@pytest.mark.parametrize(
    "change, message, fix",
    [
        (
            ("    split_k 2", "    persistent stream_k\n    split_k 2"),
            "split_k 2 and persistent stream_k each cut the tiles along K, in two different ways",
            "write `persistent split_k 2` alone",
        ),
        (
            ("    warp_specialize\n", ""),
            "split_k is built for warp-specialized kernels only",
            "add `copy tma` and `warp_specialize`",
        ),
        (
            ("    split_k 2", "    split_k 2\n    cluster 2 x 1"),
            "split_k in thread-block clusters is not built yet",
            "drop `cluster`",
        ),
    ],
)
def test_split_k_is_refused_where_it_is_not_built(tmp_path, capsys, change, message, fix) -> None:
    text = SMALL.replace(*change)
    err = _refusal(tmp_path, capsys, text)
    line = line_of(text, "split_k 2")
    first = next(e for e in err if e.startswith(f"{line}:5: error: "))
    assert message in first, err
    assert any(fix in e for e in err), err


@pytest.mark.parametrize(
    "lines",
    ["    persistent\n    split_k 2", "    split_k 2\n    persistent", "    persistent split_k 2"],
)
def test_split_k_beside_persistent_is_the_persistent_split(lines) -> None:
    """A newline separates words as a space does, so `persistent` then `split_k 2` reads
    as `persistent split_k 2`; the other order means the same."""
    k = compile_source(SMALL.replace("    split_k 2", lines), "p.tile").kernels[0]
    assert (k.persistent, k.stream_k, k.split_k, k.grid_split) == (True, True, 2, 0)


def test_the_slices_are_a_tuning_set_and_one_slice_is_no_split() -> None:
    points = expand(parse(SMALL.replace("split_k 2", "split_k {1, 2, 4}"), "space.tile"))
    assert [p.label for p in points] == ["split_k 1", "split_k 2", "split_k 4"]
    kernels = [compile_source(p.text, "p.tile").kernels[0] for p in points]
    assert [k.grid_split for k in kernels] == [0, 2, 4]
    assert not any(isinstance(s, Ticket) for s in walk(kernels[0].body))
    for point in points:
        assert parse(point.text, "p.tile") == point.program


def test_check_says_how_a_size_falls_into_slices(capsys) -> None:
    example = Path(__file__).parent.parent / "examples/hopper/split_k.tile"
    r = cli(["check", str(example), "--size", "1x4096x11008"], capsys)
    assert r.code == 0, r.err
    assert "  split-K  a block per slice of every tile, 2 slices of its K steps;" in r.out
    assert (
        "    64 tiles in 2 slices of 86 K steps (172 a tile): 128 blocks, 0.97 per SM;" in r.out
    ), r.out
    r = cli(["compile", str(example), "--explain-sync"], capsys)
    assert r.code == 0, r.err
    assert "or takes the ticket" in " ".join(r.out.split())


# ---------------------------------------------------------------- on the GPU


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
@pytest.mark.parametrize("size", [(1, 4096, 11008), (16, 1000, 4099), (3, 200, 100)])
def test_split_k_on_the_gpu_is_exact_the_same_every_launch_and_leaves_the_tickets_at_zero(
    size,
) -> None:
    compiled = compile_source(
        (Path(__file__).parent.parent / "examples/hopper/split_k.tile").read_text(),
        "split_k.tile",
    )
    check_split_on_the_gpu(compiled, size)
