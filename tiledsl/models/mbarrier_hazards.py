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
count, not the program's text, so the analysis takes the protocol every pipeline follows
— a thread arrives on a barrier once a phase, its k-th arrival counts toward phase k; a
wait on parity x is for the next phase of that parity after the one the thread last
waited for (a wait on parity 1 of a fresh barrier: "phase -1", passed at once) — and then
proves that no interleaving departs from it:

  - an arrival for phase k > 0 comes after phase k - 1 completed (it cannot count early);
  - a wait for phase n comes after phase n - 1 completed (else it could pass on phase
    n - 2, of the same parity), and phase n + 1 cannot complete before it (else it would
    miss its phase and wait for n + 2);
  - each phase gets exactly its arrivals, and exactly the bytes its expect_tx announced.

Given that, two accesses to a byte of shared memory, one a write, that are not the same
thread's in program order must be ordered by the graph: the first one's end (a TMA copy's
landing, a wgmma group's retiring wait, a TMA store's `wait_group.read`) before the second
one's start. A generic-proxy write that the async proxy reads (the lanes' stmatrix, then the
TMA store) also needs the writer's `fence.proxy.async` between them. A wait for a phase
that never completes, or completes only after the wait (a cycle), is a deadlock.

`decide` asks, for every handoff statement, what breaks without it — the hazard or the
deadlock it prevents — for `--explain-sync`; with `sync minimal` a statement without which
the proof still holds would be removed (none of the pipeline's is: the proof is the check).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..errors import error
from ..ir.expr import evaluate
from ..ir.grid import block_tile, grid_vars
from ..ir.nodes import (
    DTYPE_BYTES,
    ELECTED,
    HANDOFFS,
    Arrive,
    Barrier,
    EpilogueFrag,
    ExpectTx,
    Fill,
    For,
    If,
    KernelIR,
    Let,
    LoadFrag,
    Mma,
    MmaCommit,
    MmaFence,
    MmaWait,
    ProxyFence,
    Roles,
    SharedTile,
    StoreFrag,
    TmaLoad,
    TmaStore,
    TmaStoreWait,
    Wait,
    buffer_offsets,
    map_body,
    walk,
)
from ..ir.printer import stmt_text
from .hazards import SyncDecision, tile_bytes


class HandoffProblem(Exception):
    """A race, a deadlock or a broken mbarrier count in a traced instance: `headline`
    names it (e.g. "RAW on As"), `detail` says where."""

    def __init__(self, kind: str, headline: str, detail: str):
        super().__init__(f"{headline} — {detail}")
        self.kind = kind  # "race", "deadlock" or "count"
        self.headline = headline


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
    who: str
    rank: tuple = ()  # the order the program means: (step, producer first, program order)


@dataclass
class _Actor:
    """A role instance: the producer, or one consumer warpgroup, and its threads."""

    name: str
    threads: tuple[int, ...]  # threads[0] is the elected lane
    env: dict
    groups: list[int] = field(default_factory=list)  # wgmma group nodes, committed
    retired: int = 0  # groups[:retired] have retired
    reads: list[tuple] = field(
        default_factory=list
    )  # wgmma reads not committed: (tile, bytes, stmt)
    stores: list[_Access] = field(default_factory=list)  # TMA store reads not waited for


@dataclass
class _Arrival:
    node: int
    thread: int
    nbytes: int  # announced (expect_tx)
    stmt: object
    where: str


@dataclass
class _Wait:
    node: int
    thread: int
    bar: tuple[str, int]
    phase: int
    stmt: object
    where: str


class _Block:
    """One block's roles traced at one size: the graph, the accesses, the handoffs."""

    def __init__(self, kernel: KernelIR, env: dict):
        self.k = kernel
        self.offsets = buffer_offsets(kernel)
        self.env = env
        self.preds: list[list[int]] = []
        self.last: list[int | None] = []
        self.thread_names: list[str] = []
        self.accesses: list[_Access] = []
        self.fences: dict[int, list[int]] = {}
        self.arrivals: dict[tuple[str, int], dict[int, list[_Arrival]]] = {}
        self.landings: list[tuple[tuple[str, int], int, int, int, object, str]] = []
        self.waits: list[_Wait] = []
        self.waited: dict[
            tuple[int, tuple[str, int]], int
        ] = {}  # the phase a thread last waited for
        self.actors: list[_Actor] = []
        self.sorted: set[int] = set()  # the nodes a topological order reached

    # ------------------------------------------------------------ the graph
    def node(self, preds) -> int:
        self.preds.append([p for p in preds if p is not None])
        return len(self.preds) - 1

    def thread(self, name: str) -> int:
        self.last.append(None)
        self.thread_names.append(name)
        return len(self.last) - 1

    def step(self, t: int, *extra: int) -> int:
        """The next node on thread t (after its last, and after `extra`)."""
        n = self.node([self.last[t], *extra])
        self.last[t] = n
        return n

    # ------------------------------------------------------------ tracing
    def run(self, body) -> None:
        """The block's top level: its lets, then the roles."""
        for s in body:
            match s:
                case Let():
                    self.env[s.var] = int(evaluate(s.value, self.env))
                case Roles():
                    self.roles(s)
                case _:
                    raise HandoffProblem("count", "not modelled", f"`{_text(s)}` outside the roles")

    def roles(self, roles: Roles) -> None:
        producer = _Actor("the producer", (self.thread("the producer"),), dict(self.env))
        self.actors.append(producer)
        coords = self.k.warp_coords()
        for w in range(self.k.warp_count):
            name = f"consumer warpgroup {w}"
            threads = (self.thread(f"{name} (lane 0)"), self.thread(f"{name} (other lanes)"))
            env = {**self.env, **{v: int(a[w]) for v, a in coords.items()}}
            self.actors.append(_Actor(name, threads, env))
        self.body(producer, roles.producer.body)
        for actor in self.actors[1:]:
            self.body(actor, roles.consumer.body)

    def body(self, a: _Actor, body) -> None:
        for s in body:
            match s:
                case For():
                    start, stop = (int(evaluate(e, a.env)) for e in (s.start, s.stop))
                    for v in range(start, stop, s.step):
                        a.env[s.var] = v
                        self.body(a, s.body)
                    a.env.pop(s.var, None)
                case If():
                    lhs, rhs = evaluate(s.lhs, a.env), evaluate(s.rhs, a.env)
                    self.body(a, s.then if (lhs < rhs if s.op == "<" else lhs == rhs) else s.orelse)
                case Let():
                    a.env[s.var] = int(evaluate(s.value, a.env))
                case _:
                    self.statement(a, s)

    def statement(self, a: _Actor, s) -> None:
        where = self.where(a)
        issuers = a.threads[:1] if isinstance(s, ELECTED) else a.threads  # who runs `s`
        elected = issuers[0]
        match s:
            case Wait():
                bar = self.bar(s.bar, a.env)
                parity = int(evaluate(s.parity, a.env)) % 2
                for t in issuers:
                    before = self.waited.get((t, bar), -2)
                    phase = before + 1 if (before + 1) % 2 == parity else before + 2
                    self.waited[(t, bar)] = phase
                    self.waits.append(_Wait(self.step(t), t, bar, phase, s, where))
            case Arrive() | ExpectTx():
                bar = self.bar(s.bar, a.env)
                nbytes = s.bytes if isinstance(s, ExpectTx) else 0
                per = self.arrivals.setdefault(bar, {}).setdefault(elected, [])
                per.append(_Arrival(self.step(elected), elected, nbytes, s, where))
            case TmaLoad():
                bar = self.bar(s.bar, a.env)
                issue = self.step(elected)
                land = self.node([issue])
                mine = self.arrivals.get(bar, {}).get(elected, [])
                phase = len(mine) - 1  # the phase of this thread's latest expect_tx on it
                nbytes = s.dst.rows * s.dst.cols * DTYPE_BYTES[self.k.buffer(s.dst.buffer).dtype]
                self.landings.append((bar, phase, land, nbytes, s, where))
                self.access(s.dst, a, elected, True, True, issue, land, s, None)
            case LoadFrag() if isinstance(s.src, SharedTile):
                a.reads.append((s.src, tile_bytes(self.k, self.offsets, s.src, a.env), s))
            case MmaFence() | Mma() | Fill() | EpilogueFrag():
                pass  # registers only (a wgmma's tiles are read as its group runs)
            case LoadFrag():
                pass
            case MmaCommit():
                group = self.node([self.step(t) for t in issuers])
                a.groups.append(group)
                for tile, span, stmt in a.reads:
                    read = self.access(
                        tile, a, elected, False, True, group, group, stmt, None, span
                    )
                    read.who = f"{a.name}'s wgmmas, {self.where(a)}"
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

    def access(
        self, tile, a: _Actor, t, write, asynchronous, start, end, stmt, lanes, span=None
    ) -> _Access:
        lo, hi = span or tile_bytes(self.k, self.offsets, tile, a.env)
        if lanes is not None:
            lanes = (*lanes, lo, hi)
        acc = _Access(tile.buffer, lo, hi, write, asynchronous, start, end, t, lanes, stmt, "")
        acc.who = f"{self.thread_names[t]}, {self.where(a)}"
        acc.rank = (a.env.get("step", -1), self.actors.index(a), start)
        self.accesses.append(acc)
        return acc

    def bar(self, ref, env) -> tuple[str, int]:
        return ref.name, int(evaluate(ref.slot, env))

    def where(self, a: _Actor) -> str:
        names = [v for v in ("tl", "kt", "step", "h") if v in a.env]
        return ", ".join(f"{v} = {a.env[v]}" for v in names) or "its start"


# ------------------------------------------------------------------ the proof


def prove(kernel: KernelIR) -> None:
    """Raise HandoffProblem if some interleaving of the roles races or deadlocks."""
    for env in _sizes(kernel):
        blk = _Block(kernel, env)
        blk.run(kernel.body)
        _check(kernel, blk, env)


def _sizes(kernel: KernelIR):
    """One block (pid 0) at every size the proof needs: T tiles of KT K steps."""
    bm, bn, bk = kernel.schedule.block
    stages = kernel.schedule.stages
    for tiles in (1, 2, 3) if kernel.persistent else (1,):
        for steps in range(1, stages + 2):
            env: dict = {"M": tiles * bm, "N": bn, "K": steps * bk, "pid": 0, "blocks": 1}
            if kernel.gemm.batch is not None:
                env["bz"] = 0
            for name, e in grid_vars(kernel).items():
                env[name] = int(evaluate(e, env))
            if not kernel.persistent:
                for name, e in block_tile(kernel).items():
                    env[name] = int(evaluate(e, env))
            yield env


def _check(k: KernelIR, blk: _Block, env: dict) -> None:
    bm, _, bk = k.schedule.block
    size = f" (one block of {env['M'] // bm} tile(s), {env['K'] // bk} K step(s) each)"
    complete = _phases(k, blk, size)
    for w in blk.waits:
        if w.phase < 0:
            continue
        node = complete.get((w.bar, w.phase))
        if node is None:
            raise HandoffProblem("deadlock", f"a deadlock on {_bar(w.bar)}", _never(blk, w, size))
        blk.preds[w.node].append(node)
    order = _topological(blk)
    if order is None:
        w = min((w for w in blk.waits if w.node not in blk.sorted), key=lambda w: w.node)
        raise HandoffProblem(
            "deadlock",
            f"a deadlock on {_bar(w.bar)}",
            f"{blk.thread_names[w.thread]} waits in `{_text(w.stmt)}` ({w.where}) for phase "
            f"{w.phase} of {_bar(w.bar)}, which can complete only after that wait has "
            f"passed{size}",
        )
    seen = _ancestors(blk, order)

    def hb(a: int | None, b: int) -> bool:
        return a is not None and (a == b or (seen[b] >> a) & 1 == 1)

    # the races first: a broken protocol (below) usually shows as one, which says more
    _check_accesses(blk, hb, size)
    _check_landings(blk, size)
    _check_protocol(blk, complete, hb, size)
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


def _phases(k: KernelIR, blk: _Block, size: str) -> dict[tuple[tuple[str, int], int], int]:
    """The completion node of every phase that completes: (barrier, slot, phase) -> node."""
    expected = {m.name: m.arrivals for m in k.mbarriers}
    delivered: dict[tuple[tuple[str, int], int], list] = {}
    for bar, phase, land, nbytes, stmt, where in blk.landings:
        if phase < 0:
            raise HandoffProblem(
                "count",
                f"unannounced bytes on {_bar(bar)}",
                f"`{_text(stmt)}` ({where}) delivers bytes to {_bar(bar)} that no "
                f"mbarrier.expect_tx announced{size}",
            )
        delivered.setdefault((bar, phase), []).append((land, nbytes, stmt, where))
    complete = {}
    for bar, per in blk.arrivals.items():
        for phase in range(max(len(x) for x in per.values())):
            members = [x[phase] for x in per.values() if len(x) > phase]
            lands = delivered.get((bar, phase), [])
            if len(members) > expected[bar[0]]:
                m = members[-1]
                raise HandoffProblem(
                    "count",
                    f"too many arrivals on {_bar(bar)}",
                    f"`{_text(m.stmt)}` ({_by(blk, m)}): {len(members)} arrivals in its phase "
                    f"{phase}, which counts {expected[bar[0]]}: a phase would complete before "
                    f"its handoff{size}",
                )
            announced, landed = sum(m.nbytes for m in members), sum(x[1] for x in lands)
            if landed > announced:
                _, _, stmt, where = lands[-1]
                raise HandoffProblem(
                    "count",
                    f"unannounced bytes on {_bar(bar)}",
                    f"`{_text(stmt)}` ({where}) delivers {landed} bytes in its phase {phase}, "
                    f"which announced {announced}{size}",
                )
            if len(members) == expected[bar[0]] and landed == announced:
                complete[(bar, phase)] = blk.node([m.node for m in members] + [x[0] for x in lands])
    for key, lands in delivered.items():
        if key not in complete:
            _, _, stmt, where = lands[0]
            raise HandoffProblem(
                "count",
                f"a TMA copy on {_bar(key[0])} that never completes",
                f"`{_text(stmt)}` ({where}) lands in phase {key[1]} of {_bar(key[0])}, "
                f"which never completes{size}",
            )
    return complete


def _never(blk: _Block, w: _Wait, size: str) -> str:
    per = blk.arrivals.get(w.bar, {})
    got = sum(1 for x in per.values() if len(x) > w.phase)
    return (
        f"{blk.thread_names[w.thread]} waits in `{_text(w.stmt)}` ({w.where}) for phase "
        f"{w.phase} of {_bar(w.bar)}, which never completes: {got} arrival(s) come for "
        f"it{size}"
    )


def _topological(blk: _Block) -> list[int] | None:
    n = len(blk.preds)
    succs: list[list[int]] = [[] for _ in range(n)]
    indegree = [0] * n
    for v, ps in enumerate(blk.preds):
        for p in ps:
            succs[p].append(v)
            indegree[v] += 1
    ready = [v for v in range(n) if indegree[v] == 0]
    order = []
    while ready:
        v = ready.pop()
        order.append(v)
        for s in succs[v]:
            indegree[s] -= 1
            if indegree[s] == 0:
                ready.append(s)
    blk.sorted = set(order)
    return order if len(order) == n else None


def _ancestors(blk: _Block, order: list[int]) -> list[int]:
    """Each node's ancestors, as a bit set."""
    seen = [0] * len(order)
    for v in order:
        bits = 0
        for p in blk.preds[v]:
            bits |= seen[p] | (1 << p)
        seen[v] = bits
    return seen


def _check_accesses(blk: _Block, hb, size: str) -> None:
    """Every two conflicting accesses ordered; of the pairs that are not, the one that
    says most (two roles, a read) is reported."""
    by_buffer: dict[str, list[_Access]] = {}
    for a in blk.accesses:
        by_buffer.setdefault(a.buffer, []).append(a)
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
                unordered.append(
                    (p.write and q.write, p.who.split(",")[0] == q.who.split(",")[0], p, q)
                )
    if unordered:
        _, _, p, q = min(unordered, key=lambda x: x[:2])
        p, q = sorted((p, q), key=lambda a: a.rank)
        kind = "WAW" if p.write and q.write else ("RAW" if p.write else "WAR")
        raise HandoffProblem(
            "race",
            f"{kind} on {p.buffer}",
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
    observed = {(w.bar, w.phase) for w in blk.waits}
    for bar, phase, _, _, stmt, where in blk.landings:
        if (bar, phase) not in observed:
            raise HandoffProblem(
                "race",
                f"a TMA copy nobody waits for on {_bar(bar)}",
                f"`{_text(stmt)}` ({where}) lands in phase {phase} of {_bar(bar)}, which no "
                f"mbarrier.wait observes: the block may exit, or overwrite the tile, before it "
                f"lands{size}",
            )


def _check_protocol(blk: _Block, complete: dict, hb, size: str) -> None:
    for bar, per in blk.arrivals.items():
        for arrivals in per.values():
            for phase, m in enumerate(arrivals[1:], 1):
                if not hb(complete.get((bar, phase - 1)), m.node):
                    raise HandoffProblem(
                        "race",
                        f"an early arrival on {_bar(bar)}",
                        f"`{_text(m.stmt)}` ({_by(blk, m)}) may count toward phase {phase - 1}: "
                        f"nothing orders it after that phase completed{size}",
                    )
    for w in blk.waits:
        if w.phase >= 1 and not hb(complete.get((w.bar, w.phase - 1)), w.node):
            raise HandoffProblem(
                "race",
                f"an early pass of a wait on {_bar(w.bar)}",
                f"`{_text(w.stmt)}` ({_by(blk, w)}) may pass on phase {w.phase - 2} (the parity "
                f"of the phase {w.phase} it waits for): nothing orders it after phase "
                f"{w.phase - 1}{size}",
            )
        after = complete.get((w.bar, w.phase + 1))
        if after is not None and not hb(w.node, after):
            raise HandoffProblem(
                "deadlock",
                f"a missed phase of {_bar(w.bar)}",
                f"`{_text(w.stmt)}` ({_by(blk, w)}) may miss phase {w.phase}: phase "
                f"{w.phase + 1} can complete before the wait, which then waits for phase "
                f"{w.phase + 2}{size}",
            )


def _bar(bar) -> str:
    return f"{bar[0]}[{bar[1]}]"


def _by(blk: _Block, x: _Wait | _Arrival) -> str:
    return f"{blk.thread_names[x.thread]}, {x.where}"


def _text(stmt) -> str:
    """A statement's text without its comment."""
    return stmt_text(stmt).split("  # ")[0]


# ------------------------------------------------------------------ decisions


def decide(kernel: KernelIR, remove: bool) -> tuple[tuple[SyncDecision, ...], frozenset[int]]:
    """Each handoff statement's decision: the problem it prevents (kept), or that the proof
    holds without it (removed with `remove`, else kept). Raises TileError, at the
    `warp_specialize` directive, when the kernel itself fails the proof."""
    try:
        prove(kernel)
    except HandoffProblem as err:
        raise error(
            kernel.schedule.loc("warp_specialize"),
            f"the roles' handoffs do not order every access: {err}",
            "this is a tiledsl bug in the pipeline it built; please report it",
        ) from None
    statements = list({id(s): s for s in walk(kernel.body) if isinstance(s, HANDOFFS)}.values())
    removed: set[int] = set()
    decisions = []
    for index, s in enumerate(statements, 1):
        trial = removed | {id(s)}
        try:
            prove(_without(kernel, trial))
        except HandoffProblem as err:
            decisions.append(SyncDecision(index, s, True, f"needed: without it, {err}"))
            continue
        if remove:
            removed = trial
        decisions.append(
            SyncDecision(index, s, not remove, "redundant: the proof holds without it")
        )
    return tuple(decisions), frozenset(removed)


def _without(kernel: KernelIR, ids: set[int]) -> KernelIR:
    return replace(kernel, body=map_body(kernel.body, lambda s: () if id(s) in ids else s))
