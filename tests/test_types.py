"""Element types: f16 and bf16 inputs; f16, bf16 or f32 output; f32 or f16 accumulation.

Each combination runs in the numpy interpreter against the exact oracle (integer
inputs, exact in every type; under f16 accumulation at most 500 columns of K are
non-zero so that partial sums stay exact) and the statistical one, at a multiple
of the block tile and at an odd size (the guarded twin); all of them compile with
nvcc. bf16 is stored as its bit patterns (tiledsl.ir.dtypes) and rounded to nearest
even, as `__float2bfloat16` does.
"""

from __future__ import annotations

import itertools
import shutil

import numpy as np
import pytest

from tiledsl.commands.run import run_cpu
from tiledsl.driver import compile_source
from tiledsl.errors import TileError
from tiledsl.ir.dtypes import decode, encode

TEMPLATE = """kernel {name} {{
    A: {t_in}[M, K] row
    B: {t_in}[K, N] col
    C: {t_out}[M, N] {c_layout}
    C[m, n] {op} A[m, k] * B[k, n]
    block 64 x 64 x 32
    coarsen 2 x 2
    stages 2
    pad auto
    accumulate {acc}
}}
"""

COMBOS = [
    (t_in, t_out, acc, op)
    for t_in, t_out, acc, op in itertools.product(
        ["f16", "bf16"], ["f16", "bf16", "f32"], ["f32", "f16"], ["=", "+="]
    )
    if not (t_in == "bf16" and acc == "f16")  # WMMA has no bf16 product into f16
]


def kernel_text(t_in, t_out, acc, op, name="k", c_layout="row") -> str:
    return TEMPLATE.format(name=name, t_in=t_in, t_out=t_out, acc=acc, op=op, c_layout=c_layout)


@pytest.mark.parametrize(("t_in", "t_out", "acc", "op"), COMBOS, ids="-".join)
def test_every_type_combination_is_exact(t_in, t_out, acc, op) -> None:
    kernel = compile_source(kernel_text(t_in, t_out, acc, op), "types.tile").kernels[0]
    assert kernel.fragment("acc").dtype == acc
    for size in ((128, 64, 96), (70, 33, 41)):
        report = run_cpu(kernel, size, seed=17)
        assert report.ok, report.render()


def test_f16_accumulation_is_exact_at_a_long_k() -> None:
    """K = 1536: without the oracle's sparse K the f16 partial sums would round."""
    kernel = compile_source(kernel_text("f16", "f16", "f16", "="), "t.tile").kernels[0]
    report = run_cpu(kernel, (64, 64, 1536), seed=3)
    assert report.ok, report.render()


def test_direct_store_when_the_accumulator_is_cs_type() -> None:
    f16 = compile_source(kernel_text("f16", "f16", "f16", "="), "t.tile").kernels[0]
    assert f16.schedule.epilogue_via == "direct"
    bf16 = compile_source(kernel_text("bf16", "bf16", "f32", "="), "t.tile").kernels[0]
    assert bf16.schedule.epilogue_via == "shared"
    assert bf16.buffer("Cs").dtype == "f32"


def test_bf16_source_converts_with_the_bf16_intrinsics() -> None:
    source = compile_source(kernel_text("bf16", "bf16", "f32", "+="), "t.tile").source
    assert "#include <cuda_bf16.h>" in source
    assert "wmma::fragment<wmma::matrix_a, MMA_M, MMA_N, MMA_K, __nv_bfloat16" in source
    assert "__float2bfloat16(" in source and "__bfloat162float(" in source


def test_bf16_rounding_is_to_nearest_even() -> None:
    x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5, 3.0e38, np.nan], np.float32)
    bits = encode(x, "bf16")
    assert bits.dtype == np.uint16
    back = decode(bits, "bf16")
    assert list(back[:4]) == [1.0, 1.0, 1 + 2**-6, -2.5]
    assert np.isnan(back[5])


def test_bf16_with_f16_accumulation_is_a_located_error() -> None:
    with pytest.raises(TileError) as info:
        compile_source(kernel_text("bf16", "f32", "f16", "="), "bad.tile")
    diags = [(d.loc.line, d.loc.col, d.message) for d in info.value.diagnostics]
    assert diags == [
        (10, 5, "bf16 inputs accumulate in f32 only (WMMA has no bf16 x bf16 -> f16 product)")
    ]


def test_mixed_input_types_are_a_located_error() -> None:
    text = kernel_text("f16", "f32", "f32", "=").replace("B: f16", "B: bf16")
    with pytest.raises(TileError) as info:
        compile_source(text, "bad.tile")
    assert [(d.loc.line, d.loc.col) for d in info.value.diagnostics] == [(3, 5)]
    assert "A and B must have one element type" in info.value.diagnostics[0].message


def test_musa_refuses_f16_accumulation_and_bf16() -> None:
    text = kernel_text("f16", "f16", "f16", "=").replace(
        "    accumulate f16\n", "    accumulate f16\n    copy sync 8\n    target musa mp_22\n"
    )
    text = text.replace("block 64 x 64 x 32", "block 128 x 128 x 32").replace(
        "stages 2", "stages 1"
    )
    with pytest.raises(TileError) as info:
        compile_source(text, "m.tile")
    messages = [d.message for d in info.value.diagnostics]
    assert any("accumulate f16 on musa mp_22 is not built yet" in m for m in messages), messages
    bf = text.replace("f16[M, K]", "bf16[M, K]").replace("f16[K, N]", "bf16[K, N]")
    with pytest.raises(TileError) as info:
        compile_source(bf.replace("accumulate f16", "accumulate f32"), "m.tile")
    assert any(
        "musa mp_22 tensor cores take no bf16 inputs" in d.message for d in info.value.diagnostics
    )


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_every_type_combination_compiles_without_spills() -> None:
    from tiledsl.gpu.toolchain import compile_cubin

    text = "".join(
        kernel_text(*combo, name=f"k{i}", c_layout=("row", "col")[i % 2])
        for i, combo in enumerate(COMBOS)
    )
    compiled = compile_source(text, "types.tile")
    reports = compile_cubin(compiled.source, "sm_90", "types")
    assert len(reports) == 2 * len(COMBOS)  # each kernel and its guarded twin
    for report in reports.values():
        assert not report.spills, str(report)
