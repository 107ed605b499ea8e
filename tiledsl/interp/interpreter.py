"""The numpy interpreter of the IR: the executor, and the one entry point.

    stats = interpret(kernel, arrays, sizes)   # the output array is written in place
    stats = interpret(kernel, arrays, sizes, schedules=4, seed=7, blocks=2)

It executes what the emitter emits: every block of the grid, in order; inside a
block every statement runs for all warps at once (numpy over a leading warp
axis), copies spread over threads or lanes exactly as the emitted loops spread
them (`copy_chunks`), and fragments held per warp. Values follow the tensor cores:
inputs are f16, products exact, sums in the accumulator's type.

Async copies (cp.async) read global memory when issued and land when a
`wait_group` retires their group; touching bytes still in flight is an error.

wgmma (`mma m64nNk16`) reads its A and B tiles asynchronously: from the issue until
the `wgmma.wait_group` that retires its group. The interpreter reads them at the issue,
refuses any write to them before that wait, and logs the reads again at the wait, so a
write by another warp that no barrier orders after the wait is a race.

Warp specialization (`Roles`): the producer (one elected thread of the warpgroup after
the IR warps) and the consumer (the IR warps, in lock-step among themselves) run
concurrently, each a generator over its body that advances one statement at a time; a
seeded scheduler (tiledsl.interp.roles) interleaves them and the TMA copies in flight,
`schedules` times per call (default 2), and each interleaving must give the same bytes.
A TMA copy reads global memory at its issue (zeros outside the operand), keeps its
shared units in flight, and lands when the scheduler says, counting its bytes on its
mbarrier (tiledsl.interp.mbarriers) then. A TMA store (`epilogue_via tma`) reads its
shared tile at the issue, by the warpgroup's issuing thread, and writes C's elements
inside the operand; the tile counts as read until that thread's store wait, and it must
hold only writes a proxy fence has made visible to the TMA unit. Across the roles, a
happens-before detector over vector clocks that flow through the mbarrier phases
(tiledsl.interp.clocks) finds the races; a wait that nothing can complete is a
DeadlockError. A persistent kernel runs
`blocks` blocks (gridDim.x; default min(tiles, 3)), so that each loops over several tiles
and the phase bits carry from tile to tile. In thread-block clusters (`cluster`) the
interpreter runs one cluster at a time, its blocks' roles in one scheduler: a multicast TMA
copy is one flight per receiving block, a release arrives on every sharing block's
barrier, the clocks span every role of every block (each block's shared memory a range of
one shadow), and a block whose roles are done exits unless a cluster barrier follows them
— an arrival or a landing in an exited block is an error.

The executor leans on modules of one concern each:

    tiles       where a tile's elements are (the block's shared arena, a global array)
    contracts   what each instruction asks of its addresses (the path's pointer contracts)
    races       the race log: accesses per barrier phase, the happens-before check
    mbarriers   one block's mbarriers: arrivals, transaction bytes, phases
    clocks      the roles' vector clocks and the shadow of shared memory
    roles       the scheduler that interleaves the roles and the TMA copies
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from ..ir.dtypes import VALUE, convert, decode, encode
from ..ir.expr import INT32, evaluate, variables
from ..ir.fetch import fetch_parts, part_bytes, part_spans, partial_bytes, row_bytes
from ..ir.grid import cluster_place, grid_vars, multicast_ranks, sharing_ranks, tile_steps
from ..ir.nodes import (
    DTYPE_BYTES,
    Arrive,
    AsyncCommit,
    AsyncWait,
    Barrier,
    Copy,
    EpilogueFrag,
    ExpectTx,
    Fill,
    FlagSignal,
    FlagWait,
    For,
    GlobalTile,
    If,
    KernelIR,
    Let,
    LoadFrag,
    Mma,
    MmaCommit,
    MmaFence,
    MmaWait,
    PartialAdd,
    PartialFetch,
    PartialFromPeer,
    PartialStore,
    PartialToShared,
    ProxyFence,
    Roles,
    SharedTile,
    StoreFrag,
    Ticket,
    Tile,
    TmaLoad,
    TmaStore,
    TmaStoreWait,
    Wait,
    async_mma,
    buffer_offsets,
)
from ..ir.printer import stmt_text
from .clocks import CONSUMER, PRODUCER, HappensBefore
from .contracts import check_fragment_pointer, check_tma, check_vectors
from .errors import DeadlockError, InterpreterError, RaceError
from .fixups import FixUps
from .mbarriers import MBarriers
from .races import RaceLog
from .roles import Blocked, Scheduler, Thread
from .tiles import UNIT, Memory, checked_int

__all__ = [
    "DeadlockError",
    "InterpreterError",
    "RaceError",
    "Stats",
    "copy_chunks",
    "has_roles",
    "interpret",
]

#: Interleavings per call of a kernel with roles, unless `schedules` says otherwise.
DEFAULT_SCHEDULES = 2
#: Blocks of a persistent kernel's grid, at most, unless `blocks` says otherwise: fewer
#: blocks than tiles, so that each block loops over several.
PERSISTENT_BLOCKS = 3

# What a role cannot run: the producer is one thread without fragments; a block barrier
# in one branch of the roles' if/else waits for threads that never reach it.
_NOT_IN_PRODUCER = (Fill, LoadFrag, Mma, StoreFrag, MmaFence, MmaCommit, MmaWait, EpilogueFrag)


@dataclass
class Stats:
    blocks: int = 0
    block_barriers: int = 0
    cluster_barriers: int = 0
    warp_barriers: int = 0
    mma: int = 0
    async_groups: int = 0
    tma_loads: int = 0
    tma_stores: int = 0
    mbarrier_waits: int = 0
    schedules: int = 1  # interleavings run (each over the whole grid); the counts are one's
    partial_sums: int = 0  # stream-K: partial sums handed to a tile's owner
    steps: int = 0  # scheduler steps: statements run and TMA copies landed


@dataclass
class _Pending:
    """One async copy: where it lands, what it carries, who issued it."""

    view: np.ndarray
    flat: np.ndarray
    values: np.ndarray
    units: np.ndarray
    issuers: np.ndarray
    stmt: Copy


@dataclass
class _Flight:
    """One TMA copy in flight: where it lands, what it carries, what it counts on."""

    view: np.ndarray
    flat: np.ndarray
    values: np.ndarray
    units: np.ndarray
    agent: int | None  # its issuer in the clocks (None outside roles)
    clock: list[int] | None  # the issuer's clock at the issue
    bar: tuple[str, int]
    nbytes: int
    who: str
    stmt: TmaLoad | PartialFetch  # a tile's box, or a part of a fetched partial sum
    dest: _Block | None = None  # the block it lands in (a multicast: one flight per block)


@dataclass
class _Block:
    """One block's shared state: its memory, what is in flight in it, its mbarriers and
    the roles' clocks."""

    pid: int
    memory: Memory
    inflight: np.ndarray  # per unit: a cp.async is still filling it
    tma_busy: np.ndarray  # per unit: a TMA copy is still filling it
    mma_busy: np.ndarray  # per unit: wgmma reads in flight
    store_busy: np.ndarray  # per unit: TMA store reads in flight
    unfenced: np.ndarray  # per unit: the agent whose write no proxy fence followed, or -1
    bars: MBarriers | None
    clocks: HappensBefore | None
    races: RaceLog
    flights: list[_Flight] = field(default_factory=list)  # a cluster's blocks share one list
    landed: list[tuple[str, int, int, TmaLoad | PartialFetch]] = field(default_factory=list)
    # in a thread-block cluster (`cluster`): its rank, its units' place in the cluster's
    # clocks, the cluster's blocks (itself included), its role threads still running, and
    # whether it has exited (its roles done and no cluster barrier holding it back)
    rank: int = 0
    base: int = 0
    cluster: list[_Block] = field(default_factory=list)
    running: int = 0
    holds: bool = False  # a cluster barrier after the roles: it exits with the cluster
    exited: bool = False
    # a block without roles: thread 0's TMA copies in its race log, with the mbarrier and
    # phase each counts on (a wait for that phase orders them: tiledsl.passes.tma_copies)
    tma_logged: list = field(default_factory=list)
    # `split_k S via cluster`: the partial sum the block's consumers left in Ps, by
    # fragment (the interpreter's accumulators have no lane layout to lay it out by)
    shared_partial: dict[str, np.ndarray] | None = None

    @property
    def label(self) -> str:
        return f"block {self.rank} of cluster {self.pid}" if self.cluster else f"block {self.pid}"


