"""The checks of the Hopper directives: `copy tma`, `warp_specialize`, `persistent`,
`cluster`, `epilogue_via tma`.

What the warp-specialized kernel (tiledsl.passes.warp_specialization) asks of a schedule,
refused here with the directive's location before anything is built:

* the wgmma path (its tiles are read in the 128-byte swizzle that TMA writes), a
  pipeline (`stages` ≥ 2) and f16 or bf16 inputs;
* `warp_specialize` only with `copy tma` (a producer that copies with cp.async is not
  built), and `persistent` only with them (`copy tma` alone is the TMA pipeline in which
  every warp computes and thread 0 issues the copies: tiledsl.passes.tma_copies);
  `warp_specialize pingpong` only with `persistent`, and not with `persistent stream_k`
  (its teams take whole tiles);
* `cluster CM x CN` only with them, at most 8 blocks (the portable cluster size), and
  tiles the cluster's blocks can split: each block loads 1/CM of B's tile and 1/CN of
  A's (whole 8-line swizzle atoms) and multicasts its part;
* what the first version does not build yet: a batch, `epilogue_via shared`;
* `epilogue_via tma` only on a warp-specialized kernel, with a row-major C and a
  consumer warpgroup at least one 128-byte panel wide;
* the register split (tiledsl.models.registers.role_registers): the consumers'
  accumulators must fit in what `setmaxnreg` can give them.
"""

from __future__ import annotations

from ..errors import Collector
from ..ir.gemm import Gemm
from ..ir.schedule import Schedule
from ..ir.targets import Target
from ..models.registers import fragment_registers, role_registers


def uses_hopper_pipeline(sched: Schedule) -> bool:
    """Whether the schedule asks for any of the Hopper-native directives."""
    return (
        sched.copy_mode == "tma"
        or sched.warp_specialize
        or sched.persistent
        or (sched.grid_split > 0 and not sched.direct)  # the direct path splits on its own
        or sched.cluster_size > 1
        or sched.epilogue_via == "tma"
    )


def check_hopper(sched: Schedule, target: Target, gemm: Gemm, errs: Collector) -> None:
    if not uses_hopper_pipeline(sched):
        return
    where = next(
        name
        for name, asked in (
            ("copy", sched.copy_mode == "tma"),
            ("warp_specialize", sched.warp_specialize),
            ("persistent", sched.persistent),
            ("split_k", sched.grid_split > 0),
            ("cluster", sched.cluster_size > 1),
            ("epilogue_via", True),
        )
        if asked
    )
    loc = sched.loc(where)
    if not sched.path.feeds_tma_pipeline:
        split = where == "split_k"  # which the direct path builds too
        errs.add(
            loc,
            f"`{_spelling(where)}` builds Hopper's TMA and warpgroup pipeline, which feeds wgmma"
            + (" (or the direct path's loads, mma.sync with stages 0)" if split else ""),
            "use a wgmma shape, e.g. `mma m64n128k16`, and `target cuda sm_90`"
            + (", or write `mma m16n8k16` and `stages 0`" if split else ""),
        )
        return
    _check_together(sched, errs)
    _check_unbuilt(sched, gemm, errs)
    if sched.cluster_size > 1:
        _check_cluster(sched, gemm, errs)
    if sched.epilogue_via == "tma":
        _check_tma_store(sched, gemm, errs)
    if sched.warp_specialize:
        _check_role_registers(sched, target, errs)


def _check_together(sched: Schedule, errs: Collector) -> None:
    """The directives that come only together, and the pipeline's depth."""
    if sched.warp_specialize and sched.copy_mode != "tma":
        errs.add(
            sched.loc("warp_specialize"),
            "warp_specialize is built for TMA copies only (one thread of the producer "
            "warpgroup issues them)",
            "write `copy tma`",
        )
    if sched.persistent and not sched.warp_specialize:
        errs.add(
            sched.loc("persistent"),
            "persistent is built for warp-specialized kernels only",
            "add `copy tma` and `warp_specialize`",
        )
    if sched.grid_split:
        _check_grid_split(sched, errs)
    if sched.pingpong and not sched.persistent:
        errs.add(
            sched.loc("warp_specialize"),
            "warp_specialize pingpong gives a block's tiles to its two consumer teams in "
            "turn, so a block needs a loop over tiles",
            "add `persistent`",
        )
    if sched.stream_k and sched.pingpong:
        kind = sched.split_word
        errs.add(
            sched.loc("persistent"),
            f"persistent {kind} cuts tiles into shares of K steps, and warp_specialize "
            "pingpong gives whole tiles to its teams in turn: the two do not combine",
            f"drop `{kind}`, or write `warp_specialize` (cooperative)",
        )
    if sched.stages < 2:
        errs.add(
            sched.loc("stages"),
            f"a TMA pipeline needs stages ≥ 2 (this schedule has stages {sched.stages})",
            "write `stages 4`",
        )


