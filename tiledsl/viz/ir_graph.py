"""The picture of one stage's IR: declarations, then the body as nested boxes.

    dot_source = stage_graph(kernel, "padding", 4, previous, "examples/hgemm.tile")

Above the body, the declarations (`declarations.py`: warps, block order, buffers,
fragments, with what changed) and a legend. Loops and conditions are clusters; every
other statement is a box, coloured by what it does (`style.ROLE_FILL`), with a stripe in
the colour of the operand whose data it touches. Grey arrows give program order.
Against the previous stage (`diff.py`), new statements get a green border, changed ones
an orange border and the text they replace, removed ones a dashed red box with their
text struck through. A barrier that sync-elimination removed says why, from the hazard
analysis (`KernelIR.sync_report`); one it kept says which hazard needs it.

Statement kinds this module does not know get a generic grey box, and their bodies
(any field holding statements) are drawn as clusters, so a new IR node never stops
the pictures.
"""

from __future__ import annotations

import graphviz

from ..ir.expr import to_c
from ..ir.nodes import (
    HANDOFFS,
    Arrive,
    AsyncCommit,
    AsyncWait,
    Barrier,
    Copy,
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
    tiles_of,
)
from ..ir.paths import WMMA, InstructionPath
from ..ir.printer import tile_text
from ..passes import PASSES
from . import style
from .declarations import data_colours, declarations, legend
from .diff import Item, bodies, counts, diff_body, diff_named, generic_text, text, unchanged
from .style import esc, font, wrap

LOWER_SUMMARY = "the naive form: each warp computes one fragment, straight from global memory"
BORDER = {"added": style.ADDED, "changed": style.CHANGED, "removed": style.REMOVED}


def stage_graph(
    kernel: KernelIR,
    stage: str,
    number: int,
    previous: KernelIR | None,
    file: str,
) -> str:
    """The dot source of `kernel` after `stage`, marked against `previous` (None: the first)."""
    items = unchanged(kernel.body) if previous is None else diff_body(previous.body, kernel.body)
    g = graphviz.Digraph(f"{kernel.name}-{number:02d}-{stage}")
    style.graph_defaults(g)
    g.attr("graph", compound="true", nodesep="0.3", ranksep="0.28")
    g.attr("graph", label=style.title_label(*_titles(kernel, stage, number, previous, file, items)))
    g.attr("node", shape="box", style="rounded,filled", margin="0.08,0.04")

    g.node("decl", declarations(kernel, previous), shape="plain", style="")
    g.node("legend", legend(kernel), shape="plain", style="")
    with g.subgraph() as top:
        top.attr(rank="same")
        top.node("decl")
        top.node("legend")

    drawing = _Body(kernel.sync_report, data_colours(kernel), kernel.schedule.path)
    first = drawing.items(g, items, "b")
    if first is None:
        g.node("empty", "(empty body)", shape="plaintext", style="")
        first = _Anchor(("empty",), ("empty",), None)
    for node in first.firsts:
        g.edge("decl", node, style="invis", weight="10")
    g.edge("decl", "legend", style="invis")
    for tail, head, attrs in drawing.edges:
        g.edge(tail, head, **attrs)
    return g.source


def _titles(kernel, stage, number, previous, file, items) -> tuple[str, ...]:
    lines = [
        f"{kernel.name} · {number:02d} {stage}",
        f"{file} · {kernel.target.name} · pipeline so far: "
        + " → ".join(("lower", *kernel.passes)),
    ]
    directive, summary = pass_info(stage)
    asked = f"directive `{directive}`" if directive else "always runs"
    lines.append(f"{stage} ({asked}): {summary}")
    if previous is None:
        lines.append("the first stage: nothing is marked as changed")
        return tuple(lines)
    n = counts(items)
    changes = [f"{v} statement(s) {k}" for k, v in n.items() if v]
    changes += _declaration_changes(previous, kernel)
    lines.append("this pass: " + ("; ".join(changes) if changes else "no change to the IR"))
    return tuple(lines)


def pass_info(stage: str) -> tuple[str | None, str]:
    """(the directive that switches the stage's pass on, None for lowering; what it does)."""
    for p in PASSES:
        if p.name == stage:
            return p.directive, p.summary
    return None, LOWER_SUMMARY


