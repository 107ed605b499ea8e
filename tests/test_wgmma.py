"""The wgmma path (`mma m64nNk16`): warpgroups, descriptors, the 128-byte swizzle.

A small kernel in each of the 8 operand layouts (the transposed descriptors of
M/N-contiguous tiles included) and the tuned example must compile for sm_90a (nvcc,
where present), pass the numpy interpreter — exact oracle, race check with wgmma's
asynchronous reads — at a multiple of the block tile and at an odd size (the guarded
twin), and pass the same checks on a GPU, where only the descriptors and the
accumulator layout can be checked.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, cli

from tiledsl.commands.run import default_cpu_size, run_cpu, run_gpu
from tiledsl.driver import compile_file, compile_source, lower_program
from tiledsl.errors import TileError
from tiledsl.frontend.parser import parse
from tiledsl.gpu.runtime import gpu_available
from tiledsl.ir.nodes import MmaWait, SharedBuffer, map_body
from tiledsl.ir.targets import build_arch
from tiledsl.models.hazards import decide
from tiledsl.passes import STAGE_NAMES

TUNED = ROOT / "examples" / "tuned" / "wgmma_f32acc.tile"

LAYOUT_KERNEL = """kernel wg_{a}{b}{c} {{
    A: f16[M, K] {a}
    B: f16[K, N] {b}
    C: f32[M, N] {c}
    C[m, n] = A[m, k] * B[k, n]
    block 128 x 128 x 64
    mma m64n64k16
    coarsen 1 x 2
    stages {stages}
    copy async 16
    swizzle grouped 2
}}"""


def layout_text(a="row", b="row", c="row", stages=3) -> str:
    return LAYOUT_KERNEL.format(a=a, b=b, c=c, stages=stages)


LAYOUTS = [
    pytest.param(layout_text(a, b, c), id=f"{a}-{b}-{c}")
    for a in ("row", "col")
    for b in ("row", "col")
    for c in ("row", "col")
]
VARIANTS = [
    *LAYOUTS,
    pytest.param(layout_text(stages=2), id="stages-2"),  # no wgmma group left in flight
    pytest.param(layout_text().replace("f16[", "bf16["), id="bf16"),
    pytest.param(  # f16 C: the accumulators staged per warpgroup, converted on the way out
        layout_text()
        .replace("C: f32[", "C: f16[")
        .replace("mma m64n64k16", "mma m64n128k16")
        .replace("coarsen 1 x 2", "coarsen 1 x 1"),
        id="f16-c-n128",
    ),
    pytest.param(TUNED.read_text(), id="tuned"),
]


# ---------------------------------------------------------------- the swizzle


def test_panel_layout_is_the_128_byte_swizzle() -> None:
    """Chunk c of line l of panel p at byte (p * lines + l) * 128 + (c ^ l % 8) * 16."""
    buf = SharedBuffer("Bs", "f16", 2, 64, 256, 256, "test", xor=True, panel=64)
    lines, cols = np.meshgrid(np.arange(64), np.arange(256), indexing="ij")
    flat = buf.element(1, lines, cols)
    assert sorted(flat.ravel()) == list(range(64 * 256, 2 * 64 * 256))  # a permutation
    panel, chunk, within = cols // 64, cols % 64 // 8, cols % 8
    expect = (1 * 4 + panel) * 64 * 64 + lines * 64 + (chunk ^ lines % 8) * 8 + within
    assert (flat == expect).all()


def test_panel_layout_index_expressions_match_numbers() -> None:
    from tiledsl.ir.expr import Var, evaluate

    buf = SharedBuffer("As", "f16", 3, 128, 128, 128, "test", xor=True, panel=64)
    e = buf.element(Var("s"), Var("r"), Var("c"))
    for s, r, c in ((0, 0, 0), (2, 77, 100), (1, 127, 127), (2, 8, 64)):
        assert evaluate(e, {"s": s, "r": r, "c": c}) == buf.element(s, r, c)


# ---------------------------------------------------------------- errors


def _error(text: str) -> tuple[int, int, str]:
    with pytest.raises(TileError) as info:
        compile_source(text, "e.tile")
    d = info.value.first
    return d.loc.line, d.loc.col, d.message


BASE = layout_text()


def test_wgmma_is_not_on_sm_80_or_musa() -> None:
    text = BASE.replace("swizzle grouped 2", "swizzle grouped 2\n    target cuda sm_80")
    assert _error(text)[:3] == (
        7,
        5,
        "cuda sm_80 has no wgmma (`mma m64n64k16` is Hopper's warpgroup instruction)",
    )
    musa = BASE.replace("swizzle grouped 2", "target musa mp_22")
    assert _error(musa)[2].startswith("musa mp_22 has no wgmma")


def test_wgmma_shapes() -> None:
    line, col, message = _error(BASE.replace("m64n64k16", "m64n100k16"))
    assert (line, col) == (7, 5)
    assert message == "cuda sm_90 has no m64n100k16 wgmma for f16 here"
    # m64n96k16 is an instruction, but not of whole 64-column panels of an N-contiguous B
    line, col, message = _error(BASE.replace("m64n64k16", "m64n96k16"))
    assert (line, col) == (7, 5)
    assert message.startswith("`mma m64n96k16` with an N-contiguous B (its n index innermost)")


@pytest.mark.parametrize(
    "old,new,line,start",
    [
        ("stages 3", "stages 1", 9, "wgmma reads its tiles asynchronously"),
        ("swizzle grouped 2", "swizzle grouped 2\n    pad auto", 12, "wgmma reads shared memory"),
        (
            "swizzle grouped 2",
            "swizzle grouped 2\n    accumulate f16",
            12,
            "the wgmma path accumulates in f32 only",
        ),
        (
            "swizzle grouped 2",
            "swizzle grouped 2\n    fragment_buffers 2",
            12,
            "wgmma reads A and B from shared memory itself",
        ),
        ("block 128 x 128 x 64", "block 128 x 128 x 32", 6, "BK = 32: a K-contiguous tile"),
    ],
)
def test_wgmma_refusals(old: str, new: str, line: int, start: str) -> None:
    got_line, col, message = _error(BASE.replace(old, new))
    assert (got_line, col) == (line, 5)
    assert message.startswith(start), message


def test_bk_32_is_fine_when_no_tile_runs_along_k() -> None:
    """A col-major, B row-major: both tiles' lines run along M and N, panels of 64."""
    text = layout_text("col", "row").replace("x 64\n", "x 32\n")
    kernel = compile_source(text, "ok.tile").kernels[0]
    assert run_cpu(kernel, (256, 128, 96), seed=1).ok


