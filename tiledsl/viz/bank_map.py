"""The shared-memory bank map of one fragment load from each A and B tile.

    dot_source = banks_graph(kernel, "examples/hgemm.tile")

For the first fragment load from each tile buffer, at the natural pitch (before
padding) and at the kernel's pitch: one cell per 4-byte word of the fragment, holding
its bank (32 banks of 4 bytes) and coloured by its 16-byte bank group. The model is
`tiledsl.models.banks`: a fragment load is served in phases of 8 lines x 16 bytes, and lines
of one phase whose 16 bytes fall in the same group conflict; such cells are outlined
in red, and each phase says its ways (1 = conflict-free). A table of every modelled
access, before and after padding, follows (the numbers `tiledsl check` prints).
"""

from __future__ import annotations

from collections import Counter

import graphviz

from ..ir.nodes import DTYPE_BYTES, KernelIR, LoadFrag, SharedBuffer, walk
from ..ir.printer import tile_text
from ..models.banks import bank_rows, tile_buffers
from . import style
from .style import esc, font

BANKS, WORD, GROUP, PHASE_LINES = 32, 4, 16, 8
GROUPS = BANKS * WORD // GROUP  # 16-byte bank groups
CELL = 'CELLPADDING="3" CELLSPACING="0" CELLBORDER="1" BORDER="0"'
GROUP_FILL = (
    "#fbb4ae",
    "#b3cde3",
    "#ccebc5",
    "#decbe4",
    "#fed9a6",
    "#ffffcc",
    "#e5d8bd",
    "#fddaec",
)


def banks_graph(kernel: KernelIR, file: str) -> str:
    g = graphviz.Digraph(f"{kernel.name}-banks")
    style.graph_defaults(g)
    g.attr("graph", newrank="true", ranksep="0.4", nodesep="0.5")
    g.attr(
        "graph",
        label=style.title_label(
            f"{kernel.name} · shared-memory banks of one fragment load",
            f"{file} · {kernel.target.name} · 32 banks of 4 bytes; a fragment load is served "
            "in phases of 8 lines x 16 bytes; lines of a phase in one 16-byte bank group "
            "conflict (the bank model `tiledsl check` prints)",
        ),
    )
    g.attr("node", shape="plain")
    by_lanes = kernel.schedule.path.operands != "descriptor"
    loads = fragment_loads(kernel) if by_lanes else []
    if not loads:
        why = (
            "stages 0: fragments load straight from global memory"
            if kernel.schedule.stages == 0
            else f"{kernel.schedule.path.name}: the tensor cores read A and B through "
            "descriptors, in the hardware's 128-byte swizzle, not lanes"
            if not by_lanes
            else "no fragment load reads an f16 A or B tile"
        )
        g.node("none", _note(f"no shared-memory tile of A or B to map ({why})"))
        return g.source
    previous = None
    for name, load in loads:
        buf = kernel.buffer(name)
        with g.subgraph(name=f"cluster_{name}") as c:
            c.attr(
                label=f"<<B>{esc(name)}: load_matrix_sync {esc(str(load.frag))} ← "
                f"{esc(tile_text(load.src))}</B>>",
                style="rounded",
                color="#b0b0b0",
                fontsize="13",
            )
            with c.subgraph() as row:
                row.attr(rank="same")
                if buf.pitch == buf.line_length:  # not padded: one table says it all
                    row.node(f"{name}_before", bank_table(buf, load, buf.pitch, "same"))
                else:
                    for when, pitch in (("before", buf.line_length), ("after", buf.pitch)):
                        row.node(f"{name}_{when}", bank_table(buf, load, pitch, when))
                    c.edge(f"{name}_before", f"{name}_after", style="invis")
        if previous:
            g.edge(previous, f"{name}_before", style="invis")
        previous = f"{name}_before"
    g.node("summary", summary_table(kernel))
    g.node("legend", _legend())
    with g.subgraph() as row:
        row.attr(rank="same")
        row.node("summary")
        row.node("legend")
    g.edge(previous, "summary", style="invis")
    return g.source


def fragment_loads(kernel: KernelIR) -> list[tuple[str, LoadFrag]]:
    """(buffer, its first fragment load) for each A/B tile the bank model covers."""
    out = []
    for name in tile_buffers(kernel):
        if kernel.buffer(name).dtype == "f32":
            continue  # the model covers f16 fragment loads only
        load = next(
            (
                s
                for s in walk(kernel.body)
                if isinstance(s, LoadFrag) and getattr(s.src, "buffer", None) == name
            ),
            None,
        )
        if load is not None:
            out.append((name, load))
    return out


def storage_shape(buf: SharedBuffer, rows: int, cols: int) -> tuple[int, int]:
    """(elements of one contiguous line, lines) of a rows x cols tile, as `banks` counts them."""
    return (cols, rows) if buf.layout == "row" else (rows, cols)


