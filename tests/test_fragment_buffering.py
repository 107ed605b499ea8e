"""`fragment_buffers 2`: A and B fragments double-buffered, the barrier at the last fragment step.

The pass moves loads across the pipeline's barrier, so every check here runs the
result: the numpy interpreter (exact oracle and race check) on both instruction paths,
several pipeline depths and odd sizes; a deliberately broken wait shows that the race
check would catch a wrong move; the GPU runs the same kernels where there is one.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from tiledsl.commands.run import default_cpu_size, run_cpu, run_gpu
from tiledsl.driver import compile_source
from tiledsl.errors import TileError
from tiledsl.gpu.runtime import gpu_available
from tiledsl.ir.nodes import AsyncWait, Barrier, For, If, LoadFrag, map_body, walk

KERNEL = """kernel fb {{
    A: f16[M, K] {a}
    B: f16[K, N] {b}
    C: f32[M, N] row
    C[m, n] = A[m, k] * B[k, n]
    block 64 x 64 x {bk}
    mma {mma}
    coarsen 2 x {cn}
    stages {stages}
    fragment_buffers 2
    copy async 16
    pad {pad}
}}"""


def source(path="mma", stages=3, bk=32, a="row", b="row") -> str:
    if path == "mma":
        return KERNEL.format(a=a, b=b, bk=bk, mma="m16n8k16", cn=4, stages=stages, pad="xor")
    return KERNEL.format(a=a, b=b, bk=bk, mma="16 x 16 x 16", cn=2, stages=stages, pad="auto")


CASES = [
    pytest.param(source("mma", 2), id="mma-s2"),
    pytest.param(source("mma", 3), id="mma-s3"),
    pytest.param(source("mma", 4, bk=64), id="mma-s4-bk64"),
    pytest.param(source("mma", 3, a="col", b="col"), id="mma-s3-colcol"),
    pytest.param(source("wmma", 2), id="wmma-s2"),
    pytest.param(source("wmma", 3, bk=64), id="wmma-s3-bk64"),
    pytest.param(source("wmma", 4, a="col"), id="wmma-s4-acol"),
]


def main_kernel(text: str):
    return compile_source(text, "fb.tile").kernels[0]


def test_structure_two_fragment_sets_and_the_barrier_inside_the_fragment_steps() -> None:
    k = main_kernel(source("mma", 3))
    assert "fragment-buffering" in k.passes
    assert [f.count for f in k.fragments] == [(4, 1), (1, 8), (2, 4)]
    kt = next(s for s in k.body if isinstance(s, For) and s.var == "kt")
    kk = kt.body[0]
    assert len(kt.body) == 1 and kk.var == "kk"
    issue, last = kk.body[0], kk.body[1]
    assert isinstance(issue, If) and (issue.op, str(issue.rhs)) == ("==", "0")
    assert isinstance(last, If) and str(last.rhs) == "1"
    assert isinstance(last.then[0], AsyncWait) and last.then[0].pending == 1
    assert isinstance(last.then[1], Barrier)
    # One barrier before the loop (the first fragments) and one inside; none at the top.
    barriers = [s for s in walk(k.body) if isinstance(s, Barrier)]
    assert len(barriers) == 2
    loads = [s for s in walk(kk.body) if isinstance(s, LoadFrag)]
    assert str(loads[0].frag) == "a[(kk + 1) % 2 * 2 + i][0]"
    assert str(loads[0].src.slot) == "(kt + (kk + 1) / 2) % 3"


@pytest.mark.parametrize("text", CASES)
def test_interpreter_multiple_and_odd_size(text: str) -> None:
    program = compile_source(text, "fb.tile")
    for kernel in program.kernels:
        for size in (default_cpu_size(kernel), (70, 130, 100), (64, 64, 32)):
            report = run_cpu(kernel, size, seed=5)
            assert report.ok, report.render()


def test_a_wait_that_lets_the_next_step_fly_is_caught() -> None:
    """Waiting for one group fewer lets step kt + 1's copies still fly when its
    fragments are loaded: the interpreter must refuse to read in-flight bytes."""
    k = main_kernel(source("mma", 3))

    def loosen(stmt):
        return replace(stmt, pending=stmt.pending + 1) if isinstance(stmt, AsyncWait) else stmt

    broken = replace(k, body=map_body(k.body, loosen))
    report = run_cpu(broken, default_cpu_size(k), seed=5)
    assert not report.ok
    assert report.checks[-1].oracle == "race check"


@pytest.mark.parametrize(
    "edit,where,message",
    [
        (
            ("stages 3", "stages 1"),
            (10, 5),
            "fragment_buffers 2 loads the next step's fragments across the pipeline's "
            "barrier, and stages 1 has no pipeline",
        ),
        (
            ("block 64 x 64 x 32", "block 64 x 64 x 48"),
            (10, 5),
            "fragment_buffers 2 alternates two fragment sets over the fragment steps of a "
            "block step, and BK / mma.K = 48 / 16 = 3 is odd",
        ),
        (
            ("fragment_buffers 2", "fragment_buffers 3"),
            (10, 22),
            "fragment_buffers is 1 or 2, found 3",
        ),
    ],
)
def test_errors(edit, where, message) -> None:
    text = source("mma", 3).replace(*edit)
    if "stages 1" in text:
        text = text.replace("copy async 16", "copy sync 16")
    with pytest.raises(TileError) as info:
        compile_source(text, "fb.tile")
    d = info.value.first
    assert ((d.loc.line, d.loc.col), d.message) == (where, message)


@pytest.mark.gpu
@pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy")
@pytest.mark.parametrize("text", CASES)
def test_gpu_multiple_and_odd_size(text: str) -> None:
    program = compile_source(text, "fb.tile")
    for kernel, launch in zip(program.kernels, program.launches):
        for size in (default_cpu_size(kernel), (1000, 1032, 520)):
            report = run_gpu(kernel, program.source, launch, size, seed=7, repeat=2)
            assert report.ok, report.render()
            assert report.checks[0].detail == "bit-exact"


MUSA_KERNEL = """kernel musa_fb {
    A: f16[M, K] row
    B: f16[K, N] row
    C: f32[M, N] row
    C[m, n] = A[m, k] * B[k, n]
    block 128 x 128 x 32
    mma 16 x 16 x 16
    coarsen 2 x 4
    stages 2
    fragment_buffers 2
    copy sync 8
    target musa mp_22
}"""


def test_musa_runs_in_the_interpreter_and_type_checks(tmp_path) -> None:
    """The pass is IR to IR: a MUSA kernel (128-lane warps, plain copies) takes it too."""
    program = compile_source(MUSA_KERNEL, "musa_fb.tile")
    kernel = program.kernels[0]
    assert "fragment-buffering" in kernel.passes
    for size in (default_cpu_size(kernel), (130, 70, 100)):
        assert run_cpu(kernel, size, seed=9).ok
    clang = shutil.which("clang++")
    if clang is None:
        pytest.skip("clang++ is not installed (Debian package clang)")
    path = tmp_path / "musa_fb.mu"
    path.write_text(program.source)
    api = Path(__file__).resolve().parent / "musa_api"
    flags = ["-x", "cuda", "--cuda-host-only", "-nocudainc", "-nocudalib", "-fsyntax-only"]
    flags += ["-std=c++17", "-Wno-unknown-attributes", "-Wno-unknown-cuda-version"]
    cmd = [clang, *flags, "-I", str(api), str(path)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
