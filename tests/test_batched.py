"""Batched GEMM: a leading batch dimension (`A: f16[L, M, K]`), mapped onto the grid's y.

Each block of grid row `bz` computes its tile of product `bz`: batched operands are
offset by whole matrices; a 2-D operand is the same for every product. Checked in
the interpreter with the exact oracle (a batched reference: numpy's matmul over the
leading axis), at multiples of the tile and at odd sizes (the guarded twin).
"""

from __future__ import annotations

import json

import pytest
from helpers import ROOT, cli

from tiledsl.commands.run import SizeError, run_cpu
from tiledsl.driver import compile_file, compile_source
from tiledsl.errors import TileError

BATCHED = ROOT / "examples" / "batched.tile"

TEMPLATE = """kernel bat {{
    A: f16[{a}] {a_layout}
    B: f16[{b}] row
    C: {c_type}[L, M, N] {c_layout}
    C[l, m, n] {op} A[{a_index}] * B[{b_index}]
    block 64 x 64 x 32
    coarsen 2 x 2
    stages 2
}}
"""


def text(a_batched=True, b_batched=True, a_t=False, c_layout="row", op="=", c_type="f32"):
    a_dims = "K, M" if a_t else "M, K"
    a_idx = "k, m" if a_t else "m, k"
    return TEMPLATE.format(
        a=("L, " if a_batched else "") + a_dims,
        a_index=("l, " if a_batched else "") + a_idx,
        b=("L, " if b_batched else "") + "K, N",
        b_index=("l, " if b_batched else "") + "k, n",
        a_layout="row",
        c_layout=c_layout,
        op=op,
        c_type=c_type,
    )


@pytest.mark.parametrize(
    ("a_batched", "b_batched", "a_t", "c_layout", "op", "c_type"),
    [
        (True, True, False, "row", "=", "f32"),
        (True, False, False, "col", "+=", "f16"),
        (False, True, True, "row", "+=", "f32"),
        (True, True, True, "col", "=", "f16"),
    ],
)
def test_batched_products_are_exact(a_batched, b_batched, a_t, c_layout, op, c_type) -> None:
    kernel = compile_source(text(a_batched, b_batched, a_t, c_layout, op, c_type), "b.tile")
    kernel = kernel.kernels[0]
    assert kernel.gemm.batch is not None
    for size, batch in (((128, 64, 64), 3), ((45, 70, 33), 2)):
        report = run_cpu(kernel, size, seed=5, batch=batch)
        assert report.ok, report.render()
        assert report.batch == batch


def test_every_batch_is_written() -> None:
    """A grid without the batch axis computes product 0 only: the oracle sees C[1] unwritten."""
    from dataclasses import replace

    import numpy as np

    from tiledsl.interp.interpreter import interpret
    from tiledsl.interp.oracle import check_exact, from_storage, make_inputs, to_storage

    kernel = compile_file(BATCHED).kernels[0]
    g = kernel.gemm
    inputs = make_inputs(g, 128, 128, 64, "exact", np.random.default_rng(1), batch=2)
    arrays = {
        "A": to_storage(g.a, inputs.a),
        "B": to_storage(g.b, inputs.b),
        "C": to_storage(g.c, inputs.c_in).copy(),
    }
    sizes = {"M": 128, "N": 128, "K": 64, "L": 2}
    interpret(replace(kernel, gemm=replace(g, batch=None)), arrays, sizes)
    out = from_storage(g.c, arrays["C"], (2, 128, 128))
    check = check_exact(g, inputs, out, (128, 128))
    assert not check.ok and "first at C[1, 0, 0]" in check.detail
    arrays["C"] = to_storage(g.c, inputs.c_in).copy()
    interpret(kernel, arrays, sizes)
    assert check_exact(g, inputs, from_storage(g.c, arrays["C"], (2, 128, 128)), (128, 128)).ok


def test_launch_puts_the_batch_on_grid_y(tmp_path, capsys) -> None:
    out = tmp_path / "b.cu"
    assert cli(["compile", BATCHED, "-o", out], capsys).code == 0
    launches = json.loads((tmp_path / "b.cu.launch.json").read_text())
    assert launches[0]["grid"]["y"] == "L"
    assert [a[0] for a in launches[0]["args"]] == ["A", "B", "C", "M", "N", "K"]
    source = out.read_text().split("// ---- kernel batched_all:")[0]
    assert "const int bz = blockIdx.y;  // which product of the batch" in source
    assert "A[(long long)bz * M * K + " in source  # 64-bit from the first factor on
    assert "B[(long long)bz" not in source  # B is 2-D: one matrix for every product


def test_cli_runs_a_batch(capsys) -> None:
    r = cli(
        ["run", BATCHED, "--cpu", "--size", "128x128x64", "--batch", "3", "--seed", "2"], capsys
    )
    assert r.code == 0, r.out + r.err
    assert "batched: 3 products of 128 x 128 x 64 on the numpy interpreter" in r.out


def test_batch_on_an_unbatched_kernel_is_a_usage_error(capsys) -> None:
    r = cli(["run", ROOT / "examples" / "hgemm.tile", "--cpu", "--batch", "2"], capsys)
    assert r.code == 2 and "is not batched" in r.err
    kernel = compile_file(ROOT / "examples" / "hgemm.tile").kernels[0]
    with pytest.raises(SizeError):
        run_cpu(kernel, (128, 128, 64), batch=2)


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            text()
            .replace("C[l, m, n] =", "C[m, l, n] =")
            .replace("C: f32[L, M, N]", "C: f32[M, L, N]"),
            "'A' is indexed with 3 indices; operands are matrices [r, c], or batches of them "
            "[b, r, c] whose first index is C's first (the batch)",
        ),
        (
            text().replace("B: f16[L, K, N]", "B: f16[P, K, N]"),
            "the batch index runs over L in C and L in A and P in B: the shapes do not agree",
        ),
    ],
    ids=["batch-not-first", "batch-sizes-differ"],
)
def test_batch_errors_are_located(source, message) -> None:
    with pytest.raises(TileError) as info:
        compile_source(source, "bad.tile")
    assert message in [d.message for d in info.value.diagnostics]
