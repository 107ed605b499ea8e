"""The pass pipeline on random valid schedules, at every --stop-after stage, and with barriers cut.

Every schedule the strategy draws uses only directive values that are built today;
each is compiled, run in the numpy interpreter at a size that is a whole number of
block tiles, and must be bit-exact against the exact oracle and race-free. The only
refusals accepted are the known ones, with their messages.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tiledsl.driver import compile_file, compile_source
from tiledsl.errors import TileError
from tiledsl.interp.interpreter import InterpreterError, RaceError, interpret
from tiledsl.interp.oracle import check_exact, from_storage, make_inputs, to_storage
from tiledsl.ir.nodes import AsyncWait, Barrier, Copy, For, If, KernelIR, SharedTile, walk
from tiledsl.models.banks import PAD_CANDIDATES
from tiledsl.passes import STAGE_NAMES

ROOT = Path(__file__).resolve().parent.parent
MMA = [(16, 16, 16), (32, 8, 16), (8, 32, 16)]

# The refusals a valid-looking schedule may meet, each with its message.
ALIGNMENT = "WMMA needs 32-byte aligned pointers"  # skinny fragments (verify.py)
SMEM = "bytes of shared memory per block"  # over the target's limit (verify_limits)
REGISTERS = "registers per thread for fragments alone"  # over the register file (analysis)


def run(kernel: KernelIR, m: int, n: int, k: int, seed: int = 0):
    """Interpret `kernel` on exact inputs; the exact oracle's Check (races raise)."""
    g = kernel.gemm
    inputs = make_inputs(g, m, n, k, "exact", np.random.default_rng(seed))
    arrays = {
        g.a.name: to_storage(g.a, inputs.a),
        g.b.name: to_storage(g.b, inputs.b),
        g.c.name: to_storage(g.c, inputs.c_in).copy(),
    }
    interpret(kernel, arrays, {"M": m, "N": n, "K": k})
    out = from_storage(g.c, arrays[g.c.name], (m, n))
    return check_exact(g, inputs, out, kernel.schedule.block[:2])


# ------------------------------------------------------------------ random valid schedules


@dataclasses.dataclass(frozen=True)
class Case:
    source: str
    size: tuple[int, int, int]
    mma: tuple[int, int, int]
    stages: int
    expect: dict = dataclasses.field(compare=False)  # what the compiled IR must show

    def __repr__(self) -> str:  # hypothesis prints this for a falsifying example
        m, n, k = self.size
        return f"Case(size={m}x{n}x{k}, expect={self.expect}):\n{self.source}"


