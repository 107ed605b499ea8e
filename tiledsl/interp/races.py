"""The race log: every shared-memory access of a barrier phase, and the check at its end.

    log = RaceLog(kernel, offsets)
    log.start_block(pid)                          # a block starts: nothing logged, epoch 0
    log.record(units, issuers, write, stmt)       # an access: 2-byte units and who issued them
    log.warp_barrier()                            # __syncwarp: every warp's epoch moves on
    log.check_phase()                             # __syncthreads (and the block's end)

An access is logged in 2-byte units of the arena with its issuer — a thread for copies,
the whole warp for warp-collective fragment ops (their lane mapping is unspecified) — and
the warp-barrier epoch of its warp. At each block barrier the phase's log is checked: two
accesses to one unit, one a write, race when they come from different warps, or from
different issuers of one warp with no `__syncwarp` between them (one epoch). The check is
on happens-before, not on the order the interpreter ran the phase in, so that order
cannot hide a race. A race raises RaceError naming the place, the two statements and who
issued them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir.nodes import DTYPE_BYTES, KernelIR
from ..ir.printer import stmt_text
from .errors import RaceError
from .tiles import UNIT


@dataclass
class _Access:
    units: np.ndarray  # 2-byte units of the arena
    issuers: np.ndarray  # thread id, or threads + warp for warp-collective ops
    warps: np.ndarray
    epochs: np.ndarray  # warp-barrier epoch of the issuing warp
    write: bool
    stmt: int  # index into RaceLog.texts


class RaceLog:
    """The shared-memory accesses of one block since its last block barrier."""

    def __init__(self, kernel: KernelIR, offsets: dict[str, int]):
        self.kernel = kernel
        self.offsets = offsets
        self.threads = kernel.threads
        self.warp_width = kernel.warp_width
        self.warps = kernel.consumer_warps
        # Each logged statement's text, once for the whole grid: a report needs it, and
        # printing a statement at every access would cost more than the access.
        self.texts: list[str] = []
        self.text_ids: dict[int, int] = {}
        self.accesses: list[_Access] = []
        self.epochs = np.zeros(self.warps, np.int64)
        self.pid = 0

    def start_block(self, pid: int) -> None:
        self.accesses = []
        self.epochs = np.zeros(self.warps, np.int64)
        self.pid = pid

    def warp_barrier(self, warps) -> None:
        """`warps` (their ids) pass a warp barrier: each one's epoch moves on."""
        self.epochs[warps] += 1

    def record(self, units, issuers, write: bool, stmt) -> _Access:
        """`stmt` read (or wrote) `units`, each by its issuer (`issuers` broadcasts to them)."""
        units = np.asarray(units)
        issuers = np.broadcast_to(issuers, units.shape)
        threads = self.threads
        warps = np.where(issuers >= threads, issuers - threads, issuers // self.warp_width)
        sid = self.text_ids.setdefault(id(stmt), len(self.texts))
        if sid == len(self.texts):
            self.texts.append(stmt_text(stmt))
        flat_warps = warps.ravel()
        access = _Access(
            units.ravel(), issuers.ravel(), flat_warps, self.epochs[flat_warps], write, sid
        )
        self.accesses.append(access)
        return access

    def forget(self, done: list[_Access]) -> None:
        """Accesses that something other than a block barrier has ordered before everything
        that follows (a TMA copy whose mbarrier phase every thread has waited for): checked
        against what came before them in the phase, then dropped."""
        gone = {id(a) for a in done}
        present = [i for i, a in enumerate(self.accesses) if id(a) in gone]
        if not present:  # a block barrier has checked and dropped them already
            return
        last = present[-1]
        unit = self._racy_unit(self.accesses[: last + 1])
        if unit is not None:
            self._report(unit, self.accesses[: last + 1])
        self.accesses = [a for a in self.accesses if id(a) not in gone]

    def check_phase(self) -> None:
        """A block barrier: the phase's accesses must not race; the next phase starts empty."""
        if self.accesses:
            unit = self._racy_unit(self.accesses)
            if unit is not None:
                self._report(unit, self.accesses)
        self.accesses = []

    def _racy_unit(self, accesses: list[_Access]) -> int | None:
        """A unit two unordered accesses touch, one writing; None if there is none."""
        units = np.concatenate([a.units for a in accesses])
        issuers = np.concatenate([a.issuers for a in accesses])
        warps = np.concatenate([a.warps for a in accesses])
        epochs = np.concatenate([a.epochs for a in accesses])
        writes = np.concatenate([np.full(a.units.size, a.write) for a in accesses])
        if not writes.any():
            return None
        # Only units something wrote can race: drop the rest before sorting (a table
        # lookup, linear; a pipeline's phase logs every wgmma read of its stages).
        written = np.zeros(int(units.max()) + 1, bool)
        written[units[writes]] = True
        keep = written[units]
        units, issuers, warps = units[keep], issuers[keep], warps[keep]
        epochs, writes = epochs[keep], writes[keep]
        # (a) one unit touched by two warps, one of them writing: only a block barrier orders.
        # (Every unit left was written; the lowest racy one is reported.)
        pairs = np.unique(units * self.warps + warps)
        unit_of, counts = np.unique(pairs // self.warps, return_counts=True)
        racy = unit_of[counts > 1]
        if racy.size:
            return int(racy[0])
        # (b) within one warp and warp-epoch: two issuers (lanes vs the warp), one writing.
        span = int(epochs.max()) + 1
        group = (units * self.warps + warps) * span + epochs
        # (group, issuer) pairs as one int64 key: a 1-D unique sorts plain integers, where
        # a unique over the rows of a 2-column array sorts them as opaque records (several
        # times slower; this check is most of an interpreted pipeline's time)
        issuer_span = int(issuers.max()) + 1
        group_pairs = np.unique(group * issuer_span + issuers)
        g, gcounts = np.unique(group_pairs // issuer_span, return_counts=True)
        shared = g[gcounts > 1]  # sorted: the lowest racy group first
        racy_groups = shared[np.isin(shared, group[writes])]
        if racy_groups.size == 0:
            return None
        return int(racy_groups[0] // span // self.warps)

    def _report(self, unit: int, accesses: list[_Access]) -> None:
        """Raise the race on `unit`: its first write, and an access by someone else."""
        hits = []
        for a in accesses:
            mask = a.units == unit
            if mask.any():
                who = int(a.issuers[mask][0])
                actor = f"warp {who - self.threads}" if who >= self.threads else f"thread {who}"
                hits.append((a.write, actor, self.texts[a.stmt]))
        write = next(h for h in hits if h[0])
        other = next((h for h in hits if h[1] != write[1]), hits[-1])
        kind = "write" if other[0] else "read"
        raise RaceError(
            f"shared-memory race on {self._where(unit * UNIT, write[2])} in block "
            f"{self.pid}: write by {write[1]} in `{write[2]}` and {kind} by {other[1]} in "
            f"`{other[2]}`, with no barrier between them"
        )

    def _where(self, byte: int, text: str) -> str:
        return where(self.kernel, self.offsets, byte, text)


def where(kernel: KernelIR, offsets: dict[str, int], byte: int, text: str) -> str:
    """Buffer[slot][row][col] of a byte; of the buffers sharing it, the one `text` names."""
    places = []
    for b in kernel.buffers:
        start = offsets[b.name]
        if start <= byte < start + b.size_bytes:
            elem = (byte - start) // DTYPE_BYTES[b.dtype]
            if b.panel or b.xor:  # a permuted layout: invert it by search
                slot, row, col = _unpermute(b, elem)
            else:
                slot, rest = divmod(elem, b.lines * b.pitch)
                row, col = divmod(rest, b.pitch)
                if b.layout == "col":
                    row, col = col, row
            places.append((f"{b.name}[" not in text, f"{b.name}[{slot}][{row}][{col}]"))
    return min(places)[1] if places else f"byte {byte}"


def _unpermute(b, elem: int) -> tuple[int, int, int]:
    """(slot, row, col) stored at element `elem` of a swizzled or panelled buffer."""
    slot = elem // (b.lines * b.pitch)
    rows, cols = np.meshgrid(np.arange(b.rows), np.arange(b.cols), indexing="ij")
    hit = np.argwhere(b.element(slot, rows, cols) == elem)
    if hit.size == 0:  # padding: no element of the tile is stored there
        return slot, -1, -1
    return slot, int(hit[0][0]), int(hit[0][1])
