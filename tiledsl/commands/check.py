"""`tiledsl check`: the feasibility report of a schedule (the S4000 write-up's table, one row).

    report = check_source(text, "hgemm.tile")           # every kernel of the file
    est = register_estimate(kernel)                     # the write-up's register count
    occ = occupancy(kernel, est.declared_per_thread)    # blocks per multiprocessor
    rows = bank_rows(kernel)                            # the bank model, before/after padding

For each kernel: the schedule and the passes that ran; threads, warps and MMAs;
shared memory per buffer against the target's limit; registers, estimated
the write-up's way (one 32-bit register per fragment element per thread) and, where nvcc
is on PATH, ptxas's real count beside it; blocks per multiprocessor and the limit
that binds; and the bank-conflict ways of every shared-memory access the model
covers, at the natural pitch and at the kernel's.

The file is compiled by `tiledsl.driver.compile_source`, so a wrong file gets the
usual located TileError. The numbers come from the IR (`KernelIR`) and the device
model (`tiledsl.ir.targets`); nothing here is measured except ptxas's registers.
"""

from __future__ import annotations

from pathlib import Path

from ..driver import Compiled, compile_source
from ..errors import ToolchainError, UsageError
from ..frontend.hopper import MAX_CLUSTER
from ..gpu import toolchain
from ..gpu.toolchain import PtxasReport
from ..ir.expr import to_c
from ..ir.fetch import fetch_parts
from ..ir.grid import FLAG_DEFER_STEPS, SK_PARTS
from ..ir.nodes import (
    KernelIR,
    Roles,
    TmaLoad,
    buffer_offsets,
    walk,
)
from ..ir.partial_tiles import guards_fragments, tma_only
from ..ir.targets import build_arch
from ..lowering.edges import (
    fits_block_tile,
    guarded_vectors,
    partial_tiles_how,
    vector_fallbacks,
)
from ..models.banks import bank_rows, best_pad, tile_buffers, unaligned_async_rows
from ..models.feasibility import sweep as feasibility_sweep
from ..models.occupancy import REGISTER_UNIT, occupancy
from ..models.registers import register_cap, register_estimate
from .grid_report import grid_lines, visible_sms
from .sweep import render_sweep
from .tables import text_table

# ---------------------------------------------------------------- the numbers


# ---------------------------------------------------------------- the report


def check_source(
    text: str,
    file: str = "<string>",
    target: str | None = None,
    kernel: str | None = None,
    ptxas: bool = True,
    sweep: bool = False,
    reserve: int = 0,
    size: tuple[int, int, int] | None = None,
) -> str:
    """The report for every kernel of a file (or the one named `kernel`).

    `sweep` adds the write-up's feasibility table over blocks per multiprocessor, with
    `reserve` registers per thread set aside for addresses and loop counters.
    """
    compiled = compile_source(text, file, target)
    names = [k.name for k in compiled.kernels]
    if kernel is not None and kernel not in names:
        raise UsageError(f"no kernel '{kernel}' in {file}; it has: {', '.join(names)}")
    kernels = [k for k in compiled.kernels if kernel is None or k.name == kernel]
    takes = ""
    if size is not None and len(kernels) > 1:
        # a file of several kernels: the one the size takes (the dispatch table beside the
        # file, if any, else the first that covers it without its twin), and its report
        from ..tune.dispatch import choose_kernel, table_beside
        from .run import SizeError

        table = table_beside(file, compiled.kernels)
        try:
            picked = choose_kernel(tuple(kernels), size, 1, table)
        except SizeError as err:
            raise UsageError(
                f"no kernel of {file} runs {'x'.join(map(str, size))}: {err}"
            ) from None
        takes = f"{'x'.join(map(str, size))} takes {picked.why}\n\n"
        kernels = [picked.kernel]
    elif size is not None:
        from .run import SizeError, check_size

        for k in kernels:
            try:
                check_size(k, size)
            except SizeError as err:
                raise UsageError(f"{k.name}: {err}") from None
    reports, note = _ptxas(compiled, kernels, Path(file).stem) if ptxas else ({}, "not asked")
    parts = []
    for k in kernels:
        text = report(k, reports.get(k.name), _ptxas_note(k, note), size)
        if sweep:
            text += "\n" + render_sweep(k, feasibility_sweep(k, reserve), reserve)
        parts.append(text)
    return takes + "\n".join(parts)


