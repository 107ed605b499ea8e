"""Every `examples/**/*.tile` (globbed: a new example is picked up): parse, format, compile,
print the IR after every stage, run in the interpreter, and build with nvcc.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import EXAMPLES, cuda_example_params, example_params

from tiledsl.commands.run import default_cpu_size, run_cpu
from tiledsl.driver import compile_file, compile_source, lower_program
from tiledsl.errors import TileError
from tiledsl.frontend.formatter import format_program
from tiledsl.frontend.parser import parse
from tiledsl.ir.printer import print_ir
from tiledsl.ir.targets import build_arch
from tiledsl.passes import STAGE_NAMES
from tiledsl.tune.dispatch import table_path

SEED = 20240611


def test_there_are_examples() -> None:
    names = {p.name for p in EXAMPLES}
    assert {"hgemm.tile", "v1.tile", "v2.tile"} <= names


@pytest.mark.parametrize("path", example_params())
def test_parses(path: Path) -> None:
    program = parse(path.read_text(), str(path))
    assert program.kernels
    assert program.file == str(path)
    for kernel in program.kernels:
        assert kernel.directive("block") is not None


@pytest.mark.parametrize("path", example_params())
def test_formatter_round_trip(path: Path) -> None:
    program = parse(path.read_text(), str(path))
    text = format_program(program)
    again = parse(text, "formatted.tile")
    assert again == program
    assert format_program(again) == text  # canonical text is a fixed point
    assert "#" not in text  # comments are not kept


@pytest.mark.parametrize("path", example_params())
def test_compiles(path: Path) -> None:
    compiled = compile_file(path)
    names = [k.name for k in parse(path.read_text(), str(path)).kernels]
    assert [k.name for k in compiled.kernels] == names
    assert [launch.kernel for launch in compiled.launches] == names
    for name in names:
        assert f"{name}(" in compiled.source
    twins = [k.edge.name for k in compiled.kernels if k.edge is not None]
    assert compiled.source.count('extern "C" __global__') == len(names) + len(twins)
    for kernel, launch in zip(compiled.kernels, compiled.launches):
        assert launch.threads == kernel.threads
        assert launch.threads % 32 == 0 and 0 < launch.threads <= 1024
        assert launch.smem_bytes == kernel.smem_bytes
        assert launch.smem_bytes <= 227 * 1024  # the H200's opt-in limit per block
        assert tuple(launch.block_tile) == kernel.schedule.block


@pytest.mark.parametrize("path", example_params())
def test_prints_ir_after_every_stage(path: Path) -> None:
    compiled = compile_file(path)
    per_kernel = len(STAGE_NAMES)
    assert len(compiled.snapshots) == per_kernel * len(compiled.kernels)
    for i, (stage, kernel, ran) in enumerate(compiled.snapshots):
        assert stage == STAGE_NAMES[i % per_kernel]
        text = print_ir(kernel)
        assert text.startswith(f"kernel {kernel.name} (")
        assert "\n  body\n" in text
        assert print_ir(kernel) == text  # deterministic
        if stage == "lower":
            assert ran
            assert "barrier.block" not in text  # the naive form shares no A or B tiles
    finals = [
        k for i, (_, k, _) in enumerate(compiled.snapshots) if i % per_kernel == per_kernel - 1
    ]
    # the compiled kernels are the pipeline's last stage, with their twins for edge tiles
    assert [replace(k, edge=None) for k in compiled.kernels] == finals


def ladder_text(path: Path) -> str:
    """The kernels whose every stage the ladder test runs: all of an example's, but only the
    first of a file with a dispatch table beside it (`tiledsl tune --sizes` wrote it): its
    kernels are points of one space, the same passes on other numbers, and each of them runs
    whole in test_interpreter_at_the_default_size and test_cli's `run --cpu`."""
    text = path.read_text()
    if not table_path(path).exists():
        return text
    program = parse(text, str(path))
    return format_program(replace(program, kernels=program.kernels[:1]))


