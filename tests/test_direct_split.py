"""`split_k S` on the direct path (tiledsl.passes.split_k): a block per slice of every
tile's K steps, the slice that draws its tile's last ticket adding the S partial sums in
slice order; with `warps_k W` (and `runs R`) the teams split each slice's steps and K
team 0 hands the block's sum over.

Checked here: the slices (whole rounds of the teams, every K step of a tile once, the steps
past K read as zeros); the IR and the emitted code; the interpreter, bit-exact at odd
shapes in several block orders (each slice draws the last ticket in some run) with every
partial sum read once; the fix-up's barrier removed is a race, and `sync minimal` keeps it;
the errors; a space's `split_k {1, 2}`; nvcc's compile; on a GPU, both oracles, the same
bits every launch and the tickets left at zero."""

from __future__ import annotations

import itertools
import shutil
import subprocess

import pytest
from helpers import ROOT, check_error, check_split_on_the_gpu, interpret_exact, without

from tiledsl.driver import compile_file, compile_source
from tiledsl.frontend.parser import parse
from tiledsl.gpu.runtime import gpu_available
from tiledsl.interp.errors import RaceError
from tiledsl.ir.expr import Const, evaluate
from tiledsl.ir.grid import padded_split_steps
from tiledsl.ir.nodes import Barrier, KernelIR, PartialAdd, PartialStore, Ticket, walk
from tiledsl.ir.printer import print_ir
from tiledsl.tune.space import expand

EXAMPLE = ROOT / "examples" / "direct" / "few_tokens_direct.tile"


def direct(split: int = 2, teams: int = 4, runs: int = 1, extra: str = "") -> str:
    k_teams = f"    warps_k {teams}" + (f" runs {runs}" if runs > 1 else "") if teams > 1 else ""
    return f"""kernel d {{
    A: f16[M, K] row
    B: f16[K, N] col
    C: f16[M, N] row
    C[m, n] = A[m, k] * B[k, n]
    swap_operands
    block   16 x 16 x 64
    mma     m16n8k16
    coarsen 1 x 2
    stages  0
{k_teams}
    split_k {split}
{extra}    swizzle none
}}
"""


_KERNELS: dict[tuple, KernelIR] = {}


def kernel(split: int = 2, teams: int = 4, runs: int = 1) -> KernelIR:
    key = (split, teams, runs)
    if key not in _KERNELS:
        _KERNELS[key] = compile_source(direct(split, teams, runs), "d.tile").kernels[0]
    return _KERNELS[key]


# ---------------------------------------------------------------- the slices


@pytest.mark.parametrize(
    "split, teams, steps", list(itertools.product((2, 3, 4), (1, 4, 8), (1, 5, 16, 87, 172)))
)
def test_the_slices_are_whole_rounds_covering_each_step_once(split, teams, steps) -> None:
    covered: list[int] = []
    for pid in range(2 * split):
        env = {"pid": pid}
        for name, e in padded_split_steps(Const(steps), split, teams).items():
            env[name] = evaluate(e, env)
        assert (env["tile"], env["slice"]) == divmod(pid, split)
        assert env["slice_steps"] % teams == 0  # each team's rounds end with the slice
        assert env["k_hi"] - env["k_lo"] == env["slice_steps"]
        if env["tile"] == 0:
            covered += range(env["k_lo"], env["k_hi"])
    # in slice order, no gap, no overlap; what lies past the last step reads zeros
    assert covered[:steps] == list(range(steps))
    assert covered == list(range(len(covered)))
    assert len(covered) - steps < split * teams


def test_the_ir_slices_the_k_loop_and_ends_in_the_ticketed_fix_up() -> None:
    text = print_ir(kernel(3, 4))
    for line in (
        "let slice_steps = ((k_steps + SPLIT_K - 1) / SPLIT_K + SLICE_MULTIPLE - 1) / "
        "SLICE_MULTIPLE * SLICE_MULTIPLE",
        "let k_lo = slice * slice_steps",
        "for kr in [0, (k_hi - k_lo + WARPS_K - 1) / WARPS_K)",
        "(k_lo + kr * WARPS_K + kteam) * BK",
        "partial.store workspace[pid] <- acc, K team 0",
        "barrier.block  # every thread's partial sum is written before the ticket",
        "ticket = ticket tickets[tile] of 3",
        "partial.add acc += workspace[tile * SPLIT_K + c], K team 0",
        "guarded, K team 0",
    ):
        assert line in text, line
    # the teams' sums meet before the partial store, which leaves from team 0
    order = [
        type(s).__name__
        for s in walk(kernel(3, 4).body)
        if isinstance(s, (Barrier, PartialStore, Ticket, PartialAdd))
    ]
    assert order == ["Barrier", "PartialStore", "Barrier", "Ticket", "PartialAdd"]


def test_without_teams_every_warp_hands_its_sum_over() -> None:
    k = kernel(2, 1)
    assert k.k_teams == 1
    partials = [s for s in walk(k.body) if isinstance(s, (PartialStore, PartialAdd))]
    assert partials and not any(s.by_team0 for s in partials)


def test_runs_start_at_the_slice() -> None:
    text = print_ir(kernel(2, 4, 2))
    assert "let k_run = k_lo + kteam / RUN_TEAMS * (" in text


# ---------------------------------------------------------------- exact


