"""IR -> deterministic text: what `--print-ir-after-all` shows and golden tests pin.

    kernel hgemm (cuda sm_90, 32-thread warps)
      gemm     C[m, n] = A[m, k] * B[k, n]
      ...
      body
        fill acc[0][0] = 0
        for kt in [0, (K + 31) / 32)  # block steps along K
          copy.block.sync As[0] + (0, 0) 64x32 <- A @ (bm * BM, kt * BK) + (0, 0) 64x32, vector 8
          barrier.block  # RAW: ...

Only the kernel decides the text: no addresses, no dict ordering, no salted hashes.
"""

from __future__ import annotations

from .expr import Expr, Var, to_c
from .nodes import (
    Arrive,
    AsyncCommit,
    AsyncWait,
    Barrier,
    Copy,
    EpilogueFrag,
    ExpectTx,
    Fill,
    FlagSignal,
    FlagWait,
    For,
    GlobalTile,
    If,
    KernelIR,
    Let,
    LoadFrag,
    Mma,
    MmaCommit,
    MmaFence,
    MmaWait,
    PartialAdd,
    PartialFetch,
    PartialFromPeer,
    PartialStore,
    PartialToShared,
    ProxyFence,
    Roles,
    SharedTile,
    StoreFrag,
    Ticket,
    Tile,
    TmaLoad,
    TmaStore,
    TmaStoreWait,
    Wait,
)
from .partial_tiles import guards_fragments, tma_only
from .schedule import named_constants


def _persisting(kernel: KernelIR) -> str:
    """What a persistent kernel's blocks do with the tiles, after `gridDim.x blocks`."""
    if kernel.split_k:
        return (
            ": whole tiles, then the last round's tiles in "
            f"{kernel.split_k} slices of K (split-K), fixed up through a workspace"
        )
    if kernel.aligned:
        return (
            ": whole tiles, then equal shares of the K steps of the tiles left, each block's "
            "last tile first (stream-K, aligned), fixed up through a workspace"
        )
    if kernel.stream_k:
        return (
            ": whole tiles, then equal shares of the K steps of the tiles left (stream-K), "
            "fixed up through a workspace"
        )
    return ", each looping over tiles"


def print_ir(kernel: KernelIR) -> str:
    g, s, t = kernel.gemm, kernel.schedule, kernel.target
    consts = named_constants(s)
    lines = [
        f"kernel {kernel.name} ({t.name}, {kernel.warp_width}-thread "
        + ("warpgroups as warps)" if kernel.warp_width != t.warp_width else "warps)"),
        f"  gemm     {g.text}"
        + (", computed as C^T = B^T A^T (swap_operands)" if g.written is not None else ""),
        f"  operands {', '.join(str(o) for o in (g.a, g.b, g.c))}",
        f"  consts   {', '.join(f'{n} = {c.value}' for n, c in consts.items())}",
        f"  grid     ceil(M / BM) x ceil(N / BN) block tiles, swizzle {_swizzle(kernel)}",
        f"  warps    {kernel.warps[0]} x {kernel.warps[1]} ({kernel.threads} threads"
        + (f", {kernel.teams} teams of them on alternate tiles" if kernel.teams > 1 else "")
        + (f", {kernel.k_teams} K teams of them" if kernel.k_teams > 1 else "")
        + (f" in {kernel.schedule.k_runs} runs of K" if kernel.schedule.k_runs > 1 else "")
        + (
            f", {kernel.producer_warps} producer warpgroup after them"
            if kernel.producer_warps
            else ""
        )
        + ")",
    ]
    if kernel.persistent:
        lines.append("  persist  gridDim.x blocks (the SM count)" + _persisting(kernel))
    if kernel.split_cluster:
        lines.append(
            f"  split    {kernel.grid_split} slices of every tile's K steps, a block each, "
            "the tile's slices one cluster (split_k via cluster): slice 0 adds the partial "
            "sums in slice order from the others' shared memory"
        )
    elif kernel.grid_split:
        lines.append(
            f"  split    {kernel.grid_split} slices of every tile's K steps, a block each "
            "(split_k): the last ticket adds the partial sums in slice order"
        )
    for v in kernel.launch_scalars:
        value = "the launch's grid" if v.value == Var(v.var) else _e(v.value)
        lines.append(f"  scalar   {v.var} = {value}  # host, per launch; {PASSED[v.passed]}")
    if kernel.cluster_size > 1:
        cm, cn = kernel.cluster
        lines.append(
            f"  cluster  {cm} x {cn} blocks: {g.b.name}'s tiles multicast along M, "
            f"{g.a.name}'s along N"
        )
    if tma_only(kernel):
        lines.append(
            "  edges    every size runs this kernel: TMA zero-fills partial boxes, C's stores "
            "clip; lines not a whole 16 bytes are staged by the launcher"
        )
    elif guards_fragments(kernel):
        lines.append(
            "  edges    every size runs this kernel: its fragment loads read zeros outside "
            "the operands, its stores of C skip what lies outside C"
        )
    elif kernel.edge is not None:
        lines.append(
            f"  edges    sizes that are not multiples of BM x BN x BK run {kernel.edge.name}: "
            "the same passes, guarded copies, C staged per warp"
        )
    for b in kernel.buffers:
        lines.append(
            f"  shared   {b.name}: {b.dtype}[{b.slots}][{b.rows}][{b.cols}] {b.layout} "
            f"pitch {b.pitch}"
            + (f" xor, {b.panel}-element panels" if b.panel else "")
            + f"  # {b.purpose}, {b.size_bytes} bytes"
        )
    for f in kernel.fragments:
        layout = f" {f.layout}" if f.layout else ""
        m, n, k = f.shape
        lines.append(
            f"  frag     {f.name}[{f.count[0]}][{f.count[1]}]: {f.role} {f.dtype} "
            f"{m}x{n}x{k}{layout}"
        )
    for bar in kernel.mbarriers:
        lines.append(
            f"  mbarrier {bar.name}[{bar.slots}]: {bar.arrivals} arrival(s)  # {bar.purpose}"
        )
    lines.append("  body")
    _body(kernel.body, 2, lines)
    return "\n".join(lines) + "\n"


