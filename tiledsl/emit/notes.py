"""What each schedule directive did to a kernel, in words: the emitted code's comments.

    notes = directive_notes(kernel)       # {"block": DirectiveNote(...), "mma": ..., ...}
    notes["stages"].comment()             # "// stages 3 (line 15): 3 shared-memory slots ..."

Every directive gets a note, written or not (a default says so), and says what it did
to this kernel, or that the pass it drives was not applied (`--stop-after`). The emitter
puts each note above the constants it explains; `check` and `viz` may show them too.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..ir.epilogue import Epilogue
from ..ir.fetch import fetch_parts
from ..ir.nodes import C_TYPES, KernelIR
from ..models.registers import register_cap
from .paths import lowering_for

LATER = "not applied here (compiled with --stop-after an earlier pass)"
RASTER_MEANING = {
    "none": "block i computes tile (i / tiles_n, i % tiles_n)",
    "grouped": "blocks walk GROUP_M block-rows at a time, so neighbours share A and B in L2",
    "zigzag": "panels of PANEL_N block-columns; odd panels walk M in reverse",
    "snake": "blocks walk GROUP_M block-rows at a time, odd groups from the right, so the "
    "order never jumps and consecutive waves share B's columns in L2",
}


@dataclass(frozen=True)
class DirectiveNote:
    directive: str
    text: str  # the directive as it stands for this kernel: "stages 3"
    where: str  # "line 15", or "default"
    meaning: str  # what it did

    def comment(self) -> str:
        return f"// {self.text} ({self.where}): {self.meaning}"


def directive_notes(k: KernelIR) -> dict[str, DirectiveNote]:
    """A note per directive, in the order the emitted code shows them."""
    notes = {**_every_kernels_notes(k), **_optional_notes(k)}
    return {
        name: DirectiveNote(name, text, _where(k, name), meaning)
        for name, (text, meaning) in notes.items()
    }


def _every_kernels_notes(k: KernelIR) -> dict[str, tuple[str, str]]:
    """(text, meaning) of the directives every kernel has, written or by default."""
    s = k.schedule
    return {
        "block": (
            f"block {' x '.join(map(str, s.block))}",
            "the tile one thread block computes, and its K step",
        ),
        "mma": (f"mma {s.path.shape_text(s.mma)}", lowering_for(k).mma_note(k)),
        "coarsen": (f"coarsen {s.coarsen[0]} x {s.coarsen[1]}", _coarsening(k)),
        "stages": (f"stages {s.stages}", _staging(k)),
        "fragment_buffers": (f"fragment_buffers {s.fragment_buffers}", _fragment_buffering(k)),
        "copy": (
            "copy tma" if s.copy_mode == "tma" else f"copy {s.copy_mode} {s.copy_bytes}",
            _copying(k),
        ),
        "pad": (_pad_text(k), _padding(k)),
        "swizzle": (
            "swizzle " + " ".join(str(x) for x in (s.swizzle, s.swizzle_param) if x),
            RASTER_MEANING[k.raster[0]]
            if k.raster[0] == s.swizzle
            else f"{LATER}: {RASTER_MEANING['none']}",
        ),
        "sync": (f"sync {s.sync}", _syncing(k)),
        "load_order": (
            f"load_order {s.load_order}",
            f"{(k.gemm.a if s.load_order == 'ab' else k.gemm.b).name}'s tile is copied first",
        ),
        "accumulate": (
            f"accumulate {s.accumulate}",
            f"fragments accumulate in {C_TYPES[s.accumulate]}",
        ),
        "epilogue_via": (f"epilogue_via {s.epilogue_via}", _storing_c(k)),
        "target": (
            f"target {k.target.name}",
            f"{k.target.warp_width}-thread warps" + lowering_for(k).target_note(),
        ),
    }


def _optional_notes(k: KernelIR) -> dict[str, tuple[str, str]]:
    """(text, meaning) of the directives a kernel has only where it uses them (or where
    the file writes them: a tuned point's `split_k 1`, `warps_k 1`, `cluster 1 x 1`)."""
    s = k.schedule
    notes: dict[str, tuple[str, str]] = {}
    if s.swap_operands:
        notes["swap_operands"] = (
            "swap_operands",
            f"the kernel computes the transpose, C^T = B^T A^T, of {k.gemm.text} as written, "
            "over the same memory (the operands above as it sees them): its M runs along "
            "C's columns, so block, mma, coarsen and cluster count those first",
        )
    if s.warp_specialize:
        notes["warp_specialize"] = ("warp_specialize", _specializing(k))
    if s.persistent:
        notes["persistent"] = ("persistent", _persisting(k))
    if s.grid_split:
        via = " via cluster" if s.split_via == "cluster" else ""
        notes["split_k"] = (f"split_k {s.grid_split}{via}", _splitting(k))
    elif "split_k" in s.written and not s.persistent:  # `split_k 1`, a tuned point's
        notes["split_k"] = ("split_k 1", "no split: each tile's K steps in one block")
    if s.warps_k > 1 or "warps_k" in s.written:
        notes["warps_k"] = _k_teams_note(k)
    if declares_blocks_per_sm(k):
        notes["blocks_per_sm"] = (f"blocks_per_sm {s.blocks_per_sm}", _resident(k))
    if s.cluster_size > 1 or "cluster" in s.written:  # a written `cluster 1 x 1` too
        notes["cluster"] = (f"cluster {s.cluster[0]} x {s.cluster[1]}", _clustering(k))
    epilogue = Epilogue.of(s, k.gemm)
    if epilogue is not None:
        notes["epilogue"] = (_epilogue_text(k), _epilogue_meaning(k, epilogue))
    if s.attributes:
        notes["attributes"] = (
            "attributes " + ", ".join(s.attributes),
            "passed to the kernel as __attribute__((...))",
        )
    return notes


def _epilogue_text(k: KernelIR) -> str:
    """The epilogue as written, or `C +=` for a product that adds to C."""
    s = k.schedule
    if s.epilogue:
        return "epilogue " + ", ".join(" ".join(g) for g in s.epilogue)
    return f"{k.gemm.c.name} +="


def _epilogue_meaning(k: KernelIR, epilogue: Epilogue) -> str:
    where = (
        "on the accumulators in registers, before C is stored or staged"
        if k.schedule.warp_specialize
        else "as the lanes store it"
    )
    return f"each C element, {where}: {epilogue.describe()}"


def _storing_c(k: KernelIR) -> str:
    s = k.schedule
    if s.epilogue_via == "direct":
        return "fragments stored straight to C"
    if s.epilogue_via == "shared":
        return "C staged per warp in shared memory, converted and stored by lanes"
    how = (
        "by float2 stores"
        if k.gemm.c.dtype == "f32"
        else f"rounded to {k.gemm.c.dtype}, by stmatrix"
    )
    return (
        f"each consumer warpgroup stages its C in Cs {how}, {s.store_columns} columns at a "
        "time; one thread hands each piece to a TMA store"
    )


def _persisting(k: KernelIR) -> str:
    if not k.persistent:
        return f"{LATER}: one block per tile"
    if k.split_k:
        return (
            "one block per SM (gridDim.x, read at launch); every block takes dp_rounds whole "
            "tiles pid, pid + gridDim.x, ..., then, when a block per slice fits the grid, one "
            "of SPLIT_K slices of the K steps of a last round's tile (split-K): a slice after "
            "the first hands its partial sum to the tile's owner (the first slice's block) "
            "through the workspace and a flag, and the owner adds them in slice order before "
            "it stores C"
        )
    if k.aligned:
        return (
            "one block per SM (gridDim.x, read at launch); every block takes dp_rounds whole "
            "tiles pid, pid + gridDim.x, ..., then its equal share of the K steps of the last "
            "round's tiles, its last tile first (stream-K, aligned): every block starts at K "
            "step 0, so the blocks read A and B at the same K steps; a piece that ends inside "
            "its tile hands its partial sum to the block holding the tile's last K step "
            "through the workspace and a flag (set FLAG_DEFER_STEPS K steps into the "
            "block's next piece, the stores draining meanwhile), and that block adds them in "
            "block order before it stores C"
            + (
                f"; the owner's producer fetches the first of them into the {fetch_parts(k)} "
                "stage slots after its last step (cp.async.bulk), whence its consumers add it"
                if fetch_parts(k)
                else ""
            )
        )
    if k.stream_k:
        return (
            "one block per SM (gridDim.x, read at launch); every block takes dp_rounds whole "
            "tiles pid, pid + gridDim.x, ..., then, when a last round would fill at most "
            "SK_MAX_FILL % of the grid, its equal share of the K steps of those tiles "
            "(stream-K): a piece that starts inside a tile hands its partial sum to the "
            "tile's owner through the workspace and a flag, and the owner adds them in block "
            "order before it stores C"
        )
    return (
        "one block per SM (gridDim.x, read at launch), each looping over tiles "
        "pid, pid + gridDim.x, ... in the swizzle's order; the producer runs into the next "
        "tile's loads while the consumers store C"
    )


def _splitting(k: KernelIR) -> str:
    if not k.grid_split:
        return f"{LATER}: one block per tile"
    if k.split_cluster:
        return (
            "a block per slice of every tile (tiles x SPLIT_K blocks), the tile's slices one "
            "thread-block cluster (rank = slice): block pid computes K steps [k_lo, k_hi) of "
            "tile pid / SPLIT_K; every slice but the first leaves its partial sum in its Ps "
            "and arrives on slice 0's `sums`, then waits on its own `taken` before it exits; "
            "slice 0 waits for them all, adds them from their shared memory in slice order "
            "(the same bits as split_k through the workspace), arrives on each `taken`, and "
            "stores C. No workspace, no ticket"
        )
    return (
        "a block per slice of every tile (tiles x SPLIT_K blocks): block pid computes K steps "
        "[k_lo, k_hi) of tile pid / SPLIT_K, stores its partial sum in the workspace and "
        "takes a ticket of its tile; the slice that draws the last one adds the SPLIT_K "
        "partial sums in slice order (the same bits whichever slice finishes last) and "
        "stores C. No block waits for another"
    )


def _clustering(k: KernelIR) -> str:
    if k.schedule.cluster_size == 1:
        return "one block a cluster: no tile shared between blocks (as without the directive)"
    if k.cluster_size == 1:
        return f"{LATER}: one block at a time"
    cm, cn = k.cluster
    shared = [
        *([f"{k.gemm.b.name}'s tile by the {cm} blocks along M ({cm} parts)"] if cm > 1 else []),
        *([f"{k.gemm.a.name}'s tile by the {cn} blocks along N ({cn} parts)"] if cn > 1 else []),
    ]
    return (
        f"clusters of {cm} x {cn} blocks on neighbouring tiles; "
        + " and ".join(shared)
        + " shared: each block loads its part, which TMA multicasts into every sharer, "
        "and a slot is refilled once every sharer has released it"
    )


def _where(k: KernelIR, name: str) -> str:
    s = k.schedule
    return f"line {s.loc(name).line}" if name in s.written else "default"


def _k_teams_note(k: KernelIR) -> tuple[str, str]:
    """`warps_k` as it stands for this kernel, and what it did."""
    s = k.schedule
    if k.k_teams == 1:
        return (f"warps_k {s.warps_k}", "one team of warps on every K step")
    runs = f" runs {s.k_runs}" if s.k_runs > 1 else ""
    steps = (
        "team kteam on K steps kteam, kteam + WARPS_K, ..."
        if s.k_runs == 1
        else f"in {s.k_runs} runs of the K steps, RUN_TEAMS teams on each run's steps in turn"
    )
    return (
        f"warps_k {s.warps_k}{runs}",
        f"{k.k_teams} K teams of the block's warps, {steps}; their sums meet in Ks, added in "
        "team order, and team 0 stores C (k-teams)",
    )


def declares_blocks_per_sm(k: KernelIR) -> bool:
    """Whether the kernel's namespace declares BLOCKS_PER_SM for its __launch_bounds__:
    `blocks_per_sm` written (a written 1 too), or above 1."""
    return k.schedule.blocks_per_sm > 1 or "blocks_per_sm" in k.schedule.written


def _resident(k: KernelIR) -> str:
    n = k.schedule.blocks_per_sm
    cap = register_cap(k.target, k.threads, n)
    return (
        f"ptxas caps each thread at {cap} registers so that {n} blocks of THREADS threads "
        f"fit a multiprocessor's {k.target.registers_per_sm} at once "
        f"(__launch_bounds__(THREADS, BLOCKS_PER_SM))"
    )


def _staging(k: KernelIR) -> str:
    s = k.schedule
    if s.direct:
        return (
            "the direct path: each lane loads 16 bytes of K of its rows straight from global "
            "memory into its registers, one vector for two k16 steps (K permuted within 32 "
            "columns), guarded: every size runs this kernel"
        )
    if s.stages == 0:
        return "fragments load straight from global memory (no shared memory)"
    if "smem-tiling" not in k.passes:
        return f"{LATER}: fragments load straight from global memory"
    if k.mbarriers:
        return (
            f"{s.stages} shared-memory slots of A and B, each with a `full` and an `empty` "
            "mbarrier; one step of wgmmas left in flight, so a slot is released a step late"
        )
    if "multi-buffering" in k.passes:
        lead = s.stages - 1 - s.mma_depth
        return (
            f"{s.stages} shared-memory slots of A and B; copies run {lead} "
            "step(s) ahead of the compute (smem-tiling, multi-buffering)"
            + (", one step of wgmmas left in flight" if s.mma_depth else "")
        )
    staging = "one shared-memory tile of A and B, loaded then computed (smem-tiling)"
    return staging + (f"; multi-buffering {LATER}" if s.stages > 1 else "")


def _copying(k: KernelIR) -> str:
    s = k.schedule
    if "smem-tiling" not in k.passes:
        return "unused: no shared-memory tiles of A and B"
    if k.mbarriers:
        return (
            f"the TMA unit copies {k.gemm.a.name}'s and {k.gemm.b.name}'s tiles "
            "(cp.async.bulk.tensor.2d, one box per "
            "128-byte panel, in the 128-byte swizzle), completing on the slot's mbarrier"
        )
    if s.copy_mode == "tma":
        return f"{LATER}: all threads copy, synchronously (warp-specialization hands it to TMA)"
    if "multi-buffering" in k.passes and s.copy_mode == "async":
        return f"cp.async copies of {s.copy_bytes}-byte vectors, global -> shared"
    return f"global -> shared copies move {s.copy_bytes}-byte vectors"


def _specializing(k: KernelIR) -> str:
    if not k.producer_warps:
        return f"{LATER}: every warp copies and computes"
    teams = (
        f", in {k.teams} teams of {k.warp_count} that take the block's tiles in turn "
        "(pingpong: one team's epilogue runs while the other computes; a `turn` mbarrier "
        "per team orders their K loops)"
        if k.teams > 1
        else ""
    )
    return (
        f"warpgroup {k.consumer_warps} is the producer (one thread issues the TMA copies, "
        f"setmaxnreg down), warpgroups 0-{k.consumer_warps - 1} the consumers (the wgmmas, "
        f"setmaxnreg up){teams}, handing slots over through mbarriers"
    )


def _pad_text(k: KernelIR) -> str:
    s, g = k.schedule, k.gemm
    return "pad " + (
        s.pad if s.pad != "explicit" else f"{g.a.name} {s.pad_a}, {g.b.name} {s.pad_b}"
    )


def _padding(k: KernelIR) -> str:
    s = k.schedule
    if "smem-tiling" not in k.passes:
        return "unused: no shared-memory tiles of A and B"
    if "padding" in k.passes and s.pad == "xor":
        return lowering_for(k).swizzle_note()
    if "padding" in k.passes:
        tiles = [b for b in k.buffers if not b.per_warp]
        pads = ", ".join(f"{b.name} {b.pitch - b.line_length}" for b in tiles)
        return f"rows padded by {pads} element(s): pitches below"
    return "unpadded: pitches below" + (f"; padding {LATER}" if s.pad != "none" else "")


def _coarsening(k: KernelIR) -> str:
    s = k.schedule
    if "warp-coarsening" in k.passes or s.coarsen == (1, 1):
        return (
            f"{s.coarsen[0]} x {s.coarsen[1]} fragment(s) per warp, so "
            f"{k.warps[0]} x {k.warps[1]} warps"
        )
    return f"{LATER}: one fragment per warp, {k.warps[0]} x {k.warps[1]} warps"


def _fragment_buffering(k: KernelIR) -> str:
    if "fragment-buffering" in k.passes:
        return (
            "two sets of A and B fragments: step kk + 1's load while step kk computes, "
            "and the block barrier sits at the last fragment step (fragment-buffering)"
        )
    return "one set of A and B fragments, loaded at each fragment step"


def _syncing(k: KernelIR) -> str:
    s = k.schedule
    if k.mbarriers:
        kept = sum(d.kept for d in k.sync_report)
        return (
            "one block barrier, after the mbarriers' initialisation; the roles hand the "
            f"stages over through mbarriers, and the handoff proof kept {kept} handoff "
            f"statement(s) and removed {len(k.sync_report) - kept} (see --explain-sync)"
        )
    if "sync-elimination" in k.passes:
        kept = sum(d.kept for d in k.sync_report)
        return (
            f"the hazard analysis kept {kept} barrier(s) and removed "
            f"{len(k.sync_report) - kept} (see --explain-sync)"
        )
    return "every barrier the lowering placed is kept" + (
        f"; sync-elimination {LATER}" if s.sync == "minimal" else ""
    )
