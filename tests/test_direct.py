"""The direct path (`mma m16n8k16` with `stages 0`) and `warps_k W` (the k-teams pass).

Checked here: the directives' errors (exact line, column and message); the k-teams pass's
IR (the K loop in rounds, each team's sum in its slot of Ks, the barrier, the adds in team
order, the store by team 0); the interpreter, bit-exact at odd shapes (every size runs the
kernel itself: its loads are guarded) and with K teams, whose slots the race check holds
to the barrier (removing it is caught); the emitted code (each vector loaded once for two
k16 steps, a K step inside K without the element-by-element fallback) and, where nvcc is
present, its PTX (one 16-byte load per vector). The GPU checks are in tests/test_gpu.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from helpers import ROOT, check_error, cli, interpret_exact, line_of, without

from tiledsl.driver import compile_file, compile_source
from tiledsl.interp.errors import RaceError
from tiledsl.ir.expr import Var
from tiledsl.ir.nodes import Barrier, LoadFrag, StoreFrag, walk
from tiledsl.ir.partial_tiles import guards_fragments, runs_every_size
from tiledsl.ir.printer import print_ir

EXAMPLE = ROOT / "examples" / "direct" / "few_tokens_direct.tile"

DIRECT = """kernel d {
    A: f16[M, K] row
    B: f16[K, N] col
    C: f16[M, N] row
    C[m, n] = A[m, k] * B[k, n]
    swap_operands
    block   32 x 16 x 64
    mma     m16n8k16
    coarsen 1 x 2
    stages  0
    warps_k 4
    swizzle none
}
"""


def kernels():
    return {k.name: k for k in compile_file(EXAMPLE).kernels}


# ---------------------------------------------------------------- errors


def test_the_direct_path_needs_k_contiguous_operands(tmp_path, capsys) -> None:
    text = DIRECT.replace("B: f16[K, N] col", "B: f16[K, N] row")
    line = line_of(text, "stages  0")
    assert check_error(text, tmp_path, capsys) == (
        line,
        5,
        "mma.sync with stages 0 loads each lane's fragments from global memory as 16-byte "
        "vectors along K, which needs K-contiguous operands: K is not the contiguous "
        "dimension of B",
    )


def test_the_direct_path_needs_bk_a_multiple_of_32(tmp_path, capsys) -> None:
    text = DIRECT.replace("block   32 x 16 x 64", "block   32 x 16 x 48")
    assert check_error(text, tmp_path, capsys) == (
        line_of(text, "block"),
        5,
        "BK = 48: on the direct path (mma.sync, stages 0) a lane's 16-byte vector holds two "
        "k16 steps, so BK must be a multiple of 32",
    )


def test_the_direct_path_stores_c_from_registers(tmp_path, capsys) -> None:
    text = DIRECT.replace("    swizzle none", "    swizzle none\n    epilogue_via shared")
    assert check_error(text, tmp_path, capsys) == (
        line_of(text, "epilogue_via"),
        5,
        "epilogue_via shared: the direct path (mma.sync, stages 0) has no shared-memory "
        "tiles; it stores C from the registers",
    )
    text = DIRECT.replace("C[m, n] = A", "C[m, n] += A")
    assert check_error(text, tmp_path, capsys) == (
        line_of(text, "stages  0"),
        5,
        "`C +=` on the direct path (mma.sync, stages 0) is not built yet: its warps start "
        "from zero",
    )


def test_warps_k_needs_the_direct_path(tmp_path, capsys) -> None:
    text = DIRECT.replace("stages  0", "stages  2")
    assert check_error(text, tmp_path, capsys) == (
        line_of(text, "warps_k"),
        5,
        "warps_k 4 gives each team of warps K steps of its own, its fragments loaded "
        "straight from global memory: it needs the direct path (`mma m16n8k16` or `mma "
        "fma` with `stages 0`)",
    )


def test_warps_k_limits(tmp_path, capsys) -> None:
    text = DIRECT.replace("warps_k 4", "warps_k 17")
    line, col, message = check_error(text, tmp_path, capsys)
    assert (line, col) == (line_of(text, "warps_k"), 13)
    assert message == "'warps_k' takes integers ≤ 16, found 17"
    # 4 warps (64 rows) x 16 teams = 2048 threads
    text = DIRECT.replace("warps_k 4", "warps_k 16").replace("32 x 16 x 64", "64 x 16 x 64")
    line, col, message = check_error(text, tmp_path, capsys)
    assert (line, col) == (line_of(text, "warps_k"), 5)
    assert message.startswith("4 x 1 warps x 16 K teams of 32 threads = 2048 threads per block")


def test_warps_k_in_a_space(tmp_path) -> None:
    from tiledsl.frontend.parser import parse
    from tiledsl.tune.space import expand

    text = DIRECT.replace("warps_k 4", "warps_k {1, 4, 8}")
    points = expand(parse(text, "d.tile"))
    assert [p.label for p in points] == ["warps_k 1", "warps_k 4", "warps_k 8"]
    teams = [compile_source(p.text, "p.tile").kernels[0].k_teams for p in points]
    assert teams == [1, 4, 8]


# ---------------------------------------------------------------- the IR


def test_k_teams_ir() -> None:
    k = kernels()["few_tokens_direct_16"]
    assert k.k_teams == 8 and k.threads == 8 * 32 and "k-teams" in k.passes
    text = print_ir(k)
    assert "for kr in [0, ((K + BK - 1) / BK + WARPS_K - 1) / WARPS_K)" in text
    assert "(kr * WARPS_K + kteam) * BK" in text
    stores = [s for s in walk(k.body) if isinstance(s, StoreFrag)]
    assert [s.dst.buffer for s in stores[:1]] == ["Ks"]  # each team's sum, in its slot
    assert stores[-1].by_team0 and stores[-1].guard  # C: team 0, guarded
    adds = [s for s in walk(k.body) if isinstance(s, LoadFrag) and s.add]
    assert len(adds) == 1 and adds[0].src.buffer == "Ks"
    barriers = [s for s in walk(k.body) if isinstance(s, Barrier)]
    assert [b.scope for b in barriers] == ["block"]  # kept by sync minimal: it orders Ks
    # every size runs the kernel itself: no guarded twin
    assert guards_fragments(k) and runs_every_size(k) and k.edge is None


@pytest.mark.parametrize(
    "size", [(1, 64, 256), (13, 45, 333), (1, 1, 1), (16, 48, 1024), (19, 17, 37), (3, 100, 97)]
)
def test_interpreter_exact_at_odd_shapes(size) -> None:
    for k in kernels().values():
        check, _ = interpret_exact(k, *size)
        assert check.ok, (k.name, size, check)


def test_removing_the_teams_barrier_is_a_race() -> None:
    k = kernels()["few_tokens_direct"]
    barrier = next(s for s in walk(k.body) if isinstance(s, Barrier))
    with pytest.raises(RaceError):
        interpret_exact(without(k, barrier), 1, 32, 512)


def test_the_teams_add_in_team_order() -> None:
    """Every team adds the slots 0, 1, ... W - 1 into a zeroed accumulator, so the bits do
    not depend on which team ran first; team 0 alone stores them."""
    k = compile_source(DIRECT, "d.tile").kernels[0]
    text = print_ir(k)
    tail = text[text.index("barrier.block") :]
    assert "fill acc[i][j] = 0" in tail
    assert "for kt_sum in [0, WARPS_K) unroll  # in team order" in tail
    assert "load_frag acc[i][j] += Ks[kt_sum]" in tail
    assert "K team 0" in tail


# ---------------------------------------------------------------- warps_k W runs R

RUNS = DIRECT.replace("warps_k 4", "warps_k 4 runs 2")


def test_runs_must_divide_the_teams(tmp_path, capsys) -> None:
    text = DIRECT.replace("warps_k 4", "warps_k 4 runs 3")
    assert check_error(text, tmp_path, capsys) == (
        line_of(text, "warps_k"),
        20,
        "warps_k 4 runs 3: the runs share the 4 K teams equally, so 3 must divide 4",
    )


@pytest.mark.parametrize("teams, runs", [(4, 2), (8, 2), (8, 4), (16, 4), (2, 2)])
@pytest.mark.parametrize("steps", [1, 2, 3, 7, 8, 9, 31, 86])
def test_runs_cover_every_step_once(teams, runs, steps) -> None:
    """Over every team and round, the steps [0, steps) come once each; the rest lie past
    the last step (where the guarded loads read zeros)."""
    from tiledsl.ir.expr import evaluate
    from tiledsl.passes.k_teams import _runs

    group = teams // runs
    first, rounds = _runs(Var("steps"), teams, runs)
    seen: list[int] = []
    for kteam in range(teams):
        env = {"steps": steps, "kteam": kteam}
        start = evaluate(first, env)
        seen += [start + kr * group + kteam % group for kr in range(evaluate(rounds, env))]
    inside = sorted(step for step in seen if step < steps)
    assert inside == list(range(steps)), (teams, runs, steps)


def test_runs_ir_and_source() -> None:
    compiled = compile_source(RUNS, "d.tile")
    (k,) = compiled.kernels
    assert k.schedule.k_runs == 2 and k.k_teams == 4
    text = print_ir(k)
    assert "let k_run = kteam / RUN_TEAMS * " in text
    assert "(k_run + kr * RUN_TEAMS + kteam % RUN_TEAMS) * BK" in text
    source = compiled.source
    assert "constexpr int WARPS_K = 4, K_RUNS = 2, RUN_TEAMS = 2;" in source
    assert "const int k_run = kteam / RUN_TEAMS * " in source
    assert "// warps_k 4 runs 2 (line 11): 4 K teams of the block's warps, in 2 runs" in source


@pytest.mark.parametrize("size", [(1, 64, 256), (13, 45, 333), (1, 1, 1), (3, 100, 1100)])
@pytest.mark.parametrize("runs", [2, 4])
def test_runs_interpreter_exact(size, runs) -> None:
    text = DIRECT.replace("warps_k 4", f"warps_k 4 runs {runs}")
    (k,) = compile_source(text, "d.tile").kernels
    check, _ = interpret_exact(k, *size)
    assert check.ok, (size, runs, check)


def test_runs_barrier_still_orders_the_teams_sums() -> None:
    (k,) = compile_source(RUNS, "d.tile").kernels
    barrier = next(s for s in walk(k.body) if isinstance(s, Barrier))
    with pytest.raises(RaceError):
        interpret_exact(without(k, barrier), 1, 32, 512)


def test_runs_in_a_space() -> None:
    from tiledsl.frontend.parser import parse
    from tiledsl.tune.space import expand

    text = DIRECT.replace("warps_k 4", "warps_k {4, 8} runs {1, 2}")
    labels = [p.label for p in expand(parse(text, "d.tile"))]
    assert labels == [
        "warps_k 4 runs 1",
        "warps_k 4 runs 2",
        "warps_k 8 runs 1",
        "warps_k 8 runs 2",
    ]


def test_check_names_the_runs(tmp_path, capsys) -> None:
    path = tmp_path / "d.tile"
    path.write_text(RUNS)
    r = cli(["check", str(path), "--size", "1x4096x11008"], capsys)
    assert r.code == 0, r.err
    assert "stages 0  warps_k 4 runs 2  pad auto" in r.out
    assert "4 K teams in 2 runs (warps_k 4 runs 2: 2 teams on each run of the K steps" in r.out


# ---------------------------------------------------------------- emitted code


def test_emitted_vectors_once_per_group_and_an_interior_step() -> None:
    source = compile_file(EXAMPLE).source
    assert "direct_vector_inside(" in source and "direct_vector(" in source
    # the interior step's loads, the ragged step's and the edge step's: a vector each per
    # line, two lines of A
    inside = re.findall(r"a_vec\[\w+\]\[0\]\[0\] = direct_vector_inside\(", source)
    edge = re.findall(r"a_vec\[\w+\]\[0\]\[0\] = direct_vector\(", source)
    kernels = len(compile_file(EXAMPLE).kernels)
    assert len(edge) == kernels  # once per kernel in the edge's version of its K step
    assert len(inside) == 2 * kernels  # and in the interior's and the ragged step's
    # the ragged step: each vector tested against K as well as its line, as a select
    ragged = re.findall(r"direct_vector_inside\([^;]*\+ 8 <= K\);", source)
    assert len(ragged) == 3 * kernels  # rows g and g + 8 of the weights, the lane's token
    assert source.count("// the last step of a ragged K of whole vectors, on 16 bytes") == kernels
    assert "if (((kk * MMA_K) / 16 % 2) == 0) {  // the group's first step loads" in source
    assert "if (kteam == 0) {  // K team 0; the others hold the same sum" in source
    assert "const int kteam = warp / (WARPS_M * WARPS_N);" in source
    assert "constexpr int WARPS_K = 8;" in source


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc")
def test_ptx_one_vector_load_per_line_and_group(tmp_path) -> None:
    """few_tokens_direct: BK = 128 is 4 groups of 32 columns; a group's vectors (2 rows of
    the weights, 1 of tokens) load once for its two k16 steps: 12 16-byte loads in each
    version of the step (inside K, the ragged last step's, and the edge's), 36 in all, not
    72."""
    k_source = compile_file(EXAMPLE).source
    cu = tmp_path / "d.cu"
    cu.write_text(k_source)
    ptx = tmp_path / "d.ptx"
    subprocess.run(
        ["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-ptx", str(cu), "-o", str(ptx)],
        check=True,
        capture_output=True,
    )
    text = ptx.read_text()
    first = text[
        text.index(".entry few_tokens_direct(") : text.index(".entry few_tokens_direct_16")
    ]
    assert first.count("ld.global.nc.v4") == 36


def test_check_reports_every_size(capsys) -> None:
    r = cli(["check", str(EXAMPLE), "--size", "1x4096x11008"], capsys)
    assert r.code == 0, r.err
    assert "every size runs few_tokens_direct: each lane's 16-byte vector" in r.out
    assert "coarsen 1x1  stages 0  warps_k 8  pad auto" in r.out  # the schedule line
    assert (
        "256 per block = 8 K teams (warps_k: team t on K steps t, t + 8, ...) of 1 warps" in r.out
    )