@dataclass
class _Agent:
    """Who runs a body: the whole block (a kernel without roles), or one role. Its
    environment, fragments and groups in flight are its own (per thread on the GPU)."""

    role: str  # "block", "producer" or "consumer"
    blk: _Block
    env: dict
    memory: Memory  # the block's, evaluated in this agent's environment
    frags: dict[str, np.ndarray]
    warps: int  # IR warps it stands for: arrivals per Arrive
    threads: int  # threads a `by block` copy spreads over
    thread0: int  # its first thread
    index: int  # its agent in the clocks
    in_role: bool
    team: int | None = None  # pingpong: which team of consumer warpgroups it is
    uncommitted: list[_Pending] = field(default_factory=list)
    groups: list[list[_Pending]] = field(default_factory=list)
    # wgmma reads in flight: (units, issuers, stmt) per read, grouped like cp.async's
    mma_reads: list = field(default_factory=list)
    mma_groups: list[list] = field(default_factory=list)
    # TMA stores whose reads of shared memory are in flight: (units, issuers, stmt)
    store_reads: list = field(default_factory=list)
    loops: list[str] = field(default_factory=list)  # the running loops' variables
    scope: list[str] = field(default_factory=list)  # the names it let, for reports
    current: object = None  # the statement it runs

    @property
    def who(self) -> str:
        team = f" (team {self.team})" if self.team is not None else ""
        return f" in the {self.role} role{team}" if self.in_role else ""

    def where(self) -> str:
        """Its statement, and the values of its loop variables and of the names (lets) the
        statement uses."""
        stmt = self.current
        text = stmt_text(stmt) if stmt is not None else "its start"
        used = _names(stmt)
        shown = [v for v in self.loops if v in self.env]
        shown += [v for v in self.scope if v in used and v not in shown and v in self.env]
        values = ", ".join(f"{v} = {_value(self.env[v])}" for v in shown)
        return f"`{text}`" + (f" at {values}" if values else "")


def has_roles(kernel: KernelIR) -> bool:
    """Whether the kernel is warp-specialized (its body holds a Roles)."""
    return kernel.specialization is not None


def interpret(
    kernel: KernelIR,
    arrays: dict[str, np.ndarray],
    sizes: dict[str, int],
    *,
    schedules: int | None = None,
    seed: int = 0,
    blocks: int | None = None,
) -> Stats:
    """Run `kernel` over global `arrays` (1-D, storage order; the output is written in place).

    A kernel with roles runs `schedules` interleavings (default 2), each over the whole
    grid from the same inputs, seeded by (`seed`, its number); they must agree to the
    byte. `blocks` is a persistent kernel's grid (gridDim.x; default min(tiles, 3), or in
    clusters of `cluster_size` blocks, that many clusters' blocks rounded up).
    """
    if blocks is not None and not kernel.persistent:
        raise ValueError(f"{kernel.name} is not persistent: its grid is one block per tile")
    if blocks is not None and blocks < 1:
        raise ValueError(f"blocks = {blocks}: a grid has at least one block")
    if blocks is not None and blocks % kernel.cluster_size:
        raise ValueError(
            f"blocks = {blocks}: the grid is whole clusters of {kernel.cluster_size} blocks"
        )
    count = (DEFAULT_SCHEDULES if schedules is None else schedules) if has_roles(kernel) else 1
    if count < 1:
        raise ValueError(f"schedules = {schedules}: at least one")
    initial = {name: a.copy() for name, a in arrays.items()} if count > 1 else {}
    first: dict[str, bytes] = {}
    stats = Stats()
    for number in range(count):
        if number:
            for name, a in arrays.items():
                a[...] = initial[name]
        rng = np.random.default_rng([seed, number])
        stats = _Interpreter(kernel, arrays, sizes, rng, blocks, number).run()
        if count == 1:
            break
        out = {name: a.tobytes() for name, a in arrays.items()}
        if not first:
            first = out
        elif out != first:
            name = next(n for n in out if out[n] != first[n])
            raise InterpreterError(
                f"{name} differs between interleavings 0 and {number} (seed {seed}): the "
                "result depends on how the roles interleave, a race that no mbarrier orders"
            )
    stats.schedules = count
    return stats


