"""On a CUDA GPU through CuPy/NVRTC: every example is exact, within the statistical bound, and
timed; NVRTC failures and the toolkit headers are reported as docs/architecture.md says.

Every test here is marked `gpu` and skipped cleanly where `gpu_available()` says no
(no CuPy, no driver, or no device).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import cli, cuda_example_params

from tiledsl.commands.run import default_cpu_size, run_gpu
from tiledsl.driver import compile_file, compile_source
from tiledsl.errors import TileError, ToolchainError
from tiledsl.gpu.runtime import gpu_available
from tiledsl.passes import STAGE_NAMES

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not gpu_available(), reason="needs a CUDA GPU visible to CuPy"),
]

SEED = 1234
LARGE = (1024, 1024, 1024)


def assert_passed(report, kernel) -> None:
    assert report.ok, report.render()
    assert [c.oracle for c in report.checks] == ["exact oracle", "statistical oracle"]
    assert report.checks[0].detail == "bit-exact"
    assert 0.0 <= report.checks[1].score <= 1.0
    assert report.time_ms is not None and report.time_ms > 0, report.render()
    if kernel.gemm.a.dtype == "f16" and report.batch == 1:  # cuBLAS is timed on f16 only
        assert report.cublas_ms is not None and report.cublas_ms > 0, report.render()
    else:
        assert report.cublas_ms is None and "cuBLAS: not compared" in report.render()
    assert report.tflops > 0


def run_each(path: Path, size_of, stop_after: str | None = None, repeat: int = 5) -> None:
    compiled = compile_file(path, stop_after=stop_after)
    assert len(compiled.kernels) == len(compiled.launches)
    for kernel, launch in zip(compiled.kernels, compiled.launches):
        size = size_of(kernel)
        source = compiled.source_for((kernel,))  # one architecture's build (main.tile has two)
        report = run_gpu(kernel, source, launch, size, seed=SEED, repeat=repeat)
        assert report.size == size
        assert_passed(report, kernel)


@pytest.mark.parametrize("path", cuda_example_params())
def test_small_multiple_of_the_block_tile(path: Path) -> None:
    # 2 x 3 block tiles and 3 K steps: lopsided, so a swapped M / N or a dropped K step shows.
    run_each(path, default_cpu_size)


@pytest.mark.parametrize("path", cuda_example_params())
def test_1024_cubed(path: Path) -> None:
    run_each(path, lambda kernel: LARGE)


@pytest.mark.parametrize("stage", STAGE_NAMES)
@pytest.mark.parametrize("path", cuda_example_params())
def test_every_stage_of_the_ladder(path: Path, stage: str) -> None:
    try:
        compile_file(path, stop_after=stage)
    except TileError as err:  # a rung too big for the GPU: tests/test_examples.py checks why
        pytest.skip(err.first.message)
    run_each(path, default_cpu_size, stop_after=stage, repeat=2)


@pytest.mark.parametrize("path", cuda_example_params())
def test_cli_run_on_the_gpu(path: Path, capsys) -> None:
    r = cli(["run", path, "--size", "1024x1024x1024", "--seed", "5"], capsys)
    assert r.code == 0, r.out + r.err
    assert "numpy interpreter" not in r.out + r.err
    assert "CuPy/NVRTC" in r.out
    assert "exact oracle" in r.out and "statistical oracle" in r.out
    assert "FAIL" not in r.out
    assert "TFLOP/s" in r.out and "cuBLAS" in r.out


def test_nvrtc_failure_keeps_the_source() -> None:
    from tiledsl.gpu import runtime

    with pytest.raises(ToolchainError) as info:
        runtime.load_module("this is not C++", "sm_90")
    err = info.value
    kept = Path(err.source_path)
    assert kept.is_file()
    assert kept.read_text() == "this is not C++"
    assert f"generated source: {kept}" in str(err)
    assert err.log.strip()  # NVRTC's own log
    assert "nvcc" in err.command and str(kept) in err.command
    assert "NVRTC failed" in str(err)


def test_toolkit_headers_for_wmma() -> None:
    from tiledsl.gpu.runtime import cuda_include_dir

    inc = cuda_include_dir()
    assert (inc / "crt" / "mma.h").is_file()
    assert (inc / "mma.h").is_file()


def test_device_is_described() -> None:
    from tiledsl.gpu import runtime

    assert runtime.device_arch().startswith("sm_")
    assert runtime.device_name()


@pytest.mark.parametrize("path", cuda_example_params())
def test_odd_sizes_run_the_guarded_twin(path: Path) -> None:
    compiled = compile_file(path)
    for kernel, launch in zip(compiled.kernels, compiled.launches):
        if kernel.edge is None:
            continue  # stages 0: WMMA's multiples of the tile only, or the direct path (below)
        bm, bn, bk = kernel.schedule.block
        size = (bm + 3, 2 * bn - 5, 2 * bk + 9)
        source = compiled.source_for((kernel,))
        report = run_gpu(kernel, source, launch, size, seed=SEED, repeat=2)
        assert report.kernel == kernel.edge.name
        assert_passed(report, kernel)


@pytest.mark.parametrize("example", ["few_tokens_direct", "few_tokens_fma"])
@pytest.mark.parametrize(
    "size",
    [
        (1, 4096, 11008),
        (16, 12288, 4096),
        (3, 37, 517),
        (1, 1, 1),
        (127, 61, 37),
        (5, 100, 999),
        (7, 45, 1000),
    ],
)
def test_the_direct_path_runs_every_size_itself(example, size) -> None:
    """stages 0 (examples/direct): mma.sync's guarded vectors, K teams, C by team 0, and
    the fma path's (a warp a row, the warp's partials added by shuffles, split_k); at the
    few-token shapes, at odd ones, where K's rows are not a whole 16 bytes (999), and where
    they are but K is not a whole K step (1000: the ragged step's vectors tested against K,
    some lanes' in and some out)."""
    from helpers import ROOT

    compiled = compile_file(ROOT / "examples" / "direct" / f"{example}.tile")
    for kernel, launch in zip(compiled.kernels, compiled.launches):
        source = compiled.source_for((kernel,))
        report = run_gpu(kernel, source, launch, size, seed=SEED, repeat=2)
        assert report.kernel == kernel.name  # no twin: the kernel guards its own loads
        assert_passed(report, kernel)


@pytest.mark.parametrize("size", [(1, 4096, 11008), (3, 37, 517)])
def test_blocks_per_sm_kernels(size) -> None:
    """docs/probes/blocks_per_sm.tile with `blocks_per_sm` 2 and 4 written in: the registers
    capped (ptxas within the cap, or the launch would fail), the results the same."""
    from helpers import ROOT

    text = (ROOT / "docs" / "probes" / "blocks_per_sm.tile").read_text()
    text = text.replace("    warps_k 8\n", "    warps_k 8\n    blocks_per_sm 4\n")
    text = text.replace("    warps_k 16\n", "    warps_k 16\n    blocks_per_sm 2\n")
    compiled = compile_source(text, "blocks_per_sm.tile")
    assert [k.schedule.blocks_per_sm for k in compiled.kernels] == [4, 2, 4]
    for kernel, launch in zip(compiled.kernels, compiled.launches):
        report = run_gpu(kernel, compiled.source_for((kernel,)), launch, size, seed=SEED, repeat=2)
        assert_passed(report, kernel)


@pytest.mark.parametrize("size", [(200, 328, 104), (136, 264, 72), (2000, 4000, 1000)])
def test_a_tma_only_kernel_runs_partial_tiles_itself(size) -> None:
    from helpers import ROOT

    compiled = compile_file(ROOT / "examples" / "hopper" / "epilogue.tile")
    ((kernel, launch),) = zip(compiled.kernels, compiled.launches)
    report = run_gpu(kernel, compiled.source, launch, size, seed=SEED, repeat=2)
    assert report.kernel == kernel.name  # TMA zero-fills the loads and clips the stores
    assert_passed(report, kernel)


@pytest.mark.parametrize(
    "name, size",
    [
        ("ws", (200, 328, 104)),
        ("persistent", (136, 264, 72)),
        ("tma", (200, 328, 104)),
        ("few_tokens_swapped", (1, 4096, 4096)),  # one token: split-K and guarded C stores
        ("few_tokens_swapped", (13, 200, 336)),
    ],
)
def test_tma_loads_and_guarded_c_stores_run_partial_tiles_themselves(name, size) -> None:
    from helpers import ROOT

    compiled = compile_file(ROOT / "examples" / "hopper" / f"{name}.tile")
    ((kernel, launch),) = zip(compiled.kernels, compiled.launches)
    report = run_gpu(kernel, compiled.source, launch, size, seed=SEED, repeat=2)
    assert report.kernel == kernel.name  # TMA zero-fills the loads; C's stores are guarded
    assert_passed(report, kernel)


HOPPER_EXAMPLES = sorted((Path(__file__).parent.parent / "examples" / "hopper").glob("*.tile"))


@pytest.mark.parametrize("path", HOPPER_EXAMPLES, ids=lambda p: p.stem)
def test_a_tma_kernel_stages_the_lines_tma_cannot_address(path: Path) -> None:
    from tiledsl.gpu.staging import plan

    compiled = compile_file(path)
    for kernel, launch in zip(compiled.kernels, compiled.launches):
        bm, bn, bk = kernel.schedule.block
        for size in ((bm + 3, 2 * bn - 5, 2 * bk + 9), (127, 61, 37), (1, 1, 1)):
            # odd: no map reads them as they lie
            assert plan(launch, kernel.gemm.as_written.size_env(*size))
            report = run_gpu(kernel, compiled.source, launch, size, seed=SEED, repeat=2)
            assert report.kernel == kernel.name  # no twin: staged, then TMA's partial tiles
            assert_passed(report, kernel)


@pytest.mark.parametrize("name", ["epilogue", "ws", "few_tokens_swapped"])
def test_4095_x_4097_x_4099_on_a_tma_kernel(name: str) -> None:
    # C leaves by a TMA store (staged and copied back), from the registers into a row-major
    # C with an odd N (element by element), and transposed (swap_operands: C^T is
    # column-major) element by element
    from helpers import ROOT

    compiled = compile_file(ROOT / "examples" / "hopper" / f"{name}.tile")
    ((kernel, launch),) = zip(compiled.kernels, compiled.launches)
    report = run_gpu(kernel, compiled.source, launch, (4095, 4097, 4099), seed=SEED, repeat=2)
    assert report.kernel == kernel.name
    assert_passed(report, kernel)


def test_a_batch_on_the_gpu() -> None:
    from helpers import ROOT

    compiled = compile_file(ROOT / "examples" / "batched.tile")
    for kernel, launch in zip(compiled.kernels, compiled.launches):
        for size in ((256, 256, 128), (100, 70, 50)):
            report = run_gpu(kernel, compiled.source, launch, size, seed=SEED, repeat=2, batch=3)
            assert report.batch == 3
            assert_passed(report, kernel)
