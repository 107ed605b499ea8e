"""One block's mbarriers: arrivals, transaction bytes and phases, as the hardware counts them.

    bars = MBarriers(kernel)                        # one per block: every phase 0, nothing in
    name, slot = bars.ref(bar_ref, env, stmt)       # which barrier a BarrierRef names
    bars.arrive(name, slot, count, nbytes, clock, who, stmt)   # Arrive / ExpectTx
    bars.complete_tx(name, slot, nbytes, clock, who, stmt)     # a TMA copy's bytes land
    bars.passes(name, slot, parity)                 # would mbarrier.try_wait.parity pass?
    clock = bars.acquire(name, slot)                # it passed: what the waiter now sees

A phase completes when its arrivals (`MBarrier.arrivals`) are all in and every byte that
an expect_tx announced has been delivered; the phase index then moves on and the next
phase starts with nothing in. A wait on parity `x` passes while the current phase's
parity differs from `x`, i.e. once the phase before the current one (of parity x) has
completed; a fresh barrier, in phase 0, passes a wait on parity 1 at once (PTX ISA,
"mbarrier.test_wait / try_wait").

Each phase also carries a vector clock (tiledsl.interp.clocks): the join of the clocks of
everything that arrived on it (the arriving role's clock, a TMA copy's issue clock), which
a passing wait joins into the waiter's — the release/acquire of the handoff. The clock of
a completed phase is kept until the next one completes, which is as long as a wait can
still observe it (two phases on, the parity is the same again).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..ir.expr import evaluate
from ..ir.nodes import BarrierRef, KernelIR
from ..ir.printer import stmt_text
from .errors import InterpreterError


@dataclass
class _Slot:
    """One mbarrier: its phase index, what is in of the current phase, the clocks."""

    expected: int
    phase: int = 0
    arrived: int = 0
    # bytes announced by expect_tx and not yet delivered: below 0 only while an arrival is
    # still out (a cluster's multicast may land before this block's expect_tx)
    tx: int = 0
    clock: list[int] = field(default_factory=lambda: [0, 0])  # the current phase's releases
    done: list[int] | None = None  # the clock of the last completed phase
    observed: int = -1  # the latest phase a passing wait has observed complete


class MBarriers:
    """Every mbarrier of one block (KernelIR.mbarriers), each array slot by slot."""

    def __init__(self, kernel: KernelIR, agents: int = 2):
        self.agents = agents
        # in a cluster another block's multicast may land before this block's expect_tx
        self.early_bytes = kernel.cluster_size > 1
        self.slots: dict[str, list[_Slot]] = {
            m.name: [_Slot(m.arrivals, clock=[0] * agents) for _ in range(m.slots)]
            for m in kernel.mbarriers
        }

    def ref(self, bar: BarrierRef, env: dict, stmt) -> tuple[str, int]:
        """(array, slot) of `bar` in `env`: one barrier, inside its array."""
        if bar.name not in self.slots:
            raise InterpreterError(
                f"`{stmt_text(stmt)}`: the kernel declares no mbarrier {bar.name}"
            )
        slot = evaluate(bar.slot, env, int32=True)
        if np.ndim(slot):
            values = np.unique(slot)
            if values.size != 1:
                raise InterpreterError(
                    f"`{stmt_text(stmt)}`: the warps name different barriers ({bar.name}"
                    f"{values.tolist()}); a role's handoff must be uniform"
                )
            slot = values[0]
        slot = int(slot)
        if not 0 <= slot < len(self.slots[bar.name]):
            raise InterpreterError(
                f"`{stmt_text(stmt)}`: {bar.name}[{slot}] is outside the array of "
                f"{len(self.slots[bar.name])} mbarriers"
            )
        return bar.name, slot

    def arrive(self, name: str, slot: int, count: int, nbytes: int, clock, who: str, stmt) -> None:
        """`count` arrivals (and, for expect_tx, `nbytes` bytes announced) by `who`."""
        s = self.slots[name][slot]
        if s.arrived + count > s.expected:
            raise InterpreterError(
                f"`{stmt_text(stmt)}` in the {who} role: {count} arrival(s) on "
                f"{name}[{slot}] in its phase {s.phase}, which has {s.arrived} of its "
                f"{s.expected} already: more arrivals than the barrier counts (a phase "
                "would complete before its handoff, or one completes twice)"
            )
        s.arrived += count
        s.tx += nbytes
        if s.arrived == s.expected and s.tx < 0:
            raise InterpreterError(
                f"`{stmt_text(stmt)}` in the {who} role: the last arrival on {name}[{slot}] in "
                f"its phase {s.phase} finds {-s.tx} byte(s) more delivered than every "
                "mbarrier.expect_tx of the phase announced (the transaction count would stay "
                "negative: the phase never completes)"
            )
        self._join(s, clock)
        self._complete(s)

    def complete_tx(self, name: str, slot: int, nbytes: int, clock, who: str, stmt) -> None:
        """A TMA copy counted on `name[slot]` has landed its `nbytes` bytes."""
        s = self.slots[name][slot]
        if s.tx < nbytes and (s.arrived == s.expected or not self.early_bytes):
            raise InterpreterError(
                f"`{stmt_text(stmt)}` (the {who}'s TMA copy) delivers {nbytes} bytes to "
                f"{name}[{slot}] in its phase {s.phase}, which expects only {s.tx} more: "
                "bytes that no mbarrier.expect_tx announced (every arrival of the phase is "
                "in, and the barrier's transaction count would go negative)"
            )
        s.tx -= nbytes
        self._join(s, clock)
        self._complete(s)

    def passes(self, name: str, slot: int, parity: int) -> bool:
        return self.slots[name][slot].phase % 2 != parity

    def acquire(self, name: str, slot: int) -> list[int] | None:
        """A wait has passed: the clock of the phase it observed complete (None for the
        phase before phase 0, which nothing arrived on)."""
        s = self.slots[name][slot]
        s.observed = max(s.observed, s.phase - 1)
        return s.done

    def phase(self, name: str, slot: int) -> int:
        return self.slots[name][slot].phase

    def observed(self, name: str, slot: int) -> int:
        return self.slots[name][slot].observed

    def describe(self, name: str, slot: int) -> str:
        """Where a barrier stands, for a deadlock report."""
        s = self.slots[name][slot]
        return (
            f"{name}[{slot}] is in phase {s.phase} (parity {s.phase % 2}) with "
            f"{s.arrived} of {s.expected} arrival(s) in and {s.tx} byte(s) still to land"
        )

    def _join(self, s: _Slot, clock) -> None:
        if clock is not None:
            s.clock = [max(a, b) for a, b in zip(s.clock, clock)]

    def _complete(self, s: _Slot) -> None:
        if s.arrived == s.expected and s.tx == 0:
            s.done, s.clock = s.clock, [0] * self.agents
            s.arrived = 0
            s.phase += 1
