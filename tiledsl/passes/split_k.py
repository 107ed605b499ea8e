"""split-k on the direct path (`split_k S` with mma.sync and `stages 0`): a block per slice.

A few-token product is a read of its weights, and its tiles are few: 1 x 4096 x 11008 in
16 x 8 tiles is 256 blocks, each streaming 11008 elements of K from 16 rows. Cutting K
into S slices gives the grid S times the blocks and each block 1/S of the run, which
keeps more of the DRAM's requests in flight at once (docs/probes/direct_read.py: 2 to 4
blocks on one tile's K read 0.03-0.07 more of the memory bound than one, on an H100).

The grid has tiles x S blocks; block pid computes slice pid % S of tile pid / S
(tiledsl.ir.grid.padded_split_steps), and each slice ends in the fix-up of the
warp-specialized split (tiledsl.ir.split), which no block waits in:

    for kt in [0, ceil(K / BK)):           for kt in [k_lo, k_hi):
      ... A, B @ kt * BK ...       ==>       ... A, B @ kt * BK ...
    store_frag C <- acc                    partial.store workspace[pid] <- acc
                                           barrier.block         (the sums are written)
                                           ticket = ticket tickets[tile] of S
                                           if ticket == S - 1:   (the last to finish)
                                             fill acc 0
                                             for c in 0 .. S:    (in slice order)
                                               partial.add acc += workspace[tile * S + c]
                                             store_frag C <- acc

Every slice is slice_steps = ceil(ceil(K / BK) / S) steps long (rounded up to a multiple
of the K teams, `warps_k W`, whose rounds then end where the slice does); a slice's steps
past K read zeros through the direct path's guarded loads, so no step needs a test of its
own. The last ticket adds the S partial sums in slice order whichever slice draws it, so
C has the same bits on every run (the order depends on S alone). The pass runs before
k-teams, which splits each slice's steps among the teams and adds their sums before the
partial store (K team 0 hands the block's sum over).
"""

from __future__ import annotations

from dataclasses import replace

from ..ir.expr import Const, Var, substitute
from ..ir.grid import PID, padded_split_steps, tile_steps
from ..ir.nodes import (
    K_BLOCKS,
    Barrier,
    Fill,
    For,
    KernelIR,
    Let,
    walk,
)
from ..ir.split import TILE, ticketed_fix_up


def split_k(kernel: KernelIR) -> KernelIR:
    s = kernel.schedule
    slices = s.grid_split
    at = next(i for i, st in enumerate(kernel.body) if isinstance(st, For) and st.role == K_BLOCKS)
    k_loop = kernel.body[at]
    assert isinstance(k_loop, For) and k_loop.start == Const(0)
    fills = kernel.body[:at]  # the accumulators' zeros (lowering): the last slice's sum starts so
    assert all(isinstance(x, (Fill, For)) for x in walk(fills)), fills
    steps = padded_split_steps(k_loop.stop, slices, s.warps_k)
    mapping = {name: substitute(e, {PID.name: TILE}) for name, e in tile_steps(kernel).items()}
    lets = tuple(Let(name, e) for name, e in {**steps, **mapping}.items())
    piece = replace(
        k_loop,
        start=Var("k_lo"),
        stop=Var("k_hi"),
        comment="this block's slice of the tile's K steps (steps past K read zeros)",
    )
    why = "every thread's partial sum is written before the ticket"
    barrier = Barrier("block", why, s.loc("split_k"))
    fix_up = ticketed_fix_up(slices, barrier, fills, kernel.body[at + 1 :])
    return replace(kernel, body=(*lets, *fills, piece, *fix_up), grid_split=slices)
