"""The pass registry and the pipeline loop.

A pass is a pure function of the kernel: `Pass.run(kernel) -> kernel`, switched
on by its schedule directive (`enabled`). The pipeline runs the enabled passes
in order and calls `after_each(name, kernel)` after every one — where the
verifier runs, and where `--print-ir-after-all` and pictures hook in.

A pass not built yet is not registered; `tiledsl.frontend.refusals` refuses its
directive before the pipeline starts.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from ..errors import Diagnostic, TileError
from ..ir.nodes import KernelIR
from ..ir.schedule import Schedule


@dataclass(frozen=True)
class Pass:
    name: str
    directive: str  # the schedule directive that switches it on
    run: Callable[[KernelIR], KernelIR]
    enabled: Callable[[Schedule], bool]
    summary: str


def _registry() -> tuple[Pass, ...]:
    from .fragment_buffering import fragment_buffering
    from .k_teams import k_teams
    from .launch_scalars import launch_scalars
    from .multi_buffering import multi_buffering
    from .padding import padding
    from .smem_tiling import smem_tiling
    from .split_k import split_k
    from .swizzle import swizzle
    from .sync_elimination import sync_elimination
    from .tma_copies import tma_copies
    from .warp_coarsening import warp_coarsening
    from .warp_specialization import warp_specialization

    return (
        Pass(
            "smem-tiling",
            "stages",
            smem_tiling,
            lambda s: s.stages >= 1,
            "stages A and B tiles through shared memory, with barriers around the compute",
        ),
        Pass(
            "warp-coarsening",
            "coarsen",
            warp_coarsening,
            lambda s: s.coarsen != (1, 1),
            "gives each warp CM x CN fragments, reusing A and B fragments across them",
        ),
        Pass(
            "split-k",
            "split_k",
            split_k,
            lambda s: s.grid_split > 1 and s.direct,
            "gives each of S blocks a slice of a tile's K steps; the last slice to finish "
            "adds their partial sums in slice order (the direct path; warp_specialize "
            "splits in its own pass)",
        ),
        Pass(
            "k-teams",
            "warps_k",
            k_teams,
            lambda s: s.warps_k > 1,
            "gives each of W teams of the warps K steps of its own; their sums meet in "
            "shared memory, added in team order",
        ),
        Pass(
            "multi-buffering",
            "stages",
            multi_buffering,
            lambda s: s.stages >= 2,
            "turns the K loop into a pipeline over `stages` buffers with async copies",
        ),
        Pass(
            "fragment-buffering",
            "fragment_buffers",
            fragment_buffering,
            lambda s: s.fragment_buffers == 2,
            "double-buffers A and B fragments in registers; the block barrier moves to "
            "the last fragment step",
        ),
        Pass(
            "padding",
            "pad",
            padding,
            lambda s: s.stages >= 1 and (s.pad in ("auto", "xor") or bool(s.pad_a or s.pad_b)),
            "changes the shared-memory row pitch of A and B, or XOR-swizzles their rows",
        ),
        Pass(
            "swizzle",
            "swizzle",
            swizzle,
            lambda s: s.swizzle != "none",
            "remaps block ids to tiles",
        ),
        Pass(
            "sync-elimination",
            "sync",
            sync_elimination,
            lambda s: s.sync == "minimal",
            "removes barriers the hazard analysis proves redundant",
        ),
        Pass(
            "tma-copies",
            "copy",
            tma_copies,
            lambda s: s.copy_mode == "tma" and not s.warp_specialize,
            "loads the pipeline's tiles by TMA, counted on mbarriers; every warp computes",
        ),
        Pass(
            "warp-specialization",
            "warp_specialize",
            warp_specialization,
            lambda s: s.warp_specialize,
            "hands the copies to a producer warpgroup (TMA, mbarrier stages); the warps "
            "compute; with persistent, each block loops over tiles",
        ),
        Pass(
            "launch-scalars",
            "persistent",
            launch_scalars,
            lambda s: s.persistent,
            "computes the tile loop's grid-wide values on the host, once per launch; "
            "divides by them with a multiply and a shift",
        ),
    )


PASSES: tuple[Pass, ...] = _registry()
#: The IR straight out of lowering, before any pass; `--stop-after lower` emits it.
LOWER = "lower"
STAGE_NAMES = (LOWER,) + tuple(p.name for p in PASSES)


def run_pipeline(
    kernel: KernelIR,
    stop_after: str | None = None,
    after_each: Callable[[str, KernelIR, bool], None] | None = None,
) -> KernelIR:
    """Run every enabled pass in order; `after_each(name, kernel, ran)` sees each result."""
    if after_each:
        after_each(LOWER, kernel, True)
    if stop_after == LOWER:
        return kernel
    for p in PASSES:
        ran = p.enabled(kernel.schedule)
        if ran:
            try:
                kernel = replace(p.run(kernel), passes=(*kernel.passes, p.name))
            except TileError as err:
                raise TileError([_in_pass(d, p.name) for d in err.diagnostics], err.source) from err
        if after_each:
            after_each(p.name, kernel, ran)
        if stop_after == p.name:
            break
    return kernel


def _in_pass(d: Diagnostic, name: str) -> Diagnostic:
    return Diagnostic(d.loc, f"in pass {name}: {d.message}", d.notes, d.severity)
