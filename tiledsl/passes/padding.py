"""padding (`pad A n, B n`, `pad auto`, `pad none`): the row pitch of the A and B tiles.

Every index into a shared buffer is computed from its pitch (`As[slot][row][col]`
with rows `pitch` elements apart), so the pass only changes the pitch; the bank
model (tiledsl.banks) tells `pad auto` which pad removes the most conflicts.
"""

from __future__ import annotations

from dataclasses import replace

from ..banks import best_pad
from ..ir import KernelIR


def padding(kernel: KernelIR) -> KernelIR:
    s, g = kernel.schedule, kernel.gemm
    pads = {g.a.name + "s": s.pad_a, g.b.name + "s": s.pad_b}
    buffers = []
    for b in kernel.buffers:
        if b.name in pads:
            pad = best_pad(kernel, b.name) if s.pad == "auto" else pads[b.name]
            b = replace(b, pitch=b.line_length + pad)
        buffers.append(b)
    return replace(kernel, buffers=tuple(buffers))
