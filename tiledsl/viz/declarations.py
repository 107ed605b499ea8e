"""The box above each stage's body: the kernel's declarations, marked against the stage
before, and the legend.

    label = declarations(kernel, previous)    # an HTML-like label for a `plain` node

Rows: the kernel and target, the block and fragment shape, the warps, the block order
(the swizzle's raster), the shared memory per block; one row per shared buffer (shape,
slots, pitch, bytes, purpose) and per fragment array. A value the pass changed reads
`old → new` in orange ("pitch 64 → 72"); a new buffer is outlined green, a removed one
struck through. Names are painted in the colour of the operand whose data they hold,
the colour of the stripe on every statement that touches them.
"""

from __future__ import annotations

from ..ir.nodes import KernelIR
from . import style
from .diff import diff_named
from .style import esc, font


def declarations(kernel: KernelIR, previous: KernelIR | None) -> str:
    s, t = kernel.schedule, kernel.target
    prev = previous or kernel
    colours = {**data_colours(prev), **data_colours(kernel)}
    rows = [
        _wide(
            f"<B>kernel {esc(kernel.name)}</B> · {esc(t.name)} · {kernel.warp_width}-thread warps",
            raw=True,
        ),
        _wide(
            f"block {'x'.join(map(str, s.block))} · mma {'x'.join(map(str, s.mma))} · "
            f"stages {s.stages}"
        ),
        _wide_changed(
            "warps",
            f"{prev.warps[0]} x {prev.warps[1]} ({prev.threads} threads)",
            f"{kernel.warps[0]} x {kernel.warps[1]} ({kernel.threads} threads)",
        ),
        _wide_changed("block order", _raster(prev), _raster(kernel)),
        _wide_changed("shared memory per block", f"{prev.smem_bytes} B", f"{kernel.smem_bytes} B"),
        _section("shared buffers" if kernel.buffers or prev.buffers else "no shared buffers"),
    ]
    for status, b, old in diff_named(prev.buffers, kernel.buffers):
        old_cells = _buffer_cells(old) if old else None
        rows.append(_row(status, b.name, colours[b.name], _buffer_cells(b), old_cells))
    rows.append(_section("fragments (each warp)"))
    for status, f, old_f in diff_named(prev.fragments, kernel.fragments):
        old_cells = _frag_cells(old_f) if old_f else None
        rows.append(_row(status, _frag_name(f), colours[f.name], _frag_cells(f), old_cells))
    return (
        '<<TABLE BORDER="1" COLOR="#999999" CELLBORDER="0" CELLSPACING="0" CELLPADDING="3">'
        + "".join(rows)
        + "</TABLE>>"
    )


def data_colours(kernel: KernelIR) -> dict[str, str]:
    """The colour of every operand, buffer and fragment: that of the operand whose data it holds.

    Fragments by role; a buffer named after an operand (`As` holds A's tile) by that operand.
    """
    g = kernel.gemm
    operands = {g.a.name: "a", g.b.name: "b", g.c.name: "c"}
    roles = {"matrix_a": "a", "matrix_b": "b", "accumulator": "c"}
    out: dict[str, str | None] = {name: style.OPERAND_COLOUR[key] for name, key in operands.items()}
    for f in kernel.fragments:
        out[f.name] = style.OPERAND_COLOUR[roles[f.role]] if f.role in roles else None
    for b in kernel.buffers:
        key = operands.get(b.name[:-1]) if b.name.endswith("s") else None
        out[b.name] = style.OPERAND_COLOUR[key] if key else None
    return {name: colour or style.name_colour(name) for name, colour in out.items()}


def _raster(kernel: KernelIR) -> str:
    kind, param = kernel.raster
    return "row by row (no swizzle)" if kind == "none" else f"{kind} {param}"


def _buffer_cells(b) -> list[str]:
    alias = f", in {b.alias}'s bytes" if b.alias else ""
    per_warp = " per warp" if b.per_warp else ""
    return [
        f"{b.dtype} [{b.rows}][{b.cols}] {b.layout}",
        f"{b.slots} slot(s){per_warp}{alias}",
        f"pitch {b.pitch}",
        f"{b.size_bytes} B",
        b.purpose,
    ]


