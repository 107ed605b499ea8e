"""Operands whose lines TMA cannot address, staged into lines padded to 16 bytes
(tiledsl.gpu.staging): the plan and the copy's arguments on the CPU, its source through
nvcc, and the copies themselves on a GPU (skipped cleanly without one)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
from helpers import ROOT

from tiledsl.driver import compile_file
from tiledsl.gpu.runtime import gpu_available
from tiledsl.gpu.staging import SOURCE, Staged, copy_launch, plan, unit_bytes

EPILOGUE = ROOT / "examples" / "hopper" / "epilogue.tile"


def launch_of_epilogue():
    compiled = compile_file(EPILOGUE)
    return compiled.launches[0]


def test_lines_of_whole_16_bytes_stage_nothing() -> None:
    assert plan(launch_of_epilogue(), {"M": 4096, "N": 4096, "K": 4096}) == ()
    assert plan(launch_of_epilogue(), {"M": 1, "N": 8, "K": 8}) == ()  # M is no stride


def test_each_operand_is_staged_by_its_own_stride() -> None:
    launch = launch_of_epilogue()
    (a,) = plan(launch, {"M": 4096, "N": 4096, "K": 4100})  # A's rows: 8200 bytes
    assert (a.operand, a.lines, a.line_bytes, a.pitch, a.back) == ("A", 4096, 8200, 8320, False)
    (c,) = [s for s in plan(launch, {"M": 64, "N": 36, "K": 64}) if s.operand == "C"]
    assert (c.lines, c.line_bytes, c.pitch, c.back) == (64, 72, 128, True)


def test_the_copy_moves_the_widest_unit_a_line_allows() -> None:
    assert [unit_bytes(b) for b in (8198, 8196, 8200, 2, 4, 24)] == [2, 4, 8, 2, 4, 8]


def test_the_copy_reads_the_operand_in_and_writes_c_back() -> None:
    into = Staged("map_A", "A", 3, 14, 16, back=False)
    name, grid, block, args = copy_launch(into, operand=0x1000, copy=0x2000)
    assert (name, grid, block) == ("tiledsl_restride_2", (3,), (256,))
    # from the operand (7 units of 2 bytes apart) into the copy (8 apart), 7 units a line
    assert [int(x) for x in args] == [0x1000, 7, 0x2000, 8, 7, 3]
    back = Staged("map_C", "C", 5, 36, 48, back=True)
    name, _, _, args = copy_launch(back, operand=0x1000, copy=0x2000)
    assert name == "tiledsl_restride_4"
    assert [int(x) for x in args] == [0x2000, 12, 0x1000, 9, 9, 5]


def test_the_staging_is_described_for_check() -> None:
    text = Staged("map_B", "B", 4099, 8194, 8208, back=False).describe()
    assert text == (
        "B: lines of 8194 bytes, not a multiple of 16: staged in lines of 8208 bytes "
        "(copied in; 33.6 MB each way)"
    )


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
def test_the_copy_kernels_build_with_nvcc(tmp_path) -> None:
    import subprocess

    source = tmp_path / "staging.cu"
    source.write_text(SOURCE)
    proc = subprocess.run(
        ["nvcc", "-arch=sm_90", "-cubin", "-Xptxas", "-v", "-o", str(tmp_path / "s.cubin"),
         str(source)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    for unit in (2, 4, 8):
        assert f"tiledsl_restride_{unit}" in proc.stderr
    assert "spill" not in proc.stderr or "0 bytes spill stores" in proc.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
@pytest.mark.parametrize("dtype, cols", [(np.float16, 4099), (np.float16, 4098), (np.float32, 37)])
def test_the_copies_round_trip_on_the_gpu(dtype, cols) -> None:
    import cupy

    from tiledsl.gpu.runtime import device_arch, load_module
    from tiledsl.gpu.staging import Stager

    rows, size = 301, np.dtype(dtype).itemsize
    line = cols * size
    pitch = -(-line // 16) * 16
    staged = Staged("map_A", "A", rows, line, pitch, back=False)
    stager = Stager(lambda source, name: load_module(source, device_arch(), name=name))
    a = cupy.asarray(np.arange(rows * cols).reshape(rows, cols).astype(dtype))
    copy = stager.buffer(staged)
    stager.copy(staged, int(a.data.ptr), copy)
    padded = cupy.ndarray(
        (rows, pitch // size), dtype, cupy.cuda.MemoryPointer(
            cupy.cuda.UnownedMemory(copy, rows * pitch, stager), 0)
    )  # fmt: skip
    assert (padded[:, :cols] == a).all()
    out = cupy.zeros_like(a)
    stager.copy(Staged("map_C", "C", rows, line, pitch, back=True), int(out.data.ptr), copy)
    assert (out == a).all()
