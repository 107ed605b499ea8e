"""The WMMA lowering (`mma 16 x 16 x 16`): fragments as `wmma::fragment` objects.

nvcuda::wmma (mtmusa::wmma on MUSA, spelled `wmma::` on both) hides where each lane's
elements sit: a fragment is loaded and stored from a base pointer and a leading
dimension, warp-collectively, and `mma_sync` multiplies whole fragments. That is why
this path can read plain strided tiles only (no `pad xor`), and why its pointers must
be 32-byte aligned (tiledsl.ir.paths.WMMA, checked by the verifier and interpreter).
"""

from __future__ import annotations

from ..ir.nodes import C_TYPES, Fill, KernelIR, LoadFrag, Mma, StoreFrag
from ..ir.paths import WMMA
from .lowering import PathLowering

NAMESPACE = "wmma"  # `using namespace nvcuda;` (CUDA), `namespace wmma = mtmusa::wmma;` (MUSA)


class WmmaLowering(PathLowering):
    path = WMMA

    def mma_note(self, k: KernelIR) -> str:
        return "one tensor-core fragment"

    def declarations(self, emitter, k: KernelIR) -> list[str]:
        w, out = NAMESPACE, []
        for f in k.fragments:
            ctype = C_TYPES[f.dtype]
            if f.role == "accumulator":
                args = f"{w}::accumulator, MMA_M, MMA_N, MMA_K, {ctype}"
            else:
                args = f"{w}::{f.role}, MMA_M, MMA_N, MMA_K, {ctype}, {w}::{f.layout}_major"
            out.append(f"{w}::fragment<{args}> {f.name}[{f.count[0]}][{f.count[1]}];")
        return out

    def statement(self, emitter, k: KernelIR, s) -> list[str] | None:
        w = NAMESPACE
        match s:
            case Fill():
                value = f"{float(s.value)!r}" + (
                    "f" if k.fragment(s.frag.name).dtype == "f32" else ""
                )
                return [f"{w}::fill_fragment({s.frag}, {value});"]
            case LoadFrag():
                ptr, ld = emitter.address(k, s.src)
                layout = (
                    f", {w}::mem_{emitter.layout_of(k, s.src)}_major"
                    if k.fragment(s.frag.name).role == "accumulator"
                    else ""
                )
                return [f"{w}::load_matrix_sync({s.frag}, {ptr}, {ld}{layout});"]
            case Mma():
                return [f"{w}::mma_sync({s.acc}, {s.a}, {s.b}, {s.acc});"]
            case StoreFrag():
                ptr, ld = emitter.address(k, s.dst)
                layout = emitter.layout_of(k, s.dst)
                return [f"{w}::store_matrix_sync({ptr}, {s.frag}, {ld}, {w}::mem_{layout}_major);"]
        return None
