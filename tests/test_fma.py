"""The fma path (`mma fma`: a warp a line of A by a line of B over 256 K elements, the CUDA
cores' fused multiply-adds, the warp's 32 partials added by shuffles when a sum leaves).

Checked here: its errors (exact line, column and message); the interpreter, bit-exact at
odd shapes for the example's kernels and for the directives the path shares with the
direct path (`split_k`, `warps_k`, `coarsen`), the K teams' barrier held by the race
check; the emitted code (each lane's vector of a line, the warp's total by lane 0, the
split's partial sums by lane 0 and added into lane 0's partial); and, where nvcc is
present, its PTX (one 16-byte load per line and fragment step). The GPU checks are in
tests/test_gpu.py (the direct path's sizes), the golden IR and source in
tests/test_golden.py.
"""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from helpers import ROOT, check_error, interpret_exact, line_of, without

from tiledsl.driver import compile_file, compile_source
from tiledsl.interp.errors import RaceError
from tiledsl.ir.nodes import Barrier, walk
from tiledsl.ir.partial_tiles import guards_fragments, runs_every_size

EXAMPLE = ROOT / "examples" / "direct" / "few_tokens_fma.tile"

FMA = """kernel f {
    A: f16[M, K] row
    B: f16[K, N] col
    C: f16[M, N] row
    C[m, n] = A[m, k] * B[k, n]
    swap_operands
    block   8 x 1 x 512
    mma     fma
    stages  0
    swizzle none
}
"""


def with_lines(*lines: str, block: str = "8 x 1 x 512") -> str:
    text = FMA.replace("8 x 1 x 512", block)
    added = "".join(f"    {x}\n" for x in lines)
    return text.replace("    swizzle none\n", added + "    swizzle none\n")


# ---------------------------------------------------------------- errors


def test_fma_has_no_stages(tmp_path, capsys) -> None:
    text = FMA.replace("stages  0", "stages  2")
    assert check_error(text, tmp_path, capsys) == (
        line_of(text, "stages"),
        5,
        "mma fma loads each lane's vectors straight from global memory (the direct path): "
        "it has no shared-memory stages to read (stages 2)",
    )


def test_fma_needs_k_contiguous_operands(tmp_path, capsys) -> None:
    text = FMA.replace("B: f16[K, N] col", "B: f16[K, N] row")
    assert check_error(text, tmp_path, capsys) == (
        line_of(text, "stages"),
        5,
        "mma fma with stages 0 loads each lane's fragments from global memory as 16-byte "
        "vectors along K, which needs K-contiguous operands: K is not the contiguous "
        "dimension of B",
    )


def test_fma_bk_is_whole_warp_steps(tmp_path, capsys) -> None:
    text = FMA.replace("8 x 1 x 512", "8 x 1 x 384")
    assert check_error(text, tmp_path, capsys) == (
        line_of(text, "block"),
        5,
        "BK = 384 is not divisible by mma.K = 256",
    )


def test_fma_epilogue_not_built(tmp_path, capsys) -> None:
    text = with_lines("epilogue relu")
    assert check_error(text, tmp_path, capsys) == (
        line_of(text, "epilogue"),
        5,
        "an epilogue on the direct path (mma fma, stages 0) is not built yet",
    )


def test_fma_pad_says_there_are_no_rows(tmp_path, capsys) -> None:
    """`pad xor` on the fma path: the direct path's refusal (no shared rows), not WMMA's."""
    text = with_lines("pad xor")
    assert check_error(text, tmp_path, capsys) == (
        line_of(text, "pad"),
        5,
        "pad changes shared-memory rows, and stages 0 has none",
    )


def test_musa_has_no_fma_path(tmp_path, capsys) -> None:
    text = FMA.replace("    swizzle none\n", "    swizzle none\n    target  musa mp_22\n")
    assert check_error(text, tmp_path, capsys) == (
        line_of(text, "mma"),
        5,
        "musa mp_22 has no fma path",
    )


def test_an_unknown_word_names_fma_in_its_fix(tmp_path, capsys) -> None:
    from helpers import cli

    path = tmp_path / "w.tile"
    path.write_text(FMA.replace("mma     fma", "mma     fmb"))
    r = cli(["check", str(path)], capsys)
    assert r.code == 1
    assert "'fmb' is not an instruction shape" in r.err
    assert "or `mma fma` (the CUDA cores)" in r.err


# ---------------------------------------------------------------- the interpreter