#: How a launch scalar reaches the kernel, as the IR text says it.
PASSED = {
    "int": "passed as an int",
    "divisor": "passed as a Divisor (n / d: a multiply-high and a shift)",
    "host": "not passed: a step towards the others",
}


def _swizzle(kernel: KernelIR) -> str:
    s = kernel.schedule
    return "none" if s.swizzle == "none" else f"{s.swizzle} {s.swizzle_param}"


def tile_text(tile: Tile) -> str:
    off = f"({_e(tile.offset[0])}, {_e(tile.offset[1])})"
    if isinstance(tile, SharedTile):
        return f"{tile.buffer}[{_e(tile.slot)}] + {off} {tile.rows}x{tile.cols}"
    assert isinstance(tile, GlobalTile)
    origin = f"({_e(tile.origin[0])}, {_e(tile.origin[1])})"
    return f"{tile.operand} @ {origin} + {off} {tile.rows}x{tile.cols}"


def stmt_text(stmt) -> str:
    """One line for a statement (a loop's header for a For)."""
    match stmt:
        case For():
            unroll = " unroll" if stmt.unroll else ""
            step = f" step {stmt.step}" if stmt.step != 1 else ""
            note = f"  # {stmt.comment}" if stmt.comment else ""
            return f"for {stmt.var} in [{_e(stmt.start)}, {_e(stmt.stop)}){step}{unroll}{note}"
        case Copy():
            return (
                f"copy.{stmt.by}.{stmt.mode} {tile_text(stmt.dst)} <- {tile_text(stmt.src)}, "
                f"vector {stmt.vector}"
                + (", guarded" if stmt.guard else "")
                + (f", epilogue {stmt.epilogue.describe()}" if stmt.epilogue else "")
            )
        case Fill():
            return f"fill {stmt.frag} = {stmt.value:g}"
        case LoadFrag():
            arrow = "+=" if stmt.add else "<-"
            guard = ", guarded" if stmt.guard else ""
            return f"load_frag {stmt.frag} {arrow} {tile_text(stmt.src)}{guard}"
        case Mma():
            return f"mma {stmt.acc} += {stmt.a} * {stmt.b}"
        case StoreFrag() if stmt.cols is not None:
            first, width = stmt.cols
            return (
                f"store_frag {tile_text(stmt.dst)} <- {stmt.frag} columns "
                f"[{_e(first)}, {_e(first)} + {width})"
            )
        case StoreFrag():
            guard = ", guarded" if stmt.guard else ""
            team = ", K team 0" if stmt.by_team0 else ""
            return f"store_frag {tile_text(stmt.dst)} <- {stmt.frag}{guard}{team}"
        case Barrier():
            return f"barrier.{stmt.scope}  # {stmt.reason}"
        case If():
            return f"if {_e(stmt.lhs)} {stmt.op} {_e(stmt.rhs)}"
        case AsyncCommit():
            return "async.commit"
        case AsyncWait():
            return f"async.wait pending={stmt.pending}"
        case MmaFence():
            return "mma.fence"
        case MmaCommit():
            return "mma.commit"
        case MmaWait():
            return f"mma.wait pending={stmt.pending}"
        case Let():
            return f"let {stmt.var} = {_e(stmt.value)}"
        case Roles():
            return "roles"
    text = _pipeline_text(stmt)
    if text is None:
        raise TypeError(f"no text for {type(stmt).__name__}")
    return text


