"""`swap_operands`: a kernel that computes C^T = B^T A^T over the caller's operands.

The directive rewrites the product once, in the front end (Gemm.swapped), and everything
after it builds the transpose; what faces the caller (the arguments in order, a size
M x N x K, the oracles, the baselines, the dispatch table) keeps the product as written
(Gemm.as_written). These tests check that both halves agree: every instruction path exact
at odd sizes in the interpreter, the source the same as the transposed product's own, the
API and the dispatch table calling a swapped kernel as the caller writes the product, and
the located refusals of what is not built.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
from helpers import ROOT, cli, interpret_exact

import tiledsl
from tiledsl.driver import compile_source
from tiledsl.errors import TileError
from tiledsl.frontend.formatter import format_program
from tiledsl.frontend.parser import parse
from tiledsl.ir.expr import Var

SWAPPED = ROOT / "examples" / "hopper" / "few_tokens_swapped.tile"

# A Hopper few-token kernel as the caller writes it (x: tokens x K, B = W^T: torch's Linear
# weight seen K x N, y: tokens x N), with the swap; DIRECTIVES is filled in per case.
CALLER = """kernel swapped {
    A: f16[M, K] row
    B: f16[K, N] col
    C: f16[M, N] row
    C[m, n] = A[m, k] * B[k, n]
    swap_operands
DIRECTIVES
}
"""

# The product the swap computes, written in the kernel's own terms: A is W (N x K rows), B
# is x^T (K x tokens, K-contiguous), C is y^T (column-major).
OWN_TERMS = """kernel swapped {
    A: f16[M, K] row
    B: f16[K, N] col
    C: f16[M, N] col
    C[m, n] = A[m, k] * B[k, n]
DIRECTIVES
}
"""

HOPPER = """    block   64 x 16 x 64
    mma     m64n16k16
    stages  4
    copy    tma
    warp_specialize
    persistent split_k 2
    swizzle grouped 8
    target  cuda sm_90"""


def _kernel(text: str):
    (kernel,) = compile_source(text, "swap.tile").kernels
    return kernel


def test_the_directive_round_trips() -> None:
    program = parse(CALLER.replace("DIRECTIVES", HOPPER), "swap.tile")
    text = format_program(program)
    assert parse(text, "swap.tile") == program
    lines = text.splitlines()
    assert lines[lines.index("    persistent split_k 2") + 1] == "    swap_operands"


def test_the_kernel_computes_the_transpose_and_the_caller_keeps_the_product() -> None:
    k = _kernel(CALLER.replace("DIRECTIVES", HOPPER))
    g = k.gemm
    assert (g.a.name, g.b.name, g.c.name) == ("B", "A", "C")
    assert (str(g.a), str(g.b), str(g.c)) == (
        "B: f16[N, K] row",
        "A: f16[K, M] col",
        "C: f16[N, M] col",
    )
    assert (g.m, g.n, g.k) == (Var("N"), Var("M"), Var("K"))
    written = g.as_written
    assert (str(written.a), str(written.b), str(written.c)) == (
        "A: f16[M, K] row",
        "B: f16[K, N] col",
        "C: f16[M, N] row",
    )
    assert g.oriented((1, 4096, 512)) == (4096, 1, 512)
    # the kernel's parameters in the file's order, whatever it computes
    source = compile_source(CALLER.replace("DIRECTIVES", HOPPER), "swap.tile").source
    signature = re.search(r"\nswapped\(([^)]*)\)", source).group(1)
    names = [p.split()[-1] for p in signature.split(", ")]
    assert names[2:5] == ["A", "B", "C"]
    assert names[names.index("M") : names.index("M") + 3] == ["M", "N", "K"]


def _without_comments(source: str, name: str) -> list[str]:
    """The code of `source` with comments, blank lines and the kernel's parameter list
    left out, its kernel named `name`."""
    code = re.sub(r"//[^\n]*", "", source).replace(name, "K")
    lines = [line.rstrip() for line in code.splitlines() if line.strip()]
    return [line for line in lines if not line.startswith("K(const")]


def test_the_swapped_source_is_the_transposed_products_own() -> None:
    """What the swap builds is what the same schedule builds for the transpose written in
    the kernel's own terms (the kernels measured on 2026-12-05 as few_tokens_swapped), but
    for names: the transpose's A is the caller's B (W), its B the caller's A, its M the
    caller's N."""
    swapped = compile_source(CALLER.replace("DIRECTIVES", HOPPER), "s.tile").source
    own = compile_source(OWN_TERMS.replace("DIRECTIVES", HOPPER), "o.tile").source
    names = {"A": "B", "B": "A", "As": "Bs", "Bs": "As", "M": "N", "N": "M"}
    names |= {"map_A": "map_B", "map_B": "map_A", "AS_": "BS_", "BS_": "AS_"}
    # whole names, and the prefixes of the tiles' constants (AS_PANEL)
    pattern = re.compile(r"\b(?:(AS_|BS_)|(map_A|map_B|As|Bs|A|B|M|N)\b)")
    renamed = pattern.sub(lambda m: names[m.group(0)], own)
    assert _without_comments(swapped, "swapped") == _without_comments(renamed, "swapped")


