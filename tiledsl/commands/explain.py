"""`tiledsl compile FILE --explain-sync`: why each barrier stays or goes.

kernel hgemm (sync minimal): 1 barrier kept, 0 removed
  #1 __syncthreads()  kept
     placed by `stages 3` at examples/hgemm.tile:15:5
     needed: RAW on As (block scope) — `copy.block.async As[...]` (all threads) then
     `load_frag a[i][0] <- As[...]` (each warp); no other barrier orders them
"""

from __future__ import annotations

from ..ir.nodes import (
    Arrive,
    Barrier,
    ExpectTx,
    KernelIR,
    ProxyFence,
    TmaLoad,
    TmaStore,
    TmaStoreWait,
    Wait,
    walk,
)
from ..ir.printer import stmt_text
from ..models.hazards import decide


def explain_sync(kernels: tuple[KernelIR, ...], source: str) -> str:
    lines = source.splitlines()
    out = []
    for k in kernels:
        if k.mbarriers:
            out += _handoffs(k)
            continue
        decisions = k.sync_report or decide(k, remove=False)[0]
        kept = sum(d.kept for d in decisions)
        mode = k.schedule.sync
        out.append(
            f"kernel {k.name} (sync {mode}): {kept} barrier(s) kept, "
            f"{len(decisions) - kept} removed"
        )
        for d in decisions:
            call = "__syncthreads()" if d.barrier.scope == "block" else "__syncwarp()"
            state = "kept" if d.kept else "removed"
            if mode == "all" and d.why.startswith("redundant"):
                state = "kept (sync all), though"
            out.append(f"  #{d.index} {call}  {state}")
            loc = d.barrier.loc
            if loc.line:
                directive = lines[loc.line - 1].strip() if loc.line <= len(lines) else ""
                out.append(f"     placed by `{directive.split('#')[0].strip()}` at {loc}")
            out.append(f"     what it orders: {d.barrier.reason}")
            out.append(f"     {d.why}")
    return "\n".join(out)


def _handoffs(k: KernelIR) -> list[str]:
    """A warp-specialized kernel's mbarrier handoffs, role by role: what each wait orders."""
    roles = k.specialization
    assert roles is not None  # explain_sync asks only warp-specialized kernels
    out = [
        f"kernel {k.name}: no block barriers in the main loop; the roles hand the stages over "
        "through mbarriers (tiledsl.passes.warp_specialization)"
    ]
    for m in k.mbarriers:
        out.append(f"  mbarrier {m.name}[{m.slots}]: {m.arrivals} arrival(s) a phase; {m.purpose}")
    for role in roles.roles:
        out.append(f"  role {role.name}:")
        for s in walk(role.body):
            if isinstance(s, Wait):
                orders = (
                    "the TMA bytes of the slot (and the producer's writes) before the "
                    "consumers' wgmmas read it (RAW)"
                    if s.bar.name == "full"
                    else "the consumers' reads of the slot (their wgmmas retired) before the "
                    "next TMA copy overwrites it (WAR)"
                )
                out.append(f"     {stmt_text(s)}")
                out.append(f"       orders {orders}")
            elif isinstance(s, TmaStoreWait):
                out.append(f"     {stmt_text(s)}")
                out.append(
                    "       orders the TMA unit's reads of Cs before the block exits (its "
                    "shared memory is gone then)"
                    if s is role.body[-1]
                    else "       orders the TMA unit's reads of Cs (the stores before) before "
                    "the warpgroup writes Cs again, once the barrier after it has passed (WAR)"
                )
            elif isinstance(s, ProxyFence):
                out.append(f"     {stmt_text(s)}")
                out.append(
                    "       orders each lane's stmatrix writes before the TMA unit's reads "
                    "(the async proxy), with the barrier after it (RAW)"
                )
            elif isinstance(s, (ExpectTx, Arrive, TmaLoad, TmaStore)) or (
                isinstance(s, Barrier) and s.scope == "warp"
            ):
                out.append(f"     {stmt_text(s)}")
    return out
