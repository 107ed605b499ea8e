"""Any M, N, K >= 1: edge tiles run the guarded twin, multiples of the tile the fast path.

Every check here goes through the numpy interpreter with the exact oracle and the
race detector (tiledsl.commands.run.run_cpu): a partial tile that is not zero-filled, a
store past the edge, or a C element left unwritten (C starts as NaN) fails it.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace

import pytest
from helpers import EXAMPLES, ROOT, cli
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiledsl.commands.run import run_cpu
from tiledsl.driver import compile_file, compile_source
from tiledsl.interp.interpreter import InterpreterError, interpret
from tiledsl.ir.nodes import Copy, map_body, walk
from tiledsl.lowering.edges import fits_block_tile, vector_fallbacks

HGEMM = ROOT / "examples" / "hgemm.tile"

# A small, fully optimized schedule: 32 x 32 x 16 blocks, 2 x 2 warps, a 3-stage
# cp.async pipeline, padding, a swizzle and sync elimination: every pass runs.
SMALL = """kernel small {{
    A: f16[{a_dims}] {a_layout}
    B: f16[{b_dims}] {b_layout}
    C: {c_type}[M, N] {c_layout}
    C[m, n] {op} A[{a_index}] * B[{b_index}]
    block 32 x 32 x 16
    mma 16 x 16 x 16
    stages {stages}
    copy {copy}
    pad auto
    swizzle grouped 2
    sync minimal
}}"""


def small(layouts=("row", "row", "row"), transposed=(False, False), c_type="f32", stages=3):
    a_t, b_t = transposed
    return compile_source(
        SMALL.format(
            a_dims="K, M" if a_t else "M, K",
            a_index="k, m" if a_t else "m, k",
            b_dims="N, K" if b_t else "K, N",
            b_index="n, k" if b_t else "k, n",
            a_layout=layouts[0],
            b_layout=layouts[1],
            c_layout=layouts[2],
            c_type=c_type,
            op="+=" if c_type == "f16" else "=",
            stages=stages,
            copy="async 16" if stages > 1 else "sync 16",
        ),
        "small.tile",
    ).kernels[0]


# The shapes the issue names: primes, 1, K < BK, K just under and over stages x BK.
NAMED = [
    (1, 1, 1),
    (127, 61, 37),
    (1, 64, 32),
    (33, 1, 17),
    (31, 33, 15),
    (47, 50, 47),
    (32, 32, 49),
]


@pytest.mark.parametrize("size", NAMED, ids=lambda s: "x".join(map(str, s)))
def test_named_shapes_are_exact(size) -> None:
    kernel = small()
    report = run_cpu(kernel, size, seed=3)
    assert report.ok, report.render()
    assert report.kernel == "small_edge"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    m=st.integers(1, 80),
    n=st.integers(1, 80),
    k=st.integers(1, 70),
    layouts=st.tuples(*[st.sampled_from(["row", "col"])] * 3),
    transposed=st.tuples(st.booleans(), st.booleans()),
    c_type=st.sampled_from(["f32", "f16"]),
    stages=st.sampled_from([1, 2, 3]),
)
def test_any_shape_any_layout_is_exact(m, n, k, layouts, transposed, c_type, stages) -> None:
    kernel = small(layouts, transposed, c_type, stages)
    report = run_cpu(kernel, (m, n, k), seed=m * 10007 + n * 101 + k)
    assert report.ok, report.render()


@pytest.mark.parametrize(
    "path",
    [p for p in EXAMPLES if p.stem != "v1"],
    ids=lambda p: p.relative_to(ROOT / "examples").as_posix(),
)
def test_every_example_with_shared_tiles_runs_odd_sizes(path) -> None:
    kernel = compile_file(path).kernels[0]
    bm, bn, bk = kernel.schedule.block
    # (at least 1 where a tile is a few lines wide: the fma path's is 1 column)
    report = run_cpu(kernel, (bm + 3, max(bn - 5, 1), 2 * bk + 9), seed=5)
    assert report.ok, report.render()


def test_multiples_of_the_tile_take_the_unguarded_fast_path() -> None:
    kernel = compile_file(HGEMM).kernels[0]
    assert fits_block_tile(kernel, {"M": 256, "N": 384, "K": 192})
    assert not fits_block_tile(kernel, {"M": 256, "N": 384, "K": 193})
    assert run_cpu(kernel, (256, 128, 128), seed=1).kernel == "hgemm"
    assert not any(isinstance(s, Copy) and s.guard for s in walk(kernel.body))
    twin = kernel.edge
    assert twin.name == "hgemm_edge" and twin.passes[-1] == "edges"
    guarded = [s for s in walk(twin.body) if isinstance(s, Copy)]
    assert guarded and all(s.guard for s in guarded)


def test_the_fast_kernels_source_has_no_guard_code() -> None:
    source_text = compile_file(HGEMM).source
    fast, twin = source_text.split("// The guarded twin of hgemm", 1)
    assert "guarded" not in fast and " gr < " not in fast
    steady = twin.split("// block steps along K", 1)[1]
    assert "gr < M && gc + 8 <= K" in steady and "__float2half(0.0f)" in steady


def test_a_missing_guard_is_caught_by_the_interpreter() -> None:
    """The oracle is not blind: the twin with its guards stripped reads past A."""
    twin = small().edge

    def unguard(stmt):
        return replace(stmt, guard=False) if isinstance(stmt, Copy) else stmt

    broken = replace(twin, body=map_body(twin.body, unguard))
    import numpy as np

    m, n, k = 33, 32, 32
    arrays = {
        "A": np.zeros(m * k, np.float16),
        "B": np.zeros(k * n, np.float16),
        "C": np.zeros(m * n, np.float32),
    }
    with pytest.raises(InterpreterError, match="reaches outside A"):
        interpret(broken, arrays, {"M": m, "N": n, "K": k})


def test_stages_0_has_no_twin() -> None:
    kernel = compile_file(ROOT / "examples" / "ladder" / "v1.tile").kernels[0]
    assert kernel.edge is None


def test_narrow_leading_dimensions_fall_back_to_single_elements() -> None:
    twin = compile_file(HGEMM).kernels[0].edge
    assert vector_fallbacks(twin, {"M": 128, "N": 128, "K": 64}) == []
    notes = vector_fallbacks(twin, {"M": 100, "N": 130, "K": 37})
    assert notes == [
        "A: leading dimension 37 is not a multiple of 8 elements, so its copies move single "
        "elements instead of 8-element vectors",
        "B: leading dimension 130 is not a multiple of 8 elements, so its copies move single "
        "elements instead of 8-element vectors",
        "C: leading dimension 130 is not a multiple of 4 elements, so its copies move single "
        "elements instead of 4-element vectors",
    ]


def test_check_says_which_kernel_runs_a_size(capsys) -> None:
    r = cli(["check", HGEMM, "--size", "4096x11008x4095"], capsys)
    assert r.code == 0, r.err
    edge = r.out.split("  edge tiles\n", 1)[1].split("\n\n", 1)[0]
    assert "multiples of 128 x 128 x 64 run hgemm (no bounds checks)" in edge
    assert "at 4096x11008x4095: hgemm_edge" in edge
    assert "A: leading dimension 4095 is not a multiple of 8 elements" in edge
    fast = cli(["check", HGEMM, "--size", "4096x4096x4096"], capsys).out
    assert "at 4096x4096x4096: hgemm, the fast path" in fast


def test_launch_description_names_the_twin(tmp_path, capsys) -> None:
    out = tmp_path / "h.cu"
    assert cli(["compile", HGEMM, "-o", out], capsys).code == 0
    (launch,) = json.loads((tmp_path / "h.cu.launch.json").read_text())
    assert launch["kernel"] == "hgemm"
    assert launch["edge"]["kernel"] == "hgemm_edge"
    assert re.search(r"\(M \+ 127\) / 128", launch["edge"]["grid"]["x"])


def test_musa_launcher_picks_the_kernel_by_size() -> None:
    source_text = compile_file(ROOT / "examples" / "s4000.tile").source
    assert "if (M % 256 == 0 && N % 256 == 0 && K % 64 == 0) {" in source_text
    assert "s4000_edge<<<blocks, 1024, " in source_text
