"""Happens-before across the roles of a warp-specialized block: vector clocks and a shadow
of shared memory.

    hb = HappensBefore(kernel, offsets, units, pid)   # one per block
    clock = hb.release(agent)         # Arrive / ExpectTx: the clock to join into the phase
    clock = hb.issue(agent)           # a TMA copy's issue: the clock its write carries
    hb.acquire(agent, clock)          # a passing mbarrier wait: the phase's clock joined
    hb.read(agent, units, stmt)       # a shared-memory read by `agent`, at its clock now
    hb.write(agent, clock, units, stmt)        # a write (a TMA landing: its issue clock)

Two agents, the producer (0) and the consumer (1, every consumer warpgroup together: they
run in lock-step, and among themselves the phase race log of tiledsl.interp.races keeps
watch) — or, with `warp_specialize pingpong`, the producer and one agent per team of
consumer warpgroups (1, 2), each on tiles of its own. Each agent's clock is a vector of a
counter per agent; its own counter moves on after
every release and at every TMA issue, so an access is covered by exactly the releases
that follow it in program order. The TMA unit's writes are the producer's, ordered after
the producer's clock at their issue (FastTrack's epochs, Flanagan and Freund, PLDI 2009).

Each 2-byte unit of the arena remembers its last write (agent, epoch, statement) and, per
agent, its latest read since (epoch, statement). A write by one agent must be ordered
after every earlier read and write by the other, a read after the last write by the other
— "ordered" meaning the accessing agent's clock has seen the other's epoch, which only a
wait on an mbarrier phase that the other released into can give. Anything else is a
RaceError naming both statements and both roles. The interpreter's order of execution
cannot hide a race: the check is on the clocks, not on which access ran first.
"""

from __future__ import annotations

import numpy as np

from ..ir.nodes import KernelIR
from ..ir.printer import stmt_text
from .errors import RaceError
from .races import where
from .tiles import UNIT

AGENTS = ("producer", "consumer")
PRODUCER, CONSUMER = 0, 1


class HappensBefore:
    def __init__(
        self,
        kernel: KernelIR,
        offsets: dict[str, int],
        units: int,
        pid: int,
        agents=AGENTS,
        block_units: int | None = None,
    ):
        self.kernel = kernel
        self.offsets = offsets
        self.pid = pid
        # a cluster's blocks in one shadow: block r's units from r * block_units on
        self.block_units = block_units
        self.agents = agents
        n = len(agents)
        # clocks[a][b]: what agent a knows of agent b's counter; a's own starts at 1 so
        # that an access before any release is still unseen by the other agent (epoch 0)
        self.clocks = [[int(a == b) for b in range(n)] for a in range(n)]
        self.w_agent = np.full(units, -1, np.int8)
        self.w_epoch = np.zeros(units, np.int64)
        self.w_stmt = np.full(units, -1, np.int32)
        self.r_epoch = np.full((n, units), -1, np.int64)
        self.r_stmt = np.full((n, units), -1, np.int32)
        self.texts: list[str] = []
        self.text_ids: dict[int, int] = {}

    # ------------------------------------------------------------ clocks
    def clock(self, agent: int) -> list[int]:
        return list(self.clocks[agent])

    def release(self, agent: int) -> list[int]:
        """The clock an arrival publishes; what `agent` does next is after it."""
        out = list(self.clocks[agent])
        self.clocks[agent][agent] += 1
        return out

    def issue(self, agent: int) -> list[int]:
        """The clock of an asynchronous write issued now (a TMA copy): after everything
        the agent did before, before nothing it does next."""
        self.clocks[agent][agent] += 1
        return list(self.clocks[agent])

    def acquire(self, agent: int, clock: list[int] | None) -> None:
        if clock is not None:
            mine = self.clocks[agent]
            for b, value in enumerate(clock):
                if value > mine[b]:
                    mine[b] = value

    # ------------------------------------------------------------ accesses
    def read(self, agent: int, units, stmt) -> None:
        """`agent` reads `units` now: ordered after the other agent's last write to them."""
        u = np.asarray(units).ravel()
        clock = np.asarray(self.clocks[agent])
        writer = self.w_agent[u]
        other = (writer >= 0) & (writer != agent)
        if other.any():
            seen = clock[np.where(other, writer, 0)]
            bad = other & (self.w_epoch[u] > seen)
            if bad.any():
                i = int(np.argmax(bad))
                self._race(
                    int(u[i]),
                    (int(writer[i]), "write", self.texts[self.w_stmt[u[i]]]),
                    (agent, "read", self._text(stmt)),
                )
        sid = self._sid(stmt)
        epoch = self.clocks[agent][agent]
        self.r_epoch[agent, u] = epoch
        self.r_stmt[agent, u] = sid

    def write(self, agent: int, clock, units, stmt) -> None:
        """`agent` writes `units` with `clock` (its clock now, or a TMA copy's at issue)."""
        u = np.asarray(units).ravel()
        for b in range(len(self.agents)):
            if b == agent:
                continue
            bad = self.r_epoch[b, u] > clock[b]
            if bad.any():
                i = int(np.argmax(bad))
                self._race(
                    int(u[i]),
                    (b, "read", self.texts[self.r_stmt[b, u[i]]]),
                    (agent, "write", self._text(stmt)),
                )
        writer = self.w_agent[u]
        other = (writer >= 0) & (writer != agent)
        if other.any():
            seen = np.asarray(clock)[np.where(other, writer, 0)]
            bad = other & (self.w_epoch[u] > seen)
            if bad.any():
                i = int(np.argmax(bad))
                self._race(
                    int(u[i]),
                    (int(writer[i]), "write", self.texts[self.w_stmt[u[i]]]),
                    (agent, "write", self._text(stmt)),
                )
        self.w_agent[u] = agent
        self.w_epoch[u] = clock[agent]
        self.w_stmt[u] = self._sid(stmt)
        self.r_epoch[:, u] = -1

    # ------------------------------------------------------------ reports
    def _sid(self, stmt) -> int:
        """The statement's text, printed once per block (a report needs it; printing it
        at every access would cost more than the access)."""
        sid = self.text_ids.get(id(stmt))
        if sid is None:
            sid = self.text_ids[id(stmt)] = len(self.texts)
            self.texts.append(stmt_text(stmt))
        return sid

    def _text(self, stmt) -> str:
        return self.texts[self._sid(stmt)]

    def _race(self, unit: int, first: tuple, second: tuple) -> None:
        (a, kind_a, text_a), (b, kind_b, text_b) = first, second
        block = f"block {self.pid}"
        if self.block_units:
            rank, unit = divmod(unit, self.block_units)
            block = f"block {rank} of cluster {self.pid}"
        place = where(self.kernel, self.offsets, unit * UNIT, text_b)
        raise RaceError(
            f"shared-memory race on {place} in {block}: {kind_a} by the "
            f"{self.agents[a]} role in `{text_a}` and {kind_b} by the {self.agents[b]} role "
            f"in `{text_b}`, which no mbarrier handoff orders after it (the {self.agents[b]} "
            f"never waited on a phase that the {self.agents[a]} released into after its "
            f"{kind_a})"
        )
