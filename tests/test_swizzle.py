"""Block rasterization (tiledsl.ir.grid.raster_steps): every raster is a bijection, in its order.

The steps map a block id `pid` to its tile (bm, bn). They are evaluated here the way
the interpreter evaluates them (in order, each over the names before it), but over a
numpy array of every pid of the grid at once.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiledsl.ir.expr import evaluate
from tiledsl.ir.grid import raster_steps

PARAMS = range(1, 10)
RASTERS = [("none", 0)] + [(kind, p) for kind in ("grouped", "snake", "zigzag") for p in PARAMS]

# 1 x 1, 1 x n, n x 1, primes, squares, and shapes not divisible by most G / W.
SHAPES = sorted(
    {(1, 1), (1, 2), (2, 1), (1, 7), (7, 1), (1, 16), (16, 1), (2, 2), (3, 5), (5, 3)}
    | {(7, 11), (11, 7), (13, 13), (8, 8), (9, 9), (16, 24), (24, 16), (17, 10), (10, 17)}
    | {(6, 35), (35, 6), (12, 12), (31, 2), (2, 31), (64, 3), (3, 64)}
)


def raster_id(raster: tuple[str, int]) -> str:
    kind, param = raster
    return kind if kind == "none" else f"{kind}{param}"


def tiles_of(kind: str, param: int, tiles_m: int, tiles_n: int, pid=None):
    """(bm, bn) of every pid in `pid` (default: the whole grid), as numpy arrays."""
    if pid is None:
        pid = np.arange(tiles_m * tiles_n, dtype=np.int64)
    env = {"pid": pid, "tiles_m": tiles_m, "tiles_n": tiles_n}
    for name, expr in raster_steps(kind, param).items():  # in order: later steps use earlier
        env[name] = evaluate(expr, env)
    bm = np.broadcast_to(np.asarray(env["bm"]), np.shape(pid))
    bn = np.broadcast_to(np.asarray(env["bn"]), np.shape(pid))
    return bm, bn


def reference_order(kind: str, param: int, tiles_m: int, tiles_n: int) -> list[tuple[int, int]]:
    """The documented visiting order, written as plain loops."""
    order = []
    if kind == "none":
        for bm in range(tiles_m):
            for bn in range(tiles_n):
                order.append((bm, bn))
    elif kind == "grouped":
        for first_m in range(0, tiles_m, param):
            rows = range(first_m, min(first_m + param, tiles_m))
            for bn in range(tiles_n):  # column by column ...
                for bm in rows:  # ... down the group's block-rows
                    order.append((bm, bn))
    elif kind == "snake":
        for group, first_m in enumerate(range(0, tiles_m, param)):
            rows = range(first_m, min(first_m + param, tiles_m))
            cols = range(tiles_n) if group % 2 == 0 else range(tiles_n - 1, -1, -1)
            for bn in cols:  # column by column, odd groups from the right ...
                for bm in rows:  # ... down the group's block-rows
                    order.append((bm, bn))
    elif kind == "zigzag":
        for panel, first_n in enumerate(range(0, tiles_n, param)):
            cols = range(first_n, min(first_n + param, tiles_n))
            rows = range(tiles_m) if panel % 2 == 0 else range(tiles_m - 1, -1, -1)
            for bm in rows:  # row by row, odd panels bottom-up
                for bn in cols:
                    order.append((bm, bn))
    else:
        raise AssertionError(kind)
    return order


def assert_bijection(kind: str, param: int, tiles_m: int, tiles_n: int) -> None:
    bm, bn = tiles_of(kind, param, tiles_m, tiles_n)
    where = f"{kind} {param} on a {tiles_m} x {tiles_n} grid"
    assert bm.shape == bn.shape == (tiles_m * tiles_n,), where
    assert ((bm >= 0) & (bm < tiles_m)).all(), f"{where}: bm out of range: {bm}"
    assert ((bn >= 0) & (bn < tiles_n)).all(), f"{where}: bn out of range: {bn}"
    flat = bm * tiles_n + bn
    # In range and as many tiles as blocks: injective is onto.
    counts = np.bincount(flat, minlength=tiles_m * tiles_n)
    assert (counts == 1).all(), (
        f"{where}: tiles visited twice {np.flatnonzero(counts > 1).tolist()}, "
        f"never {np.flatnonzero(counts == 0).tolist()}"
    )


# ------------------------------------------------------------------ bijection


@pytest.mark.parametrize("raster", RASTERS, ids=raster_id)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_raster_is_a_bijection(raster, shape):
    assert_bijection(*raster, *shape)


@pytest.mark.parametrize("raster", RASTERS, ids=raster_id)
def test_raster_is_a_bijection_on_every_small_grid(raster):
    for tiles_m in range(1, 20):
        for tiles_n in range(1, 20):
            assert_bijection(*raster, tiles_m, tiles_n)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 80),
    st.integers(1, 80),
    st.sampled_from(["none", "grouped", "snake", "zigzag"]),
    st.integers(1, 16),
)
def test_random_grids_and_rasters_are_bijections_in_the_documented_order(
    tiles_m, tiles_n, kind, param
):
    assert_bijection(kind, param, tiles_m, tiles_n)
    bm, bn = tiles_of(kind, param, tiles_m, tiles_n)
    assert list(zip(bm.tolist(), bn.tolist())) == reference_order(kind, param, tiles_m, tiles_n)


def test_scalar_pids_agree_with_the_vectorized_evaluation():
    """The interpreter evaluates one Python int pid at a time (`min` on ints)."""
    for kind, param in RASTERS:
        for tiles_m, tiles_n in ((7, 11), (11, 7), (1, 5), (5, 1)):
            bm, bn = tiles_of(kind, param, tiles_m, tiles_n)
            for pid in range(tiles_m * tiles_n):
                one_m, one_n = tiles_of(kind, param, tiles_m, tiles_n, pid)
                assert (int(one_m), int(one_n)) == (bm[pid], bn[pid]), (kind, param, pid)


# ------------------------------------------------------------------ the orders


@pytest.mark.parametrize("raster", RASTERS, ids=raster_id)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_raster_visits_tiles_in_the_documented_order(raster, shape):
    bm, bn = tiles_of(*raster, *shape)
    assert list(zip(bm.tolist(), bn.tolist())) == reference_order(*raster, *shape)


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_none_is_row_major(shape):
    tiles_m, tiles_n = shape
    bm, bn = tiles_of("none", 0, tiles_m, tiles_n)
    pid = np.arange(tiles_m * tiles_n)
    assert (bm == pid // tiles_n).all() and (bn == pid % tiles_n).all()


@pytest.mark.parametrize("group", PARAMS)
def test_grouped_walks_group_rows_column_by_column(group):
    tiles_m, tiles_n = 2 * group + 1, 5  # two full groups, then a group of one row
    bm, bn = tiles_of("grouped", group, tiles_m, tiles_n)
    # The first G blocks are the first column of the first G block-rows.
    assert bm[:group].tolist() == list(range(group))
    assert bn[:group].tolist() == [0] * group
    # The next G blocks are the second column of the same rows.
    assert bm[group : 2 * group].tolist() == list(range(group))
    assert bn[group : 2 * group].tolist() == [1] * group
    # The second group starts on block-row G after all tiles_n columns of the first.
    first_of_second = group * tiles_n
    assert (bm[first_of_second], bn[first_of_second]) == (group, 0)
    # The last group has one block-row and walks it left to right.
    tail = slice(2 * group * tiles_n, None)
    assert bm[tail].tolist() == [2 * group] * tiles_n
    assert bn[tail].tolist() == list(range(tiles_n))


def test_grouped_with_fewer_rows_than_the_group_is_column_major():
    bm, bn = tiles_of("grouped", 8, 3, 4)
    assert list(zip(bm.tolist(), bn.tolist())) == [(m, n) for n in range(4) for m in range(3)]


@pytest.mark.parametrize("width", PARAMS)
def test_zigzag_walks_panel_0_down_and_panel_1_up(width):
    tiles_m, tiles_n = 5, 2 * width + 1  # two full panels, then a panel of one column
    bm, bn = tiles_of("zigzag", width, tiles_m, tiles_n)
    panel = width * tiles_m
    # Panel 0 (columns 0..W-1): top-down, row by row.
    assert bm[:panel].tolist() == [r for r in range(tiles_m) for _ in range(width)]
    assert bn[:panel].tolist() == [c for _ in range(tiles_m) for c in range(width)]
    # Panel 1 (columns W..2W-1): bottom-up.
    assert bm[panel : 2 * panel].tolist() == [
        r for r in reversed(range(tiles_m)) for _ in range(width)
    ]
    assert bn[panel : 2 * panel].tolist() == [
        width + c for _ in range(tiles_m) for c in range(width)
    ]
    # Panel 2, one column wide (the last, narrower panel): top-down again.
    assert bm[2 * panel :].tolist() == list(range(tiles_m))
    assert bn[2 * panel :].tolist() == [2 * width] * tiles_m


def test_zigzag_turns_at_the_panel_edge():
    """The first block of panel 1 is on the last block-row: no jump back to the top."""
    bm, bn = tiles_of("zigzag", 2, 4, 4)
    order = list(zip(bm.tolist(), bn.tolist()))
    assert order[7] == (3, 1) and order[8] == (3, 2)
