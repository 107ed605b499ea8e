"""The S4000 write-up's feasibility tables (§3.1, Tables 1-3) out of `tiledsl check --sweep`.

The seed's printed columns are copied here once, as the numbers to reproduce; the
model (tiledsl.models.feasibility) computes them from the schedule. Where the seed's
rows are not consistent with its own method (Table 1's row 5 and its halved
blocks' registers, Table 2's 38912, Table 3's shared memory), the tests pin what
the model says instead and why; docs/language.md explains the same.
"""

from __future__ import annotations

import dataclasses
import itertools
import re

import pytest
from helpers import ROOT, cli

from tiledsl.driver import compile_file
from tiledsl.models.feasibility import sweep
from tiledsl.models.registers import writeup_registers_per_warp

TABLE1 = ROOT / "examples" / "s4000_table1.tile"
TABLE3 = ROOT / "examples" / "s4000.tile"

# The seed's Table 1, column by column (8 MMAs of 16x16x16 per warp).
T1_BLOCKS = [1, 2, 3, 4, 5, 6, 12, 24, 48]
T1_THREADS = [1024] * 6 + [512, 256, 128]
T1_WARPS = [8] * 6 + [4, 2, 1]
T1_REGS = [22528] * 6 + [14336, 10240, 8192]
T1_SMEM = [8192] * 6 + [6144, 4096, 3072]
T1_FEASIBLE = [True] * 4 + [False] * 5


def kernel_of(path):
    return compile_file(path).kernels[0]


def test_table1_blocks_threads_warps_and_full_block_numbers() -> None:
    rows = sweep(kernel_of(TABLE1))
    assert [r.blocks_per_mp for r in rows] == T1_BLOCKS
    assert [r.threads for r in rows] == T1_THREADS
    assert [r.warp_count for r in rows] == T1_WARPS
    # the seed: (2048 + 256 + 512) x 8 = 22528 registers, A+B = 2 x 16 x 128 halves
    full = rows[0]
    assert full.registers_per_block == 22528 == T1_REGS[0]
    assert full.ab_bytes == 8192 and full.c_bytes == 8192 and full.smem_bytes == 8192


def test_table1_shared_memory_column_matches_every_row() -> None:
    assert [r.smem_bytes for r in sweep(kernel_of(TABLE1))] == T1_SMEM


def test_table1_halved_blocks_count_their_own_warps() -> None:
    """The seed's 14336/10240/8192 are 2048 x warps + 6144: eight warps' A and B
    fragments kept in a block of 4, 2 or 1 warps. One register count per warp gives
    2816 x warps instead."""
    rows = sweep(kernel_of(TABLE1))
    assert [2048 * w + 6144 for w in (4, 2, 1)] == T1_REGS[6:]
    assert [r.registers_per_block for r in rows[6:]] == [2816 * 4, 2816 * 2, 2816]


def test_table1_feasibility_needs_a_reserve_for_addresses() -> None:
    """The seed's text: 131072 / 22528 = 5.8, 'five blocks are no problem' for registers,
    yet its row 5 says FALSE: 5 x 1024 threads leave 25 registers a thread, 3 over the
    22 of fragments. Reserving registers for addresses (which the seed says exist but
    does not count) reproduces the column; without it row 5 comes out feasible."""
    kernel = kernel_of(TABLE1)
    plain = [r.feasible for r in sweep(kernel)]
    assert plain == [True] * 5 + [False] * 4
    assert sweep(kernel)[5].binding == ("registers per MP",)
    for reserve in (5, 8, 10):
        assert [r.feasible for r in sweep(kernel, reserve)] == T1_FEASIBLE


def test_table3_registers_and_feasible_at_one_block() -> None:
    rows = sweep(kernel_of(TABLE3))
    first, second = rows[0], rows[1]
    assert (first.blocks_per_mp, first.threads, first.warp_count) == (1, 1024, 8)
    # (8 x 32 x 32 + 32 x 16 + 2 x 16 x 32) x 8 warps
    assert first.registers_per_block == 77824
    assert first.feasible and first.binding == ()
    assert not second.feasible and second.binding == ("registers per MP",)
    assert [r.feasible for r in sweep(kernel_of(TABLE3), 8)][:2] == [True, False]


def test_table3_shared_memory_is_the_seeds_a_plus_b_and_the_union_is_larger() -> None:
    """Table 3's 16384 bytes are A+B (256 + 256 rows x 16 x 2 bytes). The seed's own
    rule takes max(A+B, C) and its own kernel's union holds float result[2*4*32*32]
    (32768 bytes), so the union is 32768; feasibility does not change."""
    first = sweep(kernel_of(TABLE3))[0]
    assert first.ab_bytes == 16384
    assert first.c_bytes == 2 * 4 * 32 * 32 * 4 == 32768
    assert first.smem_bytes == 32768