def _declaration_changes(previous: KernelIR, kernel: KernelIR) -> list[str]:
    out = []
    if previous.warps != kernel.warps:
        out.append("warps changed")
    if previous.raster != kernel.raster:
        out.append("block order changed")
    for what, old, new in (
        ("buffer", previous.buffers, kernel.buffers),
        ("fragment", previous.fragments, kernel.fragments),
    ):
        for status, x, _ in diff_named(old, new):
            if status != "same":
                out.append(f"{what} {x.name} {status}")
    return out


# ---------------------------------------------------------------- the body


class _Anchor:
    """Where arrows enter and leave one drawn statement: a node, or the first and last nodes
    of a cluster (of each branch of a condition: both are entered and both are left)."""

    def __init__(self, firsts: tuple[str, ...], lasts: tuple[str, ...], cluster: str | None):
        self.firsts, self.lasts, self.cluster = firsts, lasts, cluster


class _Body:
    def __init__(self, decisions: tuple, colours: dict[str, str], path: InstructionPath = WMMA):
        self.path = path
        self.colours = colours
        self.edges: list[tuple[str, str, dict]] = []
        self.pending_decisions = list(decisions)

    def items(self, g, items: tuple[Item, ...], prefix: str) -> _Anchor | None:
        """Draw `items` into `g` in order, chained by arrows; the anchor of the whole run."""
        anchors = []
        for i, item in enumerate(items):
            anchors.append(self.item(g, item, f"{prefix}_{i}"))
        for a, b in zip(anchors, anchors[1:]):
            attrs = {}
            if a.cluster:
                attrs["ltail"] = a.cluster
            if b.cluster:
                attrs["lhead"] = b.cluster
            for tail in a.lasts:
                for head in b.firsts:
                    self.edges.append((tail, head, attrs))
        if not anchors:
            return None
        return _Anchor(anchors[0].firsts, anchors[-1].lasts, None)

    def item(self, g, item: Item, name: str) -> _Anchor:
        if item.status != "removed" and bodies(item.stmt):
            return self.container(g, item, name)
        decision = self.decision(item)
        tip = text(item.stmt) + (f"\n{decision.why}" if decision else "")
        g.node(name, self.label(item, decision), tooltip=tip, **self.node_style(item))
        return _Anchor((name,), (name,), None)

    def container(self, g, item: Item, name: str) -> _Anchor:
        cluster = f"cluster_{name}"
        with g.subgraph(name=cluster) as c:
            c.attr(label=self.container_label(item), **_cluster_style(item))
            anchors: list[_Anchor] = []
            # Branches are declared last first: dot lays sibling clusters out right to left
            # here, and then-left-of-else is how code reads.
            for k, (body_name, body_items) in reversed(list(enumerate(item.bodies))):
                sub = f"{name}_{k}"
                if len(item.bodies) > 1:  # name the branches apart: then / else
                    with c.subgraph(name=f"cluster_{sub}") as bc:
                        bc.attr(label=f"<<I>{esc(body_name)}</I>>", style="rounded,dashed")
                        bc.attr(color=style.NEUTRAL, fillcolor=style.BRANCH_FILL)
                        anchors.insert(0, self.run(bc, body_items, sub))
                else:
                    anchors.insert(0, self.run(c, body_items, sub))
        firsts = tuple(n for a in anchors for n in a.firsts)
        lasts = tuple(n for a in anchors for n in a.lasts)
        return _Anchor(firsts, lasts, cluster)

    def run(self, g, items: tuple[Item, ...], prefix: str) -> _Anchor:
        anchor = self.items(g, items, prefix)
        if anchor is None:
            g.node(f"{prefix}_empty", "(empty)", shape="plaintext", style="")
            return _Anchor((f"{prefix}_empty",), (f"{prefix}_empty",), None)
        return anchor

    def container_label(self, item: Item) -> str:
        stmt = item.stmt
        if isinstance(stmt, For):
            unroll = " (unrolled)" if stmt.unroll else ""
            step = f" step {stmt.step}" if stmt.step != 1 else ""
            head = f"for {stmt.var} in [{to_c(stmt.start)}, {to_c(stmt.stop)}){step}{unroll}"
            note = stmt.comment
        elif isinstance(stmt, If):
            head, note = f"if {to_c(stmt.lhs)} {stmt.op} {to_c(stmt.rhs)}", ""
        elif isinstance(stmt, Roles):
            head = (
                f"roles: producer ({stmt.producer.registers} registers) | consumers "
                f"({stmt.consumer.registers} registers)"
            )
            note = "warp specialization: one thread of the producer warpgroup issues the TMA copies"
        else:
            head, note = generic_text(stmt), "an IR node the pictures do not know"
        parts = [f"<B>{esc(line)}</B>" for line in wrap(head, 80)]
        if note:
            parts.append(font(esc(note), 9, "#505050"))
        if item.status == "changed" and item.was is not None:
            parts += [font(esc(line), 9, style.CHANGED) for line in wrap("was: " + text(item.was))]
        if item.status == "added":
            parts.append(font("new in this pass", 9, style.ADDED))
        return style.lines_label(parts)

    def label(self, item: Item, decision) -> str:
        head, lines, touches = describe(item.stmt, self.path)
        rows = [f"<B>{esc(head)}</B>"] + [font(esc(line), 10, face=style.MONO) for line in lines]
        if item.status == "removed":
            rows = [f"<S>{r}</S>" for r in rows]
        notes: list[str] = []
        if item.status == "changed" and item.was is not None:
            notes += [font(esc(x), 9, style.CHANGED) for x in wrap("was: " + was_text(item))]
        if decision is not None and decision.kept:
            # The hazard that keeps it, without the two statements (they are in the tooltip).
            need = decision.why.split(" — ")[0]
            notes += [font(esc(x), 9, "#404040") for x in wrap("kept: " + need, 80)]
        elif decision is not None:
            notes += [font(esc(x), 9, style.REMOVED) for x in wrap("removed: " + decision.why, 80)]
        elif item.status == "removed":
            notes.append(font("removed by this pass", 9, style.REMOVED))
        stripe = (self.colours.get(touches) or style.name_colour(touches)) if touches else None
        return style.lines_label(rows + notes, stripe)

    def decision(self, item: Item):
        """sync-elimination's decision about this barrier, if it made one."""
        if not isinstance(item.stmt, HANDOFFS):  # Barrier, and the mbarrier handoffs
            return None
        kept = item.status != "removed"
        for test in (lambda d: d.barrier is item.stmt, lambda d: d.barrier == item.stmt):
            for d in self.pending_decisions:
                if d.kept == kept and test(d):
                    self.pending_decisions.remove(d)
                    return d
        return None

    @staticmethod
    def node_style(item: Item) -> dict[str, str]:
        if item.status == "removed":
            return {
                "style": "rounded,filled,dashed",
                "fillcolor": "#ffffff",
                "color": style.REMOVED,
                "penwidth": "2",
            }
        return {
            "fillcolor": style.ROLE_FILL[role(item.stmt)],
            "color": BORDER.get(item.status, style.NEUTRAL),
            "penwidth": "3" if item.status in BORDER else "1",
        }


