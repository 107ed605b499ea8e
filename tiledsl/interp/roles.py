"""The roles of a warp-specialized block, run concurrently: a seeded scheduler.

    sched = Scheduler(rng, bars, label)
    steps = sched.run(threads, flights, land)    # until every thread is done

Each role is a `Thread`: a generator over its body that advances one statement per
`next` and yields `None` after it, or a `Blocked` when it reaches an mbarrier wait that
does not pass yet. The TMA copies in flight (`flights`, the block's list) are the third
kind of thing that can happen next: `land(i)` lands copy i. At every step the scheduler
picks, at random, one runnable thing — a thread that is not blocked, or blocked on a wait
that would pass now, or a copy in flight — with weights drawn per block and redrawn now
and then, so that in some stretches the producer runs far ahead, in others the consumer
waits on copies that land late; a copy lands no later than when nothing else can move.

When nothing can move — every thread finished or blocked, no copy in flight — but a
thread is blocked, the block would hang on the GPU: DeadlockError, with each role's
statement, its loop variables, the barrier and parity it waits for and where that
barrier stands. Every step runs a statement or lands a copy, so a run ends; the step
bound is a guard against a kernel whose loops run for ever, not the way a deadlock is
found.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from .errors import DeadlockError, InterpreterError
from .mbarriers import MBarriers

#: A guard on one block's scheduler steps (statements run and copies landed).
MAX_STEPS = 20_000_000
#: How often, per step, the weights are drawn again (a new stretch of the interleaving).
REDRAW = 1 / 48


@dataclass(frozen=True)
class Blocked:
    """A thread waits for the phase of parity `parity` of mbarrier `bar[slot]`."""

    bar: str
    slot: int
    parity: int


@dataclass
class Thread:
    """One role as the scheduler sees it."""

    name: str  # "producer", "consumer" (or "block": a kernel without roles)
    index: int  # which weight it runs with: 0 producer, 1 consumer
    steps: Iterator[Blocked | None]
    where: Callable[[], str]  # its statement and loop variables, for a report
    bars: MBarriers | None = None  # its block's (a cluster's blocks are scheduled together)
    blocked: Blocked | None = None
    done: bool = False


class Scheduler:
    def __init__(self, rng: np.random.Generator | None, bars: MBarriers | None, label: str):
        self.rng = rng
        self.bars = bars
        self.label = label  # "block 3", or "block 1 of cluster 0": for reports
        self.max_steps = MAX_STEPS
        self._buffer = np.empty(0)
        self._next = 0
        self.weights = [1.0, 1.0, 1.0]
        if rng is not None:
            self._draw()

    def run(self, threads: list[Thread], flights: list, land: Callable[[int], None]) -> int:
        """Run `threads` and land `flights` until every thread is done; the steps taken."""
        steps = 0
        while True:
            runnable = [t for t in threads if not t.done and self._can_run(t)]
            if not runnable and not flights:
                if all(t.done for t in threads):
                    return steps
                raise DeadlockError(self._deadlock(threads))
            steps += 1
            if steps > self.max_steps:
                raise InterpreterError(
                    f"{self.label}: the roles did not finish in {self.max_steps} scheduler steps"
                )
            if len(runnable) == 1 and not flights:
                self._advance(runnable[0])
                continue
            pick = self._pick(runnable, len(flights))
            if pick < len(runnable):
                self._advance(runnable[pick])
            else:
                land(int(self._random() * len(flights)) if len(flights) > 1 else 0)
            if all(t.done for t in threads):  # what is still in flight nobody waits for
                return steps

    def _can_run(self, t: Thread) -> bool:
        b = t.blocked
        bars = t.bars or self.bars
        return b is None or (bars is not None and bars.passes(b.bar, b.slot, b.parity))

    def _advance(self, t: Thread) -> None:
        try:
            t.blocked = next(t.steps)
        except StopIteration:
            t.blocked, t.done = None, True

    # ------------------------------------------------------------ choices
    def _pick(self, runnable: list[Thread], flights: int) -> int:
        """Index into runnable + [a copy landing], drawn by the current weights."""
        if self._random() < REDRAW:
            self._draw()
        w = [self.weights[t.index] for t in runnable]
        if flights:
            w.append(self.weights[2])
        r = self._random() * sum(w)
        for i, weight in enumerate(w):
            r -= weight
            if r < 0:
                return i
        return len(w) - 1

    def _draw(self) -> None:
        """New weights (producer, consumer, a copy landing): skewed, so that one side
        often runs far ahead, never zero, so that none starves."""
        assert self.rng is not None
        self.weights = list(0.02 + self.rng.dirichlet((0.4, 0.4, 0.4)))

    def _random(self) -> float:
        if self.rng is None:
            return 0.0  # one thread, nothing in flight: no choice to make
        if self._next == len(self._buffer):
            self._buffer, self._next = self.rng.random(1024), 0
        value = float(self._buffer[self._next])
        self._next += 1
        return value

    # ------------------------------------------------------------ reports
    def _deadlock(self, threads: list[Thread]) -> str:
        lines = [
            f"deadlock in {self.label}: no role can advance, and no TMA copy is in "
            "flight to complete a phase (on the GPU the block hangs)"
        ]
        for t in threads:
            if t.done:
                lines.append(f"  {t.name}: finished")
                continue
            b = t.blocked
            assert b is not None  # not done and not runnable: blocked in a wait
            bars = t.bars or self.bars
            state = bars.describe(b.bar, b.slot) if bars is not None else ""
            lines.append(
                f"  {t.name}: blocked in {t.where()}: it waits for the phase of parity "
                f"{b.parity} of {b.bar}[{b.slot}] to complete; {state}"
            )
        return "\n".join(lines)