def _check_grid_split(sched: Schedule, errs: Collector) -> None:
    """`split_k S`: a block per slice, on the warp-specialized pipeline of one tile a block."""
    loc = sched.loc("split_k")
    if not sched.warp_specialize:
        errs.add(
            loc,
            "split_k is built for warp-specialized kernels only (the consumer warpgroups "
            "hand their partial sums over)",
            "add `copy tma` and `warp_specialize`",
        )
    if sched.cluster_size > 1:
        errs.add(
            loc,
            "split_k in thread-block clusters is not built yet (a cluster's blocks would "
            "take tickets for tiles they share)",
            "drop `cluster`"
            + (
                ""
                if sched.split_via == "cluster"
                else f", or write `split_k {sched.grid_split} "
                "via cluster` (a cluster of the tile's slices)"
            ),
        )
    if sched.split_via == "cluster" and sched.grid_split > MAX_CLUSTER:
        errs.add(
            loc,
            f"split_k {sched.grid_split} via cluster: a cluster holds at most {MAX_CLUSTER} "
            "blocks on every GPU that has clusters",
            f"write at most `split_k {MAX_CLUSTER} via cluster`, or `split_k "
            f"{sched.grid_split}` (through the workspace)",
        )


#: The most blocks a cluster may hold on every GPU that has clusters (sm_90: 16 with an
#: opt-in attribute, 8 without).
MAX_CLUSTER = 8
#: Lines of one 128-byte swizzle atom: a multicast part starts on one, so that its bytes
#: land where the whole tile's would.
SWIZZLE_ATOM_LINES = 8


def tile_lines(sched: Schedule, gemm: Gemm) -> dict[str, int]:
    """The lines (the TMA box's outer side) of A's and B's block tiles: a row-major A is
    BM lines of BK, a row-major B BK lines of BN (column-major: the other side)."""
    bm, bn, bk = sched.block
    return {
        "A": bm if gemm.a.layout == "row" else bk,
        "B": bk if gemm.b.layout == "row" else bn,
    }


def _check_cluster(sched: Schedule, gemm: Gemm, errs: Collector) -> None:
    """`cluster CM x CN`: a warp-specialized TMA kernel, at most MAX_CLUSTER blocks, and
    tiles that split into whole swizzle atoms among the blocks that share them."""
    loc = sched.loc("cluster")
    if not sched.warp_specialize:
        errs.add(
            loc,
            "cluster is built for warp-specialized TMA kernels (the producer multicasts "
            "the tiles the cluster's blocks share)",
            "add `copy tma` and `warp_specialize`",
        )
        return
    if sched.cluster_size > MAX_CLUSTER:
        errs.add(
            loc,
            f"a cluster of {sched.cluster[0]} x {sched.cluster[1]} = {sched.cluster_size} "
            f"blocks: at most {MAX_CLUSTER} blocks are portable",
            "write `cluster 2 x 1` (two blocks along M share B's tiles)",
        )
        return
    lines = tile_lines(sched, gemm)
    for operand, parts, along in (("B", sched.cluster[0], "M"), ("A", sched.cluster[1], "N")):
        if parts > 1 and lines[operand] % (parts * SWIZZLE_ATOM_LINES):
            errs.add(
                loc,
                f"the {parts} blocks of a cluster along {along} share {operand}'s tile of "
                f"{lines[operand]} lines, each multicasting a part of whole "
                f"{SWIZZLE_ATOM_LINES}-line swizzle atoms, and {lines[operand]} lines do not "
                f"split so",
                f"use a cluster of fewer blocks along {along}, or a larger block tile",
            )


