"""The numpy interpreter: exact results on random valid schedules, and races it must see."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiledsl.commands.run import run_cpu
from tiledsl.driver import compile_file, compile_source
from tiledsl.errors import TileError
from tiledsl.interp.interpreter import InterpreterError, RaceError, interpret
from tiledsl.interp.oracle import check_exact, from_storage, make_inputs, to_storage
from tiledsl.ir.nodes import Barrier, Copy, For, SharedTile

ROOT = Path(__file__).resolve().parent.parent


def run(kernel, m, n, k, seed=0):
    g = kernel.gemm
    inputs = make_inputs(g, m, n, k, "exact", np.random.default_rng(seed))
    arrays = {
        g.a.name: to_storage(g.a, inputs.a),
        g.b.name: to_storage(g.b, inputs.b),
        g.c.name: to_storage(g.c, inputs.c_in).copy(),
    }
    interpret(kernel, arrays, {"M": m, "N": n, "K": k})
    return check_exact(
        g, inputs, from_storage(g.c, arrays[g.c.name], (m, n)), kernel.schedule.block[:2]
    )


def without_barriers(body, reason_prefix):
    out = []
    for stmt in body:
        if isinstance(stmt, For):
            stmt = dataclasses.replace(stmt, body=without_barriers(stmt.body, reason_prefix))
        if isinstance(stmt, Barrier) and stmt.reason.startswith(reason_prefix):
            continue
        out.append(stmt)
    return tuple(out)


@pytest.fixture(scope="module")
def v2():
    return compile_file(ROOT / "examples/ladder/v2.tile").kernels[0]


@pytest.fixture(scope="module")
def staged():
    return compile_file(ROOT / "examples/hgemm_f16.tile").kernels[0]


def test_v2_is_exact_and_race_free(v2):
    assert run(v2, 128, 192, 96).ok


@pytest.mark.parametrize("which", ["WAR: every warp", "RAW: the copies"])
def test_a_removed_block_barrier_is_reported_as_a_race(v2, which):
    broken = dataclasses.replace(v2, body=without_barriers(v2.body, which))
    assert broken.body != v2.body
    with pytest.raises(RaceError) as info:
        run(broken, 64, 64, 64)
    message = str(info.value)
    assert "shared-memory race on As[0][0][0] in block 0" in message
    assert "write by thread 0 in `copy.block.sync As[0]" in message
    assert "read by warp 0 in `load_frag a[0][0] <- As[0]" in message


def test_a_race_hides_behind_right_answers(v2):
    """Without the WAR barrier the sequential interpreter still computes the right C:
    only the race check can see the bug, as racecheck on the GPU does."""
    broken = dataclasses.replace(v2, body=without_barriers(v2.body, "WAR"))
    g = broken.gemm
    inputs = make_inputs(g, 64, 64, 64, "exact", np.random.default_rng(1))
    arrays = {
        "A": to_storage(g.a, inputs.a),
        "B": to_storage(g.b, inputs.b),
        "C": inputs.c_in.ravel().copy(),
    }
    with pytest.raises(RaceError):
        interpret(broken, arrays, {"M": 64, "N": 64, "K": 64})


@pytest.mark.parametrize("which", ["RAW: the warp's fragment store", "RAW: the lanes' copy"])
def test_a_removed_warp_barrier_is_reported(staged, which):
    broken = dataclasses.replace(staged, body=without_barriers(staged.body, which))
    assert broken.body != staged.body
    with pytest.raises(RaceError, match=r"race on Cs\[0\]"):
        run(broken, 64, 128, 32)


def test_staged_f16_output_with_accumulation_is_exact(staged):
    assert staged.gemm.accumulate and staged.gemm.c.dtype == "f16"
    assert run(staged, 128, 256, 64).ok


def test_out_of_bounds_tile_is_caught(v2):
    def shift(stmt):
        if isinstance(stmt, Copy) and isinstance(stmt.dst, SharedTile):
            dst = dataclasses.replace(stmt.dst, offset=(stmt.dst.offset[0] + 1, stmt.dst.offset[1]))
            return dataclasses.replace(stmt, dst=dst)
        if isinstance(stmt, For):
            return dataclasses.replace(stmt, body=tuple(shift(s) for s in stmt.body))
        return stmt

    broken = dataclasses.replace(v2, body=tuple(shift(s) for s in v2.body))
    with pytest.raises(InterpreterError, match="reaches outside shared buffer As"):
        run(broken, 64, 64, 32)


def test_misaligned_vector_copy_is_caught(v2):
    def shift(stmt):
        if isinstance(stmt, Copy):
            src = dataclasses.replace(stmt.src, offset=(stmt.src.offset[0], stmt.src.offset[1] + 1))
            return dataclasses.replace(stmt, src=src)
        if isinstance(stmt, For):
            return dataclasses.replace(stmt, body=tuple(shift(s) for s in stmt.body))
        return stmt

    broken = dataclasses.replace(v2, body=tuple(shift(s) for s in v2.body))
    with pytest.raises(InterpreterError, match="misaligned"):
        run(broken, 64, 64, 64)


def test_run_cpu_reports_both_oracles_and_the_race_check(v2):
    report = run_cpu(v2, (64, 128, 64), seed=3)
    assert [c.oracle for c in report.checks] == ["exact oracle", "statistical oracle", "race check"]
    assert report.ok


# ------------------------------------------------------------------ random schedules

MMA = [(16, 16, 16), (32, 8, 16), (8, 32, 16)]


@st.composite
def schedules(draw):
    mm, mn, mk = draw(st.sampled_from(MMA))
    warps_m = draw(st.integers(1, 4))
    warps_n = draw(st.integers(1, 4))
    bk = mk * draw(st.integers(1, 3))
    stages = draw(st.sampled_from([0, 1]))
    c_dtype = draw(st.sampled_from(["f32", "f16"]))
    op = draw(st.sampled_from(["=", "+="]))
    order = draw(st.sampled_from(["ab", "ba"]))
    copy = draw(st.sampled_from([4, 8, 16]))
    via = draw(st.sampled_from(["shared", "direct"])) if c_dtype == "f32" else "shared"
    tiles = [draw(st.integers(1, 2)), draw(st.integers(1, 3)), draw(st.integers(1, 3))]
    block = (mm * warps_m, mn * warps_n, bk)
    source = f"""
kernel drawn {{
    A: f16[M, K] row
    B: f16[K, N] row
    C: {c_dtype}[M, N] row
    C[m, n] {op} A[m, k] * B[k, n]
    block {block[0]} x {block[1]} x {block[2]}
    mma {mm} x {mn} x {mk}
    stages {stages}
    copy sync {copy}
    {"pad none" if stages else ""}
    swizzle none
    sync all
    load_order {order}
    epilogue_via {via}
}}"""
    size = (block[0] * tiles[0], block[1] * tiles[1], block[2] * tiles[2])
    return source, size


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schedules(), st.integers(0, 2**31))
def test_random_valid_schedules_are_exact_and_race_free(case, seed):
    source, (m, n, k) = case
    try:
        kernel = compile_source(source, "rand.tile").kernels[0]
    except TileError as err:
        # The only refusals expected here are WMMA's pointer alignment on skinny fragments.
        assert "32-byte aligned" in str(err), str(err)
        return
    assert run(kernel, m, n, k, seed).ok