def _cluster_style(item: Item) -> dict[str, str]:
    return {
        "style": "rounded,filled",
        "fillcolor": style.LOOP_FILL if isinstance(item.stmt, For) else style.BRANCH_FILL,
        "color": BORDER.get(item.status, "#b0b0b0"),
        "penwidth": "3" if item.status in BORDER else "1",
        "labeljust": "l",
        "fontsize": "11",
    }


# ---------------------------------------------------------------- statements


def role(stmt) -> str:
    match stmt:
        case Copy():
            return "copy"
        case Fill() | LoadFrag() | StoreFrag() | EpilogueFrag():
            return "fragment"
        case Mma():
            return "mma"
        case Barrier():
            return "barrier"
        case AsyncCommit() | AsyncWait() | MmaFence() | MmaCommit() | MmaWait():
            return "async"
        case TmaLoad() | TmaStore():
            return "copy"
        case ExpectTx() | Arrive() | Wait() | TmaStoreWait() | ProxyFence():
            return "barrier"
    return "other"


def describe(stmt, path: InstructionPath = WMMA) -> tuple[str, list[str], str | None]:
    """(heading, detail lines, the buffer or fragment it touches) of one statement."""
    match stmt:
        case Copy():
            shared = next((t for t in tiles_of(stmt) if isinstance(t, SharedTile)), stmt.src)
            touches = _touched(shared)
            # Edge-tile copies skip (or zero-fill) what lies outside the operand.
            guard = ", guarded at the operand's edge" if getattr(stmt, "guard", False) else ""
            return (
                f"copy.{stmt.by}.{stmt.mode}",
                [
                    tile_text(stmt.dst),
                    f"← {tile_text(stmt.src)}",
                    f"vectors of {stmt.vector}{guard}",
                ],
                touches,
            )
        case Fill():
            return "fill_fragment", [f"{stmt.frag} = {stmt.value:g}"], stmt.frag.name
        case LoadFrag():
            return path.load_label, [f"{stmt.frag} ← {tile_text(stmt.src)}"], _touched(stmt.src)
        case Mma():
            return path.mma_label, [f"{stmt.acc} += {stmt.a} * {stmt.b}"], stmt.acc.name
        case StoreFrag():
            return "store_matrix_sync", [f"{tile_text(stmt.dst)} ← {stmt.frag}"], _touched(stmt.dst)
        case Barrier():
            call = "__syncthreads()" if stmt.scope == "block" else "__syncwarp()"
            return call, wrap(stmt.reason, 64), None
        case AsyncCommit():
            return "async.commit", ["close this thread's group of async copies"], None
        case AsyncWait():
            return (
                f"async.wait pending={stmt.pending}",
                [f"until at most {stmt.pending} group(s) are in flight"],
                None,
            )
        case MmaFence():
            return (
                "wgmma.fence",
                ["order the accumulators' earlier accesses before the wgmmas"],
                None,
            )
        case MmaCommit():
            return "wgmma.commit_group", ["close this step's group of wgmmas"], None
        case MmaWait():
            return (
                f"wgmma.wait_group {stmt.pending}",
                [f"until at most {stmt.pending} wgmma group(s) are in flight"],
                None,
            )
    return _describe_pipeline(stmt) or (type(stmt).__name__, wrap(generic_text(stmt), 72), None)


