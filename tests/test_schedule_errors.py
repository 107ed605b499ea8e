"""Semantic errors: the spec's "What a wrong file gets", each asserted as (line, col, message).

Every case starts from one valid kernel and breaks one thing; the last cases check
that all errors of a file come in one report, and that what is not built yet is
refused where it was asked for (or, for a default, at the kernel).
"""

from __future__ import annotations

import pytest

from tiledsl.driver import compile_source
from tiledsl.errors import TileError

BASE = """kernel k {
    A: f16[M, K] row
    B: f16[K, N] row
    C: f32[M, N] row
    C[m, n] = A[m, k] * B[k, n]
    block   64 x 64 x 32
    mma     16 x 16 x 16
    stages  1
    pad     none
    swizzle none
    sync    all
}
"""


def errors_of(source: str) -> list[tuple[int, int, str]]:
    with pytest.raises(TileError) as info:
        compile_source(source, "t.tile")
    return [(d.loc.line, d.loc.col, d.message) for d in info.value.diagnostics]


def edit(old: str, new: str) -> str:
    assert old in BASE
    return BASE.replace(old, new)


def test_the_base_file_is_valid():
    assert compile_source(BASE, "t.tile").kernels[0].name == "k"


CASES = {
    "not a matrix product": (
        edit("* B[k, n]", "* B[m, n]"),
        [(5, 5, "the computation is not a matrix product")],
    ),
    "summed index indexes C": (
        edit("C[m, n] = A[m, k] * B[k, n]", "C[m, k] = A[m, k] * B[k, n]").replace(
            "C: f32[M, N]", "C: f32[M, K]"
        ),
        [(5, 5, "the computation is not a matrix product")],
    ),
    "undeclared operand": (
        edit("* B[k, n]", "* D[k, n]"),
        [(5, 25, "'D' is not a declared operand")],
    ),
    "shapes disagree": (
        edit("B: f16[K, N]", "B: f16[M, N]"),
        [(5, 25, "index 'k' runs over M in B but over K in A: the shapes do not agree")],
    ),
    "BM not divisible by mma.M x CM": (
        edit("64 x 64 x 32", "72 x 64 x 32"),
        [(6, 5, "BM = 72 is not divisible by mma.M × CM = 16 × 1 = 16")],
    ),
    "BK not divisible by mma.K": (
        edit("64 x 64 x 32", "64 x 64 x 24"),
        [(6, 5, "BK = 24 is not divisible by mma.K = 16")],
    ),
    "fragment shape the target lacks": (
        edit("16 x 16 x 16", "16 x 16 x 8"),
        [(7, 5, "cuda sm_90 has no 16 x 16 x 8 f16 fragment")],
    ),
    "dtype the target lacks": (
        edit("A: f16", "A: f32").replace("B: f16", "B: f32"),
        [
            (2, 5, "cuda sm_90 tensor cores take no f32 inputs"),
            (3, 5, "cuda sm_90 tensor cores take no f32 inputs"),
        ],
    ),
    "unknown element type": (edit("C: f32", "C: f64"), [(4, 8, "unknown element type 'f64'")]),
    "too many threads per block": (
        edit("64 x 64 x 32", "128 x 256 x 32"),
        [(6, 5, "8 x 16 warps of 32 threads = 4096 threads per block; cuda sm_90 allows 1024")],
    ),
    "warp count over the MUSA block limit": (
        edit("    sync    all\n", "    sync    all\n    target  musa mp_22\n"),
        [
            (6, 5, "4 x 4 warps of 128 threads = 2048 threads per block; musa mp_22 allows 1024"),
        ],
    ),
    "shared memory over the limit": (
        edit("64 x 64 x 32", "64 x 64 x 1024"),
        [
            (
                8,
                5,
                "this schedule needs 262144 bytes of shared memory per block; cuda sm_90 "
                "allows 232448",
            )
        ],
    ),
    "copy vector width": (
        edit("    pad", "    copy    sync 12\n    pad"),
        [(9, 18, "copy vector width must be 4, 8 or 16 bytes, found 12")],
    ),
    "stages out of range": (
        edit("stages  1", "stages  -1"),
        [(8, 13, "'stages' takes integers ≥ 0, found -1")],
    ),
    "swizzle grouped 0": (
        edit("swizzle none", "swizzle grouped 0"),
        [(10, 21, "'swizzle' takes integers ≥ 1, found 0")],
    ),
    "a directive twice": (
        edit("    pad     none\n", "    pad     none\n    pad     none\n"),
        [(10, 5, "directive 'pad' given twice in kernel 'k'")],
    ),
    "unknown target": (
        edit("    sync    all\n", "    sync    all\n    target  cuda sm_75\n"),
        [(12, 5, "unknown target 'cuda sm_75'")],
    ),
    "no block directive": (
        edit("    block   64 x 64 x 32\n", ""),
        [(1, 8, "kernel 'k' has no 'block' directive")],
    ),
    "literal size not a multiple of the tile, stages 0": (
        edit("A: f16[M, K]", "A: f16[100, K]")
        .replace("C: f32[M, N]", "C: f32[100, N]")
        .replace("    stages  1\n", "    stages  0\n"),
        [
            (
                4,
                5,
                "M = 100 is not a multiple of the block tile (64), and stages 0 loads "
                "fragments straight from global memory, which WMMA cannot guard",
            )
        ],
    ),
    "a tuning set": (
        edit("64 x 64 x 32", "{64, 128} x 64 x 32"),
        [
            (
                6,
                13,
                "a tuning set {…} makes this file a tuning space, which compile and run "
                "cannot take",
            )
        ],
    ),
    "misaligned fragments": (
        edit("C: f32", "C: f16").replace("16 x 16 x 16", "32 x 8 x 16"),
        [
            (
                7,
                5,
                "32 x 8 x 16 fragments of B would be loaded from pointers only 16-byte "
                "aligned (ldm 128 bytes); WMMA needs 32-byte aligned pointers and ldm a multiple "
                "of 16 bytes",
            )
        ],
    ),
}


