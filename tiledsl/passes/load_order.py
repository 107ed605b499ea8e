"""The order of a step's tile copies (`load_order ab | ba | alternate`), shared by the passes.

`alternate` flips the order on odd steps (the S4000 write-up, §3.7), so that the last
tile fetched in one step and the first of the next are of the same operand:

    if step % 2 == 0:  copy A; copy B
    else:              copy B; copy A
"""

from __future__ import annotations

from ..ir.expr import Const, Expr
from ..ir.nodes import Copy, GlobalTile, If, SharedTile, Stmt


def ordered(copies: list[Copy], a_name: str, order: str, step: Expr) -> tuple[Stmt, ...]:
    """The copies of one step in the schedule's order (`copies` holds A's and B's)."""
    ab = tuple(sorted(copies, key=lambda c: operand_tile(c).operand != a_name))
    if order == "ba":
        return ab[::-1]
    if order == "alternate" and len(ab) > 1:
        return (If(step % 2, "==", Const(0), ab, ab[::-1]),)
    return ab


def copies_in(body) -> list[Copy]:
    """The block copies into shared memory of a step, wherever `ordered` put them."""
    out: list[Copy] = []
    for stmt in body:
        if isinstance(stmt, Copy) and stmt.by == "block":
            if all(staged_tile(c).buffer != staged_tile(stmt).buffer for c in out):
                out.append(stmt)
        elif isinstance(stmt, If):
            for c in copies_in(stmt.then + stmt.orelse):
                if all(staged_tile(o).buffer != staged_tile(c).buffer for o in out):
                    out.append(c)
    return out


def operand_tile(copy: Copy) -> GlobalTile:
    """The operand tile a step's copy reads."""
    assert isinstance(copy.src, GlobalTile)
    return copy.src


def staged_tile(copy: Copy) -> SharedTile:
    """The shared tile a step's block copy writes."""
    assert isinstance(copy.dst, SharedTile)
    return copy.dst
