"""`tiledsl check`, in-process: the feasibility report of a schedule (S4000 write-up §3.1).

The numbers are read back from the printed report and compared with what the
compiler itself says (KernelIR.smem_bytes, tiledsl.models.banks, ptxas), so the tests
pin the report to the model, not to a copy of it.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from helpers import BUILDABLE, ROOT, cli, example_params, kernel_text, line_of, replace_directive

import tiledsl.gpu.toolchain
from tiledsl.driver import compile_file
from tiledsl.models.occupancy import occupancy
from tiledsl.models.registers import register_estimate

HGEMM = ROOT / "examples" / "hgemm.tile"
V1 = ROOT / "examples" / "ladder" / "v1.tile"
V4 = ROOT / "examples" / "ladder" / "v4.tile"
V5 = ROOT / "examples" / "ladder" / "v5.tile"

needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not on PATH")


@pytest.fixture
def no_nvcc(monkeypatch):
    """As if nvcc were not installed: the report falls back to the estimate."""
    monkeypatch.setattr(tiledsl.gpu.toolchain, "nvcc_path", lambda: None)


def cells(line: str) -> list[str]:
    """A table row's cells: columns are two or more spaces apart."""
    return re.split(r"\s{2,}", line.strip())


def section(out: str, title: str) -> str:
    """The part of a report from the line that opens with `title` to the next blank line."""
    return out.split("\n  " + title, 1)[1].split("\n\n", 1)[0]


def row(out: str, first: str) -> list[str]:
    """The cells of the one table row whose first cell is `first`."""
    found = [cells(line) for line in out.splitlines() if cells(line)[0] == first]
    assert len(found) == 1, (first, out)
    return found[0]


def bank_ways(out: str, access: str) -> tuple[int, int]:
    """(ways before padding, ways after) of a bank-table row."""
    c = row(out, access)
    return int(c[3]), int(c[4])


def limit_rows(out: str) -> dict[str, list[str]]:
    names = ("threads", "shared memory", "registers", "blocks")
    lines = section(out, "blocks per multiprocessor").splitlines()
    return {c[0]: c for c in map(cells, lines) if c[0] in names}


# ---------------------------------------------------------------- bank conflicts


def test_v4_fragment_loads_conflict_before_padding(capsys, no_nvcc) -> None:
    r = cli(["check", V4], capsys)
    assert r.code == 0, r.err
    assert bank_ways(r.out, "fragment load of a from As") == (4, 4)  # pad none: no change
    assert bank_ways(r.out, "fragment load of b from Bs") == (8, 8)
    assert row(r.out, "fragment load of a from As")[2] == "32 -> 32"
    assert "pad auto would pick: A 8, B 8 (this kernel: A 0, B 0)" in r.out


def test_v5_padding_removes_the_fragment_load_conflicts(capsys, no_nvcc) -> None:
    r = cli(["check", V5], capsys)
    assert r.code == 0, r.err
    assert bank_ways(r.out, "fragment load of a from As") == (4, 1)
    assert bank_ways(r.out, "fragment load of b from Bs") == (8, 1)
    assert row(r.out, "fragment load of b from Bs")[2] == "64 -> 72"
    # the model's own price of the pad: A's copies now straddle a bank group
    assert bank_ways(r.out, "async copy into As") == (1, 2)
    assert "serialized passes per K step (instr x ways): 208 before padding, 56 after" in r.out


def test_bank_rows_give_instructions_per_k_step(capsys, no_nvcc) -> None:
    from tiledsl.models.banks import conflicts

    kernel = compile_file(V5).kernels[0]
    out = cli(["check", V5], capsys).out
    for buf in ("As", "Bs"):
        for access in conflicts(kernel, buf):
            assert int(row(out, access.what)[5]) == access.instructions


def test_no_shared_memory_means_nothing_to_model(capsys, no_nvcc) -> None:
    r = cli(["check", V1], capsys)
    assert r.code == 0, r.err
    assert "none (stages 0: fragments load straight from global memory)" in r.out
    assert "no shared-memory tiles of A or B: nothing to model" in r.out
    assert limit_rows(r.out)["shared memory"][3] == "no limit"
    assert "passes    none (the naive kernel)" in r.out


# ---------------------------------------------------------------- hgemm: the whole report


