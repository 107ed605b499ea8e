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
from tiledsl.gpu.staging import SOURCE, Staged, copy_launch, plan

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


def test_the_copy_reads_the_operand_in_and_writes_c_back() -> None:
    into = Staged("map_A", "A", 3, 14, 16, back=False)
    name, grid, block, args = copy_launch(into, operand=0x1002, copy=0x2000)
    assert (name, grid, block) == ("tiledsl_stage_in", (1,), (256,))
    # from the operand (lines of 7 halves, densely) into the copy (lines 8 halves apart)
    assert [int(x) for x in args] == [0x1002, 0x2000, 8, 7, 3]
    back = Staged("map_C", "C", 5, 36, 48, back=True)
    name, _, _, args = copy_launch(back, operand=0x1000, copy=0x2000)
    assert name == "tiledsl_stage_out"
    assert [int(x) for x in args] == [0x2000, 24, 0x1000, 18, 5]


def test_the_copy_gives_every_16_byte_chunk_a_thread() -> None:
    # 4095 lines of 4099 halves: 513 chunks a line in, 2,098,189 whole chunks out
    into = Staged("map_A", "A", 4095, 8198, 8320, back=False)
    assert copy_launch(into, 0, 0)[1] == (-(-4095 * 513 // 256),)
    back = Staged("map_C", "C", 4095, 8194, 8320, back=True)
    assert copy_launch(back, 0, 0)[1] == (-(-(4095 * 4097 // 8 + 1) // 256),)


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
    for name in ("tiledsl_stage_in", "tiledsl_stage_out"):
        assert name in proc.stderr
    assert "spill" not in proc.stderr or "0 bytes spill stores" in proc.stderr


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
@pytest.mark.parametrize(
    "dtype, rows, cols, shift",
    [
        (np.float16, 301, 4099, 0),
        (np.float16, 301, 4098, 0),
        (np.float16, 33, 4097, 3),  # an operand that starts 3 halves past 16 bytes
        (np.float16, 17, 9, 1),
        (np.float16, 5, 3, 7),
        (np.float16, 1, 1, 5),
        (np.float32, 301, 37, 0),
        (np.float32, 7, 5, 1),
    ],
)
def test_the_copies_round_trip_on_the_gpu(dtype, rows, cols, shift) -> None:
    import cupy

    from tiledsl.gpu.runtime import device_arch, load_module
    from tiledsl.gpu.staging import Stager

    size = np.dtype(dtype).itemsize
    line = cols * size
    pitch = -(-line // 128) * 128
    staged = Staged("map_A", "A", rows, line, pitch, back=False)
    stager = Stager(lambda source, name: load_module(source, device_arch(), name=name))
    # every bit pattern (compared as integers), in an operand `shift` halves off 16 bytes
    bits = np.random.default_rng(rows * cols).integers(0, 1 << 16, rows * cols * size // 2)
    room = cupy.zeros(rows * cols * size // 2 + 16, cupy.uint16)
    a = room[shift : shift + bits.size]
    a[...] = cupy.asarray(bits.astype(np.uint16))
    copy = stager.buffer(staged)
    stager.copy(staged, int(a.data.ptr), copy)
    padded = cupy.ndarray(
        (rows, pitch // 2), cupy.uint16, cupy.cuda.MemoryPointer(
            cupy.cuda.UnownedMemory(copy, rows * pitch, stager), 0)
    )  # fmt: skip
    assert (padded[:, : line // 2] == a.reshape(rows, line // 2)).all()
    room_out = cupy.zeros_like(room)
    out = room_out[shift : shift + bits.size]
    stager.copy(Staged("map_C", "C", rows, line, pitch, back=True), int(out.data.ptr), copy)
    assert (out == a).all()
    # nothing written outside the operand
    assert not room_out[:shift].any() and not room_out[shift + bits.size :].any()