def _describe_pipeline(stmt) -> tuple[str, list[str], str | None] | None:
    """`describe` of the warp-specialized pipeline's statements (TMA, mbarriers, lets), or
    None for any other."""
    match stmt:
        case TmaLoad():
            return (
                "cp.async.bulk.tensor (TMA)",
                [tile_text(stmt.dst), f"← {tile_text(stmt.src)}", f"bytes counted on {stmt.bar}"],
                _touched(stmt.dst),
            )
        case TmaStore():
            return (
                "cp.async.bulk.tensor store (TMA)",
                [tile_text(stmt.dst), f"← {tile_text(stmt.src)}", "one bulk group"],
                _touched(stmt.src),
            )
        case TmaStoreWait():
            return "cp.async.bulk.wait_group.read 0", [stmt.reason], None
        case ProxyFence():
            return "fence.proxy.async", [stmt.reason], None
        case ExpectTx():
            return f"mbarrier.expect_tx {stmt.bar}", [f"{stmt.bytes} bytes to come by TMA"], None
        case Arrive():
            return f"mbarrier.arrive {stmt.bar}", wrap(stmt.reason, 64), None
        case Wait():
            return (
                f"mbarrier.wait {stmt.bar} parity {to_c(stmt.parity)}",
                wrap(stmt.reason, 64),
                None,
            )
        case Let():
            return f"let {stmt.var}", [to_c(stmt.value)], None
        case EpilogueFrag():
            return (
                "epilogue on the accumulators",
                [f"{stmt.frag}: {stmt.epilogue.describe()}", f"columns of {tile_text(stmt.tile)}"],
                stmt.frag.name,
            )
    return None


def was_text(item: Item) -> str:
    """The replaced statement, in the words of its box (its heading, if that changed too)."""
    head, lines, _ = describe(item.was)
    same_head = head == describe(item.stmt)[0]
    return " ".join(lines if same_head else [head, *lines])


def _touched(tile) -> str:
    return tile.buffer if isinstance(tile, SharedTile) else tile.operand
