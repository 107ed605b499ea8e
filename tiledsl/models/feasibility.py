"""The S4000 write-up's feasibility table (its §3.1, Tables 1-3), computed for a schedule.

    rows = sweep(kernel)                    # one row per blocks-per-multiprocessor
    print(render_sweep(kernel, rows))

The write-up fixes the MMA shape and the MMAs per warp, then walks the number of
blocks a multiprocessor holds: 1, 2, ... while a full block still fits the
thread limit, then halves the warps of a block (12, 24, 48 blocks on the S4000).
For each row it counts, on paper:

* registers per block: one 32-bit register per fragment element — the warp's
  accumulators, ONE A fragment and a row of CN B fragments (the write-up loads B
  once per step and reloads A per row) — times the warps of the block;
* shared memory per block: the A and B tiles of one MMA-K slice (BK = mma K, no
  padding, one stage), against the C staging area (one accumulator fragment per
  warp, in the staging type); the two live at different times, so a union takes
  the larger;
* feasible when blocks x (threads, registers, shared memory) fit the
  multiprocessor and the registers per thread fit what a thread may have.

This is the write-up's model, deliberately: BK, stages and padding of the schedule
itself are not in it (`tiledsl check` reports those from the IR). Where the
write-up's printed rows cannot come out of this or any one consistent model,
docs/language.md ("Feasibility: the S4000 write-up's tables") says which rows and why.

`reserve` registers per thread may be set aside for addresses and loop counters,
which the write-up says exist but leaves out of its count.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.nodes import DTYPE_BYTES, KernelIR
from ..ir.schedule import Schedule
from .registers import writeup_registers_per_warp


@dataclass(frozen=True)
class SweepRow:
    blocks_per_mp: int
    warps: tuple[int, int]  # warps of a block along M and N
    threads: int
    registers_per_warp: int  # fragment elements of one warp, the write-up's way
    registers_per_thread: int  # per warp / warp width, rounded up, plus the reserve
    registers_per_block: int  # per warp x warps (without the reserve: the write-up's column)
    ab_bytes: int  # A and B tiles of one MMA-K slice
    c_bytes: int  # C staging: one accumulator fragment per warp
    feasible: bool
    binding: tuple[str, ...]  # the limits a row breaks (empty when feasible)

    @property
    def warp_count(self) -> int:
        return self.warps[0] * self.warps[1]

    @property
    def smem_bytes(self) -> int:
        """The union of the A/B tiles and the C staging area: the larger of the two."""
        return max(self.ab_bytes, self.c_bytes)


def halve_warps(warps: tuple[int, int]) -> tuple[int, int]:
    """The write-up's next-smaller block: halve the longer side of the warp grid (M on a tie)."""
    wm, wn = warps
    return (wm // 2, wn) if wm >= wn else (wm, wn // 2)


def staging_dtype(sched: Schedule) -> str:
    """WMMA stores accumulators in their own type; f16 C is staged as f32 and converted."""
    return "f32" if sched.accumulate == "f32" else "f16"


def row(kernel: KernelIR, warps: tuple[int, int], blocks: int, reserve: int) -> SweepRow:
    """One row: a block of `warps`, `blocks` of them on a multiprocessor."""
    sched, target = kernel.schedule, kernel.target
    lanes = kernel.warp_width
    m, n, k = sched.mma
    cm, cn = sched.coarsen
    warp_count = warps[0] * warps[1]
    threads = warp_count * lanes
    per_warp = writeup_registers_per_warp(sched)
    per_thread = -(-per_warp // lanes) + reserve
    in_bytes = DTYPE_BYTES[kernel.gemm.a.dtype]
    block_m, block_n = warps[0] * cm * m, warps[1] * cn * n
    ab = (block_m + block_n) * k * in_bytes
    c = warp_count * m * n * DTYPE_BYTES[staging_dtype(sched)]
    smem = max(ab, c)

    broken = []
    if threads > target.max_threads_per_block:
        broken.append("threads per block")
    if blocks * threads > target.max_threads_per_sm:
        broken.append("threads per MP")
    if target.max_blocks_per_sm and blocks > target.max_blocks_per_sm:
        broken.append("blocks per MP")
    if per_thread > target.registers_per_thread(threads):
        broken.append("registers per thread")
    if blocks * per_thread * threads > target.registers_per_sm:
        broken.append("registers per MP")
    if smem > target.max_smem_per_block:
        broken.append("shared memory per block")
    if blocks * smem > target.smem_per_sm:
        broken.append("shared memory per MP")
    return SweepRow(
        blocks,
        warps,
        threads,
        per_warp,
        per_thread,
        per_warp * warp_count,
        ab,
        c,
        not broken,
        tuple(broken),
    )


def sweep(kernel: KernelIR, reserve: int = 0) -> list[SweepRow]:
    """Rows over blocks per MP: full blocks while their threads fit, then halved blocks."""
    target = kernel.target
    warps = kernel.schedule.warps
    threads = warps[0] * warps[1] * kernel.warp_width
    full = max(1, target.max_threads_per_sm // threads)
    rows = [row(kernel, warps, b, reserve) for b in range(1, full + 1)]
    while warps[0] * warps[1] > 1:
        warps = halve_warps(warps)
        threads = warps[0] * warps[1] * kernel.warp_width
        rows.append(row(kernel, warps, target.max_threads_per_sm // threads, reserve))
    return rows
