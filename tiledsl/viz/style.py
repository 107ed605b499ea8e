"""Colours, fonts and label helpers shared by every picture.

Colours come from fixed tables: a statement's colour from its role, a buffer's or
a fragment's from its name through `zlib.crc32` (Python's `hash` is salted per
process, which would repaint the pictures on every run). Labels are Graphviz's
HTML-like labels; `esc` makes any IR text safe inside them.
"""

from __future__ import annotations

import html
import textwrap
import zlib

FONT = "Helvetica"
MONO = "Courier"

#: Fill colours of statements, by what they do.
ROLE_FILL = {
    "copy": "#dbe9f6",  # global <-> shared copies
    "fragment": "#e3f1da",  # fill, load and store of WMMA fragments
    "mma": "#fde3c0",  # the tensor-core op
    "barrier": "#f9d6d5",  # __syncthreads / __syncwarp
    "async": "#fff2b3",  # cp.async group commit / wait
    "other": "#ececec",  # an IR node this module does not know (drawn generically)
}
ROLE_LEGEND = {
    "copy": "copy: global ↔ shared memory",
    "fragment": "fragment fill / load / store (each warp)",
    "mma": "mma_sync (each warp)",
    "barrier": "barrier: __syncthreads / __syncwarp",
    "async": "async copy group: commit / wait",
    "other": "other IR node (generic box)",
}
LOOP_FILL = "#f7f7f7"
BRANCH_FILL = "#fcfcff"

#: How a node differs from the previous stage's picture.
ADDED = "#1a9641"
CHANGED = "#e66101"
REMOVED = "#d7191c"
NEUTRAL = "#7f7f7f"
DIFF_LEGEND = {
    "added": (ADDED, "new in this pass"),
    "changed": (CHANGED, "changed by this pass (was: …)"),
    "removed": (REMOVED, "removed by this pass (struck through)"),
}

#: The data of each operand, wherever it lives: A's tile and fragments are blue, B's green,
#: C's (accumulators, staging tile) purple. Keyed by the operand's place in `C = A * B`.
OPERAND_COLOUR = {"a": "#2b7bba", "b": "#2e9e48", "c": "#7b4fa6"}
#: Strong colours for names that hold no operand's data (keyed by crc32 of the name).
STRONG = ("#d95f02", "#1b9e77", "#e7298a", "#66a61e", "#a6761d", "#386cb0", "#bf5b17")

#: Pastel colours for names (buffers, fragments) and for groups of cells (warps, block groups).
PALETTE = (
    "#a6cee3",
    "#b2df8a",
    "#fdbf6f",
    "#cab2d6",
    "#fb9a99",
    "#ffff99",
    "#8dd3c7",
    "#bebada",
    "#fccde5",
    "#d9d9d9",
    "#ccebc5",
    "#ffed6f",
)


def stable_index(name: str, n: int) -> int:
    """An index in [0, n) that depends on `name` only, identically in every process."""
    return zlib.crc32(name.encode()) % n


def name_colour(name: str) -> str:
    """A strong colour for `name`, the same in every picture and run."""
    return STRONG[stable_index(name, len(STRONG))]


def cycle_colour(i: int) -> str:
    """Colour number `i` of the palette, for cells told apart by position (warps, groups)."""
    return PALETTE[i % len(PALETTE)]


def esc(text: str) -> str:
    """Text made safe for an HTML-like label."""
    return html.escape(str(text), quote=True)


def wrap(text: str, width: int = 72) -> list[str]:
    """Lines of at most `width` characters (long IR text and hazard reasons)."""
    return textwrap.wrap(text, width, break_on_hyphens=False) or [""]


def font(text: str, size: int | None = None, colour: str | None = None, face: str | None = None):
    """`text` (already escaped) in a FONT element, when any attribute is given."""
    attrs = []
    if size is not None:
        attrs.append(f'POINT-SIZE="{size}"')
    if colour is not None:
        attrs.append(f'COLOR="{colour}"')
    if face is not None:
        attrs.append(f'FACE="{face}"')
    return f"<FONT {' '.join(attrs)}>{text}</FONT>" if attrs else text


def lines_label(lines: list[str], stripe: str | None = None, align: str = "LEFT") -> str:
    """An HTML-like label of `lines` (already marked up), one table row each.

    Rows rather than <BR/>: Graphviz spaces <BR/> lines by the first font's size, so
    a bold heading over smaller lines would overlap them.
    """
    cells = [f'<TD ALIGN="{align}">{line}</TD>' for line in lines]
    if stripe is not None:
        rows = len(lines)
        cells[0] = (
            f'<TD ROWSPAN="{rows}" BGCOLOR="{stripe}" WIDTH="7"> </TD>'
            f'<TD ROWSPAN="{rows}" WIDTH="3"> </TD>' + cells[0]
        )
    return (
        '<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="1">'
        + "".join(f"<TR>{c}</TR>" for c in cells)
        + "</TABLE>>"
    )


def title_label(title: str, *subtitles: str) -> str:
    """A graph's title: one large line, then smaller lines (each wrapped)."""
    parts = [f"<B>{font(esc(title), 20)}</B>"]
    for s in subtitles:
        parts += [font(esc(line), 12, "#404040") for line in wrap(s, 110)]
    return lines_label(parts)


def legend_table(rows: list[tuple[str, str, str]], heading: str = "legend") -> str:
    """A legend node's label: (fill colour, border colour, text) per row."""
    cells = [f'<TR><TD COLSPAN="2" ALIGN="LEFT"><B>{esc(heading)}</B></TD></TR>']
    for fill, border, text in rows:
        cells.append(
            f'<TR><TD BGCOLOR="{fill}" COLOR="{border}" BORDER="2" WIDTH="22"> </TD>'
            f'<TD ALIGN="LEFT">{esc(text)}</TD></TR>'
        )
    return (
        '<<TABLE BORDER="1" COLOR="#999999" CELLBORDER="0" CELLSPACING="3" CELLPADDING="2">'
        + "".join(cells)
        + "</TABLE>>"
    )


def graph_defaults(g) -> None:
    """The attributes every picture shares: fonts, spacing, white background."""
    g.attr("graph", fontname=FONT, labelloc="t", labeljust="l", bgcolor="white", pad="0.3")
    g.attr("node", fontname=FONT, fontsize="11")
    g.attr("edge", fontname=FONT, fontsize="10", color=NEUTRAL, arrowsize="0.6")