ODD = [(1, 1, 1), (3, 37, 517), (1, 300, 520), (5, 100, 999), (17, 9, 2100)]


@pytest.mark.parametrize("size", ODD)
def test_example_exact_at_odd_shapes(size) -> None:
    for k in compile_file(EXAMPLE).kernels:
        assert guards_fragments(k) and runs_every_size(k) and k.edge is None
        check, _ = interpret_exact(k, *size)
        assert check.ok, (k.name, size, check)


@pytest.mark.parametrize(
    "lines, block",
    [
        (("split_k 3",), "8 x 1 x 512"),
        (("warps_k 2",), "8 x 1 x 512"),
        (("warps_k 2", "split_k 2"), "8 x 1 x 512"),
        (("coarsen 2 x 1",), "16 x 1 x 512"),
        (("coarsen 1 x 2",), "8 x 2 x 512"),
    ],
)
@pytest.mark.parametrize("size", [(3, 37, 517), (2, 20, 1300)])
def test_shared_directives_exact(lines, block, size) -> None:
    (k,) = compile_source(with_lines(*lines, block=block), "f.tile").kernels
    check, _ = interpret_exact(k, *size)
    assert check.ok, (lines, size, check)


def test_removing_the_teams_barrier_is_a_race() -> None:
    (k,) = compile_source(with_lines("warps_k 2"), "f.tile").kernels
    barrier = next(s for s in walk(k.body) if isinstance(s, Barrier))
    with pytest.raises(RaceError):
        interpret_exact(without(k, barrier), 1, 16, 1024)


# ---------------------------------------------------------------- the emitted code


def test_emitted_lines_totals_and_partials() -> None:
    source = compile_file(EXAMPLE).source
    # a vector of the line a step, in each version of the K step (inside K, the ragged last
    # step of whole vectors, and the edge's)
    inside = re.findall(r"(?:a|b)\[0\]\[0\] = direct_vector_inside\(", source)
    edge = re.findall(r"(?:a|b)\[0\]\[0\] = direct_vector\(", source)
    assert len(edge) == 4  # A and B, in each of the two kernels
    assert len(inside) == 8  # and again in the interior's and the ragged step's
    assert len(re.findall(r"direct_vector_inside\([^;]*\+ 8 <= K\);", source)) == 4
    assert "8 * lane" in source
    assert source.count("acc[0][0] = fma_dot8<false>(a[0][0], b[0][0], acc[0][0]);") == 6
    # what leaves the registers is the warp's total, moved by lane 0
    assert "const float total = warp_total(acc[0][0]);" in source
    assert "if (lane == 0 && bm * BM + wm < N && bn + wn < M) C[" in source
    assert "if (lane == 0) __stcg(&workspace[" in source
    assert "if (lane == 0) acc[i][j] += __ldcg(&workspace[" in source


def test_bf16_inputs_take_the_bf16_products() -> None:
    text = (
        FMA.replace("A: f16", "A: bf16").replace("B: f16", "B: bf16").replace("C: f16", "C: bf16")
    )
    source = compile_source(text, "f.tile").source
    assert "fma_dot8<true>(" in source


def test_teams_sums_leave_by_lane0_and_come_into_lane0() -> None:
    source = compile_source(with_lines("warps_k 2"), "f.tile").source
    assert "if (lane == 0) Ks[" in source
    assert "if (lane == 0) acc[0][0] += Ks[kt_sum][wm][wn];" in source


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="no nvcc")
def test_ptx_loads_a_vector_per_line_and_step(tmp_path) -> None:
    """few_tokens_fma: BK = 1024 is 4 fragment steps of 256; each loads one vector of the
    weight row and one of the token: 8 16-byte loads in each version of the K step (inside
    K, the ragged last step's, and the edge's), 24 in all. (That ptxas issues a step's 8
    loads before its fmas, in the ragged step too, was read from the SASS by hand,
    docs/performance.md; not tested here.)"""
    source = compile_file(EXAMPLE).source
    cu = tmp_path / "f.cu"
    cu.write_text(source)
    ptx = tmp_path / "f.ptx"
    subprocess.run(
        ["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-ptx", str(cu), "-o", str(ptx)],
        check=True,
        capture_output=True,
    )
    text = ptx.read_text()
    first = text[text.index(".entry few_tokens_fma(") : text.index(".entry few_tokens_fma_split")]
    assert first.count("ld.global.nc.v4") == 24
