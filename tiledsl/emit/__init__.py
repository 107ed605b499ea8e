"""Emitters: IR -> source text. `emit(kernels)` picks the one for the kernels' target vendor."""

from __future__ import annotations

from ..ir.nodes import KernelIR
from .cuda import CudaEmitter
from .musa import MusaEmitter


def emit(kernels: tuple[KernelIR, ...], source_name: str) -> str:
    vendor = kernels[0].target.vendor if kernels else "cuda"
    emitter = MusaEmitter if vendor == "musa" else CudaEmitter
    return emitter(source_name).emit_module(kernels)
