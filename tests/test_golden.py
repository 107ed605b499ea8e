"""Golden IR before and after every pass, and the emitted CUDA, for the ladder's schedules."""

from __future__ import annotations

from pathlib import Path

import pytest

from tiledsl.driver import compile_file
from tiledsl.ir.printer import print_ir

ROOT = Path(__file__).resolve().parent.parent

CASES = [
    "ladder/v1",
    "ladder/v2",
    "ladder/v3",
    "ladder/v4",
    "ladder/v5",
    "ladder/v6",
    "hgemm",
    "hgemm_f16",
    "hgemm_nt",
    "hgemm_mma",  # the mma.sync path and pad xor
    "tuned/wmma_f32acc",  # fragment-buffering
    "tuned/wgmma_f32acc",  # the wgmma path: warpgroups, descriptors, the 128-byte swizzle
    "hopper/tma",  # tma-copies: TMA loads on full mbarriers, every warp computing
    "hopper/persistent",  # warp-specialization: TMA, mbarriers, roles, the tile loop
    "hopper/epilogue",  # epilogue_via tma: stmatrix into Cs, TMA stores, their waits
    "hopper/pingpong",  # warp_specialize pingpong: two teams on alternate tiles, their turns
    "hopper/cluster",  # cluster 2 x 1: multicast parts of B, releases across the cluster
    "hopper/stream_k",  # persistent stream_k: the shares, the partial sums and their flags
    "hopper/stream_k_aligned",  # ... taken last tile first, the owner at the tile's last step
    "hopper/few_tokens_swapped",  # swap_operands: the transpose's operands, the caller's order
    "hopper/split_k",  # split_k: a block per slice, the partial sums, the tile's ticket
    "hopper/split_k_cluster",  # split_k via cluster: the slices one cluster, Ps over DSMEM
    "direct/few_tokens_direct",  # stages 0 on mma.sync: direct vectors; warps_k: K teams
    "direct/few_tokens_fma",  # mma fma: a warp a row, the CUDA cores' fmas; split_k's partials
]


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


def test_smem_tiling_changes_the_k_loop_and_fences_the_reused_bytes():
    """smem-tiling adds As and Bs, rewrites the K loop, puts Cs over As and Bs, and adds the
    two block barriers that reuse needs; C's staged load and store stay as they were."""
    compiled = compile_file(ROOT / "examples" / "hgemm_f16.tile")
    stages = {stage: kernel for stage, kernel, _ in compiled.snapshots}
    lowered, tiled = stages["lower"], stages["smem-tiling"]
    assert lowered.body[:3] == tiled.body[:3]  # C -> Cs, barrier, load of the accumulator
    assert tiled.body[3].scope == "block" and tiled.body[3].reason.startswith("WAR")
    assert tiled.body[5].scope == "block" and tiled.body[5].reason.startswith("WAR")
    assert lowered.body[4:] == tiled.body[6:]  # acc -> Cs, barrier, Cs -> C
    assert [b.name for b in lowered.buffers] == ["Cs"]
    assert [(b.name, b.alias) for b in tiled.buffers] == [("As", None), ("Bs", None), ("Cs", "As")]
    # A union: max(As + Bs, Cs) bytes, not the sum of all three.
    assert [b.size_bytes for b in tiled.buffers] == [4096, 8192, 32768]
    assert tiled.smem_bytes == 32768