def _ptxas_note(kernel: KernelIR, note: str) -> str:
    if kernel.target.vendor == "musa":
        return "none for MUSA (no MUSA compiler here); the estimate is used"
    return note


def _ptxas(
    compiled: Compiled, kernels: list[KernelIR], stem: str
) -> tuple[dict[str, PtxasReport], str]:
    """ptxas's report per kernel name, or why there is none."""
    kernels = [k for k in kernels if k.target.vendor == "cuda"]
    if not kernels:
        return {}, "no CUDA kernel"
    if toolchain.nvcc_path() is None:
        return {}, "nvcc is not on PATH: no ptxas numbers, the estimate is used"
    reports: dict[str, PtxasReport] = {}
    try:
        for group in compiled.by_architecture().values():
            mine = [k for k in group if k in kernels]
            if mine:
                arch = build_arch(mine[0].target.arch, mine)
                reports.update(toolchain.compile_cubin(compiled.source_for(group), arch, stem))
    except ToolchainError as err:
        first = str(err).splitlines()[0]
        where = f" (source kept at {err.source_path})" if err.source_path else ""
        return {}, f"nvcc failed: {first}{where}; the estimate is used"
    return reports, "ptxas did not report this kernel; the estimate is used"


def _staging_lines(kernel: KernelIR, size: tuple[int, int, int]) -> list[str]:
    """What a TMA kernel does at `size`: its tiles, and which operands it stages."""
    from ..emit.launch import launch_of
    from ..gpu.staging import plan

    sizes = kernel.gemm.as_written.size_env(*size)  # the caller's M x N x K
    shown = "x".join(map(str, size))
    tiles = "whole tiles" if fits_block_tile(kernel, sizes) else "partial tiles at the edges"
    staged = plan(launch_of(kernel), sizes)
    out = [f"    at {shown}: {kernel.name}, {tiles}" + ("" if staged else "; nothing staged")]
    return out + [f"      {s.describe()}" for s in staged]


def _edge_lines(kernel: KernelIR, size: tuple[int, int, int] | None) -> list[str]:
    """Which kernel runs which sizes, and where guarded copies lose their vectors."""
    block = " x ".join(map(str, kernel.schedule.block))
    out = ["  edge tiles"]
    twin = kernel.edge
    if tma_only(kernel):
        out.append(
            f"    every size runs {kernel.name} ({partial_tiles_how(kernel)}); an operand whose "
            "lines are not a whole 16 bytes is first copied into lines padded to 128 bytes "
            "(tiledsl.gpu.staging)"
        )
        if size is not None:
            out += _staging_lines(kernel, size)
        return [*out, ""]
    if guards_fragments(kernel):
        out.append(
            f"    every size runs {kernel.name}: each lane's 16-byte vector of A or B is loaded "
            "where it lies inside its operand (and its rows are a whole 16 bytes), element by "
            "element where it reaches past it, zeros outside; C's stores are guarded element "
            "by element"
        )
        return [*out, ""]
    if twin is None:
        out.append(
            f"    none: sizes must be multiples of {block} (stages 0 loads fragments straight "
            "from global memory, which WMMA cannot guard)"
        )
        return [*out, ""]
    out.append(
        f"    multiples of {block} run {kernel.name} (no bounds checks); other sizes run "
        f"{twin.name}: zero-filled partial tiles, C staged per warp ({twin.smem_bytes} bytes "
        "shared)"
    )
    for op, vector in guarded_vectors(twin):
        out.append(
            f"    {op.name}: {vector}-element vectors need its leading dimension "
            f"{to_c(op.leading_dim, named=False)} to be a multiple of {vector}; otherwise its "
            "edge copies move single elements"
        )
    if size is not None:
        sizes = kernel.gemm.as_written.size_env(*size)  # the caller's M x N x K
        shown = "x".join(map(str, size))
        if fits_block_tile(kernel, sizes):
            out.append(f"    at {shown}: {kernel.name}, the fast path")
        else:
            out.append(f"    at {shown}: {twin.name}")
            for note in vector_fallbacks(twin, sizes) or ["every copy keeps its vectors"]:
                out.append(f"      {note}")
    return [*out, ""]


