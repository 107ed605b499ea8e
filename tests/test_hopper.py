"""The Hopper directives (`copy tma`, `warp_specialize`, `persistent`): what they build and
what they refuse, with the directive's location (tiledsl.frontend.hopper)."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from helpers import ROOT, kernel_text, line_of

from tiledsl.driver import compile_file, compile_source, lower_file
from tiledsl.emit.launch import launch_of
from tiledsl.errors import TileError
from tiledsl.ir.nodes import Arrive, ExpectTx, Roles, TmaLoad, Wait, walk
from tiledsl.ir.targets import TARGETS
from tiledsl.models.registers import role_registers

HOPPER = (
    "block 128 x 256 x 64",
    "mma m64n256k16",
    "stages 4",
    "copy tma",
    "warp_specialize",
    "persistent",
    "target cuda sm_90",
)
F16_C = ("A: f16[M, K] row", "B: f16[K, N] row", "C: f16[M, N] row")


def errors(text: str) -> list[tuple[int, int, str]]:
    with pytest.raises(TileError) as info:
        compile_source(text, "k.tile")
    return [(d.loc.line, d.loc.col, d.message) for d in info.value.diagnostics]


def test_the_pass_builds_a_producer_and_consumers_on_mbarriers() -> None:
    (kernel,) = lower_file(ROOT / "examples" / "hopper" / "persistent.tile")
    roles = [s for s in kernel.body if isinstance(s, Roles)]
    assert len(roles) == 1 and kernel.producer_warps == 1 and kernel.persistent
    producer, consumer = roles[0].producer, roles[0].consumer
    assert (producer.registers, consumer.registers) == (40, 232)
    assert [m.name for m in kernel.mbarriers] == ["full", "empty"]
    assert kernel.mbarrier("empty").arrivals == kernel.warp_count == 2
    loads = [s for s in walk(producer.body) if isinstance(s, TmaLoad)]
    assert [t.src.operand for t in loads] == ["A", "B"]
    assert sum(isinstance(s, ExpectTx) for s in walk(producer.body)) == 1
    assert not any(isinstance(s, TmaLoad) for s in walk(consumer.body))
    assert [s.bar.name for s in walk(consumer.body) if isinstance(s, Wait)] == ["full"]
    assert {s.bar.name for s in walk(consumer.body) if isinstance(s, Arrive)} == {"empty"}
    assert kernel.threads == 384 and kernel.edge is None  # every size: partial tiles by TMA


def test_the_launch_lists_each_tensor_map_and_a_persistent_grid() -> None:
    (kernel,) = lower_file(ROOT / "examples" / "hopper" / "persistent.tile")
    launch = launch_of(kernel).to_json()
    assert [m["operand"] for m in launch["tensor_maps"]] == ["A", "B"]
    assert [m["box"] for m in launch["tensor_maps"]] == [[64, 128], [64, 64]]
    assert launch["args"][:2] == [
        ["map_A", "const __grid_constant__ TensorMap"],
        ["map_B", "const __grid_constant__ TensorMap"],
    ]
    assert "persistent" in launch and "edge" not in launch  # no twin: TMA runs every size
    assert "padded to the next multiple of 128 bytes" in launch["staging"]


def test_the_register_split_gives_consumers_only_what_the_producer_frees() -> None:
    sm90 = TARGETS["cuda sm_90"]
    assert role_registers(2, sm90).consumer == 232  # 168 at entry + (168 - 40) / 2
    assert role_registers(4, sm90).consumer == 104  # asking 112 hung the H200
    assert role_registers(1, sm90).consumer == 240


def test_hopper_directives_are_refused_off_the_wgmma_path() -> None:
    text = kernel_text(
        "block 64 x 64 x 32", "mma 16 x 16 x 16", "coarsen 2 x 2", "stages 3", "copy tma",
        "warp_specialize",
    )  # fmt: skip
    assert errors(text) == [
        (
            line_of(text, "copy tma"),
            5,
            "`copy tma` builds Hopper's TMA and warpgroup pipeline, which feeds wgmma",
        )
    ]


@pytest.mark.parametrize(
    ("drop", "directive", "message"),
    [
        (
            "copy tma",
            "warp_specialize",
            "warp_specialize is built for TMA copies only (one thread of the producer "
            "warpgroup issues them)",
        ),
    ],
)
def test_tma_and_warp_specialization_come_together(drop, directive, message) -> None:
    text = kernel_text(*(d for d in HOPPER if d != drop), operands=F16_C)
    assert (line_of(text, directive), 5, message) in errors(text)


def test_unbuilt_combinations_are_located_refusals() -> None:
    text = kernel_text(*HOPPER, operands=F16_C, product="C[m, n] += A[m, k] * B[k, n]")
    compile_source(text, "k.tile")  # built: C is read in the register epilogue
    # (tests/test_accumulate_hopper.py)
    text = kernel_text(*HOPPER, "epilogue_via shared", operands=F16_C)
    assert any("epilogue_via shared on a TMA kernel" in e[2] for e in errors(text))


def test_too_many_consumers_for_the_register_file_is_refused() -> None:
    text = kernel_text(
        "block 256 x 256 x 64", "mma m64n256k16", "stages 3", "copy tma", "warp_specialize",
        "target cuda sm_90", operands=F16_C,
    )  # fmt: skip
    found = errors(text)
    assert any(
        e[0] == line_of(text, "warp_specialize")
        and "ptxas compiles the kernel under a cap of 96 registers" in e[2]
        for e in found
    ), found


def test_a_ptxas_cap_below_the_accumulators_is_refused() -> None:
    """192 x 256: 3 consumers and a producer, 512 threads, a cap of 128 at entry; ptxas
    stops with C7602 (measured: it asked for 154) though setmaxnreg could give 152."""
    text = kernel_text(
        "block 192 x 256 x 64", "mma m64n256k16", "stages 4", "copy tma", "warp_specialize",
        "target cuda sm_90", operands=F16_C,
    )  # fmt: skip
    assert errors(text) == [
        (
            line_of(text, "warp_specialize"),
            5,
            "3 consumer warpgroups and a producer are 512 threads, so ptxas compiles the kernel "
            "under a cap of 128 registers per thread (setmaxnreg raises it only at run time), "
            "and a consumer's fragments need 128 and about 26 more",
        )
    ]


@pytest.mark.nvcc
@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")
@pytest.mark.parametrize("name", ["ws", "persistent"])
def test_hopper_examples_build_without_spills_or_ignored_setmaxnreg(tmp_path, name) -> None:
    compiled = compile_file(ROOT / "examples" / "hopper" / f"{name}.tile")
    source = tmp_path / "k.cu"
    source.write_text(compiled.source)
    run = subprocess.run(
        ["nvcc", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v", "-c", str(source),
         "-o", str(tmp_path / "k.o")],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert "C7508" not in run.stderr  # setmaxnreg ignored
    assert " 0 bytes spill stores" in run.stderr


def test_the_main_job_runs_the_kernels_of_the_newest_architecture_a_gpu_can_run() -> None:
    compiled = compile_file(ROOT / "examples" / "main.tile")
    names = {arch: [k.name for k in compiled.for_device(arch)] for arch in ("sm_90", "sm_86")}
    assert names == {"sm_90": ["main_hopper"], "sm_86": ["main_ampere"]}
    hopper = compiled.source_for(compiled.for_device("sm_90"))
    assert "main_hopper(" in hopper and "main_ampere(" not in hopper
    single = compile_file(ROOT / "examples" / "hgemm.tile")
    assert single.for_device("sm_80") == single.kernels  # one target: every kernel


def test_an_mma_too_wide_for_the_block_is_refused_not_divided_by_zero() -> None:
    """Found by the fuzz test: no consumer warpgroup fits, so no register split to make."""
    text = kernel_text(
        *(d if not d.startswith("mma") else "mma m64n1000000000000000000000000000000k16"
          for d in HOPPER),
        operands=F16_C,
    )  # fmt: skip
    found = errors(text)
    assert found and all(line == line_of(text, "mma m64n1") for line, _, _ in found), found


def test_a_wgmma_of_no_columns_is_refused_not_divided_by() -> None:
    """Found by the fuzz test (seed 11): `mma m64n0k16` on a warp-specialized schedule with
    a column-major A reached the register split, which divided by the warpgroup's width."""
    text = (ROOT / "examples" / "tuned" / "hopper_tuned_192.tile").read_text()
    text = text.replace("A: f16[M, K] row", "A: f16[M, K] col").replace("m64n192k16", "m64n0k16")
    found = errors(text)
    assert (line_of(text, "    mma "), 5, "cuda sm_90 has no m64n0k16 wgmma for f16 here") in found
