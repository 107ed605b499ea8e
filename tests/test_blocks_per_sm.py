"""`blocks_per_sm N`: registers capped so that N blocks share a multiprocessor.

Checked here: the directive's errors (exact line, column and message: out of range, more
threads or shared memory than a multiprocessor holds, a persistent or warp-specialized
kernel, MUSA); the emitted `__launch_bounds__(THREADS, BLOCKS_PER_SM)` with its comment,
and nothing new where the directive is not written (every golden source stays as it was);
`tiledsl check`'s occupancy (the cap, and every K team's warps counted); a space over it;
and, where nvcc is present, ptxas's registers within the cap.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT, check_error, cli, line_of

from tiledsl.driver import compile_source
from tiledsl.ir.targets import DEFAULT_TARGET, TARGETS
from tiledsl.models.registers import register_cap

DIRECT = """kernel d {
    A: f16[M, K] row
    B: f16[K, N] col
    C: f16[M, N] row
    C[m, n] = A[m, k] * B[k, n]
    swap_operands
    block   16 x 8 x 128
    mma     m16n8k16
    stages  0
    warps_k 8
    blocks_per_sm 4
    swizzle none
}
"""


# ---------------------------------------------------------------- errors


def test_out_of_range(tmp_path, capsys) -> None:
    text = DIRECT.replace("blocks_per_sm 4", "blocks_per_sm 33")
    assert check_error(text, tmp_path, capsys) == (
        line_of(text, "blocks_per_sm"),
        19,
        "'blocks_per_sm' takes integers ≤ 32, found 33",
    )
    text = DIRECT.replace("blocks_per_sm 4", "blocks_per_sm 0")
    assert check_error(text, tmp_path, capsys)[2] == "'blocks_per_sm' takes integers ≥ 1, found 0"


def test_more_threads_than_a_multiprocessor_holds(tmp_path, capsys) -> None:
    text = DIRECT.replace("blocks_per_sm 4", "blocks_per_sm 16")  # 16 x 256 threads
    assert check_error(text, tmp_path, capsys) == (
        line_of(text, "blocks_per_sm"),
        5,
        "blocks_per_sm 16: 16 blocks of 256 threads need 4096; a cuda sm_90 multiprocessor "
        "has 2048",
    )


STAGED = """kernel k {
    A: f16[M, K] row
    B: f16[K, N] row
    C: f16[M, N] row
    C[m, n] = A[m, k] * B[k, n]
    block   BLOCK
    mma     m16n8k16
    coarsen COARSEN
    stages  4
    blocks_per_sm 4
}
"""


def test_more_shared_memory_than_a_multiprocessor_holds(tmp_path, capsys) -> None:
    # one warp of 64 x 64, 4 stages of 64 x 64 tiles of A and B: over 64 KiB a block
    text = STAGED.replace("BLOCK", "64 x 64 x 64").replace("COARSEN", "4 x 8")
    line, col, message = check_error(text, tmp_path, capsys)
    assert (line, col) == (line_of(text, "blocks_per_sm"), 5)
    assert re.fullmatch(
        r"blocks_per_sm 4: 4 blocks of \d+ bytes of shared memory need \d+; a cuda sm_90 "
        r"multiprocessor has 233472",
        message,
    ), message


def test_a_cap_below_the_fragments(tmp_path, capsys) -> None:
    # 16 warps of 2 x 4 fragments: 44 registers each for fragments, 32 under the cap
    text = STAGED.replace("BLOCK", "128 x 128 x 32").replace("COARSEN", "2 x 4")
    assert check_error(text, tmp_path, capsys) == (
        line_of(text, "blocks_per_sm"),
        5,
        "2 x 4 fragments per warp need at least 44 registers per thread for fragments "
        "alone; cuda sm_90 allows 32 at 512 threads per block and 4 blocks per "
        "multiprocessor",
    )


def test_not_with_a_persistent_kernel(tmp_path, capsys) -> None:
    text = (ROOT / "examples" / "hopper" / "epilogue.tile").read_text()
    text = text.replace("    persistent\n", "    persistent\n    blocks_per_sm 2\n")
    line, col, message = check_error(text, tmp_path, capsys)
    assert (line, col) == (line_of(text, "blocks_per_sm"), 5)
    assert message.startswith(
        "blocks_per_sm 2 with warp_specialize: a persistent kernel runs one block per "
        "multiprocessor"
    )


def test_not_built_for_musa(tmp_path, capsys) -> None:
    text = (ROOT / "examples" / "s4000.tile").read_text()
    text = text.replace(
        "    target     musa mp_22", "    blocks_per_sm 2\n    target     musa mp_22"
    )
    line, col, message = check_error(text, tmp_path, capsys)
    assert (line, col) == (line_of(text, "blocks_per_sm"), 5)
    assert message.startswith("blocks_per_sm 2 on musa mp_22: not built for MUSA")


# ---------------------------------------------------------------- the source


def test_emitted_launch_bounds() -> None:
    source = compile_source(DIRECT, "d.tile").source
    assert "void __launch_bounds__(d_schedule::THREADS, d_schedule::BLOCKS_PER_SM)" in source
    assert "constexpr int BLOCKS_PER_SM = 4;" in source
    assert (
        "// blocks_per_sm 4 (line 11): ptxas caps each thread at 64 registers so that 4 "
        "blocks of THREADS threads fit a multiprocessor's 65536 at once" in source
    )
    # not written: the floor of one block, and no constant (the goldens hold the rest)
    plain = compile_source(DIRECT.replace("    blocks_per_sm 4\n", ""), "d.tile").source
    assert "void __launch_bounds__(d_schedule::THREADS, 1)" in plain
    assert "BLOCKS_PER_SM" not in plain


def test_register_cap() -> None:
    h200 = TARGETS[DEFAULT_TARGET]
    assert register_cap(h200, 256, 4) == 64
    assert register_cap(h200, 256, 3) == 80  # 85, in whole units of 8
    assert register_cap(h200, 128, 1) == 255 // 8 * 8


def test_check_reports_the_cap_and_every_teams_warps(tmp_path, capsys) -> None:
    path = tmp_path / "d.tile"
    path.write_text(DIRECT)
    r = cli(["check", str(path), "--size", "1x4096x11008"], capsys)
    assert r.code == 0, r.err
    assert "blocks_per_sm 4: ptxas caps registers at 64 per thread" in r.out
    assert "coarsen 1x1  stages 0  warps_k 8  blocks_per_sm 4  pad auto" in r.out
    blocks = re.search(r"=> (\d+) blocks per multiprocessor, (\d+) of 64 warps", r.out)
    assert blocks, r.out
    assert int(blocks[2]) == 8 * int(blocks[1])  # 8 K teams of one warp, every block


def test_in_a_space() -> None:
    from tiledsl.frontend.parser import parse
    from tiledsl.tune.space import expand

    text = DIRECT.replace("blocks_per_sm 4", "blocks_per_sm {1, 2, 4}")
    points = expand(parse(text, "d.tile"))
    assert [p.label for p in points] == ["blocks_per_sm 1", "blocks_per_sm 2", "blocks_per_sm 4"]
    asked = [compile_source(p.text, "p.tile").kernels[0].schedule.blocks_per_sm for p in points]
    assert asked == [1, 2, 4]


def _ptxas(text: str, tmp_path: Path) -> tuple[int, str]:
    """(registers per thread, ptxas's report) of the kernel of `text`."""
    cu = tmp_path / "d.cu"
    cu.write_text(compile_source(text, "d.tile").source)
    nvcc = ["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v", "-c", str(cu)]
    out = subprocess.run(
        [*nvcc, "-o", str(tmp_path / "d.o")], check=True, capture_output=True, text=True
    ).stderr
    return int(re.search(r"Used (\d+) registers", out)[1]), out


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc")
def test_ptxas_keeps_within_the_cap(tmp_path) -> None:
    """Without the directive ptxas gives this kernel more than 64 registers (96 with nvcc
    13.0); with `blocks_per_sm 4` it keeps within 64 and spills nothing."""
    uncapped, _ = _ptxas(DIRECT.replace("    blocks_per_sm 4\n", ""), tmp_path)
    if uncapped <= 64:
        pytest.skip(f"this nvcc gives the kernel {uncapped} registers uncapped: nothing to cap")
    registers, report = _ptxas(DIRECT, tmp_path)
    assert registers <= 64, report
    assert "0 bytes spill stores" in report