def report(
    kernel: KernelIR,
    ptxas: PtxasReport | None = None,
    ptxas_note: str = "",
    size: tuple[int, int, int] | None = None,
) -> str:
    t = kernel.target
    out = [f"kernel {kernel.name} ({t.name})"]
    out.append("  schedule  " + schedule_line(kernel))
    out.append("  passes    " + (" -> ".join(kernel.passes) or "none (the naive kernel)"))
    out.append("")

    out += _threads(kernel)
    out += _shared_memory(kernel)
    out += _registers(kernel, ptxas, ptxas_note)
    out += _occupancy(kernel, ptxas)
    out += _edge_lines(kernel, size)
    if size is not None:
        out += grid_lines(kernel, size, *visible_sms())
    out += _bank_conflicts(kernel)
    return "\n".join(out) + "\n"


def _threads(kernel: KernelIR) -> list[str]:
    """Threads, warps and MMAs per block."""
    t, s = kernel.target, kernel.schedule
    out: list[str] = []
    wm, wn = kernel.warps
    cm, cn = s.coarsen
    m, n, k = s.mma
    steps = s.block[2] // k
    frags = cm * cn
    unit = s.path.ir_warp + "s"
    producer = (
        f" + {kernel.producer_warps} producer warpgroup (one thread issues the TMA copies)"
        if kernel.producer_warps
        else ""
    )
    out.append(
        f"  threads   {kernel.threads} per block = {_teams(kernel)}{kernel.warp_count} {unit} "
        f"({wm} x {wn}) of {kernel.warp_width} lanes{producer} (limit {t.max_threads_per_block})"
    )
    op = s.path.mma_call
    out.append(
        f"  MMAs      {frags} per {unit[:-1]} ({cm} x {cn} fragments of {m}x{n}x{k}); "
        f"{frags * steps} {op} per {unit[:-1]} per K step of {s.block[2]}"
    )
    if kernel.mbarriers:
        kept = sum(d.kept for d in kernel.sync_report)
        out.append(
            f"  handoffs  proven to order every shared-memory access under every interleaving "
            f"of the {'roles' if kernel.specialization else 'warpgroups'}, without deadlock "
            f"(tiledsl.models.mbarrier_hazards); {kept} kept, "
            f"{len(kernel.sync_report) - kept} removed; `compile --explain-sync` says what "
            "each one prevents"
        )
    out += _cluster(kernel)
    out += _splits(kernel)
    out.append("")
    return out


def _teams(kernel: KernelIR) -> str:
    """The copies of the IR's warps a block holds, as the threads line opens with them."""
    if kernel.k_teams > 1:
        w, runs = kernel.k_teams, kernel.schedule.k_runs
        if runs == 1:
            return f"{w} K teams (warps_k: team t on K steps t, t + {w}, ...) of "
        return (
            f"{w} K teams in {runs} runs (warps_k {w} runs {runs}: {w // runs} teams on "
            "each run of the K steps, in turn) of "
        )
    return f"{kernel.teams} teams (pingpong, alternate tiles) of " if kernel.teams > 1 else ""