def _pipeline_text(stmt) -> str | None:
    """One line for a statement of the TMA pipeline, its roles' handoffs or a fix-up
    between blocks (None: not one of those)."""
    match stmt:
        case TmaLoad():
            cast = f", multicast to the cluster {stmt.multicast}" if stmt.multicast else ""
            return f"copy.tma {tile_text(stmt.dst)} <- {tile_text(stmt.src)}, on {stmt.bar}{cast}"
        case TmaStore():
            return f"copy.tma.store {tile_text(stmt.dst)} <- {tile_text(stmt.src)}"
        case TmaStoreWait():
            return "tma.store_wait read" + _note(stmt.reason)
        case ProxyFence():
            return "fence.proxy.async" + _note(stmt.reason)
        case EpilogueFrag():
            return f"epilogue {stmt.frag} as {tile_text(stmt.tile)}: {stmt.epilogue.describe()}"
        case ExpectTx():
            return f"mbarrier.expect_tx {stmt.bar} {stmt.bytes} bytes" + _note(stmt.reason)
        case Arrive():
            where = " in every block sharing a tile" if stmt.sharers else ""
            if stmt.rank is not None:
                where = f" of block {_e(stmt.rank)} of the cluster"
            return f"mbarrier.arrive {stmt.bar}{where}" + _note(stmt.reason)
        case Wait():
            scope = ".cluster" if stmt.cluster else ""
            return f"mbarrier.wait{scope} {stmt.bar} parity {_e(stmt.parity)}" + _note(stmt.reason)
        case PartialToShared():
            return "partial.store Ps <- acc" + _note(stmt.reason)
        case PartialFromPeer():
            return f"partial.add acc += Ps of block {_e(stmt.rank)} of the cluster" + _note(
                stmt.reason
            )
        case PartialStore():
            team = ", K team 0" if stmt.by_team0 else ""
            return f"partial.store workspace[{_e(stmt.slot)}] <- acc{team}" + _note(stmt.reason)
        case PartialAdd() if stmt.staged is not None:
            return (
                f"partial.add acc += workspace[{_e(stmt.slot)}] as fetched into the slots of "
                f"steps {_e(stmt.staged)} on" + _note(stmt.reason)
            )
        case PartialAdd():
            team = ", K team 0" if stmt.by_team0 else ""
            return f"partial.add acc += workspace[{_e(stmt.slot)}]{team}" + _note(stmt.reason)
        case PartialFetch():
            return (
                f"partial.fetch workspace[{_e(stmt.slot)}] part {stmt.part} -> the slot of step "
                f"{_e(stmt.step)} on {stmt.bar}" + _note(stmt.reason)
            )
        case FlagSignal():
            return f"flag.signal flags[{_e(stmt.slot)}]" + _note(stmt.reason)
        case FlagWait():
            return f"flag.wait flags[{_e(stmt.slot)}]" + _note(stmt.reason)
        case Ticket():
            return f"{stmt.var} = ticket tickets[{_e(stmt.slot)}] of {stmt.slices}" + _note(
                stmt.reason
            )
    return None


def _note(reason: str) -> str:
    return f"  # {reason}" if reason else ""


def _body(body, depth: int, lines: list[str]) -> None:
    for stmt in body:
        if isinstance(stmt, Roles):
            for role in stmt.roles:
                lines.append(
                    "  " * depth + f"role {role.name} ({role.registers} registers per thread)"
                )
                _body(role.body, depth + 1, lines)
            continue
        lines.append("  " * depth + stmt_text(stmt))
        if isinstance(stmt, For):
            _body(stmt.body, depth + 1, lines)
        elif isinstance(stmt, If):
            _body(stmt.then, depth + 1, lines)
            if stmt.orelse:
                lines.append("  " * depth + "else")
                _body(stmt.orelse, depth + 1, lines)


def _e(e: Expr) -> str:
    return to_c(e)
