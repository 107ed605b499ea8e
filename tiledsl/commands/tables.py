"""Plain aligned text tables, as `tiledsl check` prints them."""

from __future__ import annotations


def text_table(
    headers: list[str],
    rows: list[list[str]],
    right: set[int] | frozenset[int] = frozenset(),
    indent: str = "",
) -> list[str]:
    """Plain aligned columns, two spaces apart; `right` columns are right-aligned."""
    lines = [headers, *rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(headers))]

    def fmt(cells: list[str]) -> str:
        out = [
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))
        ]
        return (indent + "  ".join(out)).rstrip()

    return [fmt(line) for line in lines]