def test_hgemm_threads_warps_mmas_and_schedule(capsys, no_nvcc) -> None:
    r = cli(["check", HGEMM], capsys)
    assert r.code == 0, r.err
    assert r.err == ""
    out = r.out
    assert out.startswith("kernel hgemm (cuda sm_90)\n")
    assert (
        "schedule  block 128x128x64  mma 16x16x16  coarsen 4x4  stages 3  copy async 16  "
        "pad auto (A 8, B 8)  swizzle grouped 8  sync minimal"
    ) in out
    kernel = compile_file(HGEMM).kernels[0]
    assert "passes    " + " -> ".join(kernel.passes) in out
    assert "threads   128 per block = 4 warps (2 x 2) of 32 lanes" in out
    assert "MMAs      16 per warp (4 x 4 fragments of 16x16x16)" in out


@pytest.mark.parametrize(
    "path",
    [HGEMM, ROOT / "examples" / "hopper" / "few_tokens_swapped.tile"],
    ids=["row-major tiles", "column-major tiles"],
)
def test_shared_memory_is_the_compiled_kernels(path, capsys, no_nvcc) -> None:
    kernel = compile_file(path).kernels[0]
    out = cli(["check", path], capsys).out
    assert row(section(out, "shared memory"), "total")[0:2] == ["total", str(kernel.smem_bytes)]
    assert f"{kernel.smem_bytes} of {kernel.target.max_smem_per_block} bytes" in out
    for b in kernel.buffers:
        c = row(out, b.name)
        # a line is a row of a row-major tile, a column of a column-major one
        kind = "rows" if b.layout == "row" else "cols"
        assert c[1] == f"{b.slots} x {b.lines} {kind} x {b.pitch}"
        assert b.size_bytes == b.slots * b.lines * b.pitch * (4 if b.dtype == "f32" else 2)
        assert str(b.size_bytes) in c
    assert limit_rows(out)["shared memory"][1:3] == [
        str(kernel.target.smem_per_sm),
        str(kernel.smem_bytes),
    ]


def test_hgemm_register_estimate_seed_and_declared(capsys, no_nvcc) -> None:
    out = cli(["check", HGEMM], capsys).out
    # declared: acc 4 x 4, a 4 x 1, b 1 x 4 fragments of 16 x 16 elements, over 32 lanes;
    # the seed's count keeps one A fragment live instead of four
    assert (4 * 4 + 4 + 4) * 256 // 32 == 192
    assert (4 * 4 + 1 + 4) * 256 // 32 == 168
    assert "registers, ESTIMATE" in out
    assert "the write-up's method: 168 registers per thread, 21504 per block" in out
    assert "this kernel:   192 registers per thread, 24576 per block" in out
    assert row(out, "acc")[-2:] == ["4096", "4096"]
    assert row(out, "a")[-2:] == ["1024", "256"]
    assert ["total", "6144", "5376"] in [cells(line) for line in out.splitlines()]
    assert "ptxas: nvcc is not on PATH" in out
    assert "ptxas (sm_90)" not in out


