"""The tile decomposition of the final kernel, in three tables.

    dot_source = tiles_graph(kernel, "examples/hgemm.tile")

1. The grid: a small sample grid of block tiles, each cell holding the id of the block
   that computes it, i.e. the order the swizzle makes blocks visit tiles (`grid.py`'s
   expressions, evaluated), coloured by group (grouped) or panel (zigzag).
2. One block: its warps and the accumulator fragments each computes, with the rows of
   A and the columns of B each warp row and column reads.
3. The K pipeline: which shared-memory slot holds which K step at each step of the
   loops, traced from the IR itself (copies into a slot, fragment loads out of it).
"""

from __future__ import annotations

from typing import Any, TypeGuard

import graphviz
import numpy as np

from ..ir.expr import evaluate
from ..ir.grid import cluster_place, tile_steps
from ..ir.nodes import (
    AsyncWait,
    Barrier,
    Copy,
    For,
    GlobalTile,
    If,
    KernelIR,
    Let,
    LoadFrag,
    SharedTile,
    Ticket,
    Tile,
    TmaLoad,
    with_launch_scalars,
)
from ..models.banks import tile_buffers
from . import style
from .diff import bodies
from .style import esc, font

#: The attributes of every grid of cells drawn here.
CELL = 'CELLPADDING="4" CELLSPACING="0" CELLBORDER="1" BORDER="0"'


def tiles_graph(kernel: KernelIR, file: str) -> str:
    g = graphviz.Digraph(f"{kernel.name}-tiles")
    style.graph_defaults(g)
    g.attr("graph", newrank="true", ranksep="0.4")
    s = kernel.schedule
    g.attr(
        "graph",
        label=style.title_label(
            f"{kernel.name} · tile decomposition",
            f"{file} · {kernel.target.name} · block {'x'.join(map(str, s.block))}, "
            f"mma {'x'.join(map(str, s.mma))}, {kernel.warps[0]} x {kernel.warps[1]} warps"
            + (f" x {kernel.k_teams} K teams" if kernel.k_teams > 1 else "")
            + f", stages {s.stages}, swizzle {_raster_text(kernel)}",
        ),
    )
    g.attr("node", shape="plain")
    parts = (
        ("grid", "1 · the grid: which block computes which tile", grid_table(kernel)),
        ("block", "2 · one block: its warps and the fragments each computes", block_table(kernel)),
        ("pipeline", "3 · the K pipeline: what each shared-memory slot holds", pipeline(kernel)),
    )
    for name, title, label in parts:
        with g.subgraph(name=f"cluster_{name}") as c:
            c.attr(label=f"<<B>{esc(title)}</B>>", style="rounded", color="#b0b0b0", fontsize="14")
            c.node(name, label)
    g.edge("grid", "block", style="invis")
    g.edge("block", "pipeline", style="invis")
    return g.source


def _raster_text(kernel: KernelIR) -> str:
    kind, param = kernel.raster
    return "none (row by row)" if kind == "none" else f"{kind} {param}"


# ---------------------------------------------------------------- 1. the grid


