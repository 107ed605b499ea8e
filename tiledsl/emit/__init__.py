"""Emitters: IR -> source text. `emit(kernels)` picks the one for the kernels' target vendor."""

from __future__ import annotations

from ..ir import KernelIR
from .cuda import CudaEmitter


def emit(kernels: tuple[KernelIR, ...], source_name: str) -> str:
    return CudaEmitter(source_name).emit_module(kernels)