def test_table2_registers_come_out_of_no_8_warp_configuration() -> None:
    """Table 2: 4 MMAs of 32x32x16 per warp, 8 warps, 38912 registers per block. No
    coarsening with 4 fragments gives it (38912 / 8 = 4864 = 4096 + 768, and one A and
    one B fragment of 32x16 already hold 1024); it is the 4-warp row of Table 3's
    configuration (8 MMAs per warp), which the model does give."""
    table3 = kernel_of(TABLE3).schedule
    for cm, cn in ((1, 4), (2, 2), (4, 1)):
        sched = dataclasses.replace(table3, coarsen=(cm, cn))
        assert writeup_registers_per_warp(sched) * 8 != 38912
        assert writeup_registers_per_warp(sched) * 8 >= (4096 + 1024) * 8
    four_warps = next(r for r in sweep(kernel_of(TABLE3)) if r.warp_count == 4)
    assert four_warps.registers_per_block == 38912


# ---------------------------------------------------------------- the command


def sweep_rows(out: str) -> list[list[str]]:
    body = out.split("feasibility sweep", 1)[1]
    return [
        re.split(r"\s{2,}", line.strip())
        for line in body.splitlines()
        if re.match(r"^\s+\d+\s{2,}\d+", line)
    ]


def test_check_sweep_prints_table1(capsys) -> None:
    r = cli(["check", TABLE1, "--sweep"], capsys)
    assert r.code == 0, r.err
    assert "the S4000 write-up's method (its Tables 1-3) on musa mp_22" in r.out
    rows = sweep_rows(r.out)
    assert [int(c[4]) for c in rows] == T1_BLOCKS
    assert [int(c[5]) for c in rows] == T1_THREADS
    assert [int(c[8]) for c in rows[:6]] == T1_REGS[:6]
    assert [int(c[11]) for c in rows] == T1_SMEM
    assert [c[12] for c in rows] == ["TRUE"] * 5 + ["FALSE"] * 4
    reserved = sweep_rows(cli(["check", TABLE1, "--sweep", "--reserve", "8"], capsys).out)
    assert [c[12] == "TRUE" for c in reserved] == T1_FEASIBLE
    assert [int(c[7]) for c in reserved][:1] == [22 + 8]


def test_check_sweep_prints_table3(capsys) -> None:
    r = cli(["check", TABLE3, "--sweep"], capsys)
    assert r.code == 0, r.err
    first = sweep_rows(r.out)[0]
    assert first[:9] == ["32", "32", "16", "8", "1", "1024", "8", "76", "77824"]
    assert first[9:13] == ["16384", "32768", "32768", "TRUE"]
    assert "ptxas: none for MUSA (no MUSA compiler here)" in r.out


def test_check_target_musa_on_a_cuda_file(capsys) -> None:
    """--target overrides the file's target; the same schedule is checked for MP_22."""
    r = cli(["check", ROOT / "examples" / "ladder" / "v3.tile", "--target", "musa"], capsys)
    assert r.code == 0, r.err
    assert "(musa mp_22)" in r.out and "of 128 lanes" in r.out
    # what MP_22 lacks is a located error, before any number is printed
    r = cli(["check", ROOT / "examples" / "ladder" / "v5.tile", "--target", "musa"], capsys)
    assert r.code == 1 and r.out == ""
    assert "v5.tile:12:5: error: musa mp_22 has no asynchronous global -> shared copy" in r.err


def test_sweep_on_cuda_stops_at_the_resident_block_limit(capsys) -> None:
    rows = sweep(kernel_of(ROOT / "examples" / "hgemm.tile"))
    over = [r for r in rows if r.blocks_per_mp > 32]
    assert over and all("blocks per MP" in r.binding for r in over)


def test_negative_reserve_is_a_usage_error(capsys) -> None:
    r = cli(["check", TABLE1, "--sweep", "--reserve", "-1"], capsys)
    assert r.code == 2 and "--reserve" in r.err


@pytest.mark.parametrize("path", [TABLE1, TABLE3], ids=["table1", "table3"])
def test_sweep_rows_respect_every_limit_they_report(path) -> None:
    kernel = kernel_of(path)
    t = kernel.target
    for r in sweep(kernel, reserve=4):
        fits = (
            r.blocks_per_mp * r.threads <= t.max_threads_per_sm
            and r.blocks_per_mp * r.registers_per_thread * r.threads <= t.registers_per_sm
            and r.blocks_per_mp * r.smem_bytes <= t.smem_per_sm
            and r.registers_per_thread <= t.registers_per_thread(r.threads)
        )
        assert r.feasible == fits


def test_halving_takes_the_longer_side_first() -> None:
    from tiledsl.models.feasibility import halve_warps

    seen = [(2, 4)]
    for _ in itertools.repeat(None, 3):
        seen.append(halve_warps(seen[-1]))
    assert seen == [(2, 4), (2, 2), (1, 2), (1, 1)]


def test_reserve_without_sweep_is_a_usage_error(capsys) -> None:
    """--reserve only changes the sweep table: alone it is refused, never ignored."""
    r = cli(["check", TABLE1, "--reserve", "8"], capsys)
    assert r.code == 2 and "add --sweep" in r.err