PATHS = {
    "wmma": (ROOT / "examples" / "hgemm.tile", "37x61x45"),
    "wmma, B read transposed": (ROOT / "examples" / "hgemm_nt.tile", "37x61x45"),
    "mma.sync": (ROOT / "examples" / "hgemm_mma.tile", "37x61x45"),
    "wgmma cp.async": (ROOT / "examples" / "tuned" / "wgmma_f32acc.tile", "37x61x45"),
    "hopper persistent": (ROOT / "examples" / "hopper" / "persistent.tile", "37x130x70"),
    "musa": (ROOT / "examples" / "s4000.tile", "37x61x45"),
    "few tokens, split-K": (SWAPPED, "13x200x336"),
    "one token": (SWAPPED, "1x128x200"),
}


@pytest.mark.parametrize("name", PATHS)
def test_every_path_swapped_is_exact_at_odd_sizes(name, tmp_path, capsys) -> None:
    path, size = PATHS[name]
    text = path.read_text()
    if "swap_operands" not in text:
        text = re.sub(r"\n(\s*)block\s", r"\n\1swap_operands\n\1block ", text, count=1)
    swapped = tmp_path / path.name
    swapped.write_text(text)
    r = cli(["run", str(swapped), "--size", size], capsys)
    assert r.code == 0, r.out + r.err
    assert "exact oracle         PASS  bit-exact" in r.out
    assert "race check           PASS" in r.out


def test_a_swapped_cluster_and_an_epilogue_are_exact() -> None:
    text = CALLER.replace(
        "DIRECTIVES",
        HOPPER.replace("persistent split_k 2", "persistent\n    cluster 1 x 2").replace(
            "swizzle", "epilogue alpha 2, beta -1, relu\n    swizzle"
        ),
    )
    k = _kernel(text)
    for size in ((16, 128, 192), (7, 130, 64), (33, 61, 37)):
        check, stats = interpret_exact(k, *size, seed=sum(size), schedules=2, blocks=4)
        assert check.ok, (size, check.detail)
        assert stats.cluster_barriers == stats.blocks


CP_ASYNC = """    block   64 x 64 x 64
    mma     m64n64k16
    stages  3
    copy    async 16
    target  cuda sm_90"""


def test_a_bias_runs_along_c_s_columns_as_written() -> None:
    """Under the swap a bias of one value per column of C (as written) runs along the
    kernel's rows: the register epilogue indexes it by row, guarded at C's edge."""
    text = CALLER.replace("DIRECTIVES", HOPPER + "\n    epilogue alpha 2, bias D, relu").replace(
        "    C[m, n] =", "    D: f16[N] row\n    C[m, n] =", 1
    )
    compiled = compile_source(text, "bias.tile")
    assert "x = __fadd_rn(x, gr < N ? __half2float(D[gr]) : 0.0f);  // bias D[n]" in (
        compiled.source
    )
    (k,) = compiled.kernels
    for size in ((16, 128, 192), (5, 130, 64), (33, 61, 37)):
        check, _ = interpret_exact(k, *size, seed=sum(size), schedules=2, blocks=4)
        assert check.ok, (size, check.detail)


ERRORS = {
    "a bias where C is staged": (
        CP_ASYNC + "\n    epilogue bias D",
        "    D: f32[N] row\n",
        (12, 5),
        "epilogue bias with swap_operands is built where the epilogue runs on the accumulators "
        "in registers (warp_specialize) only: the bias runs along the transposed product's "
        "rows, and C's staging copy knows each element's column",
    ),
    "a TMA store": (
        HOPPER + "\n    epilogue_via tma",
        "",
        (15, 5),
        "epilogue_via tma is built for a row-major C only, and swap_operands stores C "
        "transposed (the kernel's C^T is column-major where C is row-major)",
    ),
}


@pytest.mark.parametrize("case", ERRORS)
def test_what_is_not_built_with_the_swap_is_refused_where_asked(case) -> None:
    directives, extra, (line, col), message = ERRORS[case]
    text = CALLER.replace("DIRECTIVES", directives).replace(
        "    C[m, n] =", extra + "    C[m, n] =", 1
    )
    with pytest.raises(TileError) as info:
        compile_source(text, "swap.tile")
    found = [(d.loc.line, d.loc.col, d.message) for d in info.value.diagnostics]
    line += extra.count("\n")
    assert (line, col, message) in found, found