@pytest.mark.parametrize(
    "split, teams, runs, size",
    [
        (2, 4, 1, (16, 16, 64 * 8)),  # one tile, four rounds a slice
        (3, 4, 1, (17, 40, 1000)),  # partial tiles, a ragged K
        (2, 1, 1, (3, 33, 700)),  # no teams: every warp hands over
        (4, 8, 1, (5, 20, 100)),  # fewer K steps than slices x teams: empty slices
        (2, 4, 2, (9, 30, 999)),  # runs within each slice; K's rows not on 16 bytes
        (3, 8, 2, (1, 48, 2000)),
    ],
)
def test_split_k_is_exact_in_every_block_order(split, teams, runs, size) -> None:
    m, n, kk = size
    check, stats = interpret_exact(kernel(split, teams, runs), m, n, kk, seed=kk, schedules=4)
    assert check.ok, check.detail
    tiles = -(-n // 16) * -(-m // 16)  # swapped: the kernel's M is N
    assert stats.partial_sums == tiles * split  # every slice's partial sum, read once


def test_the_example_split_is_exact() -> None:
    (k,) = [k for k in compile_file(EXAMPLE).kernels if k.grid_split]
    check, _ = interpret_exact(k, 2, 50, 1500, schedules=3)
    assert check.ok, check.detail


def test_the_barrier_before_the_ticket_removed_is_a_race() -> None:
    k = kernel(2, 4)
    (fence,) = [s for s in walk(k.body) if isinstance(s, Barrier) and "ticket" in s.reason]
    with pytest.raises(RaceError, match="takes a ticket .* between the partial store"):
        interpret_exact(without(k, fence), 16, 16, 512, schedules=1)


def test_sync_minimal_keeps_the_barrier_before_the_ticket() -> None:
    text = direct(2, 4, extra="    sync minimal\n")
    k = compile_source(text, "d.tile").kernels[0]
    kept = [d for d in k.sync_report if d.kept and isinstance(d.barrier, Barrier)]
    assert any("partial sum" in d.why for d in kept), k.sync_report
    assert any(isinstance(s, Barrier) and "ticket" in s.reason for s in walk(k.body))


# ---------------------------------------------------------------- code, errors, spaces


def test_the_emitted_code() -> None:
    source = compile_source(direct(3, 4), "d.tile").source
    for line in (
        "constexpr int SPLIT_K = 3;",
        "constexpr int TEAM_THREADS = WARPS_M * WARPS_N * WARP_SIZE, PARTIAL_FLOATS = BM * BN;",
        "unsigned* ticket_box = reinterpret_cast<unsigned*>(smem + ",
        "if (threadIdx.x == 0) *ticket_box = take_ticket(&tickets[tile], SPLIT_K);",
        "const int ticket = *ticket_box;",
        "if (ticket + 1 == SPLIT_K) {",
        "__stcg(&partial[((i * 2 + j) * 1 + v) * TEAM_THREADS + threadIdx.x]",
        "for (int kr = 0; kr < (k_hi - k_lo + WARPS_K - 1) / WARPS_K; ++kr) {",
    ):
        assert line in source, line
    # no teams: no shared buffer but the ticket's word
    bare = compile_source(direct(2, 1), "d.tile")
    assert "extern __shared__" in bare.source and bare.kernels[0].smem_bytes > 0


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("teams, runs", [(1, 1), (4, 1), (4, 2)])
def test_nvcc_compiles_it(tmp_path, teams, runs) -> None:
    cu = tmp_path / "d.cu"
    cu.write_text(compile_source(direct(2, teams, runs), "d.tile").source)
    out = subprocess.run(
        ["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-c", str(cu), "-o", str(tmp_path / "o")],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr


def test_split_k_on_the_smem_path_is_refused(tmp_path, capsys) -> None:
    text = direct(2, 1).replace("stages  0", "stages  2")
    line, col, message = check_error(text, tmp_path, capsys)
    assert (line, col) == (12, 5)
    assert message == (
        "`split_k` builds Hopper's TMA and warpgroup pipeline, which feeds wgmma (or the "
        "direct path's loads, mma.sync with stages 0)"
    )


def test_split_k_on_a_batch_is_refused(tmp_path, capsys) -> None:
    text = (
        direct(2, 4)
        .replace("f16[M, K] row", "f16[L, M, K] row")
        .replace("f16[K, N] col", "f16[L, K, N] col")
        .replace("f16[M, N] row", "f16[L, M, N] row")
        .replace("C[m, n] = A[m, k] * B[k, n]", "C[l, m, n] = A[l, m, k] * B[l, k, n]")
    )
    line, col, message = check_error(text, tmp_path, capsys)
    assert (line, col) == (12, 5)
    assert message.startswith("split_k on a batched product is not built yet on the direct path")


def test_split_k_in_a_direct_space() -> None:
    text = direct(2, 4).replace("split_k 2", "split_k {1, 2, 4}")
    points = expand(parse(text, "d.tile"))
    assert [p.label for p in points] == ["split_k 1", "split_k 2", "split_k 4"]
    kernels = [compile_source(p.text, "p.tile").kernels[0] for p in points]
    assert [k.grid_split for k in kernels] == [0, 2, 4]


# ---------------------------------------------------------------- on the GPU


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
@pytest.mark.parametrize("size", [(1, 4096, 11008), (16, 1000, 4099), (3, 200, 100)])
@pytest.mark.parametrize("shape", [(2, 8, 1), (3, 4, 2), (4, 1, 1)])
def test_split_k_on_the_gpu_is_exact_the_same_every_launch_and_leaves_the_tickets_at_zero(
    size, shape
) -> None:
    check_split_on_the_gpu(compile_source(direct(*shape), "d.tile"), size)