def _splits(kernel: KernelIR) -> list[str]:
    """Stream-K's and split-K's shares of the K steps, their workspace and hand-over."""
    s = kernel.schedule
    out: list[str] = []
    if kernel.stream_k:
        bm, bn, _ = s.block
        split = (
            f"the tiles of a last round in {s.split_k} slices of their K steps each (a block "
            f"per slice, when they fit in the grid; else whole)"
            if s.split_k
            else f"the tiles of a last round in equal shares of their K steps (at least "
            f"1/{SK_PARTS} of a tile's each), each block's last tile first: every block starts "
            "at K step 0"
            if s.aligned
            else f"the tiles left in equal shares of their K steps (at least 1/{SK_PARTS} of "
            "a tile's each)"
        )
        title = "split-K" if s.split_k else "stream-K" + (" aligned" if s.aligned else "")
        out.append(
            f"  {title}  whole rounds of tiles, then {split}; "
            f"workspace: {bm * bn * 4} bytes "
            "of f32 partial sums and a flag per block of the grid, in global memory (the "
            "launcher allocates them once); every block resident (the persistent grid)"
        )
        parts = fetch_parts(kernel)
        if parts:
            out.append(
                f"  fetch  an owner's producer copies its first contributor's partial sum "
                f"into the {parts} stage slots after its last K step (cp.async.bulk, "
                "tiledsl.ir.fetch); its consumers add it from shared memory"
            )
        if s.aligned:
            out.append(
                "  flag  a piece that hands its partial sum over goes on to the block's next "
                f"piece and signals its flag FLAG_DEFER_STEPS ({FLAG_DEFER_STEPS}) K steps into "
                "it (at that piece's last step if it has fewer; at once if the share has no "
                "next piece), so that its stores drain under those steps' wgmmas"
            )
    if kernel.split_cluster:
        bm, bn, _ = s.block
        out.append(
            f"  split-K  a block per slice of every tile, {kernel.grid_split} slices of its K "
            f"steps, the tile's slices one thread-block cluster of {kernel.grid_split}: every "
            f"slice but the first leaves its f32 partial sum ({bm * bn * 4} bytes) in its Ps "
            "and arrives on slice 0's `sums`; slice 0 adds them over distributed shared memory "
            "in slice order, hands each Ps back (`taken`) and stores C; no workspace, no "
            "ticket; a slice's block stays until slice 0 has read its Ps"
        )
    elif kernel.grid_split:
        bm, bn, _ = s.block
        out.append(
            f"  split-K  a block per slice of every tile, {kernel.grid_split} slices of its K "
            f"steps; workspace: {bm * bn * 4} bytes of f32 partial sums per block and a "
            "ticket counter per tile, in global memory (the launcher allocates them for the "
            "largest grid launched); the last slice of a tile to finish adds them in slice "
            "order; no block waits for another"
        )
    return out


def _cluster(kernel: KernelIR) -> list[str]:
    """A cluster's blocks, what each multicasts, and its limits."""
    if kernel.cluster_size == 1:
        return []
    cm, cn = kernel.cluster
    parts = list(  # once each (a stream-K producer issues them in two loops)
        dict.fromkeys(
            f"{load.src.operand}'s tile in {load.src.rows}x{load.src.cols} parts to its "
            f"cluster {load.multicast}"
            for load in walk(kernel.body)
            if isinstance(load, TmaLoad) and load.multicast
        )
    )
    empty = next(m for m in kernel.mbarriers if m.name == "empty")
    return [
        f"  cluster   {cm} x {cn} = {kernel.cluster_size} blocks (limit {MAX_CLUSTER}, portable); "
        + "; ".join(parts)
        + f"; empty counts {empty.arrivals} releases from the blocks sharing a tile; the "
        "launch holds the clusters the device keeps resident (cuOccupancyMaxActiveClusters)"
    ]


