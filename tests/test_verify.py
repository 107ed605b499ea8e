"""The IR's invariants (tiledsl.ir.verify): a pass that breaks one is reported as a located
error naming the stage, never emitted. Each case breaks one invariant of a kernel that
verifies, and checks the exact message."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from tiledsl.driver import compile_file
from tiledsl.errors import TileError
from tiledsl.ir.expr import Const, Var
from tiledsl.ir.nodes import Barrier, For, KernelIR, LoadFrag, Mma, TmaLoad, Wait, map_body
from tiledsl.ir.verify import verify

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def kernel() -> KernelIR:
    k = compile_file(ROOT / "examples" / "hgemm.tile").kernels[0]
    verify(k, "the test")  # the kernel as built keeps every invariant
    return k


def broken(k: KernelIR, edit) -> KernelIR:
    body = map_body(k.body, edit)
    assert body != k.body
    return dataclasses.replace(k, body=body)


def errors(k: KernelIR) -> list[str]:
    with pytest.raises(TileError) as caught:
        verify(k, "the test")
    return [line for line in str(caught.value).splitlines() if ": error: " in line]


def test_an_unknown_barrier_scope(kernel) -> None:
    def edit(s):
        return dataclasses.replace(s, scope="grid") if isinstance(s, Barrier) else s

    hgemm = ROOT / "examples" / "hgemm.tile"
    assert errors(broken(kernel, edit))[0] == (
        f"{hgemm}:6:8: error: invalid IR after the test: unknown barrier scope 'grid'"
    )


def test_a_loop_whose_bounds_differ_between_threads(kernel) -> None:
    def edit(s):
        return dataclasses.replace(s, stop=s.stop + Var("warp")) if isinstance(s, For) else s

    assert errors(broken(kernel, edit))[0].endswith(
        "invalid IR after the test: loop i has thread-dependent bounds (barriers inside "
        "would diverge)"
    )


def test_a_variable_used_outside_its_loop(kernel) -> None:
    def edit(s):
        if isinstance(s, For) and s.var == "i":
            return dataclasses.replace(s, stop=Var("kt") + 1)
        return s

    assert errors(broken(kernel, edit))[0].endswith(
        "invalid IR after the test: 'kt' is used outside the loop that defines it"
    )


def test_a_shared_tile_past_its_buffer(kernel) -> None:
    def edit(s):
        if isinstance(s, LoadFrag) and hasattr(s.src, "buffer"):
            row, col = s.src.offset
            return dataclasses.replace(s, src=dataclasses.replace(s.src, offset=(row + 4096, col)))
        return s

    assert "outside [0, " in errors(broken(kernel, edit))[0]
    assert "reaches rows" in errors(broken(kernel, edit))[0]


def test_a_fragment_in_the_wrong_role(kernel) -> None:
    def edit(s):
        return dataclasses.replace(s, a=s.b) if isinstance(s, Mma) else s

    assert any(
        e.endswith("fragment 'b' is a matrix_b, used as a matrix_a")
        for e in errors(broken(kernel, edit))
    )


def test_a_fragment_index_past_its_count(kernel) -> None:
    def edit(s):
        if isinstance(s, Mma):
            return dataclasses.replace(s, acc=dataclasses.replace(s.acc, i=Const(99)))
        return s

    assert any("is outside acc[" in e for e in errors(broken(kernel, edit)))


# ---------------------------------------------------------------- warp-specialized roles


@pytest.fixture(scope="module")
def specialized() -> KernelIR:
    k = compile_file(ROOT / "examples" / "hopper" / "stream_k.tile").kernels[0]
    verify(k, "the test")  # the roles' bodies keep every invariant too
    return k


def test_the_roles_bodies_are_checked_for_scope(specialized) -> None:
    """A producer's wait on a slot named by a variable no Let or loop defines."""

    def edit(s):
        if isinstance(s, Wait) and s.bar.name == "empty":
            return dataclasses.replace(s, bar=dataclasses.replace(s.bar, slot=Var("nowhere")))
        return s

    assert any(
        e.endswith("invalid IR after the test: 'nowhere' is used outside the loop that defines it")
        for e in errors(broken(specialized, edit))
    )


def test_a_tma_load_past_its_stage_buffer(specialized) -> None:
    def edit(s):
        if isinstance(s, TmaLoad):
            row, col = s.dst.offset
            return dataclasses.replace(s, dst=dataclasses.replace(s.dst, offset=(row + 512, col)))
        return s

    assert any("reaches rows" in e and "tile of As" in e for e in errors(broken(specialized, edit)))


def test_a_consumers_barrier_outside_a_stream_k_or_split_k_fix_up(specialized) -> None:
    k = dataclasses.replace(specialized, stream_k=False)
    expected = "a consumers' barrier outside a stream-K or split-K fix-up"
    assert any(e.endswith(expected) for e in errors(k))