def _check_tma_store(sched: Schedule, gemm: Gemm, errs: Collector) -> None:
    """What `epilogue_via tma` asks: the consumer warpgroups, a C that stmatrix and a TMA
    box can hold, and a warpgroup tile that 64-element panels cut."""
    loc = sched.loc("epilogue_via")
    if not sched.warp_specialize:
        errs.add(
            loc,
            "epilogue_via tma is built for warp-specialized kernels (the consumer "
            "warpgroups stage C, one of their threads issues the TMA store)",
            "add `copy tma` and `warp_specialize`, or write `epilogue_via direct`",
        )
        return
    if gemm.c.dtype not in ("f16", "bf16", "f32"):
        errs.add(
            loc,
            f"epilogue_via tma stages an f16, bf16 or f32 C, and C is {gemm.c.dtype}",
            "write `epilogue_via direct` (the consumers store C from their registers)",
        )
    if gemm.c.layout != "row":
        why, fix = "", "declare C row, or write `epilogue_via direct`"
        if gemm.written is not None:  # C^T is column-major where C is row-major
            why = (
                ", and swap_operands stores C transposed (the kernel's C^T is column-major "
                "where C is row-major)"
            )
            fix = "write `epilogue_via direct`, or declare C col"
        errs.add(loc, "epilogue_via tma is built for a row-major C only" + why, fix)
    if not sched.store_columns:
        width = sched.mma[1] * sched.coarsen[1]
        errs.add(
            loc,
            f"epilogue_via tma stages C in 128-byte panels (the TMA box: 64 elements of "
            f"f16, 32 of f32), and a consumer warpgroup's tile is {width} columns wide",
            "use a wgmma at least 64 wide, e.g. `mma m64n128k16`, or `epilogue_via direct`",
        )


def _check_unbuilt(sched: Schedule, gemm: Gemm, errs: Collector) -> None:
    """What the warp-specialized kernel does not build yet: located refusals."""
    if gemm.a.dtype not in ("f16", "bf16") or gemm.b.dtype != gemm.a.dtype:
        errs.add(gemm.a.loc, "TMA kernels take f16 or bf16 A and B", "declare A and B f16")
    if "epilogue_via" in sched.written and sched.epilogue_via == "shared":
        errs.add(
            sched.loc("epilogue_via"),
            "epilogue_via shared on a TMA kernel is not built yet: its staging tile would "
            "share bytes with stages the TMA unit may be refilling",
            "drop the line: the consumers store C from their registers",
        )
    if gemm.batch is not None:
        errs.add(
            gemm.c.loc,
            "a batched product on a warp-specialized kernel is not built yet: it needs "
            "3-D tensor maps",
            "drop `warp_specialize` and `copy tma` for batched products",
        )
    if sched.accumulate != "f32":
        errs.add(
            sched.loc("accumulate"),
            "warp-specialized kernels accumulate in f32",
            "write `accumulate f32`",
        )


#: Registers a consumer thread needs beside its fragments (addresses, loop counters, the
#: stage counter and parity): ptxas asked for 154 to hold m64n256k16's 128 accumulators
#: (measured with ptxas 13.0, sm_90a, on a 3-consumer block capped at 128).
CONSUMER_OVERHEAD = 26


def _check_role_registers(sched: Schedule, target: Target, errs: Collector) -> None:
    consumers = sched.consumer_warpgroups
    if consumers < 1:
        return  # the block and mma shapes are already refused (no warpgroup fits)
    split = role_registers(consumers, target)
    needed = fragment_registers(sched, 128, 2)
    if split is not None and needed + CONSUMER_OVERHEAD > split.entry:
        errs.add(
            sched.loc("warp_specialize"),
            f"{consumers} consumer warpgroups and a producer are {128 * (consumers + 1)} "
            f"threads, so ptxas compiles the kernel under a cap of {split.entry} registers "
            f"per thread (setmaxnreg raises it only at run time), and a consumer's fragments "
            f"need {needed} and about {CONSUMER_OVERHEAD} more",
            "use fewer consumer warpgroups (a smaller BM), or a narrower wgmma (mma m64n128k16)",
        )
        return
    if split is None or needed > split.consumer:
        got = "none" if split is None else f"{split.consumer}"
        errs.add(
            sched.loc("warp_specialize"),
            f"{consumers} consumer warpgroups and a producer: setmaxnreg can give each "
            f"consumer thread {got} registers, and its fragments alone need {needed}",
            "use fewer consumer warpgroups (a smaller BM or BN, or coarsen more)",
        )


def _spelling(directive: str) -> str:
    return {"copy": "copy tma", "epilogue_via": "epilogue_via tma"}.get(directive, directive)
