"""What a pass changed: the previous stage's body aligned with this stage's.

    items = diff_body(previous.body, kernel.body)   # one Item per statement, old and new

Statements are compared by their IR text (`printer.stmt_text`, a loop by its header),
one body at a time, with `difflib`'s longest-matching-blocks alignment. Inside a
stretch that differs, a new statement is paired with an old one of the same kind
(a loop over the same variable, a load of the same fragment) and drawn as
"changed, was: …"; what finds no partner is "added" or "removed". Loops and
conditions that survive are compared again inside, so a pass that rewrites one
statement deep in a loop nest marks that statement, not the nest.

Statement kinds this module does not know (the IR grows) are compared by a
generic text of their fields, and any field holding a tuple of statements is
treated as a body.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Protocol, TypeVar

from ..ir.expr import Expr
from ..ir.nodes import (
    Barrier,
    Copy,
    Fill,
    For,
    FragRef,
    GlobalTile,
    If,
    LoadFrag,
    Mma,
    Roles,
    SharedTile,
    StoreFrag,
)
from ..ir.printer import stmt_text, tile_text


@dataclass(frozen=True)
class Item:
    status: str  # "same", "added", "changed" or "removed"
    stmt: object  # this stage's statement (the previous stage's, when removed)
    was: object | None = None  # the statement it replaces, when changed
    bodies: tuple[tuple[str, tuple[Item, ...]], ...] = ()  # (name, items) of each body


def text(stmt) -> str:
    """One line for any statement: the IR printer's, or a generic one for unknown kinds."""
    try:
        return stmt_text(stmt)
    except TypeError:
        return generic_text(stmt)


def generic_text(stmt) -> str:
    """`Name(field=value, …)` without its bodies: how an unknown statement is drawn."""
    if not dataclasses.is_dataclass(stmt):
        return type(stmt).__name__
    fields = [
        f"{f.name}={_value_text(getattr(stmt, f.name))}"
        for f in dataclasses.fields(stmt)
        if f.compare and not _is_body(getattr(stmt, f.name))
    ]
    return f"{type(stmt).__name__}({', '.join(fields)})"


def _value_text(value) -> str:
    if isinstance(value, (SharedTile, GlobalTile)):
        return tile_text(value)
    return str(value)


def bodies(stmt) -> tuple[tuple[str, tuple], ...]:
    """The statement lists inside `stmt`, named: a loop's body, a condition's branches."""
    if isinstance(stmt, For):
        return (("", stmt.body),)
    if isinstance(stmt, If):
        return (("then", stmt.then),) + ((("else", stmt.orelse),) if stmt.orelse else ())
    if isinstance(stmt, Roles):
        return tuple((role.name, role.body) for role in stmt.roles)
    if isinstance(stmt, KNOWN_LEAVES) or not dataclasses.is_dataclass(stmt):
        return ()
    return tuple(
        (f.name, getattr(stmt, f.name))
        for f in dataclasses.fields(stmt)
        if _is_body(getattr(stmt, f.name))
    )


KNOWN_LEAVES = (Copy, Fill, LoadFrag, Mma, StoreFrag, Barrier)


def _is_body(value) -> bool:
    """A tuple of statements (dataclass nodes that are not expressions, tiles or fragments)."""
    return (
        isinstance(value, tuple)
        and bool(value)
        and all(
            dataclasses.is_dataclass(v)
            and not isinstance(v, (Expr, FragRef, SharedTile, GlobalTile))
            for v in value
        )
    )


def kind(stmt) -> tuple:
    """What must match for two statements to count as one changed statement."""
    match stmt:
        case For():
            return ("for", stmt.var)
        case Copy():
            return ("copy", _tile_name(stmt.dst), _tile_name(stmt.src))
        case Fill() | LoadFrag():
            return (type(stmt).__name__, stmt.frag.name)
        case StoreFrag():
            return ("store", stmt.frag.name)
        case Mma():
            return ("mma", stmt.acc.name)
        case Barrier():
            return ("barrier", stmt.scope)
    return (type(stmt).__name__,)


def _tile_name(tile) -> str:
    return tile.buffer if isinstance(tile, SharedTile) else tile.operand


def diff_body(old: tuple, new: tuple) -> tuple[Item, ...]:
    """Items of `new` in order, with the statements of `old` it lost placed where they were."""
    matcher = SequenceMatcher(None, [text(s) for s in old], [text(s) for s in new], autojunk=False)
    out: list[Item] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out += [_pair(o, n, "same") for o, n in zip(old[i1:i2], new[j1:j2])]
        else:
            out += _pair_by_kind(old[i1:i2], new[j1:j2])
    return tuple(out)


def _pair_by_kind(old: tuple, new: tuple) -> list[Item]:
    """A differing stretch: each new statement takes the next old one of its kind, in order."""
    out: list[Item] = []
    waiting: list[Item] = []  # added statements, drawn after what they replace (as diffs do)
    at = 0
    for n in new:
        match = next((p for p in range(at, len(old)) if kind(old[p]) == kind(n)), None)
        if match is None:
            waiting.append(added(n))
            continue
        out += [removed(o) for o in old[at:match]] + waiting
        out.append(_pair(old[match], n, "changed"))
        waiting, at = [], match + 1
    return out + [removed(o) for o in old[at:]] + waiting


def _pair(old, new, status: str) -> Item:
    if text(old) == text(new):
        status = "same"
    old_bodies = dict(bodies(old))
    inner = tuple((name, diff_body(old_bodies.get(name, ()), b)) for name, b in bodies(new))
    return Item(status, new, old if status == "changed" else None, inner)


def added(stmt) -> Item:
    return Item("added", stmt, None, tuple((n, tuple(map(added, b))) for n, b in bodies(stmt)))


def removed(stmt) -> Item:
    return Item("removed", stmt)


def unchanged(body: tuple) -> tuple[Item, ...]:
    """Items for a body with nothing to compare against (the first stage)."""
    return diff_body(body, body)


def counts(items: tuple[Item, ...]) -> dict[str, int]:
    """How many statements were added, changed and removed, at every depth."""
    out = {"added": 0, "changed": 0, "removed": 0}
    for item in items:
        if item.status in out:
            out[item.status] += 1
        for _, inner in item.bodies:
            for key, value in counts(inner).items():
                out[key] += value
    return out


class _Named(Protocol):
    @property
    def name(self) -> str: ...


_N = TypeVar("_N", bound=_Named)


def diff_named(old: tuple[_N, ...], new: tuple[_N, ...]) -> list[tuple[str, _N, _N | None]]:
    """(status, item, previous) for named declarations (buffers, fragments), by name."""
    before = {x.name: x for x in old}
    now = {x.name for x in new}
    out: list[tuple[str, _N, _N | None]] = []
    for x in new:
        prev = before.get(x.name)
        status = "added" if prev is None else ("same" if prev == x else "changed")
        out.append((status, x, prev))
    out += [("removed", x, None) for x in old if x.name not in now]
    return out