@st.composite
def schedules(draw) -> Case:
    # Skinny fragments are refused about half the time (WMMA alignment): draw them less.
    mm, mn, mk = mma = draw(st.sampled_from([MMA[0], *MMA]))
    warps_m, warps_n = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    cm, cn = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    bm, bn, bk = mm * warps_m * cm, mn * warps_n * cn, mk * draw(st.integers(1, 4))
    stages = draw(st.sampled_from([0, 1, 2, 3, 4]))
    directives = [f"block {bm} x {bn} x {bk}", f"mma {mm} x {mn} x {mk}"]
    if (cm, cn) != (1, 1) or draw(st.booleans()):
        directives.append(f"coarsen {cm} x {cn}")
    sync = draw(st.sampled_from(["all", "minimal"]))
    directives += [f"stages {stages}", f"sync {sync}"]
    expect: dict = {"warps": (warps_m, warps_n), "stages": stages, "sync": sync}

    # copy: async needs stages >= 2; left out, it defaults to async 16 / sync 16.
    modes = ["sync", "async"] if stages >= 2 else ["sync"]
    copy = draw(st.sampled_from([None, *(f"{m} {w}" for m in modes for w in (4, 8, 16))]))
    if copy is not None:
        directives.append(f"copy {copy}")
    mode, width = copy.split() if copy else ("async" if stages >= 2 else "sync", "16")
    expect["copy"] = (mode, int(width) // 2)  # f16 elements per vector

    # pad: stages 0 has no shared rows, so only `pad none` (or nothing) is valid there.
    if stages == 0:
        pad = draw(st.sampled_from([None, "none"]))
        expect["pads"] = None
    else:
        multiple_of_8 = st.integers(0, 4).map(lambda x: 8 * x)
        explicit = st.tuples(multiple_of_8, multiple_of_8)
        pad = draw(st.one_of(st.sampled_from([None, "none", "auto"]), explicit))
        if isinstance(pad, tuple):
            expect["pads"] = pad
            pad = f"A {pad[0]}, B {pad[1]}"
        else:
            expect["pads"] = (0, 0) if pad == "none" else "auto"
    if pad is not None:
        directives.append(f"pad {pad}")

    kind = draw(st.sampled_from([None, "none", "grouped", "zigzag"]))
    if kind is None:  # left out: grouped 8
        expect["raster"] = ("grouped", 8)
    elif kind == "none":
        directives.append("swizzle none")
        expect["raster"] = ("none", 0)
    else:
        param = draw(st.integers(1, 8))
        directives.append(f"swizzle {kind} {param}")
        expect["raster"] = (kind, param)

    order = draw(st.sampled_from([None, "ab", "ba", "alternate"]))
    if order is not None:
        directives.append(f"load_order {order}")
    expect["first_copy"] = "Bs" if order == "ba" else "As"  # alternate: A first on even steps

    c_dtype = draw(st.sampled_from(["f32", "f16"]))
    op = draw(st.sampled_from(["=", "+="]))
    via = draw(
        st.sampled_from([None, "direct", "shared"] if c_dtype == "f32" else [None, "shared"])
    )
    if via is not None:  # left out: direct for f32 C, shared for f16 C
        directives.append(f"epilogue_via {via}")
    expect["staged_c"] = via == "shared" or c_dtype == "f16"

    # K steps: 1..5, drawn around the pipeline depth S - 1 half of the time, so that
    # K < (S - 1) * BK (prologue copies switched off) and K just above it both occur.
    depth = max(stages - 1, 1)
    steps = draw(
        st.one_of(st.integers(1, 5), st.sampled_from(sorted({max(depth - 1, 1), depth, depth + 1})))
    )
    tiles_m, tiles_n = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    order_of_lines = draw(st.permutations(directives))  # directives may come in any order
    body = "\n".join(f"    {line}" for line in order_of_lines)
    source = f"""kernel drawn {{
    A: f16[M, K] row
    B: f16[K, N] row
    C: {c_dtype}[M, N] row
    C[m, n] {op} A[m, k] * B[k, n]
{body}
}}
"""
    return Case(source, (bm * tiles_m, bn * tiles_n, bk * steps), mma, stages, expect)


def compile_or_known_refusal(case: Case) -> KernelIR | None:
    try:
        return compile_source(case.source, "rand.tile").kernels[0]
    except TileError as err:
        message = str(err)
        if ALIGNMENT in message:
            assert case.mma != (16, 16, 16), message  # only skinny fragments are refused
            event("refused: WMMA alignment")
            return None
        if SMEM in message:
            event("refused: shared memory")
            return None
        if REGISTERS in message:
            event("refused: registers")
            return None
        raise AssertionError(f"unexpected refusal of a valid schedule:\n{message}") from err


def barrier_count(kernel: KernelIR) -> tuple[int, int]:
    """(block, warp) barriers in the IR text (not executions)."""
    scopes = [s.scope for s in walk(kernel.body) if isinstance(s, Barrier)]
    return scopes.count("block"), scopes.count("warp")


def check_structure(kernel: KernelIR, case: Case) -> None:
    """The IR shows what each directive asked for."""
    want, stages = case.expect, case.stages
    assert kernel.warps == want["warps"]
    assert ("sync-elimination" in kernel.passes) == (want["sync"] == "minimal"), kernel.passes
    if want["sync"] == "minimal":  # never more barriers than `sync all` placed
        everything = compile_source(case.source.replace("sync minimal", "sync all")).kernels[0]
        assert barrier_count(kernel) <= barrier_count(everything)
    assert kernel.raster == want["raster"]
    names = [b.name for b in kernel.buffers]
    assert ("Cs" in names) == want["staged_c"], names
    block_copies = [
        s for s in walk(kernel.body) if isinstance(s, Copy) and isinstance(s.dst, SharedTile)
    ]
    block_copies = [c for c in block_copies if c.by == "block"]
    if stages == 0:
        assert not {"As", "Bs"} & set(names) and not block_copies
        return
    a_tile, b_tile = kernel.buffer("As"), kernel.buffer("Bs")
    assert (a_tile.slots, b_tile.slots) == ((stages,) * 2 if stages >= 2 else (1, 1))
    pads = (a_tile.pitch - a_tile.cols, b_tile.pitch - b_tile.cols)
    if want["pads"] == "auto":
        assert all(p in PAD_CANDIDATES for p in pads), pads
    else:
        assert pads == want["pads"]
    assert block_copies[0].dst.buffer == want["first_copy"]
    mode, vector = want["copy"]
    assert {(c.mode, c.vector) for c in block_copies} == {(mode, vector)}
    has_wait = any(isinstance(s, AsyncWait) for s in walk(kernel.body))
    assert has_wait == (mode == "async")


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(schedules(), st.integers(0, 2**31))
def test_random_valid_schedules_are_exact_and_race_free(case, seed):
    kernel = compile_or_known_refusal(case)
    if kernel is None:
        return
    check_structure(kernel, case)
    steps = case.size[2] // kernel.schedule.block[2]
    depth = case.stages - 1
    event(f"stages {case.stages}")
    event(f"sync {case.expect['sync']}")
    if case.stages >= 2:
        event(
            "K steps < S - 1"
            if steps < depth
            else "K steps = S - 1"
            if steps == depth
            else "K steps > S - 1"
        )
    check = run(kernel, *case.size, seed)
    assert check.ok, check.detail


KNOWN_REFUSALS = [
    pytest.param(
        ("block 64 x 64 x 32", "mma 32 x 8 x 16", "coarsen 1 x 2", "stages 1", "copy sync 16"),
        ALIGNMENT,
        id="skinny-fragments",
    ),
    pytest.param(
        ("block 128 x 128 x 128", "coarsen 4 x 4", "stages 4", "pad A 32, B 32"), SMEM, id="smem"
    ),
]


@pytest.mark.parametrize("directives, message", KNOWN_REFUSALS)
def test_the_known_refusals_say_why(directives, message):
    """The two refusals the property test accepts, met on purpose, with their messages."""
    lines = "\n    ".join(directives)
    source = f"""kernel refused {{
    A: f16[M, K] row
    B: f16[K, N] row
    C: f32[M, N] row
    C[m, n] = A[m, k] * B[k, n]
    {lines}
    swizzle none
    sync all
}}
"""
    with pytest.raises(TileError) as info:
        compile_source(source, "refused.tile")
    assert message in str(info.value)


# ------------------------------------------------------------------ the pipeline's edges

PIPELINE = """kernel edge {{
    A: f16[M, K] row
    B: f16[K, N] row
    C: f32[M, N] row
    C[m, n] = A[m, k] * B[k, n]
    block 32 x 32 x 32
    coarsen 2 x 1
    stages {stages}
    copy {copy} 16
    pad auto
    swizzle zigzag 1
    sync all
}}
"""


@pytest.mark.parametrize("copy", ["sync", "async"])
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_pipelines_shorter_and_longer_than_their_depth(stages, copy):
    """K of 1 .. S + 1 block steps: fewer steps than the prologue fills, as many, more."""
    kernel = compile_source(PIPELINE.format(stages=stages, copy=copy), "edge.tile").kernels[0]
    assert kernel.buffer("As").slots == stages
    for steps in range(1, stages + 2):
        check = run(kernel, 64, 96, 32 * steps, seed=steps)
        assert check.ok, f"{steps} K steps: {check.detail}"


# ------------------------------------------------------------------ every --stop-after stage

LADDER = ["ladder/v3", "ladder/v4", "ladder/v5", "ladder/v7", "hgemm"]


@pytest.mark.parametrize("stage", STAGE_NAMES)
@pytest.mark.parametrize("example", LADDER)
def test_every_stage_of_the_ladder_runs_exactly(example, stage):
    path = ROOT / "examples" / f"{example}.tile"
    try:
        kernel = compile_file(path, stop_after=stage).kernels[0]
    except TileError as err:
        # The naive and tiled forms of a 128 x 128 block have a warp per fragment: 64 warps.
        assert "threads per block" in str(err), str(err)
        assert kernel_block(path)[:2] == (128, 128), str(err)
        assert stage in ("lower", "smem-tiling"), str(err)
        return
    bm, bn, bk = kernel.schedule.block
    check = run(kernel, 2 * bm, 2 * bn, 3 * bk, seed=len(stage))
    assert check.ok, check.detail


def kernel_block(path: Path) -> tuple[int, int, int]:
    return compile_file(path).kernels[0].schedule.block


def test_the_full_pipeline_reaches_every_pass_of_hgemm():
    kernel = compile_file(ROOT / "examples/hgemm.tile").kernels[0]
    built = ("smem-tiling", "warp-coarsening", "multi-buffering", "padding", "swizzle")
    assert [p for p in kernel.passes if p in built] == list(built)
    assert kernel.raster == ("grouped", 8)


SYNC_MINIMAL = ["ladder/v2", "ladder/v3", "ladder/v4", "ladder/v5", "ladder/v7", "hgemm_f16"]


@pytest.mark.parametrize("example", SYNC_MINIMAL)
def test_sync_minimal_on_the_ladder_is_exact_race_free_and_never_adds_barriers(example):
    text = (ROOT / "examples" / f"{example}.tile").read_text()
    assert "sync    all" in text
    everything = compile_source(text, f"{example}.tile").kernels[0]
    minimal = compile_source(text.replace("sync    all", "sync    minimal"), "m.tile").kernels[0]
    assert minimal.passes[-1] == "sync-elimination"
    assert barrier_count(minimal) <= barrier_count(everything)
    bm, bn, bk = minimal.schedule.block
    for steps in (1, 2, 3):
        check = run(minimal, 2 * bm, bn, steps * bk, seed=steps)
        assert check.ok, check.detail


def test_sync_minimal_keeps_the_pipeline_barrier_of_hgemm():
    kernel = compile_file(ROOT / "examples/hgemm.tile").kernels[0]
    assert kernel.schedule.sync == "minimal"
    loop = next(s for s in kernel.body if isinstance(s, For) and s.var == "kt")
    barriers = [s for s in walk(loop.body) if isinstance(s, Barrier)]
    assert len(barriers) == 1 and is_pipeline_barrier(barriers[0])


# ------------------------------------------------------------------ cutting the pipeline


@pytest.fixture(scope="module")
def v4() -> KernelIR:
    return compile_file(ROOT / "examples/ladder/v4.tile").kernels[0]


def cut_in_kt_loop(kernel: KernelIR, drop) -> KernelIR:
    """`kernel` without the statements of its `kt` loop body for which `drop(stmt)` holds."""
    dropped = []

    def prune(body):
        out = []
        for stmt in body:
            if drop(stmt):
                dropped.append(stmt)
                continue
            out.append(stmt)
        return tuple(out)

    body = tuple(
        dataclasses.replace(s, body=prune(s.body)) if isinstance(s, For) and s.var == "kt" else s
        for s in kernel.body
    )
    assert len(dropped) == 1, f"expected one statement to drop, found {dropped}"
    return dataclasses.replace(kernel, body=body)


def is_pipeline_barrier(stmt) -> bool:
    return (
        isinstance(stmt, Barrier)
        and stmt.scope == "block"
        and stmt.reason.startswith("RAW: step kt")
    )


def test_v4_has_one_block_barrier_per_k_step(v4):
    loop = next(s for s in v4.body if isinstance(s, For) and s.var == "kt")
    barriers = [s for s in walk(loop.body) if isinstance(s, Barrier) and s.scope == "block"]
    assert len(barriers) == 1 and is_pipeline_barrier(barriers[0])
    assert [s for s in loop.body if isinstance(s, AsyncWait)] == [AsyncWait(0)]
    assert any(isinstance(s, If) for s in loop.body)
    assert run(v4, 128, 128, 128).ok


def test_removing_the_pipeline_barrier_is_caught(v4):
    broken = cut_in_kt_loop(v4, is_pipeline_barrier)
    with pytest.raises(InterpreterError) as info:  # a RaceError, or a touch of bytes in flight
        run(broken, 128, 128, 128)
    message = str(info.value)
    assert isinstance(info.value, RaceError) or "still filling" in message, message
    assert "As[" in message or "Bs[" in message, message


def test_removing_the_pipeline_barrier_of_sync_copies_is_a_race():
    text = (
        (ROOT / "examples/ladder/v4.tile").read_text().replace("copy    async 16", "copy sync 16")
    )
    kernel = compile_source(text, "v4_sync.tile").kernels[0]
    assert kernel.schedule.copy_mode == "sync"
    check = run(kernel, 128, 128, 128)
    assert check.ok, check.detail
    broken = cut_in_kt_loop(kernel, is_pipeline_barrier)
    with pytest.raises(RaceError):
        run(broken, 128, 128, 128)


def test_removing_the_async_wait_is_caught(v4):
    broken = cut_in_kt_loop(v4, lambda s: isinstance(s, AsyncWait))
    with pytest.raises(InterpreterError, match="still filling"):
        run(broken, 128, 128, 128)


@pytest.mark.parametrize("example", ["ladder/v4", "hgemm"])
def test_waiting_for_one_group_too_few_is_caught(example):
    """`wait_group S - 1` instead of `S - 2`: step kt's tiles may still be in flight."""
    kernel = compile_file(ROOT / "examples" / f"{example}.tile").kernels[0]
    stages = kernel.schedule.stages
    loop = next(s for s in kernel.body if isinstance(s, For) and s.var == "kt")
    assert [s for s in loop.body if isinstance(s, AsyncWait)] == [AsyncWait(stages - 2)]
    body = tuple(
        dataclasses.replace(
            s,
            body=tuple(AsyncWait(stages - 1) if isinstance(x, AsyncWait) else x for x in s.body),
        )
        if s is loop
        else s
        for s in kernel.body
    )
    broken = dataclasses.replace(kernel, body=body)
    bm, bn, bk = kernel.schedule.block
    with pytest.raises(InterpreterError, match="still filling"):
        run(broken, bm, bn, bk * (stages + 1))