def sample_grid(kernel: KernelIR) -> tuple[int, int]:
    """Block tiles along M and N of a grid small enough to read and big enough to show the
    order: one full group and a shorter last one (grouped), two panels and a narrower
    third (zigzag)."""
    kind, param = kernel.raster
    if kind in ("grouped", "snake"):
        return min(param + max(1, param // 2), 24), 4
    if kind == "zigzag":
        return 4, min(2 * param + 1, 24)
    return 4, 6


def visiting_order(kernel: KernelIR, tiles_m: int, tiles_n: int) -> dict[str, np.ndarray]:
    """`grid.py`'s steps evaluated for every block id (`block`, blockIdx.x): bm, bn and the
    intermediate names. In clusters `pid` is the cluster's, and a cluster tile may reach
    past the grid (its blocks there store nothing)."""
    size, (cm, cn) = kernel.cluster_size, kernel.cluster
    ctiles_m, ctiles_n = -(-tiles_m // cm), -(-tiles_n // cn)
    blocks = np.arange(ctiles_m * ctiles_n * size)
    env: dict[str, Any] = {
        "block": blocks,
        "pid": blocks // size,
        "rank": blocks % size,
        "tiles_m": tiles_m,
        "tiles_n": tiles_n,
        "ctiles_m": ctiles_m,
        "ctiles_n": ctiles_n,
    }
    for name, expr in (cluster_place(kernel) | tile_steps(kernel)).items():
        env[name] = np.broadcast_to(evaluate(expr, env), blocks.shape)
    return env


def grid_table(kernel: KernelIR) -> str:
    bm_size, bn_size, _ = kernel.schedule.block
    tm, tn = sample_grid(kernel)
    env = visiting_order(kernel, tm, tn)
    kind, param = kernel.raster
    group = {"grouped": "group", "snake": "group", "zigzag": "panel"}.get(kind)
    inside = (env["bm"] < tm) & (env["bn"] < tn)
    at = env["bm"][inside], env["bn"][inside]
    pid_at = np.zeros((tm, tn), dtype=int)
    pid_at[at] = env["block"][inside]
    colour_of = env[group] if group else env["bm"]
    colour_at = np.zeros((tm, tn), dtype=int)
    colour_at[at] = colour_of[inside]
    header = "".join(f"<TD><I>bn={j}</I></TD>" for j in range(tn))
    rows = [f'<TR><TD BORDER="0"></TD>{header}</TR>']
    for i in range(tm):
        cells = "".join(
            f'<TD BGCOLOR="{style.cycle_colour(int(colour_at[i, j]))}" WIDTH="34">'
            f"{_pid_text(int(pid_at[i, j]))}</TD>"
            for j in range(tn)
        )
        rows.append(f"<TR><TD><I>bm={i}</I></TD>{cells}</TR>")
    explain = {
        "grouped": f"grouped {param}: blocks walk {param} block-rows at a time, down each "
        "column of the group, then the next column; the last group takes the rows left "
        "(colour: group)",
        "snake": f"snake {param}: blocks walk {param} block-rows at a time, down each column "
        "of the group, even groups left to right and odd groups right to left (colour: group)",
        "zigzag": f"zigzag {param}: the grid is cut into panels of {param} block-columns; "
        "blocks walk a panel row by row, odd panels from the bottom up (colour: panel)",
    }.get(kind, "no swizzle: blocks walk the grid row by row (colour: block-row)")
    notes = [
        f"a sample grid of {tm} x {tn} block tiles (M = {tm * bm_size}, N = {tn * bn_size}); "
        "each cell: the id of the block that computes it, i.e. the visiting order",
        explain,
    ]
    if kernel.cluster_size > 1:
        cm, cn = kernel.cluster
        notes.append(
            f"cluster {cm} x {cn}: the swizzle orders cluster tiles of {cm} x {cn} block tiles "
            f"(blocks {kernel.cluster_size} * pid + rank); a cluster's blocks share the tiles "
            "of B along M and of A along N"
        )
    return _table(rows, notes)


def _pid_text(pid: int) -> str:
    return f"<B>{pid}</B>" if pid == 0 else str(pid)


# ---------------------------------------------------------------- 2. one block


def block_table(kernel: KernelIR) -> str:
    wm, wn = kernel.warps
    m, n, _ = kernel.schedule.mma
    acc = next((f for f in kernel.fragments if f.role == "accumulator"), None)
    cm, cn = acc.count if acc else (1, 1)
    acc_name = acc.name if acc else "acc"
    header = "".join(
        f"<TD><I>warp column wn={j}</I><BR/>"
        + font(f"{kernel.gemm.b.name} columns {j * cn * n}–{(j + 1) * cn * n - 1}", 9)
        + "</TD>"
        for j in range(wn)
    )
    bm, bn, _ = kernel.schedule.block
    rows = [f"<TR><TD><B>{bm} x {bn}</B></TD>{header}</TR>"]
    for i in range(wm):
        cells = []
        for j in range(wn):
            warp = i * wn + j
            inner = []
            for a in range(cm):
                frags = "".join(
                    f"<TD>{esc(acc_name)}[{a}][{b}]<BR/>"
                    + font(f"{(i * cm + a) * m}, {(j * cn + b) * n}", 8, "#505050")
                    + "</TD>"
                    for b in range(cn)
                )
                inner.append(f"<TR>{frags}</TR>")
            frags = f'<TABLE {CELL} BGCOLOR="#ffffff">{"".join(inner)}</TABLE>'
            cells.append(
                f'<TD BGCOLOR="{style.cycle_colour(warp)}">'
                '<TABLE BORDER="0" CELLSPACING="2" CELLPADDING="0">'
                f"<TR><TD><B>warp {warp}</B> (wm={i}, wn={j})</TD></TR>"
                f"<TR><TD>{frags}</TD></TR></TABLE></TD>"
            )
        left = f"<I>warp row wm={i}</I><BR/>" + font(
            f"{kernel.gemm.a.name} rows {i * cm * m}–{(i + 1) * cm * m - 1}", 9
        )
        rows.append(f"<TR><TD>{left}</TD>{''.join(cells)}</TR>")
    notes = [
        f"{wm} x {wn} warps of {kernel.warp_width} lanes; each computes {cm} x {cn} "
        f"fragments of {m} x {n} (small numbers: the fragment's first row, column in the block)",
    ]
    runs = kernel.schedule.k_runs
    if kernel.k_teams > 1 and runs == 1:
        notes.append(
            f"warps_k {kernel.k_teams}: {kernel.k_teams} teams of these warps, team t on the K "
            f"steps t, t + {kernel.k_teams}, ...; their sums meet in Ks and team 0 stores C"
        )
    elif kernel.k_teams > 1:
        notes.append(
            f"warps_k {kernel.k_teams} runs {runs}: {kernel.k_teams} teams of these warps in "
            f"{runs} runs of the K steps, {kernel.k_teams // runs} teams on each run's steps "
            "in turn; their sums meet in Ks and team 0 stores C"
        )
    return _table(rows, notes)


# ---------------------------------------------------------------- 3. the K pipeline


def pipeline(kernel: KernelIR) -> str:
    buffers = tile_buffers(kernel)
    if not buffers:
        return _table(
            [],
            [
                f"stages {kernel.schedule.stages}: no shared memory; every warp loads its "
                "fragments straight from global memory at every K step"
            ],
        )
    slots = kernel.buffer(buffers[0]).slots
    steps = max(kernel.schedule.stages, 1) + 2
    columns = trace_pipeline(kernel, buffers, steps)
    header = "".join(f"<TD><B>{esc(c.name)}</B></TD>" for c in columns)
    rows = [f"<TR><TD></TD>{header}</TR>"]
    sync = "".join(f"<TD>{font(esc(c.sync_text()), 9)}</TD>" for c in columns)
    rows.append(f"<TR><TD><I>barriers, waits</I></TD>{sync}</TR>")
    names = ", ".join(f"{b}[{{s}}]" for b in buffers)
    for slot in range(slots):
        cells = "".join(c.cell(slot) for c in columns)
        rows.append(f"<TR><TD><B>slot {slot}</B><BR/>{esc(names.format(s=slot))}</TD>{cells}</TR>")
    notes = [
        f"a K loop of {steps} steps, traced through the IR: 'copy k' = the copies of K step k "
        "into the slot are issued; 'holds k' = in flight or landed, not read yet; "
        "'mma k' = the warps' fragment loads read step k from the slot",
    ]
    return _table(rows, notes)


class Column:
    """What one iteration of a top-level loop does to the slots."""

    def __init__(self, name: str):
        self.name = name
        self.copies: dict[int, set[int]] = {}  # slot -> K steps copied in
        self.reads: dict[int, set[int]] = {}  # slot -> K steps read
        self.holds: dict[int, int] = {}  # slot -> K step held, unread, at the start
        self.barriers = 0
        self.waits: list[int] = []

    def sync_text(self) -> str:
        parts = [f"{self.barriers} barrier(s)"] if self.barriers else []
        parts += [f"wait ≤ {w} in flight" for w in self.waits]
        return ", ".join(parts) or "–"

    def cell(self, slot: int) -> str:
        lines, fill = [], "#ffffff"
        if slot in self.holds and slot not in self.reads:
            lines.append(f"holds k={self.holds[slot]}")
            fill = "#eeeeee"
        for k in sorted(self.copies.get(slot, ())):
            lines.append(f"copy k={k}")
            fill = style.ROLE_FILL["copy"]
        for k in sorted(self.reads.get(slot, ())):
            lines.append(f"mma k={k}")
            fill = style.ROLE_FILL["mma"]
        return f'<TD BGCOLOR="{fill}">{"<BR/>".join(lines) or " "}</TD>'


def trace_pipeline(kernel: KernelIR, buffers: list[str], steps: int) -> list[Column]:
    """Run the kernel's control flow for one block and a K loop of `steps` steps."""
    bm, bn, bk = kernel.schedule.block
    env = {**kernel.gemm.size_env(bm, bn, steps * bk), "bm": 0, "bn": 0, **kernel.warp_coords()}
    # one block of one tile (a persistent block's loop then runs once, by team 0 if pingpong)
    env.update({"tiles_m": 1, "tiles_n": 1, "pid": 0, "blocks": 1, "bz": 0})
    env.update({"ctiles_m": 1, "ctiles_n": 1, "rank": 0, "crow": 0, "ccol": 0})  # clusters
    if kernel.teams > 1:
        env["team"] = 0
    with_launch_scalars(kernel, env)
    slots = _Slots()
    columns: list[Column] = []
    loose = Column("outside loops")
    for stmt in kernel.body:
        if isinstance(stmt, For):
            for v in _range(stmt, env):
                env[stmt.var] = v
                column = Column(f"{stmt.var}={v}")
                column.holds = {slot: slots.held[slot] for slot in sorted(slots.unread)}
                _run(stmt.body, env, column, buffers, bk, slots)
                if column.copies or column.reads:
                    columns.append(column)
            env.pop(stmt.var, None)
        else:
            _run((stmt,), env, loose, buffers, bk, slots)
    return columns + ([loose] if loose.copies or loose.reads else [])


class _Slots:
    def __init__(self) -> None:
        self.held: dict[int, int] = {}  # slot -> the K step last copied into it
        self.unread: set[int] = set()  # slots copied into and not read since


def _range(loop: For, env: dict) -> range:
    return range(int(evaluate(loop.start, env)), int(evaluate(loop.stop, env)), loop.step)


def _run(body, env: dict, column: Column, buffers: list[str], bk: int, slots: _Slots) -> None:
    for s in body:
        if isinstance(s, For):
            for v in _range(s, env):
                env[s.var] = v
                _run(s.body, env, column, buffers, bk, slots)
            env.pop(s.var, None)
        elif isinstance(s, If):
            lhs, rhs = evaluate(s.lhs, env), evaluate(s.rhs, env)
            taken = np.all(lhs < rhs) if s.op == "<" else np.all(lhs == rhs)
            _run(s.then if taken else s.orelse, env, column, buffers, bk, slots)
        elif isinstance(s, Let):
            env[s.var] = evaluate(s.value, env)
        elif isinstance(s, Ticket):  # split_k: the picture's slice draws the last ticket
            env[s.var] = s.slices - 1
        elif isinstance(s, TmaLoad) and _in(s.dst, buffers):
            _copied(s.dst, s.src, env, column, bk, slots)
        elif isinstance(s, Barrier):
            column.barriers += 1
        elif isinstance(s, AsyncWait):
            column.waits.append(s.pending)
        elif isinstance(s, Copy) and _in(s.dst, buffers) and isinstance(s.src, GlobalTile):
            _copied(s.dst, s.src, env, column, bk, slots)
        elif isinstance(s, LoadFrag) and _in(s.src, buffers):
            for slot in _slot_values(s.src, env):
                if slot in slots.held:
                    column.reads.setdefault(slot, set()).add(slots.held[slot])
                    slots.unread.discard(slot)
        else:
            for _, inner in bodies(s):  # an IR node this module does not know: look inside
                _run(inner, env, column, buffers, bk, slots)


def _copied(dst: SharedTile, src: GlobalTile, env: dict, column, bk: int, slots) -> None:
    """A copy of K step k into its slot(s): the origin is (0, k * BK) or (k * BK, 0) in
    block (0, 0)."""
    k = max(int(np.max(evaluate(e, env))) for e in src.origin) // bk
    for slot in _slot_values(dst, env):
        column.copies.setdefault(slot, set()).add(k)
        slots.held[slot] = k
        slots.unread.add(slot)


def _in(tile: Tile, buffers: list[str]) -> TypeGuard[SharedTile]:
    return isinstance(tile, SharedTile) and tile.buffer in buffers


def _slot_values(tile: SharedTile, env: dict) -> list[int]:
    return sorted({int(v) for v in np.atleast_1d(evaluate(tile.slot, env))})


# ---------------------------------------------------------------- layout


def _table(rows: list[str], notes: list[str]) -> str:
    """The grid of `rows` with `notes` under it, outside the grid so that they do not
    stretch its columns."""
    grid = f"<TR><TD><TABLE {CELL}>{''.join(rows)}</TABLE></TD></TR>" if rows else ""
    note_rows = "".join(
        f'<TR><TD ALIGN="LEFT">{font(esc(line), 10, "#404040")}</TD></TR>'
        for note in notes
        for line in style.wrap(note, 100)
    )
    return f'<<TABLE BORDER="0" CELLSPACING="0" CELLPADDING="2">{grid}{note_rows}</TABLE>>'
