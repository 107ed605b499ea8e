"""padding (`pad A n, B n`, `pad auto`, `pad none`, `pad xor`): the row pitch of the A and
B tiles, or (`pad xor`) no padding and an XOR permutation of each row's 16-byte chunks.

Every index into a shared buffer is computed from its pitch (`As[slot][row][col]`
with rows `pitch` elements apart), so the pass only changes the pitch; the bank
model (tiledsl.models.banks) tells `pad auto` which pad removes the most conflicts. `pad xor`
keeps the natural pitch and marks the tiles swizzled: `SharedBuffer.element`, which
every reader of shared memory goes through, then applies the permutation. On the wgmma
path it is the hardware's 128-byte swizzle: lines are cut into 128-byte panels, stored
panel after panel, and chunk c of line l sits at chunk c ^ (l % 8) of its panel.
"""

from __future__ import annotations

from dataclasses import replace

from ..ir.nodes import DTYPE_BYTES, KernelIR
from ..models.banks import best_pad


def padding(kernel: KernelIR) -> KernelIR:
    s, g = kernel.schedule, kernel.gemm
    pads = {g.a.name + "s": s.pad_a, g.b.name + "s": s.pad_b}
    buffers = []
    for b in kernel.buffers:
        if b.name in pads and s.pad == "xor":
            # on wgmma, the hardware's 128-byte swizzle: lines cut into 128-byte panels
            panel = s.path.swizzle_panel_bytes // DTYPE_BYTES[b.dtype]
            b = replace(b, pitch=b.line_length, xor=True, panel=panel)
        elif b.name in pads:
            pad = best_pad(kernel, b.name) if s.pad == "auto" else pads[b.name]
            b = replace(b, pitch=b.line_length + pad)
        buffers.append(b)
    return replace(kernel, buffers=tuple(buffers))
