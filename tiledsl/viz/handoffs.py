"""`roles.dot`: a warp-specialized kernel's roles and its stage handoffs, step by step.

One row per role (the producer's elected thread, the consumer warpgroups), one column per
K step of a block's first tile; each cell lists what the role does at that step — its
mbarrier waits, the producer's expect_tx and TMA copies, the consumers' wgmmas and
releases — with the slot and parity the IR's expressions give at that step. Edges are
the handoffs: from the copies of step q to the consumers' wait on full[q % STAGES], and
from the consumers' release of a slot to the producer's wait that reuses it, each labelled
with the barrier's phase. A wait with nothing before it (the first use of each slot) is
drawn as passing at once. With `epilogue_via tma`, a last column shows how C leaves; with
`persistent stream_k`, another how a piece's partial sum reaches the tile's owner.

Everything is read from the IR (tiledsl.passes.warp_specialization): the statements of
each role's K loop, evaluated per step. Which phase a wait needs follows the hardware: the
k-th wait of a role on a barrier slot, with parity p, waits for that slot's completion k
when k and p agree in parity, else for completion k - 1 (the phase before; none yet for
k = 0: a fresh barrier's).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import graphviz

from ..ir.expr import Var, evaluate
from ..ir.grid import FLAG_DEFER_STEPS, SK_MAX_FILL
from ..ir.nodes import (
    K_BLOCKS,
    Arrive,
    Barrier,
    ExpectTx,
    FlagSignal,
    FlagWait,
    For,
    If,
    KernelIR,
    Let,
    MmaCommit,
    PartialAdd,
    PartialFetch,
    PartialFromPeer,
    PartialStore,
    PartialToShared,
    Stmt,
    Ticket,
    TmaLoad,
    TmaStore,
    Wait,
    is_loop,
    walk,
    with_launch_scalars,
)
from ..ir.printer import stmt_text
from . import style
from .style import esc, font

#: The statements' colours: the roles' of every picture (style.ROLE_FILL).
_ROLE_OF = {
    "wait": "barrier",
    "expect": "async",
    "load": "copy",
    "mma": "mma",
    "arrive": "fragment",
}

#: K steps drawn: enough for every slot to be reused once.
MAX_STEPS = 10


@dataclass
class _Event:
    role: str
    step: int
    kind: str  # "wait", "expect", "load", "mma", "arrive"
    text: str
    bar: tuple[str, int] | None = None
    parity: int | None = None
    port: str = ""


@dataclass
class _Trace:
    events: list[_Event] = field(default_factory=list)

    def of(self, role: str, step: int) -> list[_Event]:
        return [e for e in self.events if e.role == role and e.step == step]


def handoffs_graph(kernel: KernelIR, file: str) -> str:
    """The picture's Graphviz source (a warp-specialized kernel's; see the module text)."""
    roles = kernel.specialization
    assert roles is not None  # drawn for warp-specialized kernels only
    stages = kernel.schedule.stages
    steps = min(MAX_STEPS, 2 * stages + 1)
    trace = _Trace()
    for role in roles.roles:
        _trace_role(kernel, role.name, role.body, steps, trace)
    g = graphviz.Digraph(f"{kernel.name}-roles")
    style.graph_defaults(g)
    g.attr("graph", rankdir="LR", newrank="true", nodesep="0.35", ranksep="0.55")
    g.attr(
        "graph",
        label=style.title_label(
            f"{kernel.name} · warp roles and stage handoffs",
            f"{file} · {stages} stages, mbarriers "
            + ", ".join(f"{m.name}[{m.slots}] ({m.arrivals} arrival(s))" for m in kernel.mbarriers)
            + f" · the first {steps} K steps of a block's first tile, as the IR computes "
            "each slot and parity; arrows: which arrival or copy completes the phase a wait "
            "needs",
        ),
    )
    g.attr("node", shape="plain")
    edges = _handoffs(trace)  # before the cells: it marks the waits that pass at once
    for role in roles.roles:
        with g.subgraph(name=f"cluster_{role.name}") as c:
            what = (
                "one elected thread of the producer warpgroup"
                if role.name == "producer"
                else f"{kernel.warp_count} consumer warpgroup(s), in step"
                + (
                    f"; team 0 of {kernel.teams} (pingpong: the teams take the tiles in turn, "
                    "each waiting on `turn` before its K loop)"
                    if kernel.teams > 1
                    else ""
                )
            )
            c.attr(
                label=f"<<B>{esc(role.name)}</B> · {esc(what)} · {role.registers} registers>",
                style="rounded",
                color="#b0b0b0",
            )
            for q in range(steps):
                c.node(f"{role.name}{q}", _cell(trace.of(role.name, q), q))
            for q in range(steps - 1):
                c.edge(f"{role.name}{q}", f"{role.name}{q + 1}", color="#c8c8c8")
            if role.name == "consumer" and kernel.schedule.epilogue_via == "tma":
                c.node("epilogue", _epilogue_cell(kernel))
                c.edge(f"consumer{steps - 1}", "epilogue", style="dashed", color="#c8c8c8")
            if role.name == "consumer" and (kernel.hands_over or kernel.split_cluster):
                cell = (
                    _cluster_cell(kernel)
                    if kernel.split_cluster
                    else _ticket_cell(kernel)
                    if kernel.grid_split
                    else _fix_up_cell(kernel)
                )
                c.node("fixup", cell)
                c.edge(f"consumer{steps - 1}", "fixup", style="dashed", color="#c8c8c8")
    for q in range(steps):  # each step's cells in one column
        with g.subgraph() as column:
            column.attr(rank="same")
            for role in roles.roles:
                column.node(f"{role.name}{q}")
    for tail, head, label, colour in edges:
        g.edge(tail, head, label=label, color=colour, fontcolor=colour, constraint="false")
    return g.source


def _trace_role(kernel: KernelIR, role: str, body: tuple[Stmt, ...], steps: int, trace) -> None:
    """The role's statements of the first tile's K loop, evaluated at each step."""
    k_loop = next(s for s in walk(body) if is_loop(s, K_BLOCKS))
    bk = kernel.schedule.block[2]
    sizes = kernel.gemm.size_env(kernel.schedule.block[0], kernel.schedule.block[1], 64 * bk)
    for q in range(steps):
        env = {**sizes, "tl": 0, k_loop.var: q, "pid": 0, "blocks": 1, "tiles": 1}
        env.update({"tiles_m": 1, "tiles_n": 1, "ctiles_m": 1, "ctiles_n": 1})
        with_launch_scalars(kernel, env)
        for let in (s for s in kernel.body if isinstance(s, Let)):  # what the block knows
            env[let.var] = int(evaluate(let.value, env))  # (split_k: its slice's k_lo)
        _trace_body(k_loop.body, env, role, q, trace)


def _trace_body(body, env: dict, role: str, q: int, trace) -> None:
    for s in body:
        match s:
            case Let():
                env[s.var] = int(evaluate(s.value, env))
            case If():
                lhs, rhs = evaluate(s.lhs, env), evaluate(s.rhs, env)
                taken = lhs < rhs if s.op == "<" else lhs == rhs
                _trace_body(s.then if taken else s.orelse, env, role, q, trace)
            case Wait():
                slot, parity = int(evaluate(s.bar.slot, env)), int(evaluate(s.parity, env))
                trace.events.append(
                    _Event(
                        role,
                        q,
                        "wait",
                        f"wait {s.bar.name}[{slot}] parity {parity}",
                        (s.bar.name, slot),
                        parity,
                    )  # fmt: skip
                )
            case ExpectTx():
                slot = int(evaluate(s.bar.slot, env))
                trace.events.append(
                    _Event(
                        role,
                        q,
                        "expect",
                        f"expect_tx {s.bar.name}[{slot}] {s.bytes} B",
                        (s.bar.name, slot),
                    )  # fmt: skip
                )
            case TmaLoad():
                slot = int(evaluate(s.bar.slot, env))
                dst = int(evaluate(s.dst.slot, env))
                trace.events.append(
                    _Event(
                        role,
                        q,
                        "load",
                        f"TMA {s.src.operand} → {s.dst.buffer}[{dst}]",
                        (s.bar.name, slot),
                    )  # fmt: skip
                )
            case MmaCommit():
                trace.events.append(_Event(role, q, "mma", "wgmmas on this step's slot"))
            case Arrive():
                slot = int(evaluate(s.bar.slot, env))
                trace.events.append(
                    _Event(role, q, "arrive", f"arrive {s.bar.name}[{slot}]", (s.bar.name, slot))
                )
            case For():
                _trace_body(s.body, env, role, q, trace)


def _completions(trace: _Trace) -> dict[tuple[str, int], list[_Event]]:
    """Per barrier slot, in order, the event that completes each of its phases: a release
    (one Arrive stands for every consumer warpgroup), or a step's last TMA copy (its bytes,
    with the expect_tx before it)."""
    out: dict[tuple[str, int], list[_Event]] = {}
    ordered = sorted(trace.events, key=lambda e: (e.step, e.role))
    for e in ordered:
        if e.bar is None:
            continue
        if e.kind == "arrive":
            out.setdefault(e.bar, []).append(e)
        elif e.kind == "load":
            steps = out.setdefault(e.bar, [])
            if steps and steps[-1].kind == "load" and steps[-1].step == e.step:
                steps[-1] = e  # the step's last copy completes the phase
            else:
                steps.append(e)
    return out


def _handoffs(trace: _Trace) -> list[tuple[str, str, str, str]]:
    """(tail, head, label, colour) of each handoff drawn; marks the waits that need no
    completion (a fresh slot's)."""
    edges = []
    completions = _completions(trace)
    waits_seen: dict[tuple[str, str, int], int] = {}
    for e in trace.events:
        if e.kind != "wait" or e.bar is None or e.parity is None:
            continue
        key = (e.role, *e.bar)
        k = waits_seen.get(key, 0)
        waits_seen[key] = k + 1
        needed = k if k % 2 == e.parity else k - 1
        done = completions.get(e.bar, [])
        if needed < 0:
            e.port = "fresh"
            continue
        if needed >= len(done):
            continue  # completed by a step beyond the picture
        source = done[needed]
        colour = style.OPERAND_COLOUR["b"] if e.bar[0] == "full" else style.OPERAND_COLOUR["c"]
        edges.append(
            (
                f"{source.role}{source.step}:{_port(source)}",
                f"{e.role}{e.step}:{_port(e)}",
                f"{e.bar[0]}[{e.bar[1]}] phase {needed}",
                colour,
            )
        )
    return edges


def _port(e: _Event) -> str:
    return f"{e.kind}{e.bar[0] if e.bar else ''}"


def _cell(events: list[_Event], q: int) -> str:
    fills = {kind: style.ROLE_FILL[role] for kind, role in _ROLE_OF.items()}
    rows = [f'<TR><TD BGCOLOR="#f0f0f0"><B>{font(esc(f"step {q}"), 11)}</B></TD></TR>']
    ports: set[str] = set()
    for e in events:
        text = e.text + ("  (passes at once: the slot is fresh)" if e.port == "fresh" else "")
        port = _port(e)
        attr = f' PORT="{port}"' if port not in ports else ""
        ports.add(port)
        rows.append(f'<TR><TD{attr} BGCOLOR="{fills[e.kind]}" ALIGN="LEFT">{esc(text)}</TD></TR>')
    return _table("".join(rows))


def _epilogue_cell(kernel: KernelIR) -> str:
    stores = [s for s in walk(kernel.body) if isinstance(s, TmaStore)]
    width = kernel.schedule.store_columns
    lines = [
        "after the tile's last step: C leaves by TMA",
        f"per piece of {width} columns of each warpgroup:",
        "1. wait until the last TMA store has read Cs (one thread)",
        "2. warpgroup barrier: Cs is free for every lane",
        "3. stmatrix: accumulators → Cs, rounded",
        "4. fence.proxy.async, warpgroup barrier",
        f"5. one thread: TMA store Cs → {stores[0].dst.operand if stores else 'C'} (its own "
        "bulk group)",
        "the producer meanwhile loads the next tile into the stages",
    ]
    return _lines_table(lines, "#ece3f5")


def _fix_up_cell(kernel: KernelIR) -> str:
    """`persistent stream_k`: how a piece's partial sum reaches the tile's owner, in the
    IR's own statements (tiledsl.passes.warp_specialization._fix_up)."""
    roles = kernel.specialization
    assert roles is not None
    body = list(walk(roles.consumer.body))
    store = next(s for s in body if isinstance(s, PartialStore))
    signal = next(s for s in body if isinstance(s, FlagSignal))
    barriers = [s for s in body if isinstance(s, Barrier) and s.scope == "consumers"]
    gather: list[Stmt] = [s for s in body if isinstance(s, FlagWait) and not s.by_producer]
    gather += [s for s in body if isinstance(s, PartialAdd) and s.staged is None]
    fetch = next((s for s in walk(roles.producer.body) if isinstance(s, PartialFetch)), None)
    # the owner's barrier: the one in its loop over the contributors, after the acquire
    loop = next(
        s for s in body if isinstance(s, For) and any(isinstance(x, FlagWait) for x in s.body)
    )
    barrier = next((b for b in loop.body if isinstance(b, Barrier)), None)
    handed = next(b for b in barriers if b is not barrier)
    when = (
        f" ({FLAG_DEFER_STEPS} K steps into the block's next piece, its stores draining "
        "meanwhile; at once where its share has no next piece)"
        if kernel.aligned
        else ""
    )
    pieces = (
        f"split-K slices: the tiles of a last round, {kernel.split_k} slices of K each"
        if kernel.split_k
        else "stream-K pieces, aligned: the tiles of a last round cut along K, each block's "
        "last tile first"
        if kernel.aligned
        else "stream-K pieces: the tiles of a last round that fills at most "
        f"{SK_MAX_FILL} % of the grid, cut along K"
    )
    # stream-K's owner holds a tile's first K step; stream_k_aligned's its last
    ends, others = ("ends", "before") if kernel.aligned else ("starts", "after")
    lines = [
        pieces,
        f"a piece that {ends} inside its tile hands its partial sum over:",
        f"1. {stmt_text(store)}",
        f"2. {stmt_text(handed)}{when}",
        f"3. {stmt_text(signal)}",
        f"the tile's owner, for each block {others} it in the tile, in block order:",
        *(
            [
                f"(the first: {stmt_text(fetch)} by its producer after its last load, "
                "into the stage slots after it, added from there)"
            ]
            if fetch is not None
            else []
        ),
        f"1. {stmt_text(gather[0])} (thread 0; it clears the flag)",
        *([f"2. {stmt_text(barrier)}"] if barrier is not None else []),
        f"3. {stmt_text(gather[1])}",
        "then its epilogue and C store, once, on the whole sum",
    ]
    return _lines_table(lines, "#e3eef5")


def _ticket_cell(kernel: KernelIR) -> str:
    """`split_k S`: how a slice's partial sum reaches the slice that adds them, in the IR's
    own statements (tiledsl.passes.warp_specialization._ticketed_fix_up)."""
    roles = kernel.specialization
    assert roles is not None
    end = [
        s
        for s in walk(roles.consumer.body)
        if isinstance(s, (PartialStore, Ticket, PartialAdd))
        or (isinstance(s, Barrier) and s.scope == "consumers")
    ]
    lines = [
        f"split-K: a block per slice, {kernel.grid_split} slices of every tile's K steps",
        "every slice, at the end of its K steps:",
        *(f"{i}. {stmt_text(s)}" for i, s in enumerate(end[:-1], 1)),
        f"the slice that draws ticket {kernel.grid_split - 1} (the last), for each slice in order:",
        f"{len(end)}. {stmt_text(end[-1])}",
        "then its epilogue and C store, once, on the whole sum; the others exit",
    ]
    return _lines_table(lines, "#e3eef5")


def _cluster_cell(kernel: KernelIR) -> str:
    """`split_k S via cluster`: how the other slices' partial sums reach slice 0, in the
    IR's own statements (tiledsl.passes.warp_specialization._cluster_fix_up)."""
    roles = kernel.specialization
    assert roles is not None
    fix_up = next(s for s in roles.consumer.body if isinstance(s, If) and s.lhs == Var("slice"))
    handoffs = (PartialToShared, PartialFromPeer, Arrive, Wait)
    owner = [s for s in walk(fix_up.then) if isinstance(s, handoffs)]
    others = [s for s in walk(fix_up.orelse) if isinstance(s, handoffs)]
    lines = [
        f"split-K in a cluster: the {kernel.grid_split} slices of a tile, one cluster",
        "every slice but the first, at the end of its K steps:",
        *(f"{i}. {stmt_text(s)}" for i, s in enumerate(others, 1)),
        "slice 0 (each statement of a loop once per other slice, in slice order):",
        *(f"{i}. {stmt_text(s)}" for i, s in enumerate(owner, len(others) + 1)),
        "then its epilogue and C store, once, on the whole sum",
    ]
    return _lines_table(lines, "#e3eef5")


def _lines_table(lines: list[str], fill: str) -> str:
    """A cell of one column: its first line a grey title, the others on `fill`."""
    rows = "".join(
        f'<TR><TD BGCOLOR="{"#f0f0f0" if i == 0 else fill}" ALIGN="LEFT">{esc(t)}</TD></TR>'
        for i, t in enumerate(lines)
    )
    return _table(rows)


def _table(rows: str) -> str:
    return f'<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">{rows}</TABLE>>'
