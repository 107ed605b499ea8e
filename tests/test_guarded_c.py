"""Partial tiles without the twin for every kernel whose loads are TMA's: TMA zero-fills a
box past the operand, and C's stores from registers (or staged copies into C) are
guarded element by element (tiledsl.lowering.edges.guard_c_stores). Such a kernel has no
twin at all: operands whose lines are not whole 16 bytes are staged by the launcher
(tiledsl.gpu.staging), and a pair of C's elements is stored as one word only where C's
leading dimension is even."""

from __future__ import annotations

from dataclasses import replace

import pytest
from helpers import ROOT, cli, interpret_exact

from tiledsl.driver import compile_file
from tiledsl.interp.errors import InterpreterError
from tiledsl.ir.nodes import Copy, GlobalTile, StoreFrag, map_body, walk
from tiledsl.ir.partial_tiles import tma_only
from tiledsl.lowering.edges import needs_twin

HOPPER = ROOT / "examples" / "hopper"


def _kernel(name: str):
    (kernel,) = compile_file(HOPPER / f"{name}.tile").kernels
    return kernel


def _c_stores(kernel) -> list:
    return [
        s
        for s in walk(kernel.body)
        if isinstance(s, (Copy, StoreFrag)) and isinstance(s.dst, GlobalTile)
    ]


@pytest.mark.parametrize("name", ["tma", "ws", "persistent", "few_tokens_swapped"])
def test_a_kernel_with_tma_loads_guards_its_c_stores_and_runs_partial_tiles(name) -> None:
    k = _kernel(name)
    stores = _c_stores(k)
    assert stores and all(s.guard for s in stores)
    assert tma_only(k)
    # it runs every size itself: no twin
    assert k.edge is None


def test_a_kernel_whose_loads_are_cp_async_keeps_its_stores_unguarded() -> None:
    (k,) = compile_file(ROOT / "examples" / "tuned" / "wgmma_f32acc.tile").kernels
    assert not any(s.guard for s in _c_stores(k))
    assert needs_twin(k, k.gemm.size_env(200, 136, 72))


@pytest.mark.parametrize(
    "name, size",
    [
        ("few_tokens_swapped", (1, 64, 128)),  # one token of 16
        ("few_tokens_swapped", (5, 136, 192)),  # rows and columns partial
        ("ws", (200, 136, 72)),
        ("tma", (136, 264, 200)),
    ],
)
def test_partial_tiles_on_the_kernel_itself_are_exact(name, size) -> None:
    k = _kernel(name)
    assert not needs_twin(k, k.gemm.as_written.size_env(*size))
    grid = {"blocks": 4} if k.persistent else {}
    check, _ = interpret_exact(k, *size, seed=sum(size), schedules=2, **grid)
    assert check.ok, check.detail


def test_the_guard_is_what_keeps_a_partial_tile_inside_c() -> None:
    k = _kernel("few_tokens_swapped")

    def unguarded(stmt):
        return replace(stmt, guard=False) if isinstance(stmt, StoreFrag) else stmt

    bare = replace(k, body=map_body(k.body, unguarded))
    with pytest.raises(InterpreterError, match="reaches outside C"):
        interpret_exact(bare, 1, 64, 128, seed=1, schedules=1, blocks=1)


def test_the_source_tests_each_element_against_m_and_n() -> None:
    source = compile_file(HOPPER / "few_tokens_swapped.tile").source
    kernel = source
    assert "only elements inside C are written (partial tiles)" in kernel
    # swap_operands: the kernel's rows run along N as written (its M), its columns along M
    first = "bm * BM + wm * MMA_M + wq * 16 + g < N && bn * BN + wn * MMA_N + n8 * 8 + t < M"
    assert f"if ({first})" in kernel


def test_check_says_the_kernel_runs_one_token_itself(capsys) -> None:
    r = cli(["check", str(HOPPER / "few_tokens_swapped.tile"), "--size", "1x4096x4096"], capsys)
    assert r.code == 0, r.err
    assert "C's stores are guarded element by element" in r.out
    assert "every size runs few_tokens_swapped" in r.out
    assert "at 1x4096x4096: few_tokens_swapped, partial tiles at the edges; nothing staged" in (
        r.out
    )


def test_check_names_what_an_odd_leading_dimension_stages(capsys) -> None:
    r = cli(["check", str(HOPPER / "few_tokens_swapped.tile"), "--size", "7x4095x4099"], capsys)
    assert r.code == 0, r.err
    # A (row-major 7 x 4099) and B (4099 x 4095, column-major: W's 4095 rows of 4099) have
    # lines of 4099 f16 = 8198 bytes; C (row-major, N = 4095 elements a row) 8190 bytes
    assert "A: lines of 8198 bytes, not a multiple of 16: staged in lines of 8320 bytes" in r.out
    assert "B: lines of 8198 bytes" in r.out
    assert "C: lines of" not in r.out  # C leaves from the registers: nothing to stage