class _Interpreter:
    def __init__(
        self,
        kernel: KernelIR,
        arrays: dict[str, np.ndarray],
        sizes: dict[str, int],
        rng: np.random.Generator,
        blocks: int | None = None,
        schedule: int = 0,
    ):
        self.kernel = kernel
        self.schedule = schedule  # which run of the roles' interleavings (and block orders)
        self.arrays = arrays
        self.sizes = dict(sizes)
        self.rng = rng
        self.blocks = blocks
        self.stats = Stats()
        self.fixups = FixUps()  # stream-K's workspace and flags, the grid's
        self.warp_width = kernel.warp_width
        self.warps = kernel.agent_warps
        self.threads = kernel.threads
        self.offsets = buffer_offsets(kernel)
        self.arena_bytes = max(
            [self.offsets[b.name] + b.size_bytes for b in kernel.buffers], default=0
        )
        self.warp_env = kernel.warp_coords()  # every consumer warp's, of every team
        self.async_mma = async_mma(kernel)
        self.roles = has_roles(kernel)
        # the roles' agents in the clocks: the producer, then each team of consumers
        self.agents = (
            ("producer", "consumer")
            if kernel.teams == 1
            else ("producer", *(f"consumer team {t}" for t in range(kernel.teams)))
        )

    def run(self) -> Stats:
        grid = {
            name: checked_int(e, self.sizes, name) for name, e in grid_vars(self.kernel).items()
        }
        batch = self.kernel.gemm.batch
        batches = int(evaluate(batch, self.sizes)) if batch is not None else 1
        size = self.kernel.cluster_size
        # in clusters the swizzle orders cluster tiles, and `pid` and `blocks` are clusters'
        tiles = (
            grid["tiles_m"] * grid["tiles_n"] if size == 1 else grid["ctiles_m"] * grid["ctiles_n"]
        )
        blocks = tiles * max(self.kernel.grid_split, 1)  # split_k: a block per slice
        if self.kernel.persistent:
            default = -(-PERSISTENT_BLOCKS // size)
            if self.blocks is not None:
                blocks = self.blocks // size
            else:  # stream-K shares the tiles among every block, however few the tiles
                blocks = default if self.kernel.stream_k else min(tiles, default)
            grid["blocks"] = blocks
        # what the host computes once per launch (tiledsl.passes.launch_scalars), in order
        for v in self.kernel.launch_scalars:
            grid[v.var] = checked_int(v.value, {**self.sizes, **grid}, v.var)
        if blocks * size > INT32[1]:
            raise InterpreterError(
                f"{blocks * size} blocks: more than the grid's x axis (blockIdx.x)"
            )
        # a persistent block finds its tiles in its loop over them; the others have one
        mapping = {} if self.kernel.maps_own_tiles else tile_steps(self.kernel)
        # stream-K: the last block first, so that a tile's owner finds the partial sums of
        # the blocks after it handed over (tiledsl.interp.fixups); stream_k_aligned's
        # owners add those of the blocks before them: the first block first
        backwards = self.kernel.stream_k and not self.kernel.aligned
        order: Iterable[int] = range(blocks - 1, -1, -1) if backwards else range(blocks)
        if self.kernel.split_cluster:  # a cluster per tile, its slices together
            order = self._split_order(tiles)
        elif self.kernel.grid_split:  # no block waits on another: any order, the same bits
            order = self._split_order(blocks)
        for bz, pid in itertools.product(range(batches), order):
            if size > 1 or self.kernel.split_cluster:
                self._run_cluster(grid, mapping, bz, pid)
            else:
                self._run_block(grid, mapping, bz, pid)
        if self.kernel.hands_over:
            self.fixups.check_end()
            self.stats.partial_sums = self.fixups.handed_over
        return self.stats

    def _split_order(self, blocks: int) -> list[int]:
        """`split_k`'s blocks in this run's order: forward in the first run, backward in the
        second (with two slices, each slice of every tile draws the last ticket in one of
        them), shuffled in the others; the runs' results are compared bit for bit."""
        if self.schedule == 0:
            return list(range(blocks))
        if self.schedule == 1:
            return list(range(blocks - 1, -1, -1))
        return [int(b) for b in self.rng.permutation(blocks)]

    def _run_block(self, grid: dict, mapping: dict, bz: int, pid: int) -> None:
        units = self.arena_bytes // UNIT
        clocks = (
            HappensBefore(self.kernel, self.offsets, units, pid, self.agents)
            if self.roles
            else None
        )
        agent = self._new_block(grid, mapping, bz, pid, 0, clocks, len(self.agents))
        self._schedule(agent.blk, [(agent, self.kernel.body)])
        self._finish(agent)
        self._end_block(agent.blk)

    def _run_cluster(self, grid: dict, mapping: dict, bz: int, pid: int) -> None:
        """The blocks of thread-block cluster `pid`, run concurrently: each block's top level
        (its lets), then every block's roles interleaved in one scheduler (the blocks arrive
        on each other's mbarriers and multicast into each other's stages), then the
        statements after the roles (the cluster barrier)."""
        size, units = self.kernel.blocks_per_cluster, self.arena_bytes // UNIT
        names = tuple(f"{a} of block {r}" for r in range(size) for a in self.agents)
        clocks = (
            HappensBefore(self.kernel, self.offsets, units * size, pid, names, units)
            if self.roles
            else None
        )
        tops = [self._new_block(grid, mapping, bz, pid, r, clocks, len(names)) for r in range(size)]
        blocks = [top.blk for top in tops]
        body = self.kernel.body
        at = next(i for i, st in enumerate(body) if isinstance(st, Roles))
        roles = body[at]
        assert isinstance(roles, Roles)
        holds = any(isinstance(st, Barrier) and st.scope == "cluster" for st in body[at + 1 :])
        bodies = []
        for top in tops:
            top.blk.cluster, top.blk.flights, top.blk.holds = blocks, blocks[0].flights, holds
            for st in body[:at]:
                self._execute(top, st)
            bodies += self._role_agents(top, roles)
        self._schedule(blocks[0], bodies)
        for ag, _ in bodies:
            self._finish(ag)
        for top in tops:
            top.blk.exited = True
            for st in body[at + 1 :]:
                self._execute(top, st)
            self._finish(top)
        for blk in blocks:
            self._end_block(blk)

    def _new_block(
        self, grid, mapping, bz: int, pid: int, rank: int, clocks, agents: int
    ) -> _Agent:
        """A block (of cluster `pid`, at `rank`, in clusters) and the agent of its top level."""
        env = {**self.sizes, **grid, "pid": pid, "bz": bz}
        if self.kernel.split_cluster:  # cluster pid is tile pid's slices: blocks pid * S + r
            env["pid"] = pid * self.kernel.grid_split + rank
        if self.kernel.blocks_per_cluster > 1:
            env["rank"] = rank
            for name, e in cluster_place(self.kernel).items():
                env[name] = checked_int(e, env, name)
        for name, e in mapping.items():  # in order: each step may use the ones before
            env[name] = checked_int(e, env, name)
        env.update(self.warp_env)
        frags: dict[str, np.ndarray] = {
            f.name: np.zeros((self.warps, *f.count, f.rows, f.cols), VALUE[f.dtype])
            for f in self.kernel.fragments
        }
        units = self.arena_bytes // UNIT
        memory = Memory(self.kernel, self.arrays, self.offsets, self.arena_bytes, env)
        races = RaceLog(self.kernel, self.offsets)
        races.start_block(pid)
        blk = _Block(
            pid,
            memory,
            inflight=np.zeros(units, bool),
            tma_busy=np.zeros(units, bool),
            mma_busy=np.zeros(units, np.int32),
            store_busy=np.zeros(units, np.int32),
            unfenced=np.full(units, -1, np.int32),
            bars=MBarriers(self.kernel, agents) if self.kernel.mbarriers else None,
            clocks=clocks,
            races=races,
            rank=rank,
            base=rank * units,
        )
        first = rank * len(self.agents)  # its agents' place in the cluster's clocks
        return _Agent(
            "block", blk, env, memory, frags, self.warps, self.threads, 0, first + CONSUMER, False
        )

    def _end_block(self, blk: _Block) -> None:
        """What must hold when a block exits: its copies landed, and observed."""
        mine = [f for f in blk.flights if (f.dest or blk) is blk]
        if mine:
            f = mine[0]
            raise InterpreterError(
                f"{blk.label} ends with the TMA copy `{stmt_text(f.stmt)}` still in flight: "
                f"no mbarrier.wait on {f.bar[0]}[{f.bar[1]}] waits for it to land"
            )
        assert blk.bars is not None or not blk.landed  # a TMA copy counts on a barrier
        for name, slot, phase, stmt in blk.landed:
            if blk.bars is not None and blk.bars.observed(name, slot) < phase:
                raise InterpreterError(
                    f"the TMA copy `{stmt_text(stmt)}` ({blk.label}) landed in phase {phase} "
                    f"of {name}[{slot}], which no mbarrier.wait observed complete: on the "
                    "GPU the block may exit, or overwrite the tile, before it lands"
                )
        blk.races.check_phase()
        self.stats.blocks += 1

    def _finish(self, ag: _Agent) -> None:
        """What an agent must have retired by its end."""
        where = ag.blk.label + (f", the {ag.role} role" if ag.in_role else "")
        if ag.mma_reads or any(ag.mma_groups):
            raise InterpreterError(
                f"wgmmas were issued but never waited for ({where}): a wgmma.wait_group is missing"
            )
        if ag.uncommitted or any(ag.groups):
            raise InterpreterError(
                f"async copies were issued but never waited for ({where}): "
                "a cp.async.wait_group is missing"
            )
        if ag.store_reads:
            raise InterpreterError(
                f"`{stmt_text(ag.store_reads[0][2])}` may still be reading shared memory when "
                f"its warpgroup ends ({where}): a tma.store_wait "
                "(cp.async.bulk.wait_group.read) is missing before the block exits"
            )

    # ------------------------------------------------------------ roles
    def _schedule(self, blk: _Block, bodies: list) -> None:
        """Run each (agent, body) to its end, interleaved, with the block's TMA copies."""
        threads = [
            Thread(
                f"{ag.blk.label}'s {ag.role}" if ag.blk.cluster else ag.role,
                PRODUCER if ag.role == "producer" else CONSUMER,
                self._running(ag, body),
                ag.where,
                bars=ag.blk.bars,
            )
            for ag, body in bodies
        ]
        for ag, _ in bodies:
            ag.blk.running += 1
        scheduler = Scheduler(self.rng, blk.bars, blk.label)
        steps = scheduler.run(threads, blk.flights, lambda i: self._land_tma(blk, i))
        self.stats.steps += steps  # after the run: a nested run (the roles) adds its own

    def _running(self, ag: _Agent, body):
        """`body`'s steps; after the last, the block exits once its every role is done
        (in a cluster without a cluster barrier after the roles: nothing holds it)."""
        yield from self._body(ag, body)
        blk = ag.blk
        blk.running -= 1
        if blk.cluster and not blk.running and not blk.holds:
            blk.exited = True

    def _roles(self, ag: _Agent, s: Roles) -> None:
        """Fork the producer and the consumer, run them concurrently, join."""
        bodies = self._role_agents(ag, s)
        self._schedule(ag.blk, bodies)
        for role, _ in bodies:
            self._finish(role)

    def _role_agents(self, ag: _Agent, s: Roles) -> list:
        """The producer and the consumer (a team each, pingpong) of `ag`'s block, with
        their bodies."""
        if ag.in_role:
            raise InterpreterError(f"roles inside the {ag.role} role")
        ag.blk.races.check_phase()  # the fork orders what the block did before
        blk = ag.blk
        first = blk.rank * len(self.agents)  # the block's agents in the cluster's clocks
        env = {k: v for k, v in ag.env.items() if k not in self.warp_env}
        producer = _Agent(
            "producer",
            blk,
            env,
            ag.memory.with_env(env),
            {},
            1,
            1,
            self.kernel.consumer_warps * self.warp_width,  # one elected thread after them
            first + PRODUCER,
            True,
        )
        teams = self.kernel.teams
        consumers = []
        for team in range(teams):
            # a team: the IR's warps again, with its own warp ids, accumulators and clock
            warps = slice(team * self.warps, (team + 1) * self.warps)
            team_env = {**env, **{name: a[warps] for name, a in self.warp_env.items()}}
            if teams > 1:
                team_env["team"] = team  # one value for the whole team: its tiles, its turn
            frags = ag.frags if teams == 1 else {n: np.zeros_like(f) for n, f in ag.frags.items()}
            consumer = _Agent(
                "consumer",
                blk,
                team_env,
                ag.memory.with_env(team_env, team * self.warps),
                frags,
                self.warps,
                self.warps * self.warp_width,
                team * self.warps * self.warp_width,
                first + CONSUMER + team,
                True,
                team=team if teams > 1 else None,
            )
            consumers.append(consumer)
        return [(producer, s.producer.body)] + [(c, s.consumer.body) for c in consumers]

    def _wait(self, ag: _Agent, s: Wait):
        """mbarrier.try_wait.parity in a loop: blocked until the phase completes."""
        bars = self._bars(ag, s)
        name, slot = bars.ref(s.bar, ag.env, s)
        parity = evaluate(s.parity, ag.env, int32=True)
        if np.ndim(parity) or parity not in (0, 1):
            raise InterpreterError(
                f"`{stmt_text(s)}`{ag.who}: parity {_value(parity)}, not one of 0 and 1"
            )
        while not bars.passes(name, slot, int(parity)):
            yield Blocked(name, slot, int(parity))
        clock = bars.acquire(name, slot)
        if ag.in_role and ag.blk.clocks is not None:
            ag.blk.clocks.acquire(ag.index, clock)
        if not ag.in_role:  # every thread waited: the copies of the phase are ordered
            self._forget_landed(ag.blk, (name, slot), bars.phase(name, slot) - 1)
        self.stats.mbarrier_waits += 1
        yield None

    def _forget_landed(self, blk: _Block, bar: tuple[str, int], observed: int) -> None:
        """A block without roles passed a wait on `bar`: the TMA copies counted on its
        phases up to `observed` have landed before every thread's next access, so the race
        log (which orders by block barriers only) no longer holds them against those."""
        done = [a for a, b, p in blk.tma_logged if b == bar and p <= observed]
        if done:
            blk.races.forget(done)
            gone = {id(a) for a in done}
            blk.tma_logged = [x for x in blk.tma_logged if id(x[0]) not in gone]

    def _arrive(self, ag: _Agent, s: Arrive | ExpectTx) -> None:
        """One arrival per IR warp of the agent (with expect_tx, its bytes announced)."""
        bars = self._bars(ag, s)
        name, slot = bars.ref(s.bar, ag.env, s)
        clocks = ag.blk.clocks
        clock = clocks.release(ag.index) if ag.in_role and clocks is not None else None
        # expect_tx is one thread's arrival (the producer's, or thread 0 of a block without
        # roles); an Arrive is one per IR warp (warpgroup) of the agent
        count, nbytes = (1, s.bytes) if isinstance(s, ExpectTx) else (ag.warps, 0)
        targets = [ag.blk]
        if isinstance(s, Arrive) and s.sharers:  # remote arrivals too: every sharing block
            targets = [ag.blk.cluster[r] for r in sharing_ranks(self.kernel, ag.blk.rank)]
        if isinstance(s, Arrive) and s.rank is not None:  # one block of the cluster's
            targets = [self._peer(ag, s, s.rank)]
        for blk in targets:
            if blk.exited:
                raise InterpreterError(
                    f"`{stmt_text(s)}`{ag.who} of {ag.blk.label} arrives on {name}[{slot}] of "
                    f"{blk.label}, which may have exited: a cluster barrier before the "
                    "cluster's blocks exit is missing"
                )
            self._bars(ag, s, blk).arrive(name, slot, count, nbytes, clock, ag.role, s)

    def _bars(self, ag: _Agent, s, blk: _Block | None = None) -> MBarriers:
        bars = (blk or ag.blk).bars
        if bars is None:
            raise InterpreterError(f"`{stmt_text(s)}`: the kernel declares no mbarriers")
        return bars

    def _tma(self, ag: _Agent, s: TmaLoad) -> None:
        """cp.async.bulk.tensor: read the global box now; its bytes land later."""
        if ag.role == "consumer":
            raise InterpreterError(
                f"`{stmt_text(s)}` in the consumer role: a TMA copy is issued by one thread "
                "(the producer's)"
            )
        blk = ag.blk
        bars = self._bars(ag, s)
        bar = bars.ref(s.bar, ag.env, s)
        text = stmt_text(s)
        if (s.src.rows, s.src.cols) != (s.dst.rows, s.dst.cols):
            raise InterpreterError(f"`{text}`: the box and the shared tile differ in shape")
        rows, cols = np.arange(s.dst.rows)[:, None], np.arange(s.dst.cols)[None, :]
        inside: list = []
        src, sflat, _ = ag.memory.locate(s.src, rows, cols, text, inside)
        dst, dflat, dunits = ag.memory.locate(s.dst, rows, cols, text)
        check_tma(ag.memory, s, text)
        values = convert(src[sflat], ag.memory.dtype(s.src), ag.memory.dtype(s.dst))
        values = np.where(inside[0], values, np.zeros((), dst.dtype))  # out of bounds: zeros
        clocks = blk.clocks
        clock = clocks.issue(ag.index) if ag.in_role and clocks is not None else None
        nbytes = s.dst.rows * s.dst.cols * DTYPE_BYTES[ag.memory.dtype(s.dst)]
        agent = ag.index if clock is not None else None
        if not ag.in_role:  # thread 0 of a block without roles: its write, for the race log
            # as warp 0's (thread 0 runs every warp-collective step of warp 0, its waits
            # that retire the wgmmas' reads included: program order within the warp)
            warp0 = np.asarray(self.threads, np.int64)
            logged = ag.blk.races.record(dunits, warp0, True, s)
            ag.blk.tma_logged.append((logged, bar, bars.phase(*bar)))
        # multicast: the same bytes into the same offsets of every block it names
        ranks = multicast_ranks(self.kernel, s.multicast, blk.rank)
        for dest in [blk.cluster[r] for r in ranks] if blk.cluster else [blk]:
            self._not_in_flight(ag, dunits, s, dest)
            self._not_being_read(ag, dunits, s, dest)
            dest.tma_busy[dunits] = True
            view = dest.memory.views[s.dst.buffer]
            blk.flights.append(
                _Flight(view, dflat, values, dunits, agent, clock, bar, nbytes, ag.role, s, dest)
            )
        self.stats.tma_loads += 1

    def _register_epilogue(self, ag: _Agent, s: EpilogueFrag) -> None:
        """The epilogue on an accumulator in its registers (float32 steps, as the kernel
        rounds them): C_old and a bias read at each element's place in C, nothing outside."""
        frag, i, j = self._frag(ag, s.frag)
        acc = frag[:, i, j].astype(np.float32)
        text = stmt_text(s)
        rows, cols = np.arange(s.tile.rows)[:, None], np.arange(s.tile.cols)[None, :]
        inside: list = []
        dst, dflat, _ = ag.memory.locate(s.tile, rows, cols, text, inside)
        shape = np.broadcast_shapes(acc.shape, dflat.shape)
        ep, memory = s.epilogue.bound(self.sizes), ag.memory  # a runtime alpha, beta: the launch's
        c_old = (
            decode(dst[np.broadcast_to(dflat, shape)], memory.dtype(s.tile)) if ep.reads_c else None
        )
        biases = self._biases(ag, ep, s.tile, rows if ep.bias_rows else cols, shape)
        frag[:, i, j] = ep.apply(np.broadcast_to(acc, shape), c_old, biases).astype(frag.dtype)

    def _tma_store(self, ag: _Agent, s: TmaStore) -> None:
        """cp.async.bulk.tensor to global, by thread 0 of each IR warp: reads the shared
        tile now (and until its store wait), writes C's elements inside the operand."""
        if ag.role == "producer":
            raise InterpreterError(
                f"`{stmt_text(s)}` in the producer role: the consumers store their C"
            )
        text = stmt_text(s)
        if (s.src.rows, s.src.cols) != (s.dst.rows, s.dst.cols):
            raise InterpreterError(f"`{text}`: the box and the shared tile differ in shape")
        check_tma(ag.memory, s, text)
        data, flat, units, _ = ag.memory.warp_tile(s.src, text)
        assert units is not None  # a shared tile has units
        issuers = (ag.thread0 + np.arange(ag.warps) * self.warp_width).reshape(
            -1, *([1] * (units.ndim - 1))
        )  # thread 0 of each warpgroup issues it
        self._not_in_flight(ag, units, s)
        stale = ag.blk.unfenced[units]
        if (stale >= 0).any():
            raise InterpreterError(
                f"`{text}`{ag.who} hands the TMA unit shared memory written without a "
                "fence.proxy.async after the write: the TMA unit may read the bytes from "
                "before it"
            )
        self._log(ag, units, np.broadcast_to(issuers, units.shape), False, s)
        rows, cols = np.arange(s.dst.rows)[:, None], np.arange(s.dst.cols)[None, :]
        inside: list = []
        dst, dflat, _ = ag.memory.locate(s.dst, rows, cols, text, inside)
        shape = np.broadcast_shapes(flat.shape, dflat.shape)
        values = convert(
            np.broadcast_to(data[flat], shape), ag.memory.dtype(s.src), ag.memory.dtype(s.dst)
        )
        mask = np.broadcast_to(inside[0], shape)  # outside C: the TMA unit skips them
        dst[np.broadcast_to(dflat, shape)[mask]] = values[mask]
        _count(ag.blk.store_busy, units, 1)
        ag.store_reads.append((units, issuers, s))
        self.stats.tma_stores += 1

    def _retire_stores(self, ag: _Agent) -> None:
        """cp.async.bulk.wait_group.read 0: the stores have read their tiles, until here."""
        for units, issuers, stmt in ag.store_reads:
            _count(ag.blk.store_busy, units, -1)
            self._log(ag, units, np.broadcast_to(issuers, units.shape), False, stmt)
        ag.store_reads = []

    def _land_tma(self, blk: _Block, i: int) -> None:
        """The TMA unit has written copy `i`: its bytes count on its barrier now."""
        f = blk.flights.pop(i)
        blk = f.dest or blk  # where it lands
        if blk.exited:
            raise InterpreterError(
                f"the TMA copy `{stmt_text(f.stmt)}` ({f.who} role) lands in {blk.label}, "
                "which may have exited: no mbarrier.wait of that block waits for it"
            )
        if (blk.mma_busy[f.units] > 0).any():
            raise InterpreterError(
                f"the TMA copy `{stmt_text(f.stmt)}` ({f.who} role) lands on shared memory "
                "that a wgmma of the consumer role may still be reading: the consumers "
                "released the slot before the wgmma.wait_group that retires its reads"
            )
        assert blk.bars is not None  # _tma checked that the kernel has barriers
        name, slot = f.bar
        phase = blk.bars.phase(name, slot)
        blk.bars.complete_tx(name, slot, f.nbytes, f.clock, f.who, f.stmt)
        f.view[f.flat] = f.values
        blk.tma_busy[f.units] = False
        if blk.clocks is not None and f.agent is not None:
            assert f.clock is not None
            blk.clocks.write(f.agent, f.clock, f.units + blk.base, f.stmt)
        blk.landed.append((name, slot, phase, f.stmt))

    # ------------------------------------------------------------ statements
    def _body(self, ag: _Agent, body):
        """A generator over `body`: one step per statement (a blocked wait yields
        Blocked until it passes)."""
        for stmt in body:
            ag.current = stmt
            try:
                match stmt:
                    case For():
                        yield from self._loop(ag, stmt)
                    case If():
                        yield from self._branch(ag, stmt)
                    case Wait():
                        yield from self._wait(ag, stmt)
                    case _:
                        self._execute(ag, stmt)
                        yield None
            except KeyError as err:  # a name the role does not bind (the producer: `wm`)
                if not ag.in_role:
                    raise
                raise InterpreterError(f"{ag.where()}{ag.who}: {err.args[0]}") from None

    def _execute(self, ag: _Agent, s) -> None:
        if ag.role == "producer" and isinstance(s, _NOT_IN_PRODUCER):
            raise InterpreterError(
                f"`{stmt_text(s)}` in the producer role: its statements are one thread's, "
                "which holds no fragments"
            )
        match s:
            case Let():
                ag.env[s.var] = checked_int(s.value, ag.env, f"let {s.var}")
                if s.var not in ag.scope:
                    ag.scope.append(s.var)
            case Fill():
                frag, i, j = self._frag(ag, s.frag)
                frag[:, i, j] = s.value
            case LoadFrag():
                self._load_fragment(ag, s)
            case MmaFence():
                pass  # orders registers for the hardware; the interpreter's are always in order
            case MmaCommit():
                ag.mma_groups.append(ag.mma_reads)
                ag.mma_reads = []
            case MmaWait():
                self._retire_mmas(ag, s.pending)
            case Mma():
                self._mma(ag, s)
            case StoreFrag():
                self._store_fragment(ag, s)
            case Copy():
                self._copy(ag, s)
            case AsyncCommit():
                ag.groups.append(ag.uncommitted)
                ag.uncommitted = []
                self.stats.async_groups += 1
            case AsyncWait():
                self._retire_copies(ag, s.pending)
            case Barrier(scope="block" | "cluster"):
                self._block_barrier(ag, s)
            case Barrier(scope="consumers"):  # stream-K's hand-over (tiledsl.interp.fixups)
                self._fix_up(ag, s)
            case PartialFetch():
                self._partial_fetch(ag, s)
            case PartialAdd() if s.staged is not None:
                self._fetched_add(ag, s)
            case PartialToShared():
                self._partial_to_shared(ag, s)
            case PartialFromPeer():
                self._partial_from_peer(ag, s)
            case PartialStore() | PartialAdd() | FlagSignal() | FlagWait() | Ticket():
                self._fix_up(ag, s)
            case Barrier():
                ag.blk.races.warp_barrier(ag.env.get("warp", slice(None)))  # the agent's warps
                self.stats.warp_barriers += 1
            case Arrive() | ExpectTx():
                self._arrive(ag, s)
            case TmaLoad():
                self._tma(ag, s)
            case EpilogueFrag():
                self._register_epilogue(ag, s)
            case TmaStore():
                self._tma_store(ag, s)
            case TmaStoreWait():
                self._retire_stores(ag)
            case ProxyFence():
                blk = ag.blk
                blk.unfenced[blk.unfenced == ag.index] = -1
            case Roles():
                self._roles(ag, s)
            case _:
                raise InterpreterError(f"cannot interpret {type(s).__name__}")

    def _store_fragment(self, ag: _Agent, s: StoreFrag) -> None:
        """A fragment (or a window of its columns) into its shared or global tile."""
        check_fragment_pointer(ag.memory, s.dst, s, read_async=False)
        frag, i, j = self._frag(ag, s.frag)
        values = frag[:, i, j]
        if s.cols is not None:  # a window of the fragment's columns
            first, width = int(evaluate(s.cols[0], ag.env)), s.cols[1]
            if first < 0 or first + width > values.shape[-1]:
                raise InterpreterError(
                    f"`{stmt_text(s)}`: columns {first} to {first + width} of a "
                    f"fragment {values.shape[-1]} wide"
                )
            values = values[..., first : first + width]
        self._write_tile(ag, s.dst, values, s)

    def _block_barrier(self, ag: _Agent, s: Barrier) -> None:
        """A block's or a cluster's barrier: a new race-check phase; never inside a role,
        where the other role's threads never reach it."""
        if ag.in_role:
            raise InterpreterError(
                f"`{stmt_text(s)}` in the {ag.role} role: a {s.scope} barrier in one "
                "branch of the roles waits for threads that never reach it (a hung "
                "block)"
            )
        ag.blk.races.check_phase()
        if self.kernel.hands_over:  # the direct path's split_k: it orders the partial stores
            self.fixups.barrier(ag)
        if s.scope == "block":
            self.stats.block_barriers += 1
        else:
            self.stats.cluster_barriers += 1

    def _fix_up(self, ag: _Agent, s) -> None:
        """Stream-K's hand-over of a partial sum (tiledsl.interp.fixups): the consumers';
        and the producer's acquire of a flag, for its fetch (`stream_k_aligned`)."""
        if isinstance(s, FlagWait) and s.by_producer:
            if ag.role != "producer":
                raise InterpreterError(f"`{stmt_text(s)}` outside the producer role")
            slot = checked_int(s.slot, ag.env, "a workspace slot")
            self.fixups.wait(ag, slot, f"{ag.blk.label}{ag.who}")
            return
        if ag.role == "producer" or (ag.role == "block" and self.roles):
            raise InterpreterError(
                f"`{stmt_text(s)}` outside the consumer role: the hand-over is the consumer "
                "threads' (their accumulators, their named barrier)"
            )
        who = f"{ag.blk.label}{ag.who}"
        if isinstance(s, Barrier):
            self.fixups.barrier(ag)
            return
        slot = checked_int(s.slot, ag.env, "a workspace slot")
        acc = self.kernel.fragment_of("accumulator").name
        frags = ag.frags[acc]
        if getattr(s, "by_team0", False):  # warps_k: K team 0's warps (a view: adds land)
            frags = frags[: self.kernel.warp_count]
        match s:
            case PartialStore():
                self.fixups.store(ag, slot, {acc: frags}, who)
            case PartialAdd():
                self.fixups.add(ag, slot, {acc: frags}, who)
            case FlagSignal():
                self.fixups.signal(ag, slot, who)
            case FlagWait():
                self.fixups.wait(ag, slot, who)
            case Ticket():
                ag.env[s.var] = self.fixups.ticket(ag, slot, s.slices, who)

    def _peer(self, ag: _Agent, s, rank_expr) -> _Block:
        """The block of the cluster whose rank `rank_expr` names (split_k via cluster)."""
        rank = checked_int(rank_expr, ag.env, "a rank in the cluster")
        if not ag.blk.cluster or not 0 <= rank < len(ag.blk.cluster):
            raise InterpreterError(
                f"`{stmt_text(s)}`{ag.who}: no block of rank {rank} in this block's cluster"
            )
        return ag.blk.cluster[rank]

    def _partial_units(self, ag: _Agent) -> tuple[np.ndarray, np.ndarray]:
        """(the 2-byte units of Ps each consumer thread writes or reads, by thread; the
        threads): 16 bytes of every consumer thread at a time, thread after thread."""
        threads = ag.warps * self.warp_width
        rows = partial_bytes(self.kernel) // row_bytes(self.kernel)  # the workspace's rows
        per = 16 // UNIT  # a float4's units
        first = ag.memory.offsets["Ps"] // UNIT
        t = np.arange(threads)[:, None, None]
        r = np.arange(rows)[None, :, None]
        u = np.arange(per)[None, None, :]
        units = (first + (r * threads + t) * per + u).reshape(threads, -1)
        return units, ag.thread0 + np.arange(threads)[:, None]

    def _partial_to_shared(self, ag: _Agent, s: PartialToShared) -> None:
        """Every consumer thread's accumulators into its block's Ps (kept aside by
        fragment, as the workspace's are), each thread's own 16-byte pieces written."""
        if ag.role != "consumer":
            raise InterpreterError(f"`{stmt_text(s)}` outside the consumer role")
        units, issuers = self._partial_units(ag)
        self._not_in_flight(ag, units.ravel(), s)
        self._log(ag, units, issuers, True, s)
        acc = self.kernel.fragment_of("accumulator").name
        ag.blk.shared_partial = {acc: ag.frags[acc].copy()}

    def _partial_from_peer(self, ag: _Agent, s: PartialFromPeer) -> None:
        """Every consumer thread adds the peer's Ps to its accumulators: a read of the
        peer's shared memory (ordered by the clocks across the cluster), while it runs."""
        if ag.role != "consumer":
            raise InterpreterError(f"`{stmt_text(s)}` outside the consumer role")
        peer = self._peer(ag, s, s.rank)
        who = f"{ag.blk.label}{ag.who}"
        if peer.exited:
            raise InterpreterError(
                f"{who} reads the Ps of {peer.label}, which may have exited: its shared "
                "memory is gone (a wait of that block for this one's reads is missing)"
            )
        if peer.shared_partial is None:
            raise RaceError(
                f"{who} reads the Ps of {peer.label}, which holds no partial sum yet: "
                "nothing orders the read after that block's partial store"
            )
        units, _ = self._partial_units(ag)
        clocks = ag.blk.clocks
        if clocks is not None:
            clocks.read(ag.index, units + peer.base, s)
        for name, partial in peer.shared_partial.items():
            ag.frags[name] += partial
        self.stats.partial_sums += 1

    def _fetched_units(self, ag: _Agent, first: int, part: int) -> np.ndarray:
        """The 2-byte units part `part` of a fetched partial sum writes, its part 0 in the
        stage slot of step `first` (tiledsl.ir.fetch)."""
        spans = part_spans(self.kernel, ag.memory.offsets, first, part)
        return np.concatenate([np.arange(lo // UNIT, hi // UNIT) for _, lo, hi in spans])

    def _partial_fetch(self, ag: _Agent, s: PartialFetch) -> None:
        """The producer's bulk copies of part `s.part` of a partial sum into a stage slot:
        its bytes land later on `s.bar`; the sum itself waits in the fix-ups' books
        (the interpreter's accumulators have no lane layout to lay it out by)."""
        if ag.role != "producer":
            raise InterpreterError(f"`{stmt_text(s)}` outside the producer role")
        slot = checked_int(s.slot, ag.env, "a workspace slot")
        first = int(evaluate(s.step, ag.env)) - s.part
        if s.part == 0:
            self.fixups.fetch(ag, slot, f"{ag.blk.label}{ag.who}")
        elif slot not in self.fixups.fetched:
            raise InterpreterError(f"`{stmt_text(s)}`: part {s.part} before part 0")
        blk, bars = ag.blk, self._bars(ag, s)
        bar = bars.ref(s.bar, ag.env, s)
        clocks = blk.clocks
        clock = clocks.issue(ag.index) if clocks is not None else None
        units = self._fetched_units(ag, first, s.part)
        self._not_in_flight(ag, units, s)
        self._not_being_read(ag, units, s)
        blk.tma_busy[units] = True
        arena = ag.memory.arena
        bytes_ = (units[:, None] * UNIT + np.arange(UNIT)).ravel()
        blk.flights.append(
            _Flight(
                arena,
                bytes_,
                np.full(bytes_.shape, 0xFF, np.uint8),  # the sum is kept aside (above)
                units,
                ag.index if clock is not None else None,
                clock,
                bar,
                part_bytes(self.kernel, s.part),
                ag.role,
                s,
                blk,
            )
        )

    def _fetched_add(self, ag: _Agent, s: PartialAdd) -> None:
        """The consumers add a fetched partial sum from the stage slots (after their waits
        on the parts' `full` barriers)."""
        if ag.role != "consumer":
            raise InterpreterError(f"`{stmt_text(s)}` outside the consumer role")
        assert s.staged is not None
        first = int(evaluate(s.staged, ag.env))
        parts = range(fetch_parts(self.kernel))
        units = np.concatenate([self._fetched_units(ag, first, p) for p in parts])
        self._not_in_flight(ag, units, s)
        issuers = ag.thread0 + np.arange(ag.warps * self.warp_width)
        every = np.broadcast_to(units, (len(issuers), len(units)))
        self._log(ag, every, issuers[:, None], False, s)
        slot = checked_int(s.slot, ag.env, "a workspace slot")
        acc = self.kernel.fragment_of("accumulator").name
        self.fixups.add_fetched(slot, {acc: ag.frags[acc]}, f"{ag.blk.label}{ag.who}")

    def _loop(self, ag: _Agent, s: For):
        start, stop = int(evaluate(s.start, ag.env)), int(evaluate(s.stop, ag.env))
        ag.loops.append(s.var)
        for value in range(start, stop, s.step):
            ag.env[s.var] = value
            yield from self._body(ag, s.body)
        ag.loops.pop()
        ag.env.pop(s.var, None)

    def _branch(self, ag: _Agent, s: If):
        lhs, rhs = evaluate(s.lhs, ag.env), evaluate(s.rhs, ag.env)
        if np.ndim(lhs) or np.ndim(rhs):  # all warps run a statement at once: one branch
            raise InterpreterError(f"`if` on a thread-dependent condition: {stmt_text(s)}")
        taken = lhs < rhs if s.op == "<" else lhs == rhs
        yield from self._body(ag, s.then if taken else s.orelse)

    # ------------------------------------------------------------ fragments
    def _frag(self, ag: _Agent, ref):
        i, j = int(evaluate(ref.i, ag.env)), int(evaluate(ref.j, ag.env))
        return ag.frags[ref.name], i, j

    def _reads_async(self, s: LoadFrag) -> bool:
        """A wgmma operand: read by the tensor cores until its group retires."""
        return bool(
            self.async_mma
            and isinstance(s.src, SharedTile)
            and self.kernel.fragment(s.frag.name).role != "accumulator"
        )

    def _load_fragment(self, ag: _Agent, s: LoadFrag) -> None:
        read_async = self._reads_async(s)
        check_fragment_pointer(ag.memory, s.src, s, read_async)
        frag, i, j = self._frag(ag, s.frag)
        values = decode(self._read_tile(ag, s.src, s), ag.memory.dtype(s.src))
        if s.add:  # a K team's sum added, in f32 as the lanes add it
            frag[:, i, j] = (frag[:, i, j].astype(np.float32) + values).astype(frag.dtype)
            return
        frag[:, i, j] = values.astype(frag.dtype)
        if read_async:  # the tensor cores go on reading: no writes there until the wait
            _, _, units, issuers = ag.memory.warp_tile(s.src, stmt_text(s))
            ag.mma_reads.append((units, issuers, s))
            _count(ag.blk.mma_busy, units, 1)

    def _retire_mmas(self, ag: _Agent, pending: int) -> None:
        """wgmma.wait_group: the oldest groups are done reading; their reads last till here."""
        while len(ag.mma_groups) > pending:
            for units, issuers, stmt in ag.mma_groups.pop(0):
                _count(ag.blk.mma_busy, units, -1)
                self._log(ag, units, issuers, False, stmt)  # still read until here

    def _mma(self, ag: _Agent, s: Mma) -> None:
        acc, ai, aj = self._frag(ag, s.acc)
        a, i, j = self._frag(ag, s.a)
        b, bi, bj = self._frag(ag, s.b)
        product = np.matmul(a[:, i, j].astype(np.float32), b[:, bi, bj].astype(np.float32))
        acc[:, ai, aj] = (acc[:, ai, aj].astype(np.float32) + product).astype(acc.dtype)
        self.stats.mma += ag.warps

    # ------------------------------------------------------------ tiles
    def _log(self, ag: _Agent, units, issuers, write: bool, stmt) -> None:
        """An access to shared memory: into the phase race log (the IR warps' accesses
        among themselves), and across the roles into the clocks."""
        if ag.role != "producer":
            ag.blk.races.record(units, issuers, write, stmt)
        clocks = ag.blk.clocks
        if ag.in_role and clocks is not None:
            shadow = np.asarray(units) + ag.blk.base  # the block's units among the cluster's
            if write:
                clocks.write(ag.index, clocks.clock(ag.index), shadow, stmt)
            else:
                clocks.read(ag.index, shadow, stmt)

    def _read_tile(self, ag: _Agent, tile: Tile, stmt) -> np.ndarray:
        if getattr(stmt, "guard", False):  # the direct path: zeros outside the operand
            inside: list = []
            data, flat, _, _ = ag.memory.warp_tile(tile, stmt_text(stmt), inside)
            return np.where(inside[0], data[flat], np.zeros((), data.dtype))
        data, flat, units, issuers = ag.memory.warp_tile(tile, stmt_text(stmt))
        if units is not None:
            self._not_in_flight(ag, units, stmt)
            self._log(ag, units, issuers, False, stmt)
        return data[flat]

    def _write_tile(self, ag: _Agent, tile: Tile, values, stmt) -> None:
        inside: list | None = [] if getattr(stmt, "guard", False) else None
        data, flat, units, issuers = ag.memory.warp_tile(tile, stmt_text(stmt), inside)
        if getattr(stmt, "by_team0", False):  # warps_k: K team 0's warps alone write
            team0 = (np.asarray(ag.env["kteam"]) == 0).reshape(-1, *([1] * (flat.ndim - 1)))
            keep = np.broadcast_to(team0, flat.shape)
            inside = [keep & inside[0]] if inside else [keep]
        if inside:  # a guarded store into C: elements outside C are not written
            values = np.broadcast_to(values, flat.shape)
            data[flat[inside[0]]] = encode(values[inside[0]], ag.memory.dtype(tile))
            return
        if units is not None:
            self._not_in_flight(ag, units, stmt)
            self._not_being_read(ag, units, stmt)
            self._log(ag, units, issuers, True, stmt)
            ag.blk.unfenced[units] = ag.index  # the generic proxy's: a TMA store needs a fence
        data[flat] = encode(values, ag.memory.dtype(tile))

    def _not_in_flight(self, ag: _Agent, units, stmt, blk: _Block | None = None) -> None:
        blk = blk or ag.blk
        if blk.inflight[units].any():
            raise InterpreterError(
                f"`{stmt_text(stmt)}`{ag.who} touches shared memory that a cp.async is "
                "still filling: a wait_group (and barrier) is missing before it"
            )
        if blk.tma_busy[units].any():
            mine = np.asarray(units).ravel()
            f = next(f for f in blk.flights if np.isin(f.units.ravel(), mine).any())
            raise InterpreterError(
                f"`{stmt_text(stmt)}`{ag.who} touches shared memory that the TMA copy "
                f"`{stmt_text(f.stmt)}` is still filling: a wait on "
                f"{f.bar[0]}[{f.bar[1]}] is missing before it"
            )

    def _not_being_read(self, ag: _Agent, units, stmt, blk: _Block | None = None) -> None:
        blk = blk or ag.blk
        if (blk.store_busy[np.asarray(units)] > 0).any():
            raise InterpreterError(
                f"`{stmt_text(stmt)}`{ag.who} overwrites shared memory that a TMA store may "
                "still be reading: a tma.store_wait (cp.async.bulk.wait_group.read) is "
                "missing before it"
            )
        if not (blk.mma_busy[np.asarray(units)] > 0).any():
            return
        if ag.in_role and ag.role != "consumer":
            raise InterpreterError(
                f"`{stmt_text(stmt)}`{ag.who} overwrites shared memory that a wgmma of the "
                "consumer role may still be reading: no mbarrier handoff orders it after "
                "the wgmma.wait_group that retires those reads (the wait for the consumers' "
                "release is missing, or they release the slot before that retire)"
            )
        raise InterpreterError(
            f"`{stmt_text(stmt)}`{ag.who} overwrites shared memory that a wgmma may still "
            "be reading: a wgmma.wait_group (and barrier) is missing before it"
        )

    # ------------------------------------------------------------ copies
    def _copy(self, ag: _Agent, c: Copy) -> None:
        rows, cols, v = copy_chunks(c)
        issuers = self._copy_issuers(ag, c, v, cols)
        text = stmt_text(c)
        inside: list | None = [] if c.guard else None
        src, sflat, sunits = ag.memory.locate(c.src, rows, cols, text, inside)
        dst, dflat, dunits = ag.memory.locate(c.dst, rows, cols, text, inside)
        shape = np.broadcast_shapes(sflat.shape, dflat.shape, issuers.shape)
        sflat, dflat = np.broadcast_to(sflat, shape), np.broadcast_to(dflat, shape)
        issuers = np.broadcast_to(issuers, shape)
        mask, whole = self._guard(ag, c, inside, shape)
        check_vectors(ag.memory, c, c.src, sflat, whole, text)
        check_vectors(ag.memory, c, c.dst, dflat, whole, text)
        if sunits is not None:
            sunits = np.broadcast_to(sunits, (*shape, *sunits.shape[len(shape) :]))
            self._not_in_flight(ag, sunits, c)
            self._log(ag, sunits, _expand(issuers, sunits), False, c)
        if c.epilogue is not None:
            values = self._epilogue(ag, c, src[sflat], dst, dflat, cols, shape)
        else:
            values = convert(src[sflat], ag.memory.dtype(c.src), ag.memory.dtype(c.dst))
        if mask is not None and dunits is not None:
            values = np.where(mask, values, np.zeros((), dst.dtype))  # a load: zero-filled
        if dunits is None:
            if mask is not None:  # a store: elements outside the operand are skipped
                dflat, values = dflat[mask], values[mask]
            dst[dflat] = values
            return
        dunits = np.broadcast_to(dunits, (*shape, *dunits.shape[len(shape) :]))
        self._land(ag, c, dst, dflat, dunits, values, _expand(issuers, dunits))

    def _copy_issuers(self, ag: _Agent, c: Copy, v: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Who moves each chunk: thread v % threads of the block, or lane v % warp width of
        every warp (`by warp`); a leading warp axis either way. The producer's one thread
        moves all of its copies."""
        if ag.role == "producer":
            return np.full((1, *cols.shape), ag.thread0)
        if c.by == "block":
            return np.broadcast_to((v % ag.threads)[:, None], cols.shape)[None]
        lanes = (v % self.warp_width)[:, None]
        first = ag.thread0 + np.arange(ag.warps) * self.warp_width
        return first[:, None, None] + lanes[None]

    def _guard(self, ag: _Agent, c: Copy, inside: list | None, shape) -> tuple:
        """(in-bounds mask or None, chunks moved as one vector) of a copy."""
        whole = np.ones(shape[:-1], bool)
        if not c.guard:
            return None, whole
        # As emitted: a whole vector only inside the operand and with an aligned
        # leading dimension; element by element (no alignment needed) elsewhere.
        assert inside is not None  # a guarded copy's bounds, collected by locate
        mask = np.broadcast_to(inside[0], shape)
        glob = c.src if isinstance(c.src, GlobalTile) else c.dst
        assert isinstance(glob, GlobalTile)  # a guarded copy has a global side
        ld = int(evaluate(self.kernel.gemm.operand(glob.operand).leading_dim, ag.env))
        return mask, mask.all(axis=-1) & (ld % c.vector == 0)

    def _land(self, ag: _Agent, c: Copy, dst, dflat, dunits, values, issuers) -> None:
        """A copy's values into shared memory: now, or (cp.async) when its group retires."""
        self._not_in_flight(ag, dunits, c)
        self._not_being_read(ag, dunits, c)
        if c.mode == "async":
            ag.uncommitted.append(_Pending(dst, dflat, values, dunits, issuers, c))
            ag.blk.inflight[dunits] = True
        else:
            dst[dflat] = values
            self._log(ag, dunits, issuers, True, c)

    def _retire_copies(self, ag: _Agent, pending: int) -> None:
        """cp.async.wait_group: the oldest groups land, and count as written here."""
        while len(ag.groups) > pending:
            for p in ag.groups.pop(0):
                p.view[p.flat] = p.values
                ag.blk.inflight[p.units] = False
                self._log(ag, p.units, p.issuers, True, p.stmt)

    def _epilogue(self, ag: _Agent, c: Copy, stored, dst, dflat, cols, shape):
        """C's storage values after the epilogue: as the kernel computes them, in float32."""
        assert c.epilogue is not None and isinstance(c.dst, GlobalTile)  # a store into C
        ep = c.epilogue.bound(self.sizes)  # a runtime alpha or beta: the launch's value
        memory = ag.memory
        acc = decode(stored, memory.dtype(c.src)).astype(np.float32)
        c_old = decode(dst[dflat], memory.dtype(c.dst)) if ep.reads_c else None
        # a bias along the rows (swap_operands) is refused here: a copy knows its columns
        assert not (ep.bias_rows and ep.bias_operands)
        biases = self._biases(ag, ep, c.dst, cols, shape)
        return encode(ep.apply(acc, c_old, biases), memory.dtype(c.dst))

    def _biases(self, ag: _Agent, ep, tile: GlobalTile, at, shape) -> dict[str, np.ndarray]:
        """Each bias vector's value at the place in C of every element (columns `at` of
        `tile`, per warp; its rows under swap_operands, `ep.bias_rows`), clipped at C's
        edge: an element past it is never stored."""
        if not ep.bias_operands:
            return {}
        axis = 0 if ep.bias_rows else 1
        place = np.asarray(evaluate(tile.origin[axis], ag.env)).reshape(-1, 1, 1)
        place = place + np.asarray(evaluate(tile.offset[axis], ag.env)).reshape(-1, 1, 1) + at
        place = np.broadcast_to(place, shape)
        out = {}
        for name in ep.bias_operands:
            op = self.kernel.gemm.operand(name)
            n = int(evaluate(op.dims[0], ag.env))
            out[name] = decode(self.arrays[name], op.dtype)[np.clip(place, 0, n - 1)]
        return out


def copy_chunks(c: Copy):
    """(rows, cols, chunk ids): the elements each chunk of a copy moves, as the emitted
    loop spreads them; chunk v goes to thread (or lane) v % workers."""
    if c.axis == "cols":
        per_line = c.src.cols // c.vector
        v = np.arange(c.src.rows * per_line)
        cols = ((v % per_line) * c.vector)[:, None] + np.arange(c.vector)[None, :]
        rows = np.broadcast_to((v // per_line)[:, None], cols.shape)
    else:
        per_line = c.src.rows // c.vector
        v = np.arange(c.src.cols * per_line)
        rows = ((v % per_line) * c.vector)[:, None] + np.arange(c.vector)[None, :]
        cols = np.broadcast_to((v // per_line)[:, None], rows.shape)
    return rows, cols, v


def _expand(issuers, units):
    """Issuers broadcast over the trailing unit axis of a multi-unit (f32) element."""
    extra = units.ndim - issuers.ndim
    return np.broadcast_to(issuers.reshape(*issuers.shape, *([1] * extra)), units.shape)


def _names(stmt) -> frozenset[str]:
    """The variables an mbarrier statement's slot and parity use (none for the others)."""
    match stmt:
        case Wait():
            return variables(stmt.bar.slot) | variables(stmt.parity)
        case Arrive() | ExpectTx() | TmaLoad():
            return variables(stmt.bar.slot)
    return frozenset()


def _value(v) -> str:
    """A variable's value for a report: an int, or the list of its values per warp."""
    return str(v.tolist()) if isinstance(v, np.ndarray) else str(v)


def _count(busy: np.ndarray, units: np.ndarray, delta: int) -> None:
    """Add `delta` to `busy` once per entry of `units` (a unit read by several lanes counts
    each time): np.add.at's meaning, by one bincount, several times faster."""
    busy += delta * np.bincount(units.ravel(), minlength=busy.size)
