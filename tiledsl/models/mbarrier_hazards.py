"""Whether a warp-specialized kernel's handoffs order every shared-memory access, under
every interleaving of its roles: a static proof.

The interpreter runs the roles under a few seeded interleavings and reports the races of
those (tiledsl.interp.roles); this analysis covers all of them, without data. It traces
one block's roles at small sizes (1-3 tiles per block, 1 to STAGES + 1 K steps a tile: every
slot turns its phase over more than twice) with the threads the GPU runs:

    the producer             one thread (its warpgroup's elected lane issues everything)
    each consumer warpgroup  two threads: lane 0, which alone issues what one lane issues
                             (ELECTED: mbarrier.arrive, the TMA store and its wait), and
                             "the other lanes"; both wait on the mbarriers, write their
                             part of Cs, and issue the wgmmas, one operation of the warpgroup

and builds the happens-before graph of one block: program order on each thread; a
warpgroup barrier joins the warpgroup's two threads; a wgmma group is one node after every
thread's commit of it and before each wait that retires it; a TMA copy lands after its
issue; phase n of an mbarrier completes after its arrivals and the bytes that land in it;
a wait for phase n follows that completion.

Which phase a wait observes and which one an arrival counts toward are the hardware's
count, not the program's text, so the analysis first runs the block once in a canonical
interleaving — the consumers whenever they can, a TMA copy landing as soon as it is issued,
each mbarrier counting as the hardware does (a wait on parity x passes while the current
phase's parity differs from x) — which gives every event its phase, and then proves that
no interleaving gives any event another one:

  - an arrival, or a TMA copy's bytes, counted toward phase k > 0 comes after phase
    k - 1 completed (it cannot count early), and phase k needs it (it cannot count late);
  - a wait that observed phase n complete comes after phase n - 1 completed (else it
    could pass on phase n - 2, of the same parity), and phase n + 1 cannot complete
    before it (else it would wait on, for phase n + 2);
  - a phase never has more arrivals than its count, nor more bytes than were announced.

Given that, two accesses to a byte of shared memory, one a write, that are not the same
thread's in program order must be ordered by the graph: the first one's end (a TMA copy's
landing, a wgmma group's retiring wait, a TMA store's `wait_group.read`) before the second
one's start. A generic-proxy write that the async proxy reads (the lanes' stmatrix, then the
TMA store) also needs the writer's `fence.proxy.async` between them. A canonical run that
gets stuck — waits that nothing left to run can satisfy — is a deadlock; the other
canonical order (the producer whenever it can) is tried first, to show a race that the
deadlock may hide.

In a thread-block cluster the analysis traces the cluster's blocks together, each with
its own threads, barriers and shared memory: a multicast load lands in every receiving
block (a part of a tile covers a panel's lines at a time), a release to the sharers is an
arrival on each sharing block's barrier, a phase's bytes may come before its expect_tx
from another block (the count then stays below zero until the arrival), and everything one
block does to another — an arrival on its barrier, a copy landing in its memory — must
happen before that block's exit (after all its threads, or the cluster barrier).

`decide` asks, for every handoff statement, what breaks without it — the hazard or the
deadlock it prevents — for `--explain-sync`; with `sync minimal` a statement without which
the proof still holds would be removed (none of the pipeline's is: the proof is the check).
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass, field, replace

from ..errors import error
from ..ir.expr import Const, evaluate
from ..ir.fetch import fetch_parts, part_bytes, part_spans
from ..ir.grid import cluster_place, grid_vars, multicast_ranks, sharing_ranks, tile_steps
from ..ir.nodes import (
    BLOCK_ELECTED,
    DTYPE_BYTES,
    ELECTED,
    HANDOFFS,
    Arrive,
    Barrier,
    Copy,
    EpilogueFrag,
    ExpectTx,
    Fill,
    FlagSignal,
    FlagWait,
    For,
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
    TmaLoad,
    TmaStore,
    TmaStoreWait,
    Wait,
    buffer_offsets,
    map_body,
    walk,
    with_launch_scalars,
)
from ..ir.printer import print_ir, stmt_text
from .hazards import SyncDecision, tile_bytes


class HandoffProblem(Exception):
    """A race, a deadlock or a broken mbarrier count in a traced instance: `headline`
    names it (e.g. "RAW on As"), `detail` says where."""

    def __init__(self, kind: str, headline: str, detail: str):
        super().__init__(f"{headline} — {detail}")
        self.kind = kind  # "race", "deadlock" or "count"
        self.headline = headline


class _Place:
    """Where an actor is in its loops (`tl = 0, kt = 2`): kept as values, written out only
    when a report names it (the proof traces hundreds of thousands of statements)."""

    __slots__ = ("values",)
    NAMES = ("tl", "kt", "step", "h")

    def __init__(self, env: dict):
        self.values = (env.get("tl"), env.get("kt"), env.get("step"), env.get("h"))

    def __str__(self) -> str:
        named = zip(self.NAMES, self.values, strict=True)
        return ", ".join(f"{v} = {x}" for v, x in named if x is not None) or "its start"


class _Who:
    """Who made an access: a thread (or a warpgroup's wgmmas) at a place."""

    __slots__ = ("name", "place")

    def __init__(self, name: str, place: _Place):
        self.name, self.place = name, place

    def __str__(self) -> str:
        return f"{self.name}, {self.place}"


@dataclass
class _Access:
    buffer: str
    lo: int
    hi: int
    write: bool
    asynchronous: bool  # by the async proxy (TMA, wgmma): a generic write needs a fence first
    start: int  # graph nodes: it happens after `start` and before `end`
    end: int | None  # None: still going on when the block exits
    thread: int
    lanes: tuple | None  # a lanes' access: each byte by one thread, as in every other
    stmt: object
    who: _Who
    rank: tuple = ()  # the order the program means: (step, producer first, program order)
    block: int = 0  # whose shared memory (a cluster's blocks: its rank)


@dataclass
class _Actor:
    """A role instance: the producer, or one consumer warpgroup, and its threads."""

    name: str
    threads: tuple[int, ...]  # threads[0] is the elected lane
    env: dict
    block: int = 0  # its block's rank in the cluster
    groups: list[int] = field(default_factory=list)  # wgmma group nodes, committed
    retired: int = 0  # groups[:retired] have retired
    reads: list[tuple] = field(
        default_factory=list
    )  # wgmma reads not committed: (tile, bytes, stmt)
    stores: list[_Access] = field(default_factory=list)  # TMA store reads not waited for


@dataclass(order=True)
class _Event:
    """An mbarrier event: an arrival (with expect_tx, the bytes it announces), a TMA copy's
    landing (its bytes), or a wait (its parity). `phase`: in the canonical interleaving,
    the phase it counts toward, or (a wait) the phase it observed complete."""

    kind: str  # "arrive", "land" or "wait"
    node: int
    thread: int
    bar: tuple  # (name, slot), and in a cluster the block's rank: (name, slot, rank)
    value: int  # bytes (arrive: announced, land: delivered), or the parity (wait)
    stmt: object
    where: _Place
    phase: int = -1


class _Block:
    """One block's roles traced at one size: the graph, the accesses, the handoffs."""

    def __init__(self, kernel: KernelIR, env: dict, consumers_first: bool = True):
        self.k = kernel
        self.specialized = kernel.specialization is not None  # asked at every access
        self.consumers_first = consumers_first
        self.offsets = buffer_offsets(kernel)
        self.env = env
        self.preds: list[list[int]] = []
        self.last: list[int | None] = []
        self.thread_names: list[str] = []
        self.accesses: list[_Access] = []
        self.fences: dict[int, list[int]] = {}
        self.events: dict[int, _Event] = {}  # by node
        self.complete: dict[tuple[tuple, int], int] = {}  # (bar, phase) -> node
        self.actors: list[_Actor] = []
        self.size = kernel.blocks_per_cluster  # blocks traced together: a cluster's
        self.block_threads: list[list[int]] = [[] for _ in range(self.size)]
        self.exits: list[int] = []  # per block: after all its threads (it may exit there)
        # (node, block, what): an arrival on, or a copy landing in, another block's memory
        self.remote: list[tuple[int, int, str]] = []

    # ------------------------------------------------------------ the graph
    def node(self, preds) -> int:
        self.preds.append([p for p in preds if p is not None])
        return len(self.preds) - 1

    def thread(self, name: str, block: int = 0) -> int:
        self.last.append(None)
        self.thread_names.append(self.named(name, block))
        self.block_threads[block].append(len(self.last) - 1)
        return len(self.last) - 1

    def named(self, name: str, block: int) -> str:
        return f"{name} of block {block}" if self.size > 1 else name

    def step(self, t: int, *extra: int) -> int:
        """The next node on thread t (after its last, and after `extra`)."""
        n = self.node([self.last[t], *extra])
        self.last[t] = n
        return n

    # ------------------------------------------------------------ tracing
    def run(self, body) -> None:
        """The block's top level (each block's of a cluster): its lets, the roles, and a
        cluster barrier after them; then each block's exit, after all its threads."""
        envs = [self.block_env(r) for r in range(self.size)]
        if not any(isinstance(s, Roles) for s in body):  # `copy tma` alone: no roles
            warpgroups = self.warpgroups(envs[0], 0)
            self.actors += warpgroups
            self.trace(warpgroups, body)
            self.exits = [self.node(list(self.last))]
            return
        for s in body:
            match s:
                case Let():
                    for env in envs:
                        env[s.var] = int(evaluate(s.value, env))
                case Roles():
                    self.roles(s, envs)
                case Barrier(scope="cluster"):
                    joint = self.node(list(self.last))  # every thread of every block
                    self.last = [joint] * len(self.last)
                case _:
                    raise HandoffProblem("count", "not modelled", f"`{_text(s)}` outside the roles")
        self.exits = [self.node([self.last[t] for t in ts]) for ts in self.block_threads]

    def block_env(self, rank: int) -> dict:
        """Block `rank`'s environment: its place in the cluster and (one tile per block)
        its tile."""
        env = dict(self.env)
        if self.k.split_cluster:  # a tile's slices: block pid is slice pid % S (= its rank)
            env["pid"] = env["pid"] + rank
        if self.size > 1:
            env["rank"] = rank
            for name, e in cluster_place(self.k).items():
                env[name] = int(evaluate(e, env))
        if not self.k.maps_own_tiles:
            for name, e in tile_steps(self.k).items():
                env[name] = int(evaluate(e, env))
        return env

    def warpgroups(self, block_env: dict, block: int) -> list[_Actor]:
        """The block's consumer warpgroups (the IR's warps), two threads each."""
        coords, actors = self.k.warp_coords(), []
        for w in range(self.k.consumer_warps):
            name = f"consumer warpgroup {w}" if self.k.specialization else f"warpgroup {w}"
            threads = (
                self.thread(f"{name} (lane 0)", block),
                self.thread(f"{name} (other lanes)", block),
            )
            env = {**block_env, **{v: int(a[w]) for v, a in coords.items()}}
            actors.append(_Actor(self.named(name, block), threads, env, block))
        return actors

    def trace(self, actors: list[_Actor], body) -> None:
        """`body` run by `actors` together: one role's actor, or (a block without roles)
        every warpgroup, its loops and conditions block-uniform, meeting at each block
        barrier; what one thread of the block issues (BLOCK_ELECTED) is the first actor's."""
        env = actors[0].env
        for s in body:
            match s:
                case For():
                    start, stop = (int(evaluate(e, env)) for e in (s.start, s.stop))
                    for v in range(start, stop, s.step):
                        for a in actors:
                            a.env[s.var] = v
                        self.trace(actors, s.body)
                    for a in actors:
                        a.env.pop(s.var, None)
                case If():
                    lhs, rhs = evaluate(s.lhs, env), evaluate(s.rhs, env)
                    taken = lhs < rhs if s.op == "<" else lhs == rhs
                    self.trace(actors, s.then if taken else s.orelse)
                case Let():
                    for a in actors:
                        a.env[s.var] = int(evaluate(s.value, a.env))
                case Barrier(scope="block") if not self.specialized:
                    threads = [t for a in actors for t in a.threads]
                    joint = self.node([self.last[t] for t in threads])
                    for t in threads:
                        self.last[t] = joint
                case _ if isinstance(s, BLOCK_ELECTED):
                    self.statement(actors[0], s)
                case _:
                    for a in actors:
                        self.statement(a, s)

    def roles(self, roles: Roles, envs: list[dict]) -> None:
        producers, consumers = [], []
        for block, block_env in enumerate(envs):
            thread = self.thread("the producer", block)
            producers.append(
                _Actor(self.named("the producer", block), (thread,), dict(block_env), block)
            )
            consumers += self.warpgroups(block_env, block)
        self.actors += producers + consumers
        # the canonical interleaving runs the lowest ready node first: whoever is traced
        # first runs as soon as it can, the others only when it waits
        if not self.consumers_first:
            for producer in producers:
                self.trace([producer], roles.producer.body)
        for actor in consumers:
            self.trace([actor], roles.consumer.body)
        if self.consumers_first:
            for producer in producers:
                self.trace([producer], roles.producer.body)

    def statement(self, a: _Actor, s) -> None:
        issuers = a.threads[:1] if isinstance(s, ELECTED) else a.threads  # who runs `s`
        elected = issuers[0]
        match s:
            case Wait():
                bar = self.bar(s.bar, a.env, a.block)
                parity = int(evaluate(s.parity, a.env)) % 2
                where = self.where(a)
                for t in issuers:
                    self.event("wait", self.step(t), t, bar, parity, s, where)
            case Arrive() | ExpectTx():
                self.arrive(a, s, elected, self.where(a))
            case TmaLoad():
                self.tma_load(a, s, elected, self.where(a))
            case LoadFrag() if isinstance(s.src, SharedTile):
                a.reads.append((s.src, tile_bytes(self.k, self.offsets, s.src, a.env), s))
            case MmaFence() | Mma() | Fill() | EpilogueFrag() | LoadFrag():
                pass  # registers only (a wgmma's tiles are read as its group runs)
            case MmaCommit():
                group = self.node([self.step(t) for t in issuers])
                a.groups.append(group)
                for tile, span, stmt in a.reads:
                    read = self.access(
                        tile, a, elected, False, True, group, group, stmt, None, span
                    )
                    read.who = _Who(f"{a.name}'s wgmmas", self.where(a))
                a.reads = []
            case MmaWait():
                retiring = a.groups[a.retired : max(a.retired, len(a.groups) - s.pending)]
                a.retired += len(retiring)
                for t in issuers:
                    self.step(t, *retiring)
            case Barrier(scope="warp"):
                joint = self.node([self.last[t] for t in issuers])
                for t in issuers:
                    self.last[t] = joint
            case ProxyFence():
                for t in issuers:
                    self.fences.setdefault(t, []).append(self.step(t))
            case StoreFrag() if isinstance(s.dst, SharedTile):
                lanes = (a.name, s.dst.rows, s.dst.cols, s.cols)
                for t in issuers:
                    n = self.step(t)
                    self.access(s.dst, a, t, True, False, n, n, s, lanes)
            case StoreFrag():
                pass  # to global memory
            case PartialFetch():
                self.partial_fetch(a, s, elected, self.where(a))
            case PartialAdd() if s.staged is not None:
                self.fetched_add(a, s, issuers)
            case PartialToShared():  # each consumer thread's own 16-byte pieces of Ps
                for t in issuers:
                    n = self.step(t)
                    self.access(self.partials(), a, t, True, False, n, n, s, ("Ps", a.block))
            case PartialFromPeer():  # the same pieces of the peer's Ps, by the same threads
                peer = int(evaluate(s.rank, a.env))
                for t in issuers:
                    n = self.step(t)
                    reads = ("Ps read", peer)  # each thread its own pieces, as written
                    self.access(self.partials(), a, t, False, False, n, n, s, reads, block=peer)
                    if peer != a.block:
                        where = self.where(a)
                        self.remote.append((n, peer, f"`{_text(s)}` ({where}) reads the Ps of"))
            case PartialStore() | PartialAdd() | FlagSignal() | FlagWait():
                pass  # stream-K's hand-over between blocks, in global memory (the interpreter)
            case Ticket():
                # split-K's ticket, in global memory (the interpreter); which one the block
                # draws is the proof's choice (_sizes): the last, which stores C, or another
                a.env[s.var] = int(a.env.get(DRAWN, s.slices - 1))
            case Barrier(scope="consumers"):
                pass  # orders that hand-over; shared memory is ordered without it
            case Copy(by="warp") if isinstance(s.src, SharedTile) and not isinstance(
                s.dst, SharedTile
            ):
                # the warp's lanes read their staged C (a lane mapping of its own): after
                # the warp barrier that follows the fragment store
                for t in issuers:
                    n = self.step(t)
                    self.access(s.src, a, t, False, False, n, n, s, None)
            case TmaStore():
                n = self.step(elected)
                a.stores.append(self.access(s.src, a, elected, False, True, n, None, s, None))
            case TmaStoreWait():
                n = self.step(elected)
                for read in a.stores:
                    read.end = n
                a.stores = []
            case _:
                raise HandoffProblem(
                    "count", "not modelled", f"`{_text(s)}` in the {a.name}'s role"
                )

    def arrive(self, a: _Actor, s: Arrive | ExpectTx, elected: int, where: _Place) -> None:
        """An arrival (with expect_tx, its bytes announced); a release to the sharers is
        one on each sharing block's barrier."""
        nbytes = s.bytes if isinstance(s, ExpectTx) else 0
        sharers = isinstance(s, Arrive) and s.sharers
        blocks = sharing_ranks(self.k, a.block) if sharers else [a.block]
        if isinstance(s, Arrive) and s.rank is not None:  # split_k via cluster: one block's
            blocks = [int(evaluate(s.rank, a.env))]
        for block in blocks:
            node = self.step(elected)
            self.event("arrive", node, elected, self.bar(s.bar, a.env, block), nbytes, s, where)
            if block != a.block:
                self.remote.append((node, block, f"`{_text(s)}` ({where}) arrives on"))

    def tma_load(self, a: _Actor, s: TmaLoad, elected: int, where: _Place) -> None:
        """A TMA copy: issued now, landing later in every block it is multicast to."""
        issue = self.step(elected)
        nbytes = s.dst.rows * s.dst.cols * DTYPE_BYTES[self.k.buffer(s.dst.buffer).dtype]
        for block in multicast_ranks(self.k, s.multicast, a.block):
            land = self.node([issue])
            self.event("land", land, elected, self.bar(s.bar, a.env, block), nbytes, s, where)
            for span in _part_spans(self.k, self.offsets, s.dst, a.env):
                self.access(s.dst, a, elected, True, True, issue, land, s, None, span, block)
            if block != a.block:
                self.remote.append((land, block, f"`{_text(s)}` ({where}) lands in"))

    def partial_fetch(self, a: _Actor, s: PartialFetch, elected: int, where: _Place) -> None:
        """The producer's bulk copies of a part of a partial sum into a stage slot: issued
        now, landing later on `s.bar` (tiledsl.ir.fetch)."""
        issue = self.step(elected)
        land = self.node([issue])
        step = int(evaluate(s.step, a.env))
        nbytes = part_bytes(self.k, s.part)
        self.event("land", land, elected, self.bar(s.bar, a.env, a.block), nbytes, s, where)
        for tile, span in self.fetched(step - s.part, a.env, only=s.part):
            self.access(tile, a, elected, True, True, issue, land, s, None, span)

    def fetched_add(self, a: _Actor, s: PartialAdd, issuers) -> None:
        """The consumers' reads of the fetched partial sum from the stage slots."""
        assert s.staged is not None
        first = int(evaluate(s.staged, a.env))
        for t in issuers:
            n = self.step(t)
            for tile, span in self.fetched(first, a.env):
                self.access(tile, a, t, False, False, n, n, s, None, span)

    def fetched(self, first: int, env, only: int | None = None):
        """(tile, byte span) of each bulk copy of a fetched partial sum whose part 0 is in
        the slot of step `first` (part `only`'s alone, if given)."""
        stages = self.k.schedule.stages
        for part in range(fetch_parts(self.k)) if only is None else (only,):
            for name, lo, hi in part_spans(self.k, self.offsets, first, part):
                buf = self.k.buffer(name)
                slot = Const((first + part) % stages)
                yield SharedTile(name, slot, (Const(0), Const(0)), buf.rows, buf.cols), (lo, hi)

    def partials(self) -> SharedTile:
        """`split_k S via cluster`'s Ps, the whole buffer (a block's partial sum)."""
        buf = self.k.buffer("Ps")
        return SharedTile("Ps", Const(0), (Const(0), Const(0)), buf.rows, buf.cols)

    def access(
        self,
        tile,
        a: _Actor,
        t,
        write,
        asynchronous,
        start,
        end,
        stmt,
        lanes,
        span=None,
        block=None,
    ) -> _Access:
        lo, hi = span or tile_bytes(self.k, self.offsets, tile, a.env)
        if lanes is not None:
            lanes = (*lanes, lo, hi)
        who = _Who(self.thread_names[t], self.where(a))
        acc = _Access(tile.buffer, lo, hi, write, asynchronous, start, end, t, lanes, stmt, who)
        # the order the program means: in lock step (no roles) the trace's own order
        acc.rank = (
            (a.env.get("step", -1), self.actors.index(a), start) if self.specialized else (start,)
        )
        acc.block = a.block if block is None else block
        self.accesses.append(acc)
        return acc

    def event(self, kind, node, thread, bar, value, stmt, where) -> None:
        self.events[node] = _Event(kind, node, thread, bar, value, stmt, where)

    def bar(self, ref, env, block: int = 0) -> tuple:
        """A barrier's key: (name, slot), and in a cluster the block whose barrier it is."""
        key = (ref.name, int(evaluate(ref.slot, env)))
        return (*key, block) if self.size > 1 else key

    def where(self, a: _Actor) -> _Place:
        return _Place(a.env)


def _part_spans(k: KernelIR, offsets: dict, tile: SharedTile, env) -> list:
    """The byte ranges a TMA load's tile covers: one per 64-element panel when the tile is
    some of its buffer's lines (a cluster's multicast part: the blocks' parts interleave
    panel by panel), else the whole tile's (tile_bytes)."""
    buf = k.buffer(tile.buffer)
    lines = tile.rows if buf.layout == "row" else tile.cols
    if not buf.panel or lines == buf.lines:
        return [tile_bytes(k, offsets, tile, env)]
    first = int(evaluate(tile.offset[0] if buf.layout == "row" else tile.offset[1], env))
    slot = int(evaluate(tile.slot, env))
    size, base = DTYPE_BYTES[buf.dtype], offsets[buf.name]
    panels = buf.line_length // buf.panel
    spans = []
    for piece in range(panels):  # a panel line is 128 bytes: the swizzle stays inside it
        start = ((slot * panels + piece) * buf.lines + first) * buf.panel
        spans.append((base + start * size, base + (start + lines * buf.panel) * size))
    return spans


# ------------------------------------------------------------------ the proof


def prove(kernel: KernelIR) -> None:
    """Raise HandoffProblem if some interleaving of the roles races or deadlocks."""
    for env, size in _sizes(kernel):
        try:
            _prove_at(kernel, env, size, consumers_first=True)
        except HandoffProblem as deadlock:
            if deadlock.kind != "deadlock":
                raise
            # the other canonical interleaving may run to the end and show the race that
            # the deadlock hides (a broken kernel has both); else the deadlock it is
            try:
                _prove_at(kernel, env, size, consumers_first=False)
            except HandoffProblem as other:
                if other.kind != "deadlock":
                    raise other from None
            raise deadlock from None


def _prove_at(kernel: KernelIR, env: dict, size: str, consumers_first: bool) -> None:
    blk = _Block(kernel, dict(env), consumers_first)
    blk.run(kernel.body)
    _check(kernel, blk, size)


#: The proof's name for the ticket a `split_k` block draws (an environment entry no
#: kernel name can be: it has a space).
DRAWN = "drawn ticket"


def _sizes(kernel: KernelIR):
    """One block (pid 0 of 1; with stream-K, also each block of 2 or 3) at every size the
    proof needs, T tiles of KT K steps (a literal dimension stays as written): (the
    environment, the size in words for a report)."""
    bm, bn, bk = kernel.schedule.block
    cm, cn = kernel.cluster
    stages = kernel.schedule.stages
    # (tiles, blocks, pid, K steps): one block alone takes whole tiles
    grids = [
        (t, 1, 0, steps)
        for t in ((1, 2, 3) if kernel.persistent else (1,))
        for steps in range(1, stages + 2)
    ]
    if kernel.split_k:  # split-K slices: the owner, the first and the last of the others
        s = kernel.split_k
        grids += [
            # a tile in S slices, alone or after a whole round of S tiles
            *(
                (t, s, pid, steps)
                for t in (1, s + 1)
                for pid in sorted({0, 1, s - 1})
                for steps in (s, s * stages + 1)
            ),
        ]
    elif kernel.stream_k:  # stream-K pieces (tiledsl.ir.grid.stream_k_split) as well:
        grids += [
            # a tile in two pieces, and a whole round before them
            *((t, 2, pid, steps) for t in (1, 3) for pid in (0, 1) for steps in (2, stages + 1)),
            # two tiles of 3 * STAGES steps in three shares: the middle block's two pieces
            # refill slots its first piece released, inside it and after its last step
            *((2, 3, pid, 3 * stages) for pid in (0, 1, 2)),
        ]
    drawn: list[int | None] = [None]
    if kernel.split_cluster:  # split_k S via cluster: a tile's slices, one cluster
        s = kernel.grid_split
        grids = [(1, s, 0, steps) for steps in (1, s * stages + 1)]
    elif kernel.grid_split:  # split_k S: the first and the last slice of one tile, each
        s = kernel.grid_split  # drawing the last ticket (it stores C) or the first
        grids = [(1, s, pid, steps) for pid in sorted({0, s - 1}) for steps in (1, s * stages + 1)]
        drawn = [s - 1, 0]
    for (tiles, blocks, pid, steps), ticket in itertools.product(grids, drawn):
        m, n = tiles * bm * cm, bn * cn  # whole cluster tiles
        env: dict = {**kernel.gemm.size_env(m, n, steps * bk), "pid": pid, "blocks": blocks}
        if ticket is not None:
            env[DRAWN] = ticket
        if kernel.gemm.batch is not None:
            env["bz"] = 0
        for name, e in grid_vars(kernel).items():
            env[name] = int(evaluate(e, env))
        with_launch_scalars(kernel, env)
        who = "one block" if cm * cn == 1 else f"one cluster of {cm} x {cn} blocks"
        if kernel.split_cluster:
            who = f"one cluster of the tile's {kernel.grid_split} slices"
        elif blocks > 1:
            who = f"{'block' if cm * cn == 1 else 'cluster'} {pid} of {blocks}"
        drew = f", drawing ticket {ticket}" if ticket is not None else ""
        yield env, f" ({who} of {tiles} tile(s), {steps} K step(s) each{drew})"


def _check(k: KernelIR, blk: _Block, size: str) -> None:
    order = _canonical(k, blk, size)
    seen = _ancestors(blk, order)

    def hb(a: int | None, b: int) -> bool:
        return a is not None and (a == b or (seen[b] >> a) & 1 == 1)

    # the races first: a broken protocol (below) usually shows as one, which says more
    _check_accesses(blk, hb, size)
    for node, block, what in blk.remote:
        if not hb(node, blk.exits[block]):
            raise HandoffProblem(
                "race",
                f"block {block} may exit while another block of its cluster still uses it",
                f"{what} block {block}, which nothing orders before block {block}'s exit: a "
                f"cluster barrier before the blocks exit is missing{size}",
            )
    _check_landings(blk, size)
    _check_protocol(blk, hb, size)
    for a in blk.actors:
        if a.retired < len(a.groups):
            raise HandoffProblem(
                "race",
                "wgmmas never waited for",
                f"{a.name}'s last wgmma group: a wgmma.wait_group is missing{size}",
            )
        for read in a.stores:
            raise HandoffProblem(
                "race",
                f"a TMA store still reading {read.buffer} at the block's exit",
                f"`{_text(read.stmt)}` ({read.who}): a tma.store_wait "
                f"(cp.async.bulk.wait_group.read) is missing{size}",
            )


@dataclass
class _Count:
    """One mbarrier in the canonical interleaving, as the hardware counts it."""

    expected: int
    phase: int = 0
    arrived: int = 0
    tx: int = 0
    members: list[int] = field(default_factory=list)  # the current phase's arrivals, bytes


def _canonical(k: KernelIR, blk: _Block, size: str) -> list[int]:
    """Run the block's graph in the canonical interleaving: each event gets its phase,
    each phase its completion node (after its arrivals and bytes), each wait an edge from
    the completion it observed. The order it ran the nodes in (a topological order of the
    finished graph), or a deadlock: nothing can run, and a wait has not passed."""
    arrivals = {m.name: m.arrivals for m in k.mbarriers}
    counts: dict[tuple[str, int], _Count] = {}
    succs: list[list[int]] = [[] for _ in blk.preds]
    missing = [len(ps) for ps in blk.preds]
    for v, ps in enumerate(blk.preds):
        for p in ps:
            succs[p].append(v)
    ready = [v for v in range(len(blk.preds)) if not missing[v]]
    heapq.heapify(ready)
    blocked: dict[tuple[str, int], list[int]] = {}  # waits that do not pass yet
    order: list[int] = []
    while ready:
        v = heapq.heappop(ready)
        e = blk.events.get(v)
        done = None
        if e is not None:
            c = counts.setdefault(e.bar, _Count(arrivals[e.bar[0]]))
            if e.kind == "wait" and c.phase % 2 == e.value:
                blocked.setdefault(e.bar, []).append(v)
                continue
            done = _count(blk, e, c, size)
        order.append(v)
        if done is not None and e is not None:  # a phase completed: its waits may pass now
            order.append(done)
            for b in blocked.pop(e.bar, []):
                heapq.heappush(ready, b)
        for n in succs[v]:
            missing[n] -= 1
            if not missing[n]:
                heapq.heappush(ready, n)
    if len(order) < len(blk.preds):
        stuck = sorted(blk.events[b] for bs in blocked.values() for b in bs)
        bars = sorted({w.bar for w in stuck})
        who, actors = [], set()
        for w in stuck:
            actor = blk.thread_names[w.thread].split(" (")[0]  # its warpgroup's lanes alike
            if actor in actors:
                continue
            actors.add(actor)
            c = counts[w.bar]
            who.append(
                f"{actor} waits in `{_text(w.stmt)}` ({w.where}) for the "
                f"phase of parity {w.value} of {_bar(w.bar)}, which is in phase {c.phase} with "
                f"{c.arrived} of {c.expected} arrival(s) in and {c.tx} byte(s) still to land"
            )
        raise HandoffProblem(
            "deadlock",
            f"a deadlock on {', '.join(_bar(b) for b in bars)}",
            "; ".join(who) + f"; nothing else can run{size}",
        )
    return order


def _count(blk: _Block, e: _Event, c: _Count, size: str) -> int | None:
    """The hardware's count of event `e` on barrier `c`; the completion node it makes."""
    if e.kind == "wait":
        e.phase = c.phase - 1  # the phase it observed complete (-1: the one before phase 0)
        if e.phase >= 0:
            blk.preds[e.node].append(blk.complete[(e.bar, e.phase)])
        return None
    e.phase = c.phase
    if e.kind == "arrive":
        if c.arrived == c.expected:
            raise HandoffProblem(
                "count",
                f"too many arrivals on {_bar(e.bar)}",
                f"`{_text(e.stmt)}` ({_by(blk, e)}) arrives in phase {c.phase}, which has its "
                f"{c.expected} arrival(s) already: a phase would complete before its "
                f"handoff{size}",
            )
        c.arrived += 1
        c.tx += e.value
        if c.arrived == c.expected and c.tx < 0:
            raise HandoffProblem(
                "count",
                f"unannounced bytes on {_bar(e.bar)}",
                f"`{_text(e.stmt)}` ({_by(blk, e)}) is the last arrival of phase {c.phase}, "
                f"which has {-c.tx} byte(s) more delivered than its expect_tx announced{size}",
            )
    else:
        # a cluster's multicast may land before this block's expect_tx: the count goes below
        # zero only while an arrival is still out (one block's own copies never can)
        if e.value > c.tx and (c.arrived == c.expected or blk.size == 1):
            raise HandoffProblem(
                "count",
                f"unannounced bytes on {_bar(e.bar)}",
                f"`{_text(e.stmt)}` ({e.where}) delivers {e.value} bytes to {_bar(e.bar)} in "
                f"its phase {c.phase}, which expects {c.tx} more: bytes that no "
                f"mbarrier.expect_tx announced{size}",
            )
        c.tx -= e.value
    c.members.append(e.node)
    if c.arrived < c.expected or c.tx:
        return None
    done = blk.node(c.members)
    blk.complete[(e.bar, c.phase)] = done
    c.phase, c.arrived, c.members = c.phase + 1, 0, []
    return done


def _ancestors(blk: _Block, order: list[int]) -> list[int]:
    """Each node's ancestors, as a bit set."""
    seen = [0] * len(blk.preds)
    for v in order:
        bits = 0
        for p in blk.preds[v]:
            bits |= seen[p] | (1 << p)
        seen[v] = bits
    return seen


def _regions(k: KernelIR, offsets: dict[str, int]) -> dict[str, int]:
    """Each buffer's region: buffers whose bytes overlap (a staging tile over the stages,
    `SharedBuffer.alias`) share one, so that their accesses are compared; the others are
    apart, which keeps the pairs few."""
    spans = sorted((offsets[b.name], offsets[b.name] + b.size_bytes, b.name) for b in k.buffers)
    region, current, end = {}, -1, -1
    for lo, hi, name in spans:
        if lo >= end:  # past every byte so far: a new region
            current += 1
        region[name] = current
        end = max(end, hi)
    return region


def _check_accesses(blk: _Block, hb, size: str) -> None:
    """Every two conflicting accesses ordered; of the pairs that are not, the one that
    says most (two roles, a read) is reported."""
    region = _regions(blk.k, blk.offsets)
    by_buffer: dict[tuple[int, int], list[_Access]] = {}
    for a in blk.accesses:
        by_buffer.setdefault((region[a.buffer], a.block), []).append(a)
    unordered = []
    for accesses in by_buffer.values():
        for i, q in enumerate(accesses):
            for p in accesses[:i]:
                if not (p.write or q.write) or p.hi <= q.lo or q.hi <= p.lo:
                    continue
                if p.lanes is not None and p.lanes == q.lanes:
                    continue  # each byte written by the same lane both times
                if _ordered(blk, p, q, hb) or _ordered(blk, q, p, hb):
                    continue
                unordered.append((p.write and q.write, p.who.name == q.who.name, p, q))
    if unordered:
        _, _, p, q = min(unordered, key=lambda x: x[:2])
        p, q = sorted((p, q), key=lambda a: a.rank)
        kind = "WAW" if p.write and q.write else ("RAW" if p.write else "WAR")
        whose = f" of block {p.block}" if blk.size > 1 else ""
        raise HandoffProblem(
            "race",
            f"{kind} on {p.buffer}{whose}",
            f"`{_text(p.stmt)}` ({p.who}) and `{_text(q.stmt)}` ({q.who}) are not ordered by "
            f"any handoff{size}",
        )


def _ordered(blk: _Block, p: _Access, q: _Access, hb) -> bool:
    """p happens before q, and what p wrote is visible to q's proxy."""
    if not hb(p.end, q.start):
        return False
    if p.write and not p.asynchronous and q.asynchronous:
        return any(f > p.start and hb(f, q.start) for f in blk.fences.get(p.thread, ()))
    return True


def _check_landings(blk: _Block, size: str) -> None:
    observed = {(e.bar, e.phase) for e in blk.events.values() if e.kind == "wait"}
    for e in blk.events.values():
        if e.kind == "land" and (e.bar, e.phase) not in observed:
            raise HandoffProblem(
                "race",
                f"a TMA copy nobody waits for on {_bar(e.bar)}",
                f"`{_text(e.stmt)}` ({e.where}) lands in phase {e.phase} of {_bar(e.bar)}, "
                "which no mbarrier.wait observes: the block may exit, or overwrite the "
                f"tile, before it lands{size}",
            )


def _check_protocol(blk: _Block, hb, size: str) -> None:
    """Every event's phase is the same in every interleaving (the module's text)."""
    complete = blk.complete
    for e in blk.events.values():
        before = complete.get((e.bar, e.phase - 1))
        if e.kind != "wait":
            if e.phase >= 1 and not hb(before, e.node):
                raise HandoffProblem(
                    "race",
                    f"an early arrival on {_bar(e.bar)}",
                    f"`{_text(e.stmt)}` ({_by(blk, e)}) may count toward phase "
                    f"{e.phase - 1}: nothing orders it after that phase completed{size}",
                )
            continue
        if e.phase >= 1 and not hb(before, e.node):
            raise HandoffProblem(
                "race",
                f"an early pass of a wait on {_bar(e.bar)}",
                f"`{_text(e.stmt)}` ({_by(blk, e)}) may pass on phase {e.phase - 2} (the parity "
                f"of the phase {e.phase} it waits for): nothing orders it after phase "
                f"{e.phase - 1}{size}",
            )
        after = complete.get((e.bar, e.phase + 1))
        if after is not None and not hb(e.node, after):
            raise HandoffProblem(
                "deadlock",
                f"a missed phase of {_bar(e.bar)}",
                f"`{_text(e.stmt)}` ({_by(blk, e)}) may miss phase {e.phase}: phase "
                f"{e.phase + 1} can complete before the wait, which then waits for phase "
                f"{e.phase + 2}{size}",
            )


def _bar(bar) -> str:
    return f"{bar[0]}[{bar[1]}]" + (f" of block {bar[2]}" if len(bar) > 2 else "")


def _by(blk: _Block, x: _Event) -> str:
    return f"{blk.thread_names[x.thread]}, {x.where}"


def _text(stmt) -> str:
    """A statement's text without its comment."""
    return stmt_text(stmt).split("  # ")[0]


# ------------------------------------------------------------------ decisions


#: decide's verdicts by kernel (its IR text and schedule): a pure function of them, and the
#: proof is most of a warp-specialized compile, which the tests and `tune` repeat.
_DECIDED: dict[tuple[str, str, bool], tuple[tuple[tuple[bool, str], ...], frozenset[int]]] = {}
_MAX_DECIDED = 256


def decide(kernel: KernelIR, remove: bool) -> tuple[tuple[SyncDecision, ...], frozenset[int]]:
    """Each handoff statement's decision: the problem it prevents (kept), or that the proof
    holds without it (removed with `remove`, else kept); and the ids of those removed.
    Raises TileError, at the `warp_specialize` directive, when the kernel itself fails
    the proof."""
    handoffs = {id(s): s for s in walk(kernel.body) if isinstance(s, HANDOFFS)}.values()
    # stream-K's barriers order global memory between blocks, which this proof does not
    # model (the interpreter checks them): kept, never tried without
    statements = [s for s in handoffs if not _fix_up_barrier(s)]
    fix_ups = [s for s in handoffs if _fix_up_barrier(s)]
    key = (print_ir(kernel), repr(kernel.schedule), remove)
    verdicts = _DECIDED.get(key)
    if verdicts is None:
        verdicts = _decide(kernel, statements, remove)
        if len(_DECIDED) >= _MAX_DECIDED:
            _DECIDED.clear()
        _DECIDED[key] = verdicts
    kept_why, removed = verdicts
    decided = [*zip(statements, kept_why, strict=True), *((s, (True, FIX_UP)) for s in fix_ups)]
    decisions = tuple(
        SyncDecision(index, s, kept, why) for index, (s, (kept, why)) in enumerate(decided, 1)
    )
    return decisions, frozenset(id(statements[i]) for i in removed)


FIX_UP = (
    "needed: it orders stream-K's or split-K's hand-over of a partial sum through global "
    "memory between the consumer threads and the one that signals or waits on the flag, or "
    "takes the ticket (the interpreter's race check covers it; this proof covers shared "
    "memory)"
)


def _fix_up_barrier(s) -> bool:
    return isinstance(s, Barrier) and s.scope == "consumers"


def proven(kernel: KernelIR) -> KernelIR:
    """`kernel` with each handoff statement's decision (its `sync_report`) and, with `sync
    minimal`, without the statements the proof holds without: what the passes that build
    mbarrier pipelines return. TileError when the kernel fails the proof."""
    decisions, removed = decide(kernel, remove=kernel.schedule.sync == "minimal")
    body = map_body(kernel.body, lambda st: () if id(st) in removed else st)
    return replace(kernel, body=body, sync_report=decisions)


def _decide(kernel: KernelIR, statements: list, remove: bool):
    """(kept, why) per statement, and the indices of those removed."""
    try:
        prove(kernel)
    except HandoffProblem as err:
        raise error(
            kernel.schedule.loc("warp_specialize"),
            f"the roles' handoffs do not order every access: {err}",
            "this is a tiledsl bug in the pipeline it built; please report it",
        ) from None
    removed: set[int] = set()
    verdicts = []
    for s in statements:
        trial = removed | {id(s)}
        try:
            prove(_without(kernel, trial))
        except HandoffProblem as err:
            verdicts.append((True, f"needed: without it, {err}"))
            continue
        if remove:
            removed = trial
        verdicts.append((not remove, "redundant: the proof holds without it"))
    ids = [id(s) for s in statements]
    return tuple(verdicts), frozenset(ids.index(r) for r in removed)


def _without(kernel: KernelIR, ids: set[int]) -> KernelIR:
    return replace(kernel, body=map_body(kernel.body, lambda s: () if id(s) in ids else s))
