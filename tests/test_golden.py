"""Golden IR before and after every pass, and the emitted CUDA, for the ladder's schedules."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiledsl.driver import compile_file
from tiledsl.printer import print_ir

ROOT = Path(__file__).resolve().parent.parent

CASES = ["ladder/v1", "ladder/v2", "ladder/v3", "ladder/v4", "ladder/v5", "hgemm", "hgemm_f16"]


@pytest.mark.parametrize("name", CASES)
def test_ir_after_each_stage(name, golden):
    compiled = compile_file(ROOT / "examples" / f"{name}.tile")
    text = []
    for stage, kernel, ran in compiled.snapshots:
        text.append(f"// ----- after {stage}{'' if ran else ' (not enabled)'}\n{print_ir(kernel)}")
    golden(f"{name.replace('/', '_')}.ir", "\n".join(text))


@pytest.mark.parametrize("name", CASES)
def test_emitted_cuda(name, golden):
    compiled = compile_file(ROOT / "examples" / f"{name}.tile")
    golden(f"{name.replace('/', '_')}.cu", compiled.source)


def test_smem_tiling_changes_only_the_k_loop():
    """smem-tiling adds As and Bs and rewrites the K loop; C's staged load and store stay."""
    compiled = compile_file(ROOT / "examples" / "hgemm_f16.tile")
    stages = {stage: kernel for stage, kernel, _ in compiled.snapshots}
    lowered, tiled = stages["lower"], stages["smem-tiling"]
    assert lowered.body[:3] == tiled.body[:3]  # C -> Cs, barrier, load of the accumulator
    assert lowered.body[4:] == tiled.body[4:]  # acc -> Cs, barrier, Cs -> C
    assert lowered.body[3] != tiled.body[3]  # the K loop
    assert [b.name for b in lowered.buffers] == ["Cs"]
    assert [b.name for b in tiled.buffers] == ["Cs", "As", "Bs"]
