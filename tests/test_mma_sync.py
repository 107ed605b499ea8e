"""The mma.sync path (`mma m16n8k16`) and the XOR swizzle (`pad xor`).

Every CUDA example, and a small kernel in each of the 8 operand layouts, is rewritten
onto the mma.sync path with XOR-swizzled tiles; each must compile (nvcc, where present),
pass the numpy interpreter (exact oracle and race check) at a multiple of its block tile
and at an odd size (its guarded twin), and pass the same checks on a GPU. The
interpreter reads shared memory through `SharedBuffer.element`, so it runs the swizzle
itself; the per-lane register layouts of ldmatrix and mma.sync only a GPU can check.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from helpers import ROOT, cli, cuda_example_params

from tiledsl.commands.run import default_cpu_size, run_cpu, run_gpu
from tiledsl.driver import compile_source
from tiledsl.errors import TileError
from tiledsl.gpu.runtime import gpu_available
from tiledsl.ir.nodes import SharedBuffer, xor_geometry
from tiledsl.limits import INT_TEXT_DIGITS
from tiledsl.models.banks import conflicts
from tiledsl.passes import STAGE_NAMES

MMA_EXAMPLE = ROOT / "examples" / "hgemm_mma.tile"

LAYOUT_KERNEL = """kernel lay_{a}{b}{c} {{
    A: f16[M, K] {a}
    B: f16[K, N] {b}
    C: f32[M, N] {c}
    C[m, n] = A[m, k] * B[k, n]
    block 64 x 64 x 32
    mma m16n8k16
    coarsen 2 x 4
    stages 3
    copy async 16
    pad xor
    swizzle grouped 2
}}"""


def on_mma_sync(text: str) -> str:
    """`text` with every kernel on the mma.sync path and XOR-swizzled tiles."""
    text = re.sub(r"^(\s*)mma\b.*$", r"\1mma m16n8k16", text, flags=re.M)
    text = re.sub(r"^(\s*)pad\b.*$", r"\1pad xor", text, flags=re.M)
    # Kernels that left mma or pad at their defaults get the lines after `block`.
    for directive in ("mma m16n8k16", "pad xor"):
        word = directive.split()[0]
        text = re.sub(
            r"(kernel \w+ \{(?:(?!\n\s*kernel )[\s\S])*?)\}",
            lambda m, d=directive, w=word: (
                m.group(0)
                if re.search(rf"^\s*{w}\b", m.group(1), re.M)
                else m.group(1) + f"    {d}\n}}"
            ),
            text,
        )
    return text


def variants() -> list:
    out = []
    for param in cuda_example_params():
        path = param.values[0]
        if path.parent.name in ("ladder", "tuned"):
            # The ladder is WMMA's story (its last rungs are covered by hgemm); a tuned
            # schedule is tuned for its own path (tuned/mma_f32acc.tile is the mma one).
            if path.name != "mma_f32acc.tile":
                continue
        text = on_mma_sync(path.read_text())
        out.append(pytest.param(path.stem, text, id=f"example-{path.stem}"))
    for a in ("row", "col"):
        for b in ("row", "col"):
            for c in ("row", "col"):
                out.append(
                    pytest.param(
                        f"lay_{a}{b}{c}", LAYOUT_KERNEL.format(a=a, b=b, c=c), id=f"{a}-{b}-{c}"
                    )
                )
    return out


VARIANTS = variants()


def compiled(name: str, text: str):
    try:
        return compile_source(text, f"{name}.tile")
    except TileError as err:
        pytest.skip(f"not a schedule for the mma.sync path: {err.first.message}")


# ---------------------------------------------------------------- the swizzle


@pytest.mark.parametrize("line_length", [16, 32, 48, 64, 96, 128, 256])
def test_xor_swizzle_is_a_permutation_of_each_line(line_length: int) -> None:
    buf = SharedBuffer("As", "f16", 2, 24, line_length, line_length, "test", xor=True)
    rows, cols = np.meshgrid(np.arange(24), np.arange(line_length), indexing="ij")
    flat = buf.element(1, rows, cols)
    assert sorted(flat.ravel()) == list(range(24 * line_length, 48 * line_length))
    # Every element stays in its own line, and 8-element chunks move whole.
    assert (flat // line_length == 24 + rows).all()
    assert ((flat % line_length) % 8 == cols % 8).all()


@pytest.mark.parametrize("line_length", [16, 32, 64, 128])
def test_eight_lines_put_one_chunk_in_eight_bank_groups(line_length: int) -> None:
    buf = SharedBuffer("Bs", "f16", 1, 8, line_length, line_length, "test", xor=True)
    for chunk in range(0, line_length, 8):
        groups = {(buf.element(0, r, chunk) * 2 // 16) % 8 for r in range(8)}
        assert len(groups) == 8


def test_xor_geometry() -> None:
    assert xor_geometry(64, "f16") == (8, 8, 1)
    assert xor_geometry(32, "f16") == (8, 4, 2)
    assert xor_geometry(16, "f16") == (8, 2, 4)
    assert xor_geometry(8, "f16") == (8, 1, 8)  # one chunk: nothing to permute


def test_bank_model_sees_no_conflicts_with_xor_and_some_without() -> None:
    text = MMA_EXAMPLE.read_text()
    swizzled = compile_source(text, "x.tile").kernels[0]
    plain = compile_source(text.replace("pad     xor", "pad     none"), "x.tile").kernels[0]
    for buffer in ("As", "Bs"):
        assert all(a.ways == 1 for a in conflicts(swizzled, buffer)), conflicts(swizzled, buffer)
        assert any(a.ways > 1 for a in conflicts(plain, buffer))


# ---------------------------------------------------------------- errors


def _error(text: str) -> tuple[int, int, str]:
    with pytest.raises(TileError) as info:
        compile_source(text, "e.tile")
    d = info.value.first
    return d.loc.line, d.loc.col, d.message


BASE = LAYOUT_KERNEL.format(a="row", b="row", c="row")


def test_pad_xor_needs_the_mma_sync_path() -> None:
    text = BASE.replace("mma m16n8k16", "mma 16 x 16 x 16").replace(
        "coarsen 2 x 4", "coarsen 2 x 2"
    )
    line, col, message = _error(text)
    assert (line, col) == (11, 5)
    assert message.startswith("pad xor permutes each row's 16-byte chunks")


def test_unknown_instruction_shape() -> None:
    assert _error(BASE.replace("mma m16n8k16", "mma m16n8k8")) == (
        7,
        5,
        "cuda sm_90 has no m16n8k8 mma.sync path for f16 here",
    )
    assert _error(BASE.replace("mma m16n8k16", "mma wide")) == (
        7,
        9,
        "'wide' is not an instruction shape",
    )
    # more digits than int() reads from text: refused before it is read (a ValueError, an
    # internal error, before: found by the fuzz test, seed 20261207, case 834)
    digits = INT_TEXT_DIGITS + 1  # 4301 (Python 3.11's default limit, CI's)
    assert _error(BASE.replace("mma m16n8k16", "mma m16n8k" + "9" * digits)) == (
        7,
        9,
        "'m16n8k999999999999999999…' is not an instruction shape: a dimension of more than "
        f"{INT_TEXT_DIGITS} digits",
    )


def test_mma_sync_without_shared_memory_needs_k_contiguous_operands() -> None:
    # stages 0 is the direct path (tests/test_direct.py): 16-byte vectors along K
    line, col, message = _error(BASE.replace("stages 3", "stages 0").replace("copy async 16", ""))
    assert (line, col) == (9, 5)
    assert message == (
        "mma.sync with stages 0 loads each lane's fragments from global memory as 16-byte "
        "vectors along K, which needs K-contiguous operands: K is not the contiguous "
        "dimension of B"
    )


def test_mma_sync_is_not_on_musa() -> None:
    text = BASE.replace("swizzle grouped 2", "target musa mp_22")
    line, col, message = _error(text)
    assert (line, col, message) == (7, 5, "musa mp_22 has no mma.sync PTX path")


def test_pad_xor_needs_two_chunks_per_line() -> None:
    # BN = 8: each line of B's tile is one 16-byte chunk, nothing to permute.
    text = BASE.replace("block 64 x 64 x 32", "block 64 x 8 x 32").replace(
        "coarsen 2 x 4", "coarsen 2 x 1"
    )
    line, col, message = _error(text)
    assert (line, col) == (11, 5)
    assert message == (
        "pad xor swaps 16-byte chunks within a line of B's tile, and its 8-element lines "
        "(BN) hold no even number of 8-element chunks"
    )


# ---------------------------------------------------------------- code and interpreter


def test_emitted_code_uses_ldmatrix_mma_and_the_swizzle() -> None:
    source = compile_source(MMA_EXAMPLE.read_text(), "hgemm_mma.tile").source
    assert "ldmatrix_x4(a[i][0], &As[" in source
    assert "ldmatrix_x4_trans(b[0][j], b[0][j + 1], &Bs[" in source  # B fragments in pairs
    assert "mma_m16n8k16_f16_f32(acc[i][j], a[i][0], b[0][j]);" in source
    assert "xor_swizzle<AS_XOR_CHUNK, AS_XOR_GROUPS, AS_XOR_REPEAT>" in source
    assert "wmma::" not in source.split("// ---- kernel")[1]
    assert "// mma m16n8k16 (line" in source and "// pad xor (line" in source


@pytest.mark.parametrize("name,text", VARIANTS)
def test_interpreter_multiple_and_odd_size(name: str, text: str) -> None:
    program = compiled(name, text)
    for kernel in program.kernels:
        for size in (default_cpu_size(kernel), (67, 45, 50)):
            report = run_cpu(kernel, size, seed=3)
            assert report.ok, report.render()


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc")
@pytest.mark.parametrize("name,text", VARIANTS)
def test_nvcc_compiles(name: str, text: str, tmp_path: Path) -> None:
    program = compiled(name, text)
    cu = tmp_path / f"{name}.cu"
    cu.write_text(program.source)
    done = subprocess.run(
        ["nvcc", "-cubin", "-arch=sm_90", "-Xptxas", "-v", "-o", str(tmp_path / "k.cubin"), cu],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert "spill stores" in done.stderr and " 0 bytes spill stores" in done.stderr


def test_cli_compile_and_check(capsys, tmp_path: Path) -> None:
    r = cli(["compile", MMA_EXAMPLE, "-o", tmp_path / "k.cu"], capsys)
    assert r.code == 0, r.err
    r = cli(["check", MMA_EXAMPLE], capsys)
    assert r.code == 0, r.out + r.err
    assert "mma m16n8k16" in r.out and "pad xor" in r.out


@pytest.mark.parametrize("stage", STAGE_NAMES)
def test_every_stage_runs_in_the_interpreter(stage: str) -> None:
    """Stopped early, fragments come straight from global memory (element by element)
    or from unswizzled tiles: each stage is still a correct kernel."""
    text = LAYOUT_KERNEL.format(a="col", b="row", c="row")
    program = compile_source(text, "stage.tile", stop_after=stage)
    for kernel in program.kernels:
        assert run_cpu(kernel, default_cpu_size(kernel), seed=2).ok


# ---------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
@pytest.mark.parametrize("stage", STAGE_NAMES)
def test_gpu_every_stage(stage: str) -> None:
    text = LAYOUT_KERNEL.format(a="col", b="row", c="row")
    program = compile_source(text, "stage.tile", stop_after=stage)
    for kernel, launch in zip(program.kernels, program.launches):
        report = run_gpu(kernel, program.source, launch, default_cpu_size(kernel), seed=4, repeat=2)
        assert report.ok, report.render()


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
@pytest.mark.parametrize("name,text", VARIANTS)
def test_gpu_multiple_and_odd_size(name: str, text: str) -> None:
    program = compiled(name, text)
    for kernel, launch in zip(program.kernels, program.launches):
        for size in (default_cpu_size(kernel), (1000, 1032, 520), (67, 45, 50)):
            report = run_gpu(kernel, program.source, launch, size, seed=11, repeat=2)
            assert report.ok, report.render()
            assert report.checks[0].detail == "bit-exact", report.render()