# ---------------------------------------------------------------- code and interpreter


def test_emitted_code_uses_descriptors_groups_and_fences() -> None:
    source = compile_source(TUNED.read_text(), "t.tile").source
    kernel = source.split("// ---- kernel")[1]
    assert "wgmma_m64n128k16_f16_f32<0, 1>(acc[i][j], a[i][0], b[0][j]);" in kernel
    assert "= wgmma_desc(&As[kt % 4][(kk * MMA_K) / AS_PANEL]" in kernel
    assert "wgmma_fence();" in kernel and "wgmma_commit();" in kernel
    assert "wgmma_wait<1>();" in kernel and "wgmma_wait<0>();" in kernel
    assert "fence_proxy_async();\n        __syncthreads();" in kernel
    assert "WARP_SIZE = 128" in kernel and "__align__(1024)" in kernel
    assert "constexpr unsigned BS_LBO = 8192, BS_SBO = 1024;" in kernel  # 64 lines x 128 B
    assert "if (kt + 2 < (K + BK - 1) / BK)" in kernel  # copies run S - 2 steps ahead


def test_a_warp_coordinate_of_one_warp_is_the_constant_0() -> None:
    """A block of one consumer warpgroup along M (the 64-row tiles) has every computing
    warp at wm = 0: written as 0, since nvcc cannot fold `warp / WARPS_N` (it does not know
    the computing warps come first) and built every A descriptor of the K loop in vector
    registers (an R2UR before each HGMMA, in the SASS of a 64 x 64 tile). Several warps
    along M are read from lane 0 (uniform registers)."""
    small = (ROOT / "examples" / "tuned" / "small_m.tuned.tile").read_text()
    source = compile_source(small, "small_m.tuned.tile").source
    assert source.count("const int wm = 0, wn = 0;  // the warp's place in the block") == 6
    assert "warp / WARPS_N" not in source
    # small_m_5: 64 x 128 in two m64n64 warpgroups along N
    assert "const int wm = 0, wn = __shfl_sync(0xffffffffu, warp % WARPS_N, 0);  // " in source
    two = compile_source(TUNED.read_text(), "t.tile").source  # 2 x 1 warpgroups of m64n128
    assert "const int wm = __shfl_sync(0xffffffffu, warp / WARPS_N, 0), wn = 0;" in two