def _shared_memory(kernel: KernelIR) -> list[str]:
    """Each shared buffer, its bytes and the block's total against the limit."""
    t = kernel.target
    out: list[str] = []
    out.append("  shared memory per block")
    if kernel.buffers:
        offsets = buffer_offsets(kernel)
        rows = []
        for b in kernel.buffers:
            shape = f"{b.slots} x {b.lines} {b.line_kind} x {b.pitch}"
            pad = f"{b.line_length}+{b.pitch - b.line_length}" if b.pitch != b.line_length else ""
            alias = getattr(b, "alias", None)
            holds = b.purpose + (f" (aliases {alias})" if alias else "")
            cells = [b.name, shape, b.dtype, pad, str(offsets[b.name]), str(b.size_bytes), holds]
            rows.append(["  " + cells[0], *cells[1:]])
        at = kernel.mbarrier_offsets()
        for m in kernel.mbarriers:
            shape = f"{m.slots} x 8 bytes"
            cells = [m.name, shape, "b64", "", str(at[m.name]), str(8 * m.slots), m.purpose]
            rows.append(["  " + cells[0], *cells[1:]])
        total = kernel.smem_bytes
        pct = 100 * total / t.max_smem_per_block
        align = kernel.schedule.path.smem_align
        rows.append(["  total", "", "", "", "", str(total), f"buffers start {align}-byte aligned"])
        out += text_table(
            ["  buffer", "slots x lines x pitch", "type", "line+pad", "offset", "bytes", "holds"],
            rows,
            right={4, 5},
            indent="  ",
        )
        out.append(
            f"    {total} of {t.max_smem_per_block} bytes a block may use ({pct:.0f}%); "
            f"{t.smem_per_sm} per multiprocessor"
        )
    else:
        out.append("    none (stages 0: fragments load straight from global memory)")
    out.append("")
    return out


def _registers(kernel: KernelIR, ptxas: PtxasReport | None, ptxas_note: str) -> list[str]:
    """The fragments' registers: the estimates, and ptxas's count where there is one."""
    est = register_estimate(kernel)
    out = [
        "  registers, ESTIMATE (one 32-bit register per fragment element, spread over the "
        f"{kernel.warp_width} lanes",
        "  of a warp; the S4000 write-up counts one A fragment live at a time, tiledsl's "
        "kernel keeps all it declares;",
        "  addresses and loop counters not counted)",
    ]
    out += _fragment_table(est)
    out += _register_budget(kernel, est, ptxas)
    out += _ptxas_lines(kernel, ptxas, ptxas_note)
    return [*out, ""]


def _fragment_table(est) -> list[str]:
    """Each fragment's elements per warp, declared and as the write-up counts them."""
    rows = [
        [
            "  " + f.name,
            f.role,
            f"{f.count[0]} x {f.count[1]} of {f.rows}x{f.cols}",
            f.dtype,
            str(f.elements),
            str(f.live),
        ]
        for f in est.fragments
    ]
    rows.append(
        [
            "  total",
            "",
            "",
            "",
            str(sum(f.elements for f in est.fragments)),
            str(sum(f.live for f in est.fragments)),
        ]
    )
    return text_table(
        ["  fragment", "role", "count", "type", "declared/warp", "write-up's count/warp"],
        rows,
        right={4, 5},
        indent="  ",
    )


def _register_budget(kernel: KernelIR, est, ptxas: PtxasReport | None) -> list[str]:
    """The estimates per thread and block against the target's limits (and setmaxnreg's
    split between the roles)."""
    t = kernel.target
    allowed = t.registers_per_thread(kernel.threads)
    out = [
        f"    the write-up's method: {est.writeup_per_thread} registers per thread, "
        f"{est.writeup_per_block} per block",
        f"    this kernel:   {est.declared_per_thread} registers per thread, "
        f"{est.declared_per_block} per block (limits: {allowed} per thread at "
        f"{kernel.threads} threads, {t.registers_per_sm} per multiprocessor)",
    ]
    roles = next((st for st in kernel.body if isinstance(st, Roles)), None)
    if roles is not None:
        out.append(
            f"    per role after setmaxnreg: producer {roles.producer.registers}, consumers "
            f"{roles.consumer.registers} per thread (from {allowed} at entry; a consumer grows "
            "only by what the producer gives back)"
        )
    if est.declared_per_thread > allowed and (ptxas is None or ptxas.spills):
        out.append(
            f"    the estimate is over the {allowed} registers a thread may have here: "
            "expect spills; use less coarsening"
        )
    elif est.declared_per_thread > allowed:
        out.append(
            f"    the estimate is over the {allowed} registers a thread may have here, but "
            "ptxas fits the kernel (two f16 elements share a register, and it reuses them)"
        )
    return out


