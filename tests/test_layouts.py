"""Row- and column-major operands, and transposed access: every combination is exact.

The tiles of a column-major operand stay column-major in shared memory (copied along
its contiguous axis) and WMMA reads them as col_major fragments; C is stored (or staged)
in its own layout. `B[n, k]` on a row-major [N, K] is a column-major K x N.
"""

from __future__ import annotations

import itertools
import shutil

import pytest

from tiledsl.commands.run import run_cpu
from tiledsl.driver import compile_source
from tiledsl.gpu.toolchain import compile_cubin

TEMPLATE = """kernel lay {{
    A: f16[{a_dims}] {a_layout}
    B: f16[{b_dims}] {b_layout}
    C: {c_type}[M, N] {c_layout}
    C[m, n] {op} A[{a_index}] * B[{b_index}]
    block 64 x 64 x 32
    coarsen 2 x 2
    stages {stages}
    {pad}
    swizzle none
}}"""


def source(a_layout, b_layout, c_layout, a_t, b_t, c_type, stages):
    return TEMPLATE.format(
        a_dims="K, M" if a_t else "M, K",
        a_index="k, m" if a_t else "m, k",
        b_dims="N, K" if b_t else "K, N",
        b_index="n, k" if b_t else "k, n",
        a_layout=a_layout,
        b_layout=b_layout,
        c_layout=c_layout,
        c_type=c_type,
        op="+=" if c_type == "f16" else "=",
        stages=stages,
        pad="pad auto" if stages else "",
    )


CASES = list(
    itertools.product(["row", "col"], ["row", "col"], ["row", "col"], [False, True], [False, True])
)


@pytest.mark.parametrize(("a_layout", "b_layout", "c_layout", "a_t", "b_t"), CASES)
def test_every_layout_is_exact_in_the_interpreter(a_layout, b_layout, c_layout, a_t, b_t):
    for c_type, stages in (("f32", 3), ("f16", 1)):
        text = source(a_layout, b_layout, c_layout, a_t, b_t, c_type, stages)
        kernel = compile_source(text, "lay.tile").kernels[0]
        report = run_cpu(kernel, (128, 192, 96), seed=11)
        assert report.ok, report.render()


def test_nt_gemm_reads_b_as_column_major():
    text = source("row", "row", "row", False, True, "f32", 2)
    kernel = compile_source(text, "nt.tile").kernels[0]
    assert kernel.gemm.b.layout == "col"
    assert kernel.fragment("b").layout == "col"
    assert kernel.buffer("Bs").layout == "col"
    assert kernel.buffer("Bs").line_length == 32  # a column of the 32 x 64 tile: K long


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_column_major_kernels_compile_without_spills():
    text = source("col", "col", "col", False, False, "f16", 3)
    compiled = compile_source(text, "ccc.tile")
    assert "wmma::col_major" in compiled.source and "wmma::mem_col_major" in compiled.source
    reports = compile_cubin(compiled.source, "sm_90", "ccc")
    assert len(reports) == 2  # the kernel and its guarded twin
    for report in reports.values():
        assert not report.spills
