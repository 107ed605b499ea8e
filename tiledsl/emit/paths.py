"""The lowering of each instruction path (tiledsl.ir.paths), looked up once per kernel.

    lowering = lowering_for(kernel)     # WmmaLowering, MmaSyncLowering, WgmmaLowering, FmaLowering

A new path is one description in tiledsl.ir.paths and one PathLowering here.
"""

from __future__ import annotations

from ..ir.nodes import KernelIR
from .fma import FmaLowering
from .lowering import PathLowering
from .mma_sync import MmaSyncLowering
from .wgmma import WgmmaLowering
from .wmma import WmmaLowering

LOWERINGS: dict[str, PathLowering] = {
    lowering.path.name: lowering
    for lowering in (WmmaLowering(), MmaSyncLowering(), WgmmaLowering(), FmaLowering())
}


def lowering_for(kernel: KernelIR) -> PathLowering:
    return LOWERINGS[kernel.schedule.instruction]
