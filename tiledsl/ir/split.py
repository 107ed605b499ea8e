"""The end of a `split_k S` slice, as both paths build it: the warp-specialized kernels'
(tiledsl.passes.warp_specialization, its consumers' named barrier) and the direct path's
(tiledsl.passes.split_k, a block barrier).

    partial.store workspace[pid] <- acc        every thread that holds the sum, its registers
    barrier                                    ... all written before the ticket
    ticket = ticket tickets[tile] of S         the first thread's atomic add (acq_rel),
                                               handed to the others
    if ticket == S - 1:                        the last slice to finish, whichever it is
      fill acc 0
      for c in 0 .. S:                         every slice's partial sum, in slice order
        partial.add acc += workspace[tile * S + c]
      store C

The slice that draws the last ticket adds the S partial sums in slice order (its own from
the workspace like the others', so that the order does not depend on which slice came
last) and stores C: the same bits on every run. No block waits for another.
"""

from __future__ import annotations

from .expr import Const, Var
from .grid import PID
from .nodes import Barrier, For, If, PartialAdd, PartialStore, Stmt, Ticket

TILE = Var("tile")  # the block's tile, pid / SPLIT_K (tiledsl.ir.grid.grid_split_steps)


def ticketed_fix_up(
    slices: int, barrier: Barrier, fills: tuple[Stmt, ...], stores: tuple[Stmt, ...]
) -> tuple[Stmt, ...]:
    """The fix-up above: `barrier` orders the partial stores before the ticket; `fills`
    zero the accumulators and `stores` store C, in the last slice's branch."""
    count = Const(slices, "SPLIT_K")
    gather = For(
        "c",
        Const(0),
        count,
        1,
        (PartialAdd(TILE * count + Var("c"), "slice c's partial sum, in slice order"),),
        unroll=True,
        comment="every slice's partial sum of the tile, in slice order",
    )
    last = (*fills, gather, *stores)  # the sum starts from zero, whichever slice adds it
    return (
        PartialStore(PID, "this slice's partial sum, for the slice that finishes last"),
        barrier,
        Ticket(TILE, slices, "ticket", "this slice is done: its tile's next ticket"),
        If(Var("ticket") + Const(1), "==", count, last),  # the last ticket: S - 1
    )