@pytest.mark.parametrize("kernel", ["batched", "batched_all"])
def test_a_batched_product_swapped_is_exact(kernel, tmp_path, capsys) -> None:
    """examples/batched.tile with the swap: a shared B, and every operand batched with a
    transposed A, a column-major C, `+=` and an epilogue; each matrix of a batch flipped."""
    text = (ROOT / "examples" / "batched.tile").read_text()
    text = re.sub(r"\n(\s*)block\s", r"\n\1swap_operands\n\1block ", text)
    path = tmp_path / "batched.tile"
    path.write_text(text)
    r = cli(["run", str(path), "--kernel", kernel, "--size", "37x61x45", "--batch", "3"], capsys)
    assert r.code == 0, r.out + r.err
    assert "exact oracle         PASS  bit-exact" in r.out


# Two kernels of one file, one swapped, with a dispatch table: few tokens take the swap.
TWO = """kernel swapped {
    A: f16[M, K] row
    B: f16[K, N] col
    C: f16[M, N] row
    C[m, n] = A[m, k] * B[k, n]
    swap_operands
    block 64 x 16 x 64
    mma m64n16k16
    stages 4
    copy tma
    warp_specialize
    persistent
    target cuda sm_90
}

kernel plain {
    A: f16[M, K] row
    B: f16[K, N] col
    C: f16[M, N] row
    C[m, n] = A[m, k] * B[k, n]
    block 64 x 64 x 64
    mma m64n64k16
    stages 4
    copy tma
    warp_specialize
    persistent
    target cuda sm_90
}
"""

TABLE = """{"tile": "two.tile", "entries": [
    {"size": [16, 4096, 4096], "kernel": "swapped"},
    {"size": [512, 4096, 4096], "kernel": "plain"}
]}
"""


# the calls run tiny shapes against a table tuned at 4096 x 4096: far, and said so
@pytest.mark.filterwarnings("ignore::tiledsl.TileWarning")
def test_a_file_mixing_swapped_and_plain_kernels_dispatches_as_written(tmp_path, capsys) -> None:
    path = tmp_path / "two.tile"
    path.write_text(TWO)
    path.with_suffix(".dispatch.json").write_text(TABLE)
    k = tiledsl.load(path)
    assert k.choose(8, 4096, 4096).kernel.name == "swapped"
    assert k.choose(256, 4096, 4096).kernel.name == "plain"
    rng = np.random.default_rng(5)
    for m in (3, 100):  # the interpreter on numpy arrays: the swap, then the plain kernel
        a = rng.integers(-2, 3, (m, 96)).astype(np.float16)
        b = np.asfortranarray(rng.integers(-2, 3, (96, 80)).astype(np.float16))
        y = k(a, b)
        assert y.shape == (m, 80)
        assert np.array_equal(y.astype(np.float32), a.astype(np.float32) @ b.astype(np.float32))
    r = cli(["check", str(path), "--size", "16x4096x4096"], capsys)
    assert r.code == 0, r.err
    assert "16x4096x4096 takes swapped: the dispatch table's pick" in r.out
    assert "swap_operands (C^T = B^T A^T)" in r.out
    # the swap's grid: 64 weight rows by 16 tokens a tile, 64 tiles at N = 4096
    assert "64 tiles on 132 blocks" in r.out


class FamilyTimer:
    """A fake GPU on which the swapped family wins a few tokens and the plain one more."""

    device = "Fake GPU"
    compiler = "fakec 1.0"

    def measure(self, points, size, jobs):
        from tiledsl.tune.record import Result

        for point in points:
            swapped = point.label.startswith("kernel swapped")
            ms = (1.0 if swapped else 2.0) if size[0] <= 16 else (2.0 if swapped else 1.0)
            yield point, Result("ok", ms, 2.0, "bit-exact", self.device)


def test_one_search_over_both_families_writes_one_file_and_table(tmp_path) -> None:
    """A space of a swapped and a plain kernel of one product is searched as one: its
    tuned file holds the winners of both, and one table sends each shape to its kernel."""
    import json

    from tiledsl.tune.dispatch import table_path
    from tiledsl.tune.suite import tune_suite

    text = TWO.replace(
        "stages 4\n    copy tma\n    warp_specialize\n    persistent\n",
        "stages {4, 6}\n    copy tma\n    warp_specialize\n    persistent\n",
        1,
    )
    space = tmp_path / "family.tile"
    space.write_text(text)
    out = tmp_path / "family.tuned.tile"
    sizes = [(1, 4096, 4096), (16, 4096, 4096), (512, 4096, 4096)]
    status = tune_suite(
        text,
        str(space),
        sizes,
        budget=None,
        kernel=None,
        record=tmp_path / "record.jsonl",
        output=out,
        jobs=1,
        timer_factory=FamilyTimer,
    )
    assert status == 0
    entries = json.loads(table_path(out).read_text())["entries"]
    assert [(e["size"][0], e["kernel"]) for e in entries] == [
        (1, "swapped_1"),
        (16, "swapped_1"),
        (512, "plain_2"),
    ]
    assert entries[0]["point"] == "kernel swapped, stages 4"
    k = tiledsl.load(out)  # one product as written: the file loads as one callable
    assert k.choose(1, 4096, 4096).kernel.name == "swapped_1"
    assert k.choose(512, 4096, 4096).kernel.name == "plain_2"