@pytest.mark.parametrize("text", VARIANTS)
def test_interpreter_multiple_and_odd_size(text: str) -> None:
    program = compile_source(text, "wg.tile")
    for kernel in program.kernels:
        for size in (default_cpu_size(kernel), (67, 45, 50)):
            report = run_cpu(kernel, size, seed=3)
            assert report.ok, report.render()


def _loosened(kernel):
    """The pipeline with the wgmma wait one group looser: slot kt - 2 is overwritten
    while its wgmmas may still read it."""
    body = map_body(kernel.body, lambda s: MmaWait(2) if s == MmaWait(1) else s)
    assert body != kernel.body
    return replace(kernel, body=body)


def test_a_loosened_wgmma_wait_is_caught() -> None:
    kernel = compile_source(BASE, "wg.tile").kernels[0]
    report = run_cpu(_loosened(kernel), (128, 128, 6 * 64), seed=1)  # 6 steps: slots reused
    assert not report.ok
    assert "overwrites shared memory that a wgmma may still be reading" in report.render()
    with pytest.raises(TileError, match="wgmma.wait_group is missing"):
        decide(_loosened(kernel), remove=False)


@pytest.mark.parametrize("stage", STAGE_NAMES)
def test_every_stage_runs_in_the_interpreter(stage: str) -> None:
    """Stopped early, fragments come from global memory or unswizzled tiles; still right."""
    program = parse(layout_text("col", "row"), "stage.tile")
    for kernel in lower_program(program, stop_after=stage):
        assert run_cpu(kernel, default_cpu_size(kernel), seed=2).ok


def test_early_stages_are_not_emitted_as_wgmma() -> None:
    with pytest.raises(TileError, match="wgmma reads A and B from 128-byte-swizzled"):
        compile_source(BASE, "stage.tile", stop_after="multi-buffering")


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("text", VARIANTS)
def test_nvcc_compiles_for_sm_90a(text: str, tmp_path: Path) -> None:
    program = compile_source(text, "wg.tile")
    assert build_arch("sm_90", program.kernels) == "sm_90a"
    cu = tmp_path / "wg.cu"
    cu.write_text(program.source)
    done = subprocess.run(
        ["nvcc", "-cubin", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v"]
        + ["-o", str(tmp_path / "k.cubin"), cu],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert " 0 bytes spill stores" in done.stderr and "spill stores" in done.stderr


def test_cli_compile_and_check(capsys, tmp_path: Path) -> None:
    r = cli(["compile", TUNED, "-o", tmp_path / "k.cu"], capsys)
    assert r.code == 0, r.err
    r = cli(["check", TUNED], capsys)
    assert r.code == 0, r.out + r.err
    assert "mma m64n128k16" in r.out and "of 128 lanes" in r.out


# ---------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
@pytest.mark.parametrize("text", VARIANTS)
def test_gpu_multiple_and_odd_size(text: str) -> None:
    program = compile_source(text, "wg.tile")
    for kernel, launch in zip(program.kernels, program.launches):
        for size in (default_cpu_size(kernel), (1000, 1032, 520), (67, 45, 50)):
            report = run_gpu(kernel, program.source, launch, size, seed=11, repeat=2)
            assert report.ok, report.render()
            assert report.checks[0].detail == "bit-exact", report.render()


def test_wgmma_builds_for_sm_90a_and_only_on_hopper() -> None:
    from tiledsl.errors import UsageError

    kernels = compile_source(BASE, "wg.tile").kernels
    assert build_arch("sm_90", kernels) == "sm_90a"
    assert build_arch("sm_90", compile_source(layout_text(), "w.tile").kernels) == "sm_90a"
    plain = compile_file(ROOT / "examples" / "hgemm.tile").kernels
    assert build_arch("sm_80", plain) == "sm_80"
    with pytest.raises(UsageError, match="runs on sm_90 \\(Hopper\\) only, and this device is"):
        build_arch("sm_120", kernels)
