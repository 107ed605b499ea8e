"""Stream-K's hand-over of partial sums between blocks (`persistent stream_k`), as the
interpreter runs it: the global workspace, the flags, and the order the GPU's memory
model gives them.

    fix = FixUps()
    fix.store(agent, slot, frags)        # PartialStore: every consumer thread writes
    fix.barrier(agent)                   # Barrier("consumers"): the consumer threads meet
    fix.signal(agent, slot)              # FlagSignal: the first thread releases flags[slot]
    fix.wait(agent, slot)                # FlagWait: the first thread acquires it, clears it
    fix.add(agent, slot, frags)          # PartialAdd: every consumer thread reads it
    fix.fetch(agent, slot)               # PartialFetch (stream_k_aligned): the producer's
                                         # thread hands an acquired sum to the TMA unit
    fix.add_fetched(slot, frags)         # PartialAdd staged: the consumers add it
    fix.ticket(agent, slot, slices)      # Ticket (split_k): the first thread's atomic add,
                                         # handed to every consumer thread; the ticket drawn
    fix.check_end()                      # after the grid: every flag clear, every counter
                                         # zero, every sum read

A consumer role runs all of its threads at once, so the order between its threads is
modelled by what each statement leaves unordered: a partial sum written by every thread
is ordered before the first thread's release only by a `consumers` barrier between
them, and the first thread's acquire before the other threads' reads only by one after
it. A read of a partial sum needs the acquire of its flag (happens-before through the
release), which is the race check; a wait on a flag that no block sets is a deadlock.

A ticket (`split_k`) is an atomic add with acquire and release: it releases the partial
sums its block stored before it (ordered before it by a `consumers` barrier) to the
tickets of the same counter drawn after it, and acquires those released by the tickets
drawn before it; the consumers' barrier that hands the ticket to every thread orders their
reads after that acquire. A block may read back its own partial sums (the same threads
wrote them). The interpreter runs a split's grid in several block orders (forward,
backward, shuffled: tiledsl.interp.interpreter), so that each slice draws the last ticket
in some run, and the runs must agree bit for bit.

The blocks of a stream-K grid run from the last to the first: a tile's owner waits on the
blocks after it, which have run by then (`stream_k_aligned`: from the first to the last,
its owners waiting on the blocks before them). On the GPU they run at once; a wait the
blocks that ran before cannot satisfy is one no order satisfies, since a block's hand-over
comes before its own waits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .errors import DeadlockError, InterpreterError, RaceError


@dataclass
class _Ordering:
    """One consumer role's threads: what they did that the next step is not yet ordered
    after."""

    unordered_store: bool = False  # every thread wrote a partial sum since the last barrier
    acquired: set[int] = field(default_factory=set)  # flags the first thread acquired
    unordered_acquire: set[int] = field(default_factory=set)  # ... since the last barrier
    stored: set[int] = field(default_factory=set)  # slots its threads wrote, not yet released
    agent: object = None  # whose (kept alive: the orderings are keyed by its id)


@dataclass
class FixUps:
    partials: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    writers: dict[int, str] = field(default_factory=dict)  # who wrote each partial sum
    flags: dict[int, int] = field(default_factory=dict)
    orderings: dict[int, _Ordering] = field(default_factory=dict)  # by agent id
    handed_over: int = 0  # partial sums read by an owner
    counters: dict[int, int] = field(default_factory=dict)  # split_k's tickets drawn per tile
    released: dict[int, set[int]] = field(default_factory=dict)  # slots released per counter
    # stream_k_aligned's fetch: partial sums handed to the TMA unit, not yet added
    fetched: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    fetchers: dict[int, str] = field(default_factory=dict)

    def _of(self, agent) -> _Ordering:
        ordering = self.orderings.get(id(agent))
        if ordering is None:
            # the ordering holds its agent, so that no later block's agent gets its id
            ordering = self.orderings[id(agent)] = _Ordering(agent=agent)
        return ordering

    def store(self, agent, slot: int, frags: dict[str, np.ndarray], who: str) -> None:
        if slot in self.partials:
            raise InterpreterError(
                f"{who} writes workspace slot {slot}, which holds {self.writers[slot]}'s "
                "partial sum that no owner has read yet"
            )
        self.partials[slot] = {name: f.copy() for name, f in frags.items()}
        self.writers[slot] = who
        ordering = self._of(agent)
        ordering.unordered_store = True
        ordering.stored.add(slot)
        ordering.acquired.add(slot)  # its own threads read it back in program order

    def barrier(self, agent) -> None:
        ordering = self._of(agent)
        ordering.unordered_store = False
        ordering.unordered_acquire.clear()

    def signal(self, agent, slot: int, who: str) -> None:
        if self._of(agent).unordered_store:
            raise RaceError(
                f"{who}: the first consumer thread sets flags[{slot}] while the other "
                "threads' partial sums may still be on their way to the workspace: a "
                "`barrier.consumers` between the partial store and the flag is missing"
            )
        if self.flags.get(slot):
            raise InterpreterError(f"{who} sets flags[{slot}], which is set already")
        self.flags[slot] = 1

    def wait(self, agent, slot: int, who: str) -> None:
        if not self.flags.get(slot):
            raise DeadlockError(
                f"{who} waits on flags[{slot}], which no block sets (the blocks after it "
                "have run): a hung kernel"
            )
        self.flags[slot] = 0  # cleared for the next launch
        ordering = self._of(agent)
        ordering.acquired.add(slot)
        ordering.unordered_acquire.add(slot)

    def ticket(self, agent, slot: int, slices: int, who: str) -> int:
        """The ticket the block draws from counter `slot`: it releases the partial sums the
        block stored to the tickets drawn after it and acquires those of the tickets drawn
        before it; the last (slices - 1) resets the counter for the next launch."""
        ordering = self._of(agent)
        if ordering.unordered_store:
            raise RaceError(
                f"{who}: the first consumer thread takes a ticket of tiles[{slot}] while the "
                "other threads' partial sums may still be on their way to the workspace: a "
                "`barrier.consumers` between the partial store and the ticket is missing"
            )
        drawn = self.counters.get(slot, 0)
        released = self.released.setdefault(slot, set())
        ordering.acquired |= released  # the acquire (the ticket's barrier orders every read)
        released |= ordering.stored
        ordering.stored = set()
        if drawn + 1 == slices:
            self.counters[slot] = 0  # the last ticket: reset for the next launch
            self.released.pop(slot)
        else:
            self.counters[slot] = drawn + 1
        return drawn

    def add(self, agent, slot: int, frags: dict[str, np.ndarray], who: str) -> None:
        ordering = self._of(agent)
        if slot not in ordering.acquired:
            raise RaceError(
                f"{who} reads workspace slot {slot} without waiting on flags[{slot}] or "
                "drawing a ticket after its writer's: nothing orders the read after the "
                "other block's partial store"
            )
        if slot in ordering.unordered_acquire:
            raise RaceError(
                f"{who}: the consumer threads read workspace slot {slot} before the first "
                f"thread's acquire of flags[{slot}] is ordered before them: a "
                "`barrier.consumers` after the flag's wait is missing"
            )
        if slot not in self.partials:
            raise InterpreterError(f"{who} reads workspace slot {slot}, which holds no sum")
        for name, partial in self.partials.pop(slot).items():
            frags[name] += partial
        self.writers.pop(slot)
        ordering.acquired.discard(slot)
        self.handed_over += 1

    def fetch(self, agent, slot: int, who: str) -> None:
        """`stream_k_aligned`'s fetch (PartialFetch's first part): the producer's thread
        hands slot `slot` to the TMA unit, after its own acquire of the slot's flag (one
        thread: program order orders its copies after it); the consumers add it from
        shared memory, ordered by the mbarrier its bytes count on."""
        ordering = self._of(agent)
        if slot not in ordering.acquired:
            raise RaceError(
                f"{who} fetches workspace slot {slot} without waiting on flags[{slot}]: "
                "nothing orders the copy after the other block's partial store"
            )
        if slot not in self.partials:
            raise InterpreterError(f"{who} fetches workspace slot {slot}, which holds no sum")
        self.fetched[slot] = self.partials.pop(slot)
        self.fetchers[slot] = self.writers.pop(slot)
        ordering.acquired.discard(slot)
        ordering.unordered_acquire.discard(slot)

    def add_fetched(self, slot: int, frags: dict[str, np.ndarray], who: str) -> None:
        """The consumers add the partial sum their producer fetched from slot `slot` (the
        interpreter checks their reads of the stage slots after the copies' landing)."""
        if slot not in self.fetched:
            raise InterpreterError(f"{who} adds workspace slot {slot}, which no one fetched")
        for name, partial in self.fetched.pop(slot).items():
            frags[name] += partial
        self.fetchers.pop(slot)
        self.handed_over += 1

    def check_end(self) -> None:
        """After the whole grid: the next launch finds every flag clear and no sum left."""
        left = sorted(slot for slot, set_ in self.flags.items() if set_)
        if left:
            raise InterpreterError(
                f"the kernel ends with flags[{left[0]}] set: the next launch's owner would "
                "read a stale partial sum (no block waited on it)"
            )
        drawn = sorted(slot for slot, count in self.counters.items() if count)
        if drawn:
            raise InterpreterError(
                f"the kernel ends with {self.counters[drawn[0]]} ticket(s) of tiles[{drawn[0]}] "
                "drawn: the next launch's slices would count from there, and none would add "
                "the tile's partial sums"
            )
        if self.fetched:
            slot = min(self.fetched)
            raise InterpreterError(
                f"{self.fetchers[slot]}'s partial sum, fetched from workspace slot {slot}, is "
                "never added: its tile's C misses those K steps"
            )
        if self.partials:
            slot = min(self.partials)
            raise InterpreterError(
                f"{self.writers[slot]}'s partial sum in workspace slot {slot} is never "
                "added: its tile's C misses those K steps"
            )
