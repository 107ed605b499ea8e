"""nvcc on the host: reading ptxas's resource report, and what a failed build tells the user."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tiledsl.errors import ToolchainError
from tiledsl.gpu.toolchain import PtxasReport, compile_cubin, parse_ptxas

# `nvcc -cubin -arch=sm_90 -Xptxas -v` on two kernels, one spilling; the second in the
# older style that ends its resource line with shared and constant memory.
PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'spilly' for 'sm_90'
ptxas info    : Function properties for spilly
    8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 8 bytes cumulative stack size
ptxas info    : Compile time = 6.886 ms
ptxas info    : Compiling entry function 'tiled' for 'sm_90'
ptxas info    : Function properties for tiled
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, 4096 bytes smem, 388 bytes cmem[0]
ptxas info    : Compile time = 1.359 ms
"""

BROKEN = 'extern "C" __global__ void broken(float* x) { x[0] = undeclared_name; }\n'
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


def test_parse_ptxas_two_kernels() -> None:
    reports = parse_ptxas(PTXAS_LOG)
    assert list(reports) == ["spilly", "tiled"]
    assert reports["spilly"] == PtxasReport(
        "spilly",
        registers=40,
        smem_bytes=0,
        stack_frame=8,
        spill_stores=4,
        spill_loads=4,
        barriers=1,
    )
    assert reports["tiled"] == PtxasReport(
        "tiled",
        registers=32,
        smem_bytes=4096,
        stack_frame=0,
        spill_stores=0,
        spill_loads=0,
        barriers=0,
    )
    assert reports["spilly"].spills
    assert not reports["tiled"].spills


def test_parse_ptxas_report_text() -> None:
    text = str(parse_ptxas(PTXAS_LOG)["spilly"])
    assert text.startswith("spilly: 40 registers")
    assert "4/4 bytes spilled" in text
    assert "1 barrier" in text


def test_parse_ptxas_without_a_properties_line() -> None:
    log = (
        "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
        "ptxas info    : Used 64 registers, used 0 barriers\n"
    )
    assert parse_ptxas(log) == {"k": PtxasReport("k", 64, 0, 0, 0, 0, 0)}


def test_parse_ptxas_a_called_function_does_not_leak_into_the_kernel() -> None:
    # A non-inlined device function gets its own properties block inside the entry's section.
    log = (
        "ptxas info    : Compiling entry function 'k' for 'sm_90'\n"
        "ptxas info    : Function properties for _Z6helperv\n"
        "    16 bytes stack frame, 12 bytes spill stores, 12 bytes spill loads\n"
        "ptxas info    : Function properties for k\n"
        "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
        "ptxas info    : Used 20 registers, used 0 barriers\n"
    )
    reports = parse_ptxas(log)
    assert list(reports) == ["k"]
    assert reports["k"].registers == 20
    assert not reports["k"].spills


def test_parse_ptxas_of_nothing() -> None:
    assert parse_ptxas("") == {}
    assert parse_ptxas("ptxas info    : 0 bytes gmem\n") == {}


@pytest.mark.nvcc
@needs_nvcc
def test_compile_cubin_reports_each_kernel() -> None:
    src = (
        'extern "C" __global__ void one(float* x) {'
        " __shared__ float s[256]; s[threadIdx.x] = x[threadIdx.x]; __syncthreads();"
        " x[threadIdx.x] = s[255 - threadIdx.x]; }\n"
        'extern "C" __global__ void two(float* x) { x[threadIdx.x] *= 2.0f; }\n'
    )
    reports = compile_cubin(src, "sm_90", "two_kernels")
    assert sorted(reports) == ["one", "two"]
    assert reports["one"].smem_bytes == 1024
    assert reports["one"].barriers == 1
    assert reports["two"].barriers == 0
    assert all(0 < r.registers <= 255 and not r.spills for r in reports.values())


@pytest.mark.nvcc
@needs_nvcc
def test_compile_cubin_failure_names_log_source_and_command() -> None:
    with pytest.raises(ToolchainError) as info:
        compile_cubin(BROKEN, "sm_90", "broken")
    err = info.value
    text = str(err)
    assert "nvcc failed" in text
    assert 'identifier "undeclared_name" is undefined' in text  # the compiler's own log
    assert 'identifier "undeclared_name" is undefined' in err.log
    kept = Path(err.source_path)
    assert kept.is_file()
    assert kept.read_text() == BROKEN
    assert f"generated source: {kept}" in text
    assert f"reproduce with: {err.command}" in text
    argv = shlex.split(err.command)
    assert Path(argv[0]).name == "nvcc"
    assert "-arch=sm_90" in argv
    assert argv[-1] == str(kept)
    # The command really reproduces the failure, from the kept source.
    again = subprocess.run(argv, capture_output=True, text=True)
    assert again.returncode != 0
    assert 'identifier "undeclared_name" is undefined' in again.stderr


@pytest.mark.nvcc
@needs_nvcc
def test_compile_cubin_failure_log_points_at_the_kept_source() -> None:
    with pytest.raises(ToolchainError) as info:
        compile_cubin(BROKEN, "sm_90", "broken")
    err = info.value
    located = re.findall(r"^(\S+?)\(\d+\): error", err.log, flags=re.M)
    assert located
    assert all(Path(p).is_file() for p in located), located


@pytest.mark.nvcc
@needs_nvcc
def test_compile_cubin_reproducing_command_builds_the_fixed_source() -> None:
    with pytest.raises(ToolchainError) as info:
        compile_cubin(BROKEN, "sm_90", "broken")
    err = info.value
    kept = Path(err.source_path)
    kept.write_text(BROKEN.replace("undeclared_name", "1.0f"))  # the user fixes the source
    try:
        again = subprocess.run(shlex.split(err.command), capture_output=True, text=True)
        assert again.returncode == 0, again.stderr
    finally:
        kept.unlink()


def test_compile_cubin_without_nvcc(monkeypatch) -> None:
    monkeypatch.setattr("tiledsl.gpu.toolchain.shutil.which", lambda name: None)
    with pytest.raises(ToolchainError, match="nvcc was not found"):
        compile_cubin(BROKEN, "sm_90", "broken")
