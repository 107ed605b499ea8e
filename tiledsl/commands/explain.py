"""`tiledsl compile FILE --explain-sync`: why each barrier stays or goes.

kernel hgemm (sync minimal): 1 barrier kept, 0 removed
  #1 __syncthreads()  kept
     placed by `stages 3` at examples/hgemm.tile:15:5
     needed: RAW on As (block scope) — `copy.block.async As[...]` (all threads) then
     `load_frag a[i][0] <- As[...]` (each warp); no other barrier orders them
"""

from __future__ import annotations

import textwrap

from ..ir.nodes import Barrier, KernelIR, TmaLoad, TmaStore, walk
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
            barrier = d.barrier
            assert isinstance(barrier, Barrier)  # sync-elimination decides about barriers
            call = "__syncthreads()" if barrier.scope == "block" else "__syncwarp()"
            state = "kept" if d.kept else "removed"
            if mode == "all" and d.why.startswith("redundant"):
                state = "kept (sync all), though"
            out.append(f"  #{d.index} {call}  {state}")
            loc = barrier.loc
            if loc.line:
                directive = lines[loc.line - 1].strip() if loc.line <= len(lines) else ""
                out.append(f"     placed by `{directive.split('#')[0].strip()}` at {loc}")
            out.append(f"     what it orders: {barrier.reason}")
            out.append(f"     {d.why}")
    return "\n".join(out)


def _handoffs(k: KernelIR) -> list[str]:
    """A TMA kernel's mbarrier handoffs, role by role (or, without roles, the block's
    statements), with what the handoff proof (tiledsl.models.mbarrier_hazards) found each
    one prevents."""
    roles = k.specialization
    decisions = {id(d.barrier): d for d in k.sync_report}
    kept = sum(d.kept for d in k.sync_report)
    how = (
        "the roles hand the stages over through mbarriers (tiledsl.passes.warp_specialization)"
        if roles is not None
        else "thread 0 issues the TMA copies, every thread waits on their mbarrier "
        "(tiledsl.passes.tma_copies)"
    )
    out = [
        f"kernel {k.name} (sync {k.schedule.sync}): {how}. The handoff proof kept {kept} "
        f"handoff statement(s) and removed {len(k.sync_report) - kept}: each one kept below "
        "says what goes wrong without it"
    ]
    for m in k.mbarriers:
        out.append(f"  mbarrier {m.name}[{m.slots}]: {m.arrivals} arrival(s) a phase; {m.purpose}")
    parts = (
        [(f"role {role.name}", role.body) for role in roles.roles]
        if roles is not None
        else [("the block (every warpgroup)", k.body)]
    )
    for title, body in parts:
        out.append(f"  {title}:")
        out += _decided(k, body, decisions)
    after = [s for s in k.body if id(s) in decisions] if roles is not None else []
    if after:  # after the roles: the cluster barrier
        out.append("  after the roles (every thread of the block):")
        out += _decided(k, tuple(after), decisions)
    return out


def _decided(k: KernelIR, body, decisions) -> list[str]:
    out = []
    for s in walk(body):
        d = decisions.get(id(s))
        if d is not None:
            state = "kept" if d.kept else "removed"
            if k.schedule.sync == "all" and d.why.startswith("redundant"):
                state = "kept (sync all), though"
            out.append(f"     #{d.index} {state}: {stmt_text(s)}")
            out += textwrap.wrap(d.why, 100, initial_indent=" " * 8, subsequent_indent=" " * 10)
        elif isinstance(s, (TmaLoad, TmaStore)):
            out.append(f"     {stmt_text(s)}")
    return out