def _ptxas_lines(kernel: KernelIR, ptxas: PtxasReport | None, note: str) -> list[str]:
    """ptxas's registers, spills, stack and static shared memory (or why there are none)."""
    if ptxas is None:
        return [f"    ptxas: {note}"]
    spilled = (
        f"spills {ptxas.spill_stores}/{ptxas.spill_loads} bytes (stores/loads)"
        if ptxas.spills
        else "no spills"
    )
    return [
        f"    ptxas ({build_arch(kernel.target.arch, (kernel,))}): {ptxas.registers} registers "
        f"per thread, {ptxas.registers * kernel.threads} per block, {spilled}, "
        f"{ptxas.stack_frame} bytes stack",
        f"    ptxas shared memory: {ptxas.smem_bytes} bytes static; the "
        f"{kernel.smem_bytes} bytes above are dynamic (given at launch), which ptxas "
        "does not see",
    ]


def _occupancy(kernel: KernelIR, ptxas: PtxasReport | None) -> list[str]:
    """Blocks per multiprocessor and the limit that binds."""
    t = kernel.target
    out: list[str] = []
    est = register_estimate(kernel)
    regs, source = (
        (ptxas.registers, "ptxas") if ptxas else (est.declared_per_thread, "this kernel's estimate")
    )
    occ = occupancy(kernel, regs, source)
    out.append("  blocks per multiprocessor")
    rows = []
    for lim in occ.limits:
        blocks = "no limit" if lim.blocks is None else str(lim.blocks)
        mark = "<- binds" if lim.resource in occ.binding else ""
        row = [lim.resource, str(lim.per_sm), str(lim.per_block), blocks, lim.note, mark]
        rows.append(["  " + row[0], *row[1:]])
    out += text_table(
        ["  limit", "per SM", "per block", "blocks", "from", ""],
        rows,
        right={1, 2, 3},
        indent="  ",
    )
    unit = REGISTER_UNIT.get(t.vendor)
    rounding = (
        f"registers rounded up to a multiple of {unit} per thread ({unit * t.warp_width} per "
        "warp, the allocation unit)"
        if unit
        else "registers not rounded (allocation unit unknown for this target)"
    )
    out.append(f"    {rounding}")
    asked = kernel.schedule.blocks_per_sm
    if asked > 1:
        cap = register_cap(t, kernel.threads, asked)
        out.append(
            f"    blocks_per_sm {asked}: ptxas caps registers at {cap} per thread "
            f"(__launch_bounds__(THREADS, {asked}))"
            + ("" if ptxas else "; the estimate above counts fragments only")
        )
        if 0 < occ.blocks < asked:
            out.append(
                f"    fewer blocks than blocks_per_sm asks ({occ.blocks} of {asked}): "
                f"{' and '.join(occ.binding)} bind"
            )
    if occ.blocks == 0:
        out.append(
            f"    => 0 blocks: the block does not fit on a multiprocessor "
            f"({' and '.join(occ.binding)})"
        )
    else:
        pct = 100 * occ.warps_per_sm / occ.max_warps_per_sm
        out.append(
            f"    => {occ.blocks} block{'s' if occ.blocks != 1 else ''} per multiprocessor, "
            f"{occ.warps_per_sm} of {occ.max_warps_per_sm} warps ({pct:.0f}%); "
            f"limited by {' and '.join(occ.binding)}"
        )
    out.append("")
    return out


