"""sync-elimination (`sync minimal`): drop the barriers the hazard analysis proves redundant.

The decision for every barrier — kept with the hazard that needs it, or removed
with the reason — is recorded in the kernel (`KernelIR.sync_report`) and shown by
`tiledsl compile FILE --explain-sync`. A barrier the analysis cannot prove
redundant stays: there is no way to ask for a racy kernel.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir.nodes import Barrier, KernelIR, map_body
from ..models.hazards import decide


def sync_elimination(kernel: KernelIR) -> KernelIR:
    decisions, removed = decide(kernel, remove=True)
    body = map_body(kernel.body, lambda s: () if isinstance(s, Barrier) and id(s) in removed else s)
    return replace(kernel, body=body, sync_report=decisions)