def phases(buf: SharedBuffer, load: LoadFrag, pitch: int):
    """For each phase (first line, first byte): its ways and the lines in conflict."""
    size = DTYPE_BYTES[buf.dtype]
    length, lines = storage_shape(buf, load.src.rows, load.src.cols)
    out = {}
    for r0 in range(0, lines, PHASE_LINES):
        for c0 in range(0, length * size, GROUP):
            starts = {
                r: r * pitch * size + _stored_byte(buf, r, c0)
                for r in range(r0, min(r0 + PHASE_LINES, lines))
            }
            groups = Counter(a // GROUP % GROUPS for a in set(starts.values()))
            clash = {r for r, a in starts.items() if groups[a // GROUP % GROUPS] > 1}
            out[(r0, c0)] = (max(groups.values()), clash)
    return out


def _stored_byte(buf: SharedBuffer, line: int, byte: int) -> int:
    """Where byte `byte` of `line` is stored within its line: itself, or under `pad xor`
    its 16-byte chunk's swizzled place (what `banks` models and the kernel does)."""
    size = DTYPE_BYTES[buf.dtype]
    return buf.swizzled(line, byte // size) * size + byte % size


def bank_table(buf: SharedBuffer, load: LoadFrag, pitch: int, when: str) -> str:
    size = DTYPE_BYTES[buf.dtype]
    length, lines = storage_shape(buf, load.src.rows, load.src.cols)
    words = length * size // WORD
    chunk = GROUP // WORD  # words of one phase's 16 bytes
    by_phase = phases(buf, load, pitch)
    worst = max(w for w, _ in by_phase.values())
    line_word = "row" if buf.layout == "row" else "column"
    padded = {
        "before": "natural pitch, before padding",
        "after": "the kernel's pitch",
        "same": "the natural pitch, 16-byte chunks XOR-swizzled (pad xor)"
        if buf.xor
        else "the natural pitch: this kernel does not pad",
    }[when]
    verdict = "conflict-free" if worst == 1 else f"{worst}-way conflicts"
    colour = style.ADDED if worst == 1 else style.REMOVED
    head = f"<B>{esc(buf.name)} pitch {pitch}</B> ({padded}): " + font(
        f"<B>{verdict}</B>", colour=colour
    )
    rows = [f'<TR><TD COLSPAN="{words + 1}" BORDER="0">{head}</TD></TR>']
    per = WORD // size if size <= WORD else 1
    header = "".join(
        f"<TD>{font(f'{w * per}–{w * per + per - 1}' if per > 1 else str(w), 8)}</TD>"
        for w in range(words)
    )
    corner = font(f"{line_word} / elements", 8)
    rows.append(f"<TR><TD>{corner}</TD>{header}</TR>")
    for r0 in range(0, lines, PHASE_LINES):
        for r in range(r0, min(r0 + PHASE_LINES, lines)):
            cells = []
            for w in range(words):
                address = r * pitch * size + _stored_byte(buf, r, w * WORD)
                bank = address // WORD % BANKS
                fill = GROUP_FILL[address // GROUP % len(GROUP_FILL)]
                clash = r in by_phase[(r0, w // chunk * GROUP)][1]
                text = font(f"<B>{bank}</B>", colour=style.REMOVED) if clash else str(bank)
                border = f' BORDER="2" COLOR="{style.REMOVED}"' if clash else ""
                cells.append(f'<TD BGCOLOR="{fill}"{border}>{text}</TD>')
            rows.append(f"<TR><TD>{line_word} {r}</TD>{''.join(cells)}</TR>")
        ways = []
        for c0 in range(0, words * WORD, GROUP):
            w, _ = by_phase[(r0, c0)]
            mark = font(f"{w}-way", 9, style.REMOVED if w > 1 else style.ADDED)
            ways.append(f'<TD COLSPAN="{chunk}" BORDER="0">{mark}</TD>')
        rows.append(f'<TR><TD BORDER="0">{font("phase", 9)}</TD>{"".join(ways)}</TR>')
    return f"<<TABLE {CELL}>{''.join(rows)}</TABLE>>"


def summary_table(kernel: KernelIR) -> str:
    head = ["access", "buffer", "pitch before → after", "ways before", "ways after", "instr / K"]
    rows = ["<TR>" + "".join(f"<TD><B>{esc(h)}</B></TD>" for h in head) + "</TR>"]
    for r in bank_rows(kernel):
        cells = [
            r.access,
            r.buffer,
            f"{r.pitch_before} → {r.pitch_after}",
            _ways(r.ways_before),
            _ways(r.ways_after),
            str(r.instructions),
        ]
        rows.append(
            "<TR>"
            + "".join(f"<TD>{c if c.startswith('<') else esc(c)}</TD>" for c in cells)
            + "</TR>"
        )
    title = (
        '<TR><TD COLSPAN="6" BORDER="0"><B>every modelled access (as tiledsl check)</B></TD></TR>'
    )
    return f"<<TABLE {CELL}>{title}{''.join(rows)}</TABLE>>"


def _ways(ways: int) -> str:
    return font(f"{ways}", colour=style.ADDED if ways == 1 else style.REMOVED)


def _legend() -> str:
    rows = [
        (GROUP_FILL[i], "#999999", f"banks {4 * i}–{4 * i + 3}: 16-byte bank group {i}")
        for i in range(len(GROUP_FILL))
    ]
    rows.append(("#ffffff", style.REMOVED, "red: a line that conflicts within its phase"))
    rows.append(("#ffffff", "#ffffff", "cell: one 4-byte word; number: its bank"))
    return style.legend_table(rows)


def _note(text: str) -> str:
    return f'<<TABLE BORDER="0"><TR><TD>{esc(text)}</TD></TR></TABLE>>'
