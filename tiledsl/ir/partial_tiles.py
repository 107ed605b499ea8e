"""Whether a kernel runs its partial tiles itself: every load a TMA copy (zero-filled
past the operand) and C leaving through a TMA store (which clips) or through stores
guarded element by element; or (the direct path, mma.sync with stages 0) every fragment
load from global memory guarded, and every store of C. Such a kernel runs every size and
has no guarded twin (tiledsl.lowering.edges builds the twin of every other kernel)."""

from __future__ import annotations

from .nodes import Copy, GlobalTile, KernelIR, LoadFrag, StoreFrag, TmaLoad, TmaStore, walk


def loads_by_tma(stmts: list) -> bool:
    """Whether every load among `stmts` is a TMA copy: some are, and no copy or fragment
    load reads global memory itself."""
    direct = any(isinstance(s, (Copy, LoadFrag)) and isinstance(s.src, GlobalTile) for s in stmts)
    return not direct and any(isinstance(s, TmaLoad) for s in stmts)


def stores_c_directly(stmt) -> bool:
    """A copy or fragment store that writes global memory itself (not through TMA)."""
    return isinstance(stmt, (Copy, StoreFrag)) and isinstance(stmt.dst, GlobalTile)


def tma_only(kernel: KernelIR) -> bool:
    """Whether the kernel runs partial tiles itself: every load is a TMA copy (zero-filled
    outside the operand) and C leaves through a TMA store (which clips) or through
    guarded stores from registers (`guard_c_stores`)."""
    stmts = list(walk(kernel.body))
    if not loads_by_tma(stmts):
        return False
    direct = [s for s in stmts if stores_c_directly(s)]
    if direct:
        return all(s.guard for s in direct)
    return any(isinstance(s, TmaStore) for s in stmts)


def guards_fragments(kernel: KernelIR) -> bool:
    """The direct path's kernel (tiledsl.emit.mma_sync): its fragments load from global
    memory guarded (zeros outside the operands), and its stores of C are guarded."""
    stmts = list(walk(kernel.body))
    loads = [s for s in stmts if isinstance(s, LoadFrag) and isinstance(s.src, GlobalTile)]
    stores = [s for s in stmts if stores_c_directly(s)]
    return bool(loads) and all(s.guard for s in loads) and all(s.guard for s in stores)


def runs_every_size(kernel: KernelIR) -> bool:
    """Whether the kernel runs partial tiles itself (by TMA or by guarded fragments)."""
    return tma_only(kernel) or guards_fragments(kernel)
