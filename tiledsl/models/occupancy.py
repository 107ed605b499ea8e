"""Occupancy: resident blocks per multiprocessor, and which limit binds.

occ = occupancy(kernel, registers_per_thread)   # threads, shared memory, registers, blocks
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.nodes import KernelIR

#: NVIDIA allocates registers per warp in units of 256, i.e. 8 per thread of a 32-lane warp.
REGISTER_UNIT = {"cuda": 8}


@dataclass(frozen=True)
class Limit:
    resource: str  # "threads", "shared memory", "registers"
    per_sm: int
    per_block: int  # 0: the kernel uses none of it (no limit)
    note: str = ""

    @property
    def blocks(self) -> int | None:
        return self.per_sm // self.per_block if self.per_block else None


@dataclass(frozen=True)
class Occupancy:
    limits: tuple[Limit, ...]
    blocks: int  # resident blocks per multiprocessor (0: the block does not fit)
    binding: tuple[str, ...]  # the resources whose limit gives `blocks`
    registers_per_thread: int  # as used for the register limit (after rounding)
    warps_per_sm: int
    max_warps_per_sm: int


def occupancy(kernel: KernelIR, registers_per_thread: int, source: str = "estimate") -> Occupancy:
    """Blocks per multiprocessor: the least over the thread, shared-memory and register limits."""
    t = kernel.target
    unit = REGISTER_UNIT.get(t.vendor, 1)
    regs = -(-registers_per_thread // unit) * unit
    reg_note = f"{source}: {registers_per_thread}/thread"
    if regs != registers_per_thread:
        reg_note += f", allocated {regs}"
    limits: tuple[Limit, ...] = (
        Limit("threads", t.max_threads_per_sm, kernel.threads),
        Limit("shared memory", t.smem_per_sm, kernel.smem_bytes),
        Limit("registers", t.registers_per_sm, regs * kernel.threads, reg_note),
    )
    if t.max_blocks_per_sm:
        limits += (Limit("blocks", t.max_blocks_per_sm, 1, "resident blocks per SM"),)
    counts = {lim.resource: lim.blocks for lim in limits if lim.blocks is not None}
    blocks = min(counts.values())
    binding = tuple(name for name, n in counts.items() if n == blocks)
    lanes = kernel.warp_width
    return Occupancy(
        limits,
        blocks,
        binding,
        regs,
        blocks * (kernel.threads // lanes),  # every warp of the block: K teams, producer
        t.max_threads_per_sm // lanes,
    )
