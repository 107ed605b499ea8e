"""The checks of the direct path (`mma m16n8k16` or `mma fma` with `stages 0`) and of
`warps_k`.

On the direct path each lane loads its fragments straight from global memory, 16 bytes
at a time along K (tiledsl.emit.mma_sync): a few-token product is a read of its weights,
and a read goes fastest from DRAM to registers with every warp's loads in flight at once,
without the shared-memory stage, the barrier and the producer in between
(docs/probes/direct_gemv.py). What it asks of a schedule, refused here with the
directive's location before anything is built:

* A and B K-contiguous (in the kernel's terms: A row-major, B column-major), so that a
  lane's 8 consecutive elements of K are one aligned vector; the weights of y = x W^T
  as torch keeps them are that, with `swap_operands`;
* BK a multiple of 32: a vector holds two k16 steps of a lane's row;
* C stored from the registers (`epilogue_via direct`, its default there), f32
  accumulators, no epilogue and no `C +=` (not built yet on this path);
* with `split_k S` (a block per slice of K: tiledsl.passes.split_k), no batch (not built
  yet: a slice's workspace slot is its block's).

`warps_k W` (W teams of the block's warps on K steps of their own, their sums added in
shared memory: tiledsl.passes.k_teams) needs the direct path: with shared-memory stages
every warp of a block computes from the same staged tile.
"""

from __future__ import annotations

from dataclasses import replace

from ..errors import Collector
from ..ir.gemm import Gemm
from ..ir.schedule import Schedule

#: A lane's vector along K: 16 bytes of 16-bit elements, two k16 steps of mma.sync.
DIRECT_K_GROUP = 32


def check_direct(sched: Schedule, gemm: Gemm, errs: Collector) -> None:
    if sched.warps_k > 1 and not sched.direct:
        errs.add(
            sched.loc("warps_k"),
            f"warps_k {sched.warps_k} gives each team of warps K steps of its own, its "
            "fragments loaded straight from global memory: it needs the direct path "
            "(`mma m16n8k16` or `mma fma` with `stages 0`)",
            "write `mma m16n8k16` and `stages 0`, or drop `warps_k`",
        )
    if not sched.direct:
        return
    loc = sched.loc("stages")
    words = _path_words(sched)
    # the fix of a schedule the direct path cannot serve: stages, where the path has them
    staged = ", or use stages 1 or more" if _can_stage(sched) else ""
    a, b = gemm.a, gemm.b
    if (a.layout, b.layout) != ("row", "col"):
        wrong = " and ".join(op.name for op, want in ((a, "row"), (b, "col")) if op.layout != want)
        errs.add(
            loc,
            f"{words} with stages 0 loads each lane's fragments from global memory as "
            f"16-byte vectors along K, which needs K-contiguous operands: K is not the "
            f"contiguous dimension of {wrong}",
            "declare the operands K-contiguous (the weights of y = x W^T as torch keeps "
            f"them, `B: f16[K, N] col` with `swap_operands`){staged}",
        )
    bk = sched.block[2]
    # a vector of mma.sync holds two of its k16 steps (a K step of 256 holds whole vectors)
    if bk % DIRECT_K_GROUP and sched.mma[2] < DIRECT_K_GROUP:
        errs.add(
            sched.loc("block"),
            f"BK = {bk}: on the direct path ({words}, stages 0) a lane's 16-byte vector "
            f"holds two k16 steps, so BK must be a multiple of {DIRECT_K_GROUP}",
            f"make BK a multiple of {DIRECT_K_GROUP}, e.g. {max(DIRECT_K_GROUP, bk - bk % 32)}",
        )
    if sched.epilogue_via != "direct":
        errs.add(
            sched.loc("epilogue_via"),
            f"epilogue_via {sched.epilogue_via}: the direct path ({words}, stages 0) has "
            "no shared-memory tiles; it stores C from the registers",
            "write `epilogue_via direct`, or drop the line",
        )
    if sched.epilogue:
        errs.add(
            sched.loc("epilogue"),
            f"an epilogue on the direct path ({words}, stages 0) is not built yet",
            f"drop the epilogue (and apply it after the call){staged}",
        )
    if gemm.accumulate:
        errs.add(
            loc,
            f"`C +=` on the direct path ({words}, stages 0) is not built yet: its warps "
            "start from zero",
            f"write `C[...] = ...` and add C after the call{staged}",
        )
    if sched.accumulate != "f32":
        errs.add(
            sched.loc("accumulate"),
            f"accumulate {sched.accumulate}: the direct path ({words}, stages 0) "
            "accumulates in f32 only",
            "write `accumulate f32`, or drop the line",
        )
    if sched.grid_split and sched.split_via == "cluster":
        errs.add(
            sched.loc("split_k"),
            f"split_k {sched.grid_split} via cluster is built for the warp-specialized wgmma "
            f"kernels; the direct path ({words}, stages 0) adds its slices through the "
            "workspace",
            f"write `split_k {sched.grid_split}`",
        )
    if sched.grid_split and gemm.batch is not None:
        errs.add(
            sched.loc("split_k"),
            "split_k on a batched product is not built yet on the direct path (each "
            "block's partial sum has a workspace slot of its own per product, not per batch)",
            "drop `split_k`, or launch the products one by one",
        )


def _path_words(sched: Schedule) -> str:
    """The path as the messages name it: `mma.sync`, or the directive (`mma fma`)."""
    path = sched.path
    return path.name if path.shape_syntax != "word" else f"mma {path.shape_text(sched.mma)}"


def _can_stage(sched: Schedule) -> bool:
    """Whether the path would take the schedule with shared-memory stages (mma.sync does;
    the fma path reads only from global memory)."""
    one = replace(sched, stages=1)
    return all(need.holds(one) for need in sched.path.requirements if need.directive == "stages")