def _bank_conflicts(kernel: KernelIR) -> list[str]:
    """The bank model's ways of every shared-memory access, before and after padding."""
    out: list[str] = []
    out.append(
        "  bank conflicts (the bank model: 32 banks of 4 bytes; ways = passes per request, "
        "1 = conflict-free;"
    )
    out.append(
        "  before pad: pitch = the tile's columns; after pad: the kernel's pitch; instructions "
        "of all warps)"
    )
    brows = bank_rows(kernel)
    if not brows:
        out.append("    no shared-memory tiles of A or B: nothing to model")
    else:
        rows = [
            [
                "  " + r.access,
                r.buffer,
                f"{r.pitch_before} -> {r.pitch_after}",
                str(r.ways_before),
                str(r.ways_after),
                str(r.instructions),
            ]
            for r in brows
        ]
        out += text_table(
            ["  access", "buffer", "pitch", "ways before pad", "ways after pad", "instr/K step"],
            rows,
            right={2, 3, 4, 5},
            indent="  ",
        )
        cost_before = sum(r.instructions * r.ways_before for r in brows)
        cost_after = sum(r.instructions * r.ways_after for r in brows)
        out.append(
            f"    serialized passes per K step (instr x ways): {cost_before} before padding, "
            f"{cost_after} after"
        )
        picks = ", ".join(f"{b[:-1]} {best_pad(kernel, b)}" for b in tile_buffers(kernel))
        have = ", ".join(
            f"{b[:-1]} {kernel.buffer(b).pitch - kernel.buffer(b).line_length}"
            for b in tile_buffers(kernel)
        )
        out.append(f"    pad auto would pick: {picks} (this kernel: {have})")
        unaligned = unaligned_async_rows(kernel)
        if unaligned:
            out.append(
                "    cp.async stores into rows not 128-byte aligned: counted conflict-free above, "
                "but the H200"
            )
            out.append(
                "      took 2.0-2.6x their ideal wavefronts for them (Nsight Compute, 2026-11-29)"
            )
        for name, pitch in unaligned:
            if kernel.buffer(name).xor:
                fix = "lines of 128 bytes or more would be aligned (e.g. BK 64 in f16)"
            else:
                fix = "pad xor keeps rows aligned (mma.sync path; WMMA cannot read it)"
            out.append(f"      {name}: rows {pitch} bytes apart; {fix}")
    return out


def schedule_line(kernel: KernelIR) -> str:
    s = kernel.schedule
    parts = [
        *(["swap_operands (C^T = B^T A^T)"] if s.swap_operands else []),
        "block " + "x".join(map(str, s.block)),
        "mma " + s.path.compact_shape(s.mma),
        "coarsen " + "x".join(map(str, s.coarsen)),
        f"stages {s.stages}",
    ]
    if s.warps_k != 1:
        parts.append(f"warps_k {s.warps_k}" + (f" runs {s.k_runs}" if s.k_runs != 1 else ""))
    if s.blocks_per_sm != 1:
        parts.append(f"blocks_per_sm {s.blocks_per_sm}")
    if s.fragment_buffers != 1:
        parts.append(f"fragment_buffers {s.fragment_buffers}")
    if s.stages >= 1:
        parts.append("copy tma" if s.copy_mode == "tma" else f"copy {s.copy_mode} {s.copy_bytes}")
    if s.warp_specialize:
        parts.append("warp_specialize" + (" pingpong" if s.pingpong else ""))
    if s.persistent:
        kind = f" {s.split_word}" + (f" {s.split_k}" if s.split_k else "")
        parts.append("persistent" + (kind if s.split_word else ""))
    if s.grid_split:
        parts.append(f"split_k {s.grid_split}" + (" via cluster" if kernel.split_cluster else ""))
    if s.cluster_size > 1:
        parts.append(f"cluster {s.cluster[0]}x{s.cluster[1]}")
    pads = ", ".join(
        f"{b[:-1]} {kernel.buffer(b).pitch - kernel.buffer(b).line_length}"
        for b in tile_buffers(kernel)
    )
    if s.pad == "auto":
        parts.append(f"pad auto ({pads})" if pads else "pad auto")
    elif s.pad in ("none", "xor"):
        parts.append(f"pad {s.pad}")
    else:
        parts.append(f"pad {pads}" if pads else f"pad A {s.pad_a}, B {s.pad_b}")
    parts.append(f"swizzle {s.swizzle}" + (f" {s.swizzle_param}" if s.swizzle != "none" else ""))
    parts.append(f"sync {s.sync}")
    return "  ".join(parts)