@pytest.mark.parametrize("name", list(CASES))
def test_semantic_error(name):
    source, expected = CASES[name]
    assert errors_of(source) == expected


def test_all_errors_of_a_file_in_one_report():
    source = edit("16 x 16 x 16", "16 x 16 x 8").replace("* B[k, n]", "* D[k, n]")
    assert errors_of(source) == [
        (5, 25, "'D' is not a declared operand"),
        (7, 5, "cuda sm_90 has no 16 x 16 x 8 f16 fragment"),
    ]


def test_errors_of_every_kernel_in_one_report():
    second = BASE.replace("kernel k", "kernel k2").replace("mma     16 x 16 x 16", "mma 8 x 8 x 8")
    errors = errors_of(BASE.replace("64 x 64 x 32", "72 x 64 x 32") + second)
    assert [(line, col) for line, col, _ in errors] == [(6, 5), (19, 5)]


UNBUILT = {
    "epilogue on MUSA": (
        edit("    sync    all\n", "    sync    all\n    epilogue relu\n")
        .replace("    block   64 x 64 x 32\n", "    block   64 x 64 x 32\n    coarsen 2 x 2\n")
        .replace("    sync    all\n", "    sync    all\n    target  musa mp_22\n"),
        (
            14,
            5,
            "epilogue relu on musa mp_22 is not built yet: it needs MUSA's round-to-nearest "
            "float intrinsics (the CUDA epilogue uses __fmul_rn and __fadd_rn so that it is "
            "exact), which the S4000 write-up does not document",
        ),
    ),
    "f16 C stored directly": (
        edit("C: f32", "C: f16").replace(
            "    sync    all\n", "    sync    all\n    epilogue_via direct\n"
        ),
        (
            12,
            5,
            "epilogue_via direct with f16 C and an f32 accumulator is not built yet: it "
            "needs a conversion, which a WMMA fragment store cannot do",
        ),
    ),
}


@pytest.mark.parametrize("name", list(UNBUILT))
def test_unbuilt_directive_is_refused_where_written(name):
    source, expected = UNBUILT[name]
    assert errors_of(source) == [expected]


def test_rendered_report_has_location_source_line_caret_and_note():
    with pytest.raises(TileError) as info:
        compile_source(edit("16 x 16 x 16", "16 x 16 x 8"), "bad.tile")
    text = str(info.value)
    assert text.splitlines()[:3] == [
        "bad.tile:7:5: error: cuda sm_90 has no 16 x 16 x 8 f16 fragment",
        "        mma     16 x 16 x 8",
        "        ^" + "~" * (len("mma     16 x 16 x 8") - 1),
    ]
    assert text.splitlines()[3].startswith("note: fragment shapes here: 16 x 16 x 16")


WIDE = """kernel wide {
    A: f16[M, K] row
    B: f16[K, N] row
    C: f16[M, N] row
    C[m, n] = A[m, k] * B[k, n]
    block      128 x 256 x 64
    mma        16 x 16 x 16
    coarsen    4 x 8
    stages     3
    copy       async 16
    accumulate f16
    target     cuda sm_90
}
"""


def test_register_refusal_counts_f16_fragments_packed():
    """Two f16 elements share a register: a 64 x 128 warp tile of f16 accumulators is
    4096 + 128 + 1024 words / 32 lanes = 164 registers, which fits (ptxas: 244, no spill).
    The seed's one-register-per-element count (328) refused it until 2026-11-29."""
    from tiledsl.models.registers import fragment_registers, writeup_registers_per_warp

    kernel = compile_source(WIDE, "w.tile").kernels[0]
    assert kernel.threads == 128
    assert fragment_registers(kernel.schedule, 32) == (4096 + 128 + 1024) // 32 == 164
    assert -(-writeup_registers_per_warp(kernel.schedule) // 32) == 328  # check's column


@pytest.mark.parametrize(
    "coarsen, block, accumulate, needed",
    [
        # f16: 64 fragments x 256 elements x 2 bytes = 8192 words, + A 128 + 8 B x 128,
        # over 32 lanes: 9344 / 32
        ("8 x 8", "128 x 128 x 64", "f16", 292),
        # f32 is not packed: 32 x 256 x 4 bytes = 8192 words, + A 128 + 4 B x 128: 8832 / 32
        ("8 x 4", "128 x 64 x 64", "f32", 276),
    ],
)
def test_register_refusal_is_located_at_coarsen(coarsen, block, accumulate, needed):
    source = (
        WIDE.replace("coarsen    4 x 8", f"coarsen    {coarsen}")
        .replace("128 x 256 x 64", block)
        .replace("accumulate f16", f"accumulate {accumulate}")
        .replace("C: f16[M, N]", f"C: {accumulate}[M, N]")
    )
    assert errors_of(source) == [
        (
            8,
            5,
            f"{coarsen} fragments per warp need at least {needed} registers per thread for "
            "fragments alone; cuda sm_90 allows 255 at 32 threads per block",
        )
    ]