def _frag_name(f) -> str:
    return f"{f.name}[{f.count[0]}][{f.count[1]}]"


def _frag_cells(f) -> list[str]:
    m, n, k = f.shape
    return [
        f.role,
        f"{f.dtype} {m}x{n}x{k}",
        f.layout or "",
        f"count {f.count[0]} x {f.count[1]}",
        "",
    ]


COLUMNS = 6


def _wide(content: str, raw: bool = False) -> str:
    body = content if raw else esc(content)
    return f'<TR><TD COLSPAN="{COLUMNS}" ALIGN="LEFT">{body}</TD></TR>'


def _wide_changed(name: str, old: str, new: str) -> str:
    if old == new:
        return _wide(f"{name}: {new}")
    changed = font(f"<B>{esc(old)} → {esc(new)}</B>", colour=style.CHANGED)
    return _wide(f"{esc(name)}: {changed}", raw=True)


def _section(title: str) -> str:
    return (
        f'<TR><TD COLSPAN="{COLUMNS}" ALIGN="LEFT" BGCOLOR="#eeeeee"><B>{esc(title)}</B></TD></TR>'
    )


def _row(status: str, name: str, colour: str, cells: list[str], old: list[str] | None) -> str:
    out = []
    for i, cell in enumerate(cells):
        content = esc(cell)
        if status == "changed" and old is not None and old[i] != cell:
            content = font(f"<B>{esc(change_text(old[i], cell))}</B>", colour=style.CHANGED)
        elif status == "removed":
            content = font(f"<S>{content}</S>", colour=style.REMOVED)
        out.append(f'<TD ALIGN="LEFT">{content}</TD>')
    label = font(f"<B>{esc(name)}</B>", colour="#ffffff")
    border = ""
    if status == "added":
        label = font(f"<B>+ {esc(name)}</B>", colour="#ffffff")
        border = f' BORDER="3" COLOR="{style.ADDED}"'
    elif status == "removed":
        label = font(f"<S>{esc(name)}</S>", colour="#ffffff")
        colour = style.REMOVED
    cell = f'<TD ALIGN="LEFT" BGCOLOR="{colour}"{border}>{label}</TD>'
    return f"<TR>{cell}{''.join(out)}</TR>"


def change_text(old: str, new: str) -> str:
    """`old → new` with the words both share said once: "pitch 64 → 72", "1 → 3 slot(s)"."""
    a, b = old.split(" "), new.split(" ")

    def word(w: str) -> bool:  # a name, not a number or the `x` between numbers
        return any(ch.isalpha() for ch in w) and w != "x"

    head = 0
    while head < min(len(a), len(b)) - 1 and a[head] == b[head] and word(a[head]):
        head += 1
    tail = 0
    while (
        tail < min(len(a), len(b)) - head - 1
        and a[-1 - tail] == b[-1 - tail]
        and word(a[-1 - tail])
    ):
        tail += 1
    words = [*a[:head], " ".join(a[head : len(a) - tail]), "→", " ".join(b[head : len(b) - tail])]
    return " ".join(words + a[len(a) - tail :])


def legend(kernel: KernelIR) -> str:
    rows = [(fill, "#999999", style.ROLE_LEGEND[role]) for role, fill in style.ROLE_FILL.items()]
    rows += [(style.LOOP_FILL, "#999999", "loop (a box around its body); arrows: program order")]
    rows += [("#ffffff", colour, text) for colour, text in style.DIFF_LEGEND.values()]
    colours = data_colours(kernel)
    for operand in (kernel.gemm.a, kernel.gemm.b, kernel.gemm.c):
        names = [n for n, c in colours.items() if c == colours[operand.name]]
        rows.append(
            (
                colours[operand.name],
                colours[operand.name],
                f"{operand.name}'s data: " + ", ".join(names) + " (stripe, name)",
            )
        )
    return style.legend_table(rows)