def test_hgemm_blocks_per_sm_and_the_binding_limit(capsys, no_nvcc) -> None:
    out = cli(["check", HGEMM], capsys).out
    limits = limit_rows(out)
    assert limits["threads"][1:4] == ["2048", "128", "16"]
    assert limits["shared memory"][3] == str(233472 // 107520) == "2"
    assert limits["registers"][1:4] == ["65536", str(192 * 128), "2"]
    assert limits["registers"][4] == "this kernel's estimate: 192/thread"
    assert limits["blocks"][1:4] == ["32", "1", "32"]  # sm_90: 32 resident blocks per SM
    bound = [name for name, c in limits.items() if c[-1] == "<- binds"]
    assert bound == ["shared memory", "registers"]
    assert "=> 2 blocks per multiprocessor, 8 of 64 warps (12%); " in out
    assert "limited by shared memory and registers" in out


def test_occupancy_rounds_registers_to_the_allocation_unit() -> None:
    kernel = compile_file(HGEMM).kernels[0]
    occ = occupancy(kernel, 129)
    assert occ.registers_per_thread == 136
    regs = next(lim for lim in occ.limits if lim.resource == "registers")
    assert regs.per_block == 136 * 128 and regs.blocks == 65536 // (136 * 128) == 3
    assert occ.blocks == 2 and occ.binding == ("shared memory",)
    too_many = occupancy(kernel, 600)
    assert too_many.blocks == 0 and too_many.binding == ("registers",)


def test_register_estimate_counts_every_fragment_element_once() -> None:
    kernel = compile_file(V4).kernels[0]
    est = register_estimate(kernel)
    # (name, declared elements per warp, the seed's live elements per warp)
    assert [(f.name, f.elements, f.live) for f in est.fragments] == [
        ("a", 512, 256),
        ("b", 512, 512),
        ("acc", 1024, 1024),
    ]
    assert est.declared_per_thread == 64 and est.declared_per_block == 64 * 128
    assert est.writeup_per_thread == 56 and est.writeup_per_block == 56 * 128


@needs_nvcc
@pytest.mark.nvcc
def test_ptxas_registers_beside_the_estimate(capsys) -> None:
    from tiledsl.driver import compile_file as compile_
    from tiledsl.gpu.toolchain import compile_cubin

    compiled = compile_(HGEMM)
    real = compile_cubin(compiled.source, "sm_90", "hgemm")["hgemm"]
    r = cli(["check", HGEMM], capsys)
    assert r.code == 0, r.err
    assert f"ptxas (sm_90): {real.registers} registers per thread" in r.out
    assert "this kernel:   192 registers per thread" in r.out
    regs = limit_rows(r.out)["registers"]
    assert regs[4].startswith(f"ptxas: {real.registers}/thread")
    rounded = -(-real.registers // 8) * 8
    assert regs[2] == str(rounded * 128)
    assert regs[3] == str(65536 // (rounded * 128))


def test_ptxas_skipped_with_a_note_without_nvcc(capsys, no_nvcc) -> None:
    r = cli(["check", V4], capsys)
    assert r.code == 0
    assert "ptxas: nvcc is not on PATH: no ptxas numbers, the estimate is used" in r.out
    assert "ptxas (" not in r.out


# ---------------------------------------------------------------- files, kernels, errors


@pytest.mark.parametrize("path", example_params())
def test_every_example_checks(path: Path, capsys, no_nvcc) -> None:
    r = cli(["check", path], capsys)
    assert r.code == 0, r.err
    for kernel in compile_file(path).kernels:
        assert f"kernel {kernel.name} (" in r.out
        assert "blocks per multiprocessor" in r.out


def two_kernels(tmp_path: Path) -> Path:
    text = kernel_text(*BUILDABLE, name="first") + kernel_text(
        *replace_directive(BUILDABLE, "block 32 x 32 x 16"), name="second"
    )
    path = tmp_path / "two.tile"
    path.write_text(text)
    return path


def test_each_kernel_by_default_and_kernel_selects(tmp_path: Path, capsys, no_nvcc) -> None:
    path = two_kernels(tmp_path)
    both = cli(["check", path], capsys)
    assert both.code == 0, both.err
    assert "kernel first (" in both.out and "kernel second (" in both.out
    one = cli(["check", path, "--kernel", "second"], capsys)
    assert one.code == 0, one.err
    assert "kernel first (" not in one.out
    assert one.out.startswith("kernel second (cuda sm_90)\n")
    assert "block 32x32x16" in one.out


def test_unknown_kernel_is_a_usage_error(tmp_path: Path, capsys, no_nvcc) -> None:
    r = cli(["check", two_kernels(tmp_path), "--kernel", "third"], capsys)
    assert r.code == 2
    assert "no kernel 'third'" in r.err and "first, second" in r.err


def test_a_wrong_file_gets_the_located_error(tmp_path: Path, capsys) -> None:
    text = kernel_text(*replace_directive(BUILDABLE, "block 60 x 64 x 32"))
    path = tmp_path / "bad.tile"
    path.write_text(text)
    r = cli(["check", path], capsys)
    assert r.code == 1
    assert r.out == ""
    line = line_of(text, "block 60")
    assert re.match(rf"^{re.escape(str(path))}:{line}:\d+: error: ", r.err), r.err
    assert "    block 60 x 64 x 32" in r.err.splitlines()[1]
    assert "Traceback" not in r.err


def test_missing_file_is_a_usage_error(tmp_path: Path, capsys) -> None:
    r = cli(["check", tmp_path / "nope.tile"], capsys)
    assert r.code == 2
    assert "no such file" in r.err


TUNED = ROOT / "examples" / "tuned"
UNALIGNED = "cp.async stores into rows not 128-byte aligned"


def test_padded_rows_are_flagged_for_cp_async_stores(capsys, no_nvcc) -> None:
    """The bank model counts cp.async's stores into padded rows conflict-free; the H200
    took 2.62x their ideal wavefronts (docs/performance.md): check says
    so, per buffer, with the pitch in bytes (72 and 264 halves)."""
    out = cli(["check", str(TUNED / "wmma_f16acc.tile")], capsys).out
    assert UNALIGNED in out
    assert "As: rows 144 bytes apart; pad xor keeps rows aligned" in out
    assert "Bs: rows 528 bytes apart; pad xor keeps rows aligned" in out
    # ... and the same accesses stay 1-way in the table: the note is beside the model
    assert [r for r in out.splitlines() if "async copy into As" in r][0].split()[-3:] == [
        "1",
        "1",
        "32",
    ]


def test_short_xor_lines_are_flagged_and_wide_ones_are_not(capsys, no_nvcc, tmp_path) -> None:
    # mma_f32acc: BK 32 of f16 = 64-byte lines of A (measured 2x); B's 256-byte lines align
    out = cli(["check", str(TUNED / "mma_f32acc.tile")], capsys).out
    assert "As: rows 64 bytes apart; lines of 128 bytes or more would be aligned" in out
    assert "Bs: rows" not in out
    # wgmma's 128-byte panels, and a 64-wide K step of the same mma.sync schedule: nothing
    assert UNALIGNED not in cli(["check", str(TUNED / "wgmma_f32acc.tile")], capsys).out
    text = (TUNED / "mma_f32acc.tile").read_text()
    assert "block   256 x 128 x 32" in text
    wide = tmp_path / "wide.tile"
    wide.write_text(text.replace("block   256 x 128 x 32", "block   256 x 128 x 64"))
    assert UNALIGNED not in cli(["check", str(wide)], capsys).out


# ---------------------------------------------------------------- the persistent grid at a size


def _grid(example: str, size: tuple[int, int, int]) -> str:
    from tiledsl.commands.grid_report import grid_lines

    kernel = compile_file(ROOT / "examples" / example).kernels[0]
    lines = grid_lines(kernel, size, 132, "the test's")
    assert lines[0] == f"  the grid at {'x'.join(map(str, size))} on 132 SMs (the test's)"
    return lines[1].strip()


def test_the_grid_at_a_size_says_what_the_last_round_does() -> None:
    size = (2048, 4096, 11008)  # 128 cluster tiles on the H200's 66 clusters of two
    clusters = "128 tiles (of 2 x 1 blocks' clusters) on 66 clusters (if the GPU keeps them all "
    assert _grid("hopper/stream_k_aligned.tile", size) == (
        clusters + "resident): 1 round of whole tiles, then a last round of 62 tiles (94 % of "
        "the grid) cut along K into 66 shares of 161-162 K steps (172 a tile), each cluster's "
        "tiles last first; 64 clusters hand a partial sum over"
    )
    assert _grid("hopper/stream_k.tile", size) == (
        clusters + "resident): 1 round of whole tiles, then a last round of 62 tiles (94 % of "
        "the grid) run whole (above SK_MAX_FILL, 75 %): 4 clusters idle in it"
    )
    assert _grid("hopper/stream_k.tile", (2048, 22016, 4096)).endswith(
        "10 rounds of whole tiles, then a last round of 28 tiles (42 % of the grid) cut along "
        "K into 66 shares of 27-28 K steps (64 a tile); 64 clusters hand a partial sum over"
    )
    assert _grid("hopper/persistent.tile", size) == (
        "256 tiles on 132 blocks: 1 round of whole tiles, then a last round of 124 tiles "
        "(94 % of the grid): 8 blocks idle in it"
    )
    assert _grid("hopper/few_tokens.tile", (16, 4096, 4096)) == (
        "64 tiles on 132 blocks: 64 tiles (48 % of the grid) cut into 2 slices of 32 K steps "
        "(64 a tile); 64 blocks hand a partial sum over; 4 blocks idle"
    )


def test_check_at_a_size_reports_the_grid_of_a_persistent_kernel_alone(capsys, no_nvcc) -> None:
    r = cli(
        ["check", str(ROOT / "examples/hopper/stream_k_aligned.tile"), "--size", "256x512x640"],
        capsys,
    )
    assert r.code == 0, r.err
    assert "  the grid at 256x512x640 on " in r.out
    assert "2 tiles (of 2 x 1 blocks' clusters) on " in r.out
    # the contributor's deferred flag is named with its constant and its step count
    assert "  flag  a piece that hands its partial sum over goes on to the block's next " in r.out
    assert "signals its flag FLAG_DEFER_STEPS (2) K steps into it" in r.out
    r = cli(["check", str(ROOT / "examples/hopper/stream_k.tile")], capsys)
    assert r.code == 0 and "stream-K  whole rounds" in r.out and "  flag  " not in r.out
    r = cli(["check", str(ROOT / "examples/hgemm.tile"), "--size", "256x256x256"], capsys)
    assert r.code == 0 and "the grid at" not in r.out
