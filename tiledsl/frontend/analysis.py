"""Meaning for a parsed kernel: its GEMM, its schedule, its target, checked together.

`analyze(kernel)` combines `gemm.resolve_gemm` and `schedule.read_directives`,
fills the defaults that depend on the operands, and checks what needs both —
divisibility, the target's fragment shapes and limits, copy widths — collecting
every problem of the file. What the compiler cannot build yet is refused
afterwards by `tiledsl.frontend.refusals`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..errors import Collector
from ..ir.dtypes import DTYPE_NAMES
from ..ir.expr import Const
from ..ir.gemm import LAYOUTS, Gemm
from ..ir.nodes import (
    DTYPE_BYTES,
    SMEM_ALIGN,
    TICKET_BOX_BYTES,
    lanes_per_warp,
    swizzle_panel,
    xor_geometry,
)
from ..ir.schedule import Schedule
from ..ir.targets import DEFAULT_TARGET, TARGETS, Target
from ..limits import GRID_Y_MAX, dim_problem
from ..models.registers import fragment_registers, register_cap
from . import syntax as S
from .computation import resolve_gemm
from .direct import check_direct
from .directives import read_directives
from .hopper import check_hopper
from .names import check_kernel_names
from .residency import check_blocks_per_sm


@dataclass(frozen=True)
class Analysis:
    name: str
    gemm: Gemm
    schedule: Schedule
    target: Target


def analyze(
    kernel: S.Kernel, target_override: str | None = None, errs: Collector | None = None
) -> Analysis | None:
    """Resolve and check one kernel.

    With a Collector, problems are added to it and the result is None only when the
    GEMM itself cannot be made out; without one, any problem raises TileError.
    """
    if errs is None:
        own = Collector()
        result = analyze(kernel, target_override, own)
        own.raise_if_any()
        return result
    sched, pads = read_directives(kernel, target_override, errs)
    target = TARGETS.get(sched.target, TARGETS[DEFAULT_TARGET])
    gemm = resolve_gemm(kernel, errs)
    check_kernel_names(kernel, gemm, errs)
    if gemm is not None:
        _check_epilogue(gemm, sched, errs)  # a bias runs along C's columns as written
        gemm = _swapped_if_asked(gemm, sched, errs)
        sched = _resolve_operand_defaults(sched, gemm, pads, errs)
        _check_types(gemm, sched, target, errs)
    # An operand of an unknown element type or layout is already refused: the checks
    # that need its element size or its orientation skip the GEMM, and nothing is lowered.
    if gemm is not None and not all(
        op.dtype in DTYPE_NAMES and op.layout in LAYOUTS
        for op in (gemm.a, gemm.b, gemm.c, *gemm.extras)
    ):
        gemm = None
    if gemm is not None:
        sched = _resolve_store_columns(sched, gemm, target)
    _check_shapes(sched, target, gemm, errs)
    if gemm is not None:
        check_hopper(sched, target, gemm, errs)
        check_direct(sched, gemm, errs)
    return None if gemm is None else Analysis(kernel.name, gemm, sched, target)


def _swapped_if_asked(gemm: Gemm, sched: Schedule, errs: Collector) -> Gemm:
    """The product the kernel computes: its transpose under `swap_operands` (where every
    layout is known; an unknown one is refused already), else the product as written."""
    if not sched.swap_operands or not all(op.layout in LAYOUTS for op in (gemm.a, gemm.b, gemm.c)):
        return gemm
    biased = any(step[0] == "bias" for step in sched.epilogue)
    if biased and not sched.warp_specialize:
        errs.add(
            sched.loc("epilogue"),
            "epilogue bias with swap_operands is built where the epilogue runs on the "
            "accumulators in registers (warp_specialize) only: the bias runs along the "
            "transposed product's rows, and C's staging copy knows each element's column",
            "add `warp_specialize` (wgmma, `copy tma`), drop `swap_operands`, or add the bias "
            "after the call",
        )
    return gemm.swapped()


def _resolve_operand_defaults(sched: Schedule, gemm: Gemm, pads: dict, errs: Collector) -> Schedule:
    updates: dict = {}
    if "epilogue_via" not in sched.written:
        # Direct only when the accumulator is C's type (a fragment store cannot convert)
        # and there is no epilogue (it needs each element's column: the staging tile's).
        direct = gemm.c.dtype == sched.accumulate and not sched.epilogue
        # warp specialization: the consumers store C from their registers, converting
        direct = direct or sched.warp_specialize
        # the direct path's lanes too (mma.sync, stages 0: no shared memory to stage C in)
        direct = direct or sched.direct
        updates["epilogue_via"] = "direct" if direct else "shared"
    if sched.path.default_pad and "pad" not in sched.written:
        updates["pad"] = sched.path.default_pad  # wgmma: the 128-byte swizzle it reads
    for name, (value, loc, value_loc) in pads.items():
        if name in (gemm.a.name, gemm.b.name):
            updates["pad_a" if name == gemm.a.name else "pad_b"] = value
            _check_pad_alignment(sched, gemm, gemm.operand(name), value, value_loc, errs)
        else:
            errs.add(
                loc,
                f"'{name}' is not an input operand; pad applies to {gemm.a.name} and {gemm.b.name}",
                f"e.g. `pad {gemm.a.name} 8, {gemm.b.name} 8`",
            )
    return replace(sched, **updates)


#: Columns of C one consumer warpgroup can hold at most (wgmma N ≤ 256, a few fragments
#: side by side): wider tiles are refused elsewhere, and not searched here.
MAX_STORE_COLUMNS = 2048


def store_column_choices(sched: Schedule, c_dtype: str) -> list[int]:
    """The widths `epilogue_via tma` can stage C in, widest first: whole 128-byte panels
    (the swizzle's line, one TMA store box: 64 elements of f16, 32 of f32) that cut a
    consumer warpgroup's columns into equal pieces, each within one fragment or whole
    fragments side by side."""
    n, panel = sched.mma[1], swizzle_panel(c_dtype)
    total = n * sched.coarsen[1]
    if not 0 < total <= MAX_STORE_COLUMNS:
        return []  # no warpgroup is that wide (the shape checks say why): nothing to search
    return [
        width
        for width in range(total - total % panel, 0, -panel)
        if total % width == 0 and ((width <= n and n % width == 0) or width % n == 0)
    ]


def _resolve_store_columns(sched: Schedule, gemm: Gemm, target: Target) -> Schedule:
    """`epilogue_via tma`: the widest staging of C that fits the block's shared memory
    beside the stages (the narrowest when none does: the shared-memory check reports it)."""
    if sched.epilogue_via != "tma" or not sched.path.feeds_tma_pipeline:
        return sched
    choices = store_column_choices(sched, gemm.c.dtype) if min(sched.mma) > 0 else []
    if not choices or min(sched.warps) < 1:
        return sched  # refused by the Hopper checks (no panel-wide staging)
    for width in choices:
        candidate = replace(sched, store_columns=width)
        if shared_memory_bytes(candidate, gemm, False) <= target.max_smem_per_block:
            return candidate
    return replace(sched, store_columns=choices[-1])


def tile_shape(sched: Schedule, gemm: Gemm, op) -> tuple[int, int]:
    """(lines, elements per line) of `op`'s shared-memory block tile: A is BM x BK and B is
    BK x BN, stored along the operand's contiguous axis (rows, or columns if col-major)."""
    bm, bn, bk = sched.block
    rows, cols = (bm, bk) if op.name == gemm.a.name else (bk, bn)
    return (rows, cols) if op.layout == "row" else (cols, rows)


def _check_pad_alignment(sched: Schedule, gemm: Gemm, op, pad: int, loc, errs: Collector) -> None:
    """A padded line must stay a whole number of 16-byte chunks: copies and fragment loads
    move 16 bytes at a time, on 16-byte boundaries."""
    if sched.block == (0, 0, 0) or op.dtype not in DTYPE_BYTES:
        return  # the block or the element type is already refused
    _, line = tile_shape(sched, gemm, op)
    size = DTYPE_BYTES[op.dtype]
    if (line + pad) * size % 16:
        fix = next(p for p in range(pad, pad + 16) if (line + p) * size % 16 == 0)
        errs.add(
            loc,
            f"pad {op.name} {pad} makes the lines of {op.name}'s shared-memory tile "
            f"{line} + {pad} elements = {(line + pad) * size} bytes, not a multiple of 16 "
            "(copies and fragment loads move 16-byte chunks on 16-byte boundaries)",
            f"pad by a multiple of {16 // size} elements, e.g. `pad {op.name} {fix}`",
        )


# ---------------------------------------------------------------- checks


def _check_types(gemm: Gemm, sched: Schedule, target: Target, errs: Collector) -> None:
    for op in (gemm.a, gemm.b):
        if op.dtype in DTYPE_NAMES and op.dtype not in target.mma_shapes:  # else: unknown, refused
            errs.add(
                op.loc,
                f"{target.name} tensor cores take no {op.dtype} inputs",
                "inputs may be " + " or ".join(target.mma_shapes),
            )
    if gemm.a.dtype != gemm.b.dtype and {gemm.a.dtype, gemm.b.dtype} <= set(DTYPE_NAMES):
        errs.add(
            gemm.b.loc,
            f"A and B must have one element type; found {gemm.a.dtype} and {gemm.b.dtype}",
            "declare both f16 (or both bf16)",
        )
    if sched.accumulate not in ("f32", "f16"):
        errs.add(
            sched.loc("accumulate"),
            f"cannot accumulate in '{sched.accumulate}'",
            "write `accumulate f32` (default) or `accumulate f16`",
        )


def _check_epilogue(gemm: Gemm, sched: Schedule, errs: Collector) -> None:
    """alpha and beta are numbers, each step once; a bias names a declared [N] vector; every
    operand outside the product is some bias."""
    loc = sched.loc("epilogue")
    seen: set[str] = set()
    biases: set[str] = set()
    for group in sched.epilogue:
        word = group[0]
        if word in seen and word != "bias":
            errs.add(loc, f"'{word}' appears twice in the epilogue", f"keep one '{word}'")
        seen.add(word)
        if word in ("alpha", "beta"):
            _check_scale(gemm, group, loc, errs)
        elif word == "bias":
            _check_bias(gemm, group, loc, biases, errs)
    for op in gemm.extras:
        if op.name not in biases:
            errs.add(
                op.loc,
                f"operand '{op.name}' is declared but neither the product nor the epilogue uses it",
                f"add `epilogue bias {op.name}` or drop the declaration",
            )
    if (
        sched.epilogue
        and sched.epilogue_via == "direct"
        and "epilogue_via" in sched.written
        and not sched.warp_specialize  # its consumers know each element's column
    ):
        errs.add(
            sched.loc("epilogue_via"),
            "an epilogue runs as C leaves the per-warp staging tile, where each element's "
            "column is known; epilogue_via direct stores fragments straight to C",
            "write `epilogue_via shared`, or drop the line (the default with an epilogue)",
        )


def _check_scale(gemm: Gemm, group: tuple[str, ...], loc, errs: Collector) -> None:
    """`alpha V` / `beta V`: a number, or `runtime` (a kernel parameter of that name, which
    no operand or size may have)."""
    word = group[0]
    if group[1:] == ("runtime",):
        taken = {op.name for op in (gemm.a, gemm.b, gemm.c, *gemm.extras)}
        taken |= set(gemm.size_args)
        if word in taken:
            errs.add(
                loc,
                f"'{word} runtime' makes {word} a parameter of the kernel, and an operand "
                f"or size is named {word} already",
                f"rename that operand or size, or write a number: `epilogue {word} 1.5`",
            )
        return
    try:
        float(group[1])
    except (IndexError, ValueError):
        errs.add(
            loc,
            f"'{word}' takes a number or `runtime`",
            f"e.g. `epilogue {word} 1.5`, or `epilogue {word} runtime`",
        )


def _check_bias(gemm: Gemm, group: tuple[str, ...], loc, biases: set[str], errs: Collector) -> None:
    """`bias NAME`: a declared vector of one value per column of C, added once (its name
    joins `biases`)."""
    name = group[1] if len(group) > 1 else ""
    extras = {op.name: op for op in gemm.extras}
    if name not in extras:
        errs.add(
            loc,
            f"bias '{name}' is not a declared vector"
            + (" (it is an operand of the product)" if name in _product(gemm) else ""),
            f"declare it, e.g. `{name or 'D'}: f32[{gemm.n}] row`",
        )
        return
    op = extras[name]
    if len(op.dims) != 1 or op.dims[0] != gemm.n:
        errs.add(
            op.loc,
            f"bias '{name}' must be one value per column of C, [{gemm.n}]; it is "
            f"[{', '.join(map(str, op.dims))}]",
            f"declare `{name}: {op.dtype}[{gemm.n}] row`",
        )
    if name in biases:
        errs.add(loc, f"bias '{name}' is added twice", "name each bias once")
    biases.add(name)


def _product(gemm: Gemm) -> tuple[str, ...]:
    return (gemm.a.name, gemm.b.name, gemm.c.name)


def _check_shapes(sched: Schedule, target: Target, gemm: Gemm | None, errs: Collector) -> None:
    if sched.block == (0, 0, 0):
        return
    bm, bn, bk = sched.block
    m, n, k = sched.mma
    cm, cn = sched.coarsen
    dtype = gemm.a.dtype if gemm is not None else "f16"
    if dtype not in target.mma_shapes:
        return  # already reported: the target takes no such inputs
    if not _check_path(sched, target, dtype, gemm, errs):
        return
    ok = True
    for what, size, unit, expl in (
        ("BM", bm, m * cm, f"mma.M × CM = {m} × {cm} = {m * cm}"),
        ("BN", bn, n * cn, f"mma.N × CN = {n} × {cn} = {n * cn}"),
        ("BK", bk, k, f"mma.K = {k}"),
    ):
        if size % unit:
            ok = False
            errs.add(
                sched.loc("block"),
                f"{what} = {size} is not divisible by {expl}",
                f"make {what} a multiple of {unit}, e.g. {max(unit, size - size % unit)}",
            )
    if not ok:
        return
    warps_m, warps_n = sched.warps
    lanes = lanes_per_warp(sched, target)
    threads = warps_m * warps_n * sched.warps_k * lanes
    if threads > target.max_threads_per_block:
        teams = f" x {sched.warps_k} K teams" if sched.warps_k > 1 else ""
        errs.add(
            sched.loc("warps_k" if sched.warps_k > 1 else "block"),
            f"{warps_m} x {warps_n} {sched.path.ir_warp}s{teams} "
            f"of {lanes} threads = "
            f"{threads} threads per block; {target.name} allows {target.max_threads_per_block}",
            "use a smaller block tile, or give each warp several fragments (`coarsen 2 x 2`)",
        )
    else:
        _check_registers(sched, target, threads, DTYPE_BYTES[dtype], errs)
    smem = None
    if gemm is not None and all(op.dtype in DTYPE_BYTES for op in (gemm.a, gemm.b, gemm.c)):
        _check_shared_memory(sched, target, gemm, errs)
        smem = shared_memory_bytes(sched, gemm, sched.epilogue_via == "shared")
    if threads <= target.max_threads_per_block:
        check_blocks_per_sm(sched, target, threads, smem, errs)
    if gemm is not None and sched.stages >= 1 and sched.copy_mode != "tma":
        _check_copy_width(sched, gemm, errs)
    if sched.fragment_buffers == 2 and sched.path.fragments_in_registers:
        _check_fragment_buffers(sched, errs)
    if gemm is not None and sched.pad == "xor" and not sched.path.swizzle_panel_bytes:
        _check_xor_lines(sched, gemm, errs)
    if gemm is not None:
        _check_literal_sizes(sched, gemm, errs)
    if gemm is not None and sched.stages == 0 and not sched.direct:
        # With shared-memory tiles a guarded twin covers the edges (tiledsl.lowering.edges); the
        # naive form loads fragments straight from global memory, which cannot be guarded.
        for dim, size, what in ((gemm.m, bm, "M"), (gemm.n, bn, "N"), (gemm.k, bk, "K")):
            if isinstance(dim, Const) and dim.value % size:
                errs.add(
                    gemm.c.loc if what != "K" else gemm.a.loc,
                    f"{what} = {dim.value} is not a multiple of the block tile ({size}), "
                    "and stages 0 loads fragments straight from global memory, which WMMA "
                    "cannot guard",
                    "use stages 1 or more (edge tiles are then guarded), or a multiple",
                )


def _check_literal_sizes(sched: Schedule, gemm: Gemm, errs: Collector) -> None:
    """Sizes written as integers must fit the generated code's 32-bit arithmetic
    (tiledsl.limits); sizes bound at run time are checked when they are given."""
    for dim, tile, what in zip((gemm.m, gemm.n, gemm.k), sched.block, "MNK"):
        problem = dim_problem(what, dim.value, tile) if isinstance(dim, Const) else None
        if problem:
            errs.add(
                gemm.c.loc if what != "K" else gemm.a.loc,
                problem,
                "split the product, or declare the size as a name bound at run time",
            )
    if isinstance(gemm.batch, Const) and gemm.batch.value > GRID_Y_MAX:
        errs.add(
            gemm.c.loc,
            f"a batch of {gemm.batch.value} products is more than a grid's y axis holds "
            f"({GRID_Y_MAX})",
            "split the batch into several launches",
        )


def shared_memory_bytes(sched: Schedule, gemm: Gemm, staged_c: bool) -> int:
    """The dynamic shared memory the lowered kernel asks for, from the schedule alone:
    exact, except under `pad auto` (whose pad the bank model picks from the IR), where it
    is the floor with no pad. `staged_c`: C goes through the per-warp staging tile.

    The same layout as the passes build (tiledsl.ir.nodes.buffer_offsets and
    KernelIR.smem_bytes): A's and B's tiles, `stages` slots each (one for stages 1), each
    starting where the path aligns buffers, the end rounded to 128 bytes, plus the path's
    slack; the staging tile of C, one fragment per warp, shares their bytes."""
    path = sched.path

    def aligned(nbytes: int, align: int) -> int:
        return -(-nbytes // align) * align

    start = end = 0
    if sched.stages >= 1:
        for op, pad in ((gemm.a, sched.pad_a), (gemm.b, sched.pad_b)):
            lines, length = tile_shape(sched, gemm, op)
            pitch = length + (pad if sched.pad == "explicit" else 0)
            size = sched.stages * lines * pitch * DTYPE_BYTES[op.dtype]
            end = max(end, aligned(start + size, SMEM_ALIGN))
            start += aligned(size, path.smem_align)
    if staged_c:
        m, n, _ = sched.mma
        warps_m, warps_n = sched.warps
        acc_bytes = DTYPE_BYTES[sched.accumulate] if sched.accumulate in DTYPE_BYTES else 4
        end = max(end, aligned(warps_m * warps_n * m * n * acc_bytes, SMEM_ALIGN))
    if sched.warps_k > 1:  # the K teams' sums (tiledsl.passes.k_teams), f32
        end = max(end, aligned(sched.warps_k * sched.block[0] * sched.block[1] * 4, SMEM_ALIGN))
    if sched.epilogue_via == "tma" and sched.store_columns and sched.warp_specialize:
        # its own bytes after the stages: the producer refills those while C leaves
        rows = sched.mma[0] * sched.coarsen[0]
        c_bytes = DTYPE_BYTES.get(gemm.c.dtype, 2)
        size = sched.consumer_warpgroups * rows * sched.store_columns * c_bytes
        end = max(end, aligned(start + size, SMEM_ALIGN))
        start += aligned(size, path.smem_align)
    by_cluster = sched.grid_split and sched.split_via == "cluster" and sched.warp_specialize
    if by_cluster:  # split_k via cluster: the block's partial sum, f32, for slice 0 to read
        end = max(end, aligned(start + sched.block[0] * sched.block[1] * 4, SMEM_ALIGN))
    if end and sched.warp_specialize:
        end += 2 * 8 * sched.stages  # a `full` and an `empty` mbarrier per stage
        end += 8 * sched.teams if sched.teams > 1 else 0  # pingpong: a `turn` per team
        if by_cluster:  # the partial sums stored (slice 0's), and taken (each other slice's)
            end += 2 * 8
        elif sched.grid_split:  # split_k: the ticket's word
            end += TICKET_BOX_BYTES
    elif end and sched.copy_mode == "tma":
        end += 8 * sched.stages  # `copy tma` alone: a `full` mbarrier per stage
    if sched.grid_split and sched.direct:  # the direct path's split_k: the ticket's word
        end = aligned(end, SMEM_ALIGN) + TICKET_BOX_BYTES
    return end + path.smem_slack if end else end


def _check_shared_memory(sched: Schedule, target: Target, gemm: Gemm, errs: Collector) -> None:
    """The kernel, and its guarded twin (which stages C), within the block's shared memory."""
    limit, floor = target.max_smem_per_block, sched.pad == "auto" and sched.stages >= 1
    need = shared_memory_bytes(sched, gemm, sched.epilogue_via == "shared")
    classic = replace(sched, warp_specialize=False)  # the twin has no mbarriers
    twin = (
        shared_memory_bytes(classic, gemm, True) if sched.stages >= 1 else 0
    )  # tiledsl.lowering.edges
    if max(need, twin) <= limit:
        return
    what = (
        "this schedule needs"
        if need > limit
        else "the guarded twin for edge tiles (which stages C per warp) needs"
    )
    errs.add(
        sched.loc("stages"),
        f"{what}{' at least' if floor else ''} {max(need, twin)} bytes of shared memory per "
        f"block; {target.name} allows {limit}",
        "use fewer stages, a smaller block tile or less padding",
    )


def _shape_list(path, shapes) -> str:
    """The shapes a note lists: `m64nNk16 for N = 8, 16, ..., 256` where they run evenly."""
    ns = [s[1] for s in shapes]
    step = ns[1] - ns[0] if len(ns) > 3 else 0
    if step and ns == list(range(ns[0], ns[-1] + 1, step)) and len({s[0] for s in shapes}) == 1:
        return f"{path.family} for N = {ns[0]}, {ns[1]}, ..., {ns[-1]}"
    return ", ".join(path.shape_text(s) for s in shapes)


def _check_path(
    sched: Schedule, target: Target, dtype: str, gemm: Gemm | None, errs: Collector
) -> bool:
    """The instruction path (tiledsl.ir.paths): the target has it and its shape, the
    schedule gives it what it needs; False if what follows cannot be checked."""
    path = sched.path
    shapes = (getattr(target, path.target_shapes) or {}).get(dtype, ())
    shape = path.shape_text(sched.mma)
    if not shapes:
        wmma = ", ".join(" x ".join(map(str, s)) for s in target.mma_shapes[dtype])
        errs.add(
            sched.loc("mma"),
            path.no_path.format(target=target.name, shape=shape),
            path.no_path_fix.format(wmma_shapes=wmma),
        )
        return False
    if sched.mma not in shapes:
        errs.add(
            sched.loc("mma"),
            path.no_shape.format(target=target.name, shape=shape, dtype=dtype),
            path.shapes_note.format(shapes=_shape_list(path, shapes)),
        )
        return False
    panel = path.n_panel_elements
    if panel and gemm is not None and gemm.b.layout == "row" and sched.mma[1] % panel:
        errs.add(
            sched.loc("mma"),
            f"`mma {shape}` with an N-contiguous {gemm.b.name} (its n index innermost): "
            f"{path.name} reads it in 128-byte panels of {panel} columns, and N = "
            f"{sched.mma[1]} is not whole panels",
            f"use N a multiple of {panel}, or store {gemm.b.name} K-contiguous (declare it "
            f"`col`), where any N the instruction has fits",
        )
        return False
    ok = True
    for need in path.requirements:
        if not need.holds(sched):
            ok = False
            errs.add(sched.loc(need.directive), need.message.format(stages=sched.stages), need.fix)
    # (the direct path has no shared tiles to swizzle: refusals.py says `pad` has none to pad)
    if sched.pad == "xor" and not path.reads_swizzled_lines and not sched.direct:
        errs.add(
            sched.loc("pad"),
            "pad xor permutes each row's 16-byte chunks, and WMMA's load_matrix_sync "
            "can only read plain strided rows",
            "use the mma.sync path (`mma m16n8k16`), which reads through ldmatrix, or `pad auto`",
        )
    bk, line = sched.block[2], path.k_line_elements
    k_contiguous = gemm is not None and (gemm.a.layout == "row" or gemm.b.layout == "col")
    if line and k_contiguous and bk % line:
        ok = False
        errs.add(
            sched.loc("block"),
            f"BK = {bk}: a K-contiguous tile is read by {path.name} in "
            f"{line * 2}-byte lines of {line} elements",
            f"make BK a multiple of {line}, e.g. {max(line, bk - bk % line)}",
        )
    return ok


def _check_fragment_buffers(sched: Schedule, errs: Collector) -> None:
    """Double-buffered fragments ride on the pipeline, with an even count of fragment steps."""
    if sched.stages < 2:
        errs.add(
            sched.loc("fragment_buffers"),
            f"fragment_buffers 2 loads the next step's fragments across the pipeline's "
            f"barrier, and stages {sched.stages} has no pipeline",
            "use stages 2 or more, or drop `fragment_buffers 2`",
        )
        return
    bk, k = sched.block[2], sched.mma[2]
    if (bk // k) % 2:
        errs.add(
            sched.loc("fragment_buffers"),
            f"fragment_buffers 2 alternates two fragment sets over the fragment steps of a "
            f"block step, and BK / mma.K = {bk} / {k} = {bk // k} is odd",
            f"make BK a multiple of {2 * k}, e.g. {max(2 * k, bk + k)}",
        )


def _check_xor_lines(sched: Schedule, gemm: Gemm, errs: Collector) -> None:
    """`pad xor` permutes 16-byte chunks within a line: a line needs an even count."""
    bm, bn, bk = sched.block
    for op, line, what in (
        (gemm.a, bk if gemm.a.layout == "row" else bm, "BK" if gemm.a.layout == "row" else "BM"),
        (gemm.b, bn if gemm.b.layout == "row" else bk, "BN" if gemm.b.layout == "row" else "BK"),
    ):
        chunk, groups, _ = xor_geometry(line, op.dtype)
        if groups == 1:
            errs.add(
                sched.loc("pad"),
                f"pad xor swaps 16-byte chunks within a line of {op.name}'s tile, and its "
                f"{line}-element lines ({what}) hold no even number of {chunk}-element chunks",
                f"make {what} a multiple of {2 * chunk}, or use `pad auto`",
            )


def _check_copy_width(sched: Schedule, gemm: Gemm, errs: Collector) -> None:
    """Each copied tile row must split into whole vectors, and each vector stay aligned."""
    bm, bn, bk = sched.block
    width = sched.copy_bytes
    for op, row_elems in ((gemm.a, bk), (gemm.b, bn)):
        size = DTYPE_BYTES[op.dtype]
        if (row_elems * size) % width:
            errs.add(
                sched.loc("copy"),
                f"a {width}-byte copy vector does not divide a "
                f"{row_elems}-element row of {op.name}'s block tile ({row_elems * size} bytes)",
                f"use `copy {sched.copy_mode} {_largest_divisor(row_elems * size)}` "
                "or a wider tile",
            )
        ld = op.leading_dim
        if isinstance(ld, Const) and (ld.value * size) % width:
            errs.add(
                op.loc,
                f"rows of {op.name} are {ld.value * size} bytes apart, so "
                f"{width}-byte copies would be misaligned",
                f"use `copy {sched.copy_mode} {_largest_divisor(ld.value * size)}`",
            )


def _largest_divisor(nbytes: int) -> int:
    return next(w for w in (16, 8, 4, 2) if nbytes % w == 0)


def _check_registers(
    sched: Schedule, target: Target, threads: int, in_bytes: int, errs: Collector
) -> None:
    needed = fragment_registers(sched, lanes_per_warp(sched, target), in_bytes)
    blocks = sched.blocks_per_sm
    allowed = (
        register_cap(target, threads, blocks)
        if blocks > 1
        else target.registers_per_thread(threads)
    )
    if needed > allowed:
        cm, cn = sched.coarsen
        resident = f" and {blocks} blocks per multiprocessor" if blocks > 1 else ""
        errs.add(
            sched.loc("blocks_per_sm" if blocks > 1 else "coarsen"),
            f"{cm} x {cn} fragments per warp need at least {needed} registers per thread for "
            f"fragments alone; {target.name} allows {allowed} at {threads} threads per "
            f"block{resident}",
            "ask for fewer blocks per multiprocessor"
            if blocks > 1
            else "coarsen less, or use fewer threads per block",
        )
