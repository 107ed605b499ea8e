"""Registers: how many a schedule's fragments need, counted three ways.

    fragment_registers(schedule, lanes, 2)   # the packed lower bound the analysis refuses by
    writeup_registers_per_warp(schedule)        # the S4000 write-up's count (its tables)
    register_estimate(kernel)                # per fragment, as declared and as the write-up counts

None of them counts addresses or loop counters; `tiledsl check` prints ptxas's real count
beside them where nvcc is on PATH.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.nodes import KernelIR
from ..ir.schedule import Schedule
from .occupancy import REGISTER_UNIT


def writeup_registers_per_warp(sched: Schedule) -> int:
    """The S4000 write-up's count: one 32-bit register per element of the accumulators, one A
    fragment and a row of CN B fragments per warp (B loaded once per step, A per row)."""
    m, n, k = sched.mma
    cm, cn = sched.coarsen
    if not sched.path.fragments_in_registers:
        return cm * cn * m * n  # A and B stay in shared memory: only the accumulators
    return cm * cn * m * n + m * k + cn * k * n


def fragment_words_per_warp(sched: Schedule, in_bytes: int) -> int:
    """32-bit registers per warp that fragments occupy, packed: the write-up's liveness (the
    accumulators, one A fragment, a row of CN B fragments) but counted in bytes, so two f16
    elements share a register, as they do in WMMA's and mma.sync's fragments. A lower
    bound, which is what a refusal needs; the write-up's one-register-per-element count (kept
    for `check` and `feasibility`, which reproduce its tables) doubles f16 accumulators and
    refused warp tiles that fit (64 x 128 of f16 C is 128 registers, not 256)."""
    m, n, k = sched.mma
    cm, cn = sched.coarsen
    acc_bytes = 2 if sched.accumulate == "f16" else 4
    total = cm * cn * m * n * acc_bytes
    if sched.path.fragments_in_registers:  # else A and B are read from shared memory
        total += (m * k + cn * k * n) * in_bytes
    return -(-total // 4)


def fragment_registers(sched: Schedule, warp_width: int, in_bytes: int = 2) -> int:
    """Registers per thread for fragments (packed), spread over the warp's lanes."""
    return -(-fragment_words_per_warp(sched, in_bytes) // warp_width)


@dataclass(frozen=True)
class FragmentRegisters:
    name: str
    role: str
    count: tuple[int, int]
    rows: int
    cols: int
    dtype: str
    elements: int  # per warp, as declared: count x rows x cols
    live: int  # per warp, the write-up's count: one A fragment at a time, every B and accumulator


@dataclass(frozen=True)
class RegisterEstimate:
    """One 32-bit register per fragment element, spread over a warp's lanes.

    `writeup_*` is the S4000 write-up's count (accumulators, ONE A fragment, a row of B
    fragments: its loop reloads A per row); `declared_*` counts every fragment the
    kernel declares — tiledsl loads all CM A fragments of a K step before its CM x CN
    mma_sync, so they are live together. Neither counts addresses or loop counters.
    """

    fragments: tuple[FragmentRegisters, ...]
    lanes: int
    threads: int

    @property
    def writeup_per_thread(self) -> int:
        return -(-sum(f.live for f in self.fragments) // self.lanes)

    @property
    def declared_per_thread(self) -> int:
        return -(-sum(f.elements for f in self.fragments) // self.lanes)

    @property
    def writeup_per_block(self) -> int:
        return sum(f.live for f in self.fragments) * (self.threads // self.lanes)

    @property
    def declared_per_block(self) -> int:
        return sum(f.elements for f in self.fragments) * (self.threads // self.lanes)


def register_estimate(kernel: KernelIR) -> RegisterEstimate:
    frags = []
    for f in kernel.fragments:
        one = f.rows * f.cols
        elements = f.count[0] * f.count[1] * one
        frags.append(
            FragmentRegisters(
                f.name,
                f.role,
                f.count,
                f.rows,
                f.cols,
                f.dtype,
                elements,
                one if f.role == "matrix_a" else elements,
            )
        )
    return RegisterEstimate(tuple(frags), kernel.warp_width, kernel.threads)


def register_cap(target, threads: int, blocks: int = 1) -> int:
    """The most registers a thread may hold so that `blocks` blocks of `threads` threads
    are resident on one multiprocessor at once: what ptxas caps a kernel at under
    `__launch_bounds__(threads, blocks)` (`blocks_per_sm`), in whole allocation units."""
    unit = REGISTER_UNIT.get(target.vendor, 1)
    return target.registers_per_thread(threads * blocks) // unit * unit


#: The producer warpgroup's registers per thread after `setmaxnreg.dec`: it only issues
#: TMA copies and waits on mbarriers (CUTLASS's producer warpgroups use 24 to 40).
PRODUCER_REGISTERS = 40


@dataclass(frozen=True)
class RoleRegisters:
    """Registers per thread of a warp-specialized block: at entry (the cap ptxas applies,
    `__launch_bounds__(THREADS, 1)`), and each role's after `setmaxnreg`."""

    entry: int
    producer: int
    consumer: int


def role_registers(consumers: int, target) -> RoleRegisters | None:
    """The register split of `consumers` consumer warpgroups and one producer warpgroup.

    A block starts with `entry` registers per thread (the file over its threads, in steps
    of 8). `setmaxnreg.inc` takes registers only from what the block's other warps gave
    back with `setmaxnreg.dec`, and blocks until they are there: a consumer may grow by
    the producer's release shared over the consumers, and no further (measured on the
    H200: asking for more hangs the kernel). None when the producer cannot shrink.
    """
    if consumers < 1:
        return None
    threads = 128 * (consumers + 1)
    entry = min(target.registers_per_thread(threads), 255) // 8 * 8
    if entry <= PRODUCER_REGISTERS:
        return None
    released = (entry - PRODUCER_REGISTERS) * 128
    consumer = min(240, (entry + released // (128 * consumers)) // 8 * 8)
    return RoleRegisters(entry, PRODUCER_REGISTERS, consumer)