def test_the_ladder_runs_every_kernel_of_an_example_and_the_first_of_a_tuned_file() -> None:
    tuned = [p for p in EXAMPLES if table_path(p).exists()]
    assert tuned, "the tuned dispatch files are examples too"
    for path in tuned:
        first = parse(path.read_text(), str(path)).kernels[0]
        assert parse(ladder_text(path), "ladder.tile").kernels == (first,)
    plain = next(p for p in EXAMPLES if p.name == "hgemm.tile")
    assert ladder_text(plain) == plain.read_text()


@pytest.mark.parametrize("stage", STAGE_NAMES)
@pytest.mark.parametrize("path", example_params())
def test_every_stage_emits_and_runs_correctly(path: Path, stage: str) -> None:
    """`--stop-after STAGE` is the optimization ladder: each rung must be a correct kernel,
    or, where that rung cannot fit the GPU (the naive form of a 128 x 128 block needs 64
    warps), a located error that says which later stage would."""
    text = ladder_text(path)
    try:
        compiled = compile_source(text, str(path), stop_after=stage)
    except TileError as err:
        if "wgmma reads A and B from 128-byte-swizzled" in err.first.message:
            # wgmma reads only the swizzled tiles padding makes: its rungs start there, and
            # the IR before it still runs in the interpreter
            assert STAGE_NAMES.index(stage) < STAGE_NAMES.index("padding")
            for kernel in lower_program(parse(text, str(path)), stop_after=stage):
                assert run_cpu(kernel, default_cpu_size(kernel), seed=SEED).ok
            return
        assert "threads per block" in err.first.message, str(err)
        assert any(note.startswith(f"this is the IR after {stage}") for note in err.first.notes)
        return
    if compiled.kernels[0].schedule.instruction == "wgmma":
        assert "wgmma.mma_async.sync.aligned" in compiled.source
    elif compiled.kernels[0].schedule.instruction == "mma.sync":
        assert "mma.sync.aligned.m16n8k16" in compiled.source
    elif compiled.kernels[0].schedule.instruction == "fma":
        assert "fma_dot8<" in compiled.source
    else:
        assert "wmma::mma_sync(" in compiled.source
    for kernel in compiled.kernels:
        report = run_cpu(kernel, default_cpu_size(kernel), seed=SEED)
        assert report.ok, report.render()


@pytest.mark.parametrize("path", example_params())
def test_interpreter_at_the_default_size(path: Path) -> None:
    for kernel in compile_file(path).kernels:
        size = default_cpu_size(kernel)
        bm, bn, bk = kernel.schedule.block
        # the caller's M x N x K: the kernel's own, swapped back under swap_operands
        assert kernel.gemm.oriented(size) == (2 * bm, 3 * bn, 3 * bk)
        report = run_cpu(kernel, size, seed=SEED)
        assert report.ok, report.render()
        assert [c.oracle for c in report.checks] == [
            "exact oracle",
            "statistical oracle",
            "race check",
        ]
        assert report.checks[1].score <= 1.0


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("path", cuda_example_params())
def test_nvcc_builds_it_without_spills(path: Path) -> None:
    from tiledsl.gpu.toolchain import compile_cubin

    compiled = compile_file(path)
    reports = compile_cubin(compiled.source, build_arch("sm_90", compiled.kernels), path.stem)
    kernels = [*compiled.kernels, *(k.edge for k in compiled.kernels if k.edge is not None)]
    assert sorted(reports) == sorted(k.name for k in kernels)
    for kernel in kernels:  # the guarded twins for edge tiles too
        report = reports[kernel.name]
        assert not report.spills, str(report)
        assert report.stack_frame == 0, str(report)
        assert 0 < report.registers <= 255, str(report)
        assert report.smem_bytes == 0  # tiledsl's shared memory is all dynamic
