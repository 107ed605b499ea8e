"""Device models: warp width, fragment shapes and per-block / per-multiprocessor limits.

Every limit the compiler enforces comes from here, so that a schedule is refused
before any code is written. Numbers are NVIDIA's published limits for each
compute capability (the programming guide's table: at most 32 resident blocks per
SM on 8.0, 9.0 and 12.0) and, for MUSA MP_22 (the S4000), the values the S4000 write-up
reports.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .paths import FMA_SHAPE

Shape = tuple[int, int, int]
Vendor = Literal["cuda", "musa"]

_WMMA_F16: tuple[Shape, ...] = ((16, 16, 16), (32, 8, 16), (8, 32, 16))
# mma.sync PTX (sm_80+), written `mma m16n8k16`: the instruction WMMA's 16 x 16 x 16 is
# made of, with ldmatrix feeding it. Only the shape the fast path uses is offered.
_PTX_F16: tuple[Shape, ...] = ((16, 8, 16),)
_PTX = {"f16": _PTX_F16, "bf16": _PTX_F16}
# wgmma (sm_90a), written `mma m64nNk16`: one warpgroup computes 64 x N, A and B read from
# shared memory by descriptor. N a multiple of 8 up to 256, the instruction's own range; an
# N-contiguous B needs N a multiple of 64 besides (whole 128-byte panels, the swizzle's
# atom: InstructionPath.n_panel_elements), a K-contiguous B takes narrow N (few tokens).
_WGMMA_F16: tuple[Shape, ...] = tuple((64, n, 16) for n in range(8, 257, 8))
_WGMMA = {"f16": _WGMMA_F16, "bf16": _WGMMA_F16}
# The CUDA cores' fused multiply-adds (`mma fma`): a warp's fragment is a line of A by a line
# of B over 256 K elements (tiledsl.ir.paths.FMA), on every CUDA GPU.
_FMA_F16: tuple[Shape, ...] = (FMA_SHAPE,)
_FMA = {"f16": _FMA_F16, "bf16": _FMA_F16}


@dataclass(frozen=True)
class Target:
    vendor: Vendor
    arch: str  # "sm_90", "mp_22", ...
    warp_width: int
    max_threads_per_block: int
    max_threads_per_sm: int
    registers_per_sm: int
    max_registers_per_thread: int
    max_smem_per_block: int  # bytes, with the opt-in for dynamic shared memory
    smem_per_sm: int
    mma_shapes: dict[str, tuple[Shape, ...]]  # input dtype -> fragment shapes (M, N, K)
    has_cp_async: bool
    max_blocks_per_sm: int | None = None  # None: not documented for this target
    # input dtype -> mma.sync instruction shapes (empty: no PTX path, e.g. MUSA)
    ptx_mma_shapes: dict[str, tuple[Shape, ...]] | None = None
    # input dtype -> wgmma shapes (sm_90a only; built for sm_90a, the chip's own target)
    wgmma_shapes: dict[str, tuple[Shape, ...]] | None = None
    # input dtype -> the fma path's warp shape (`mma fma`, the CUDA cores)
    fma_shapes: dict[str, tuple[Shape, ...]] | None = None

    def registers_per_thread(self, threads: int) -> int:
        """The most registers a thread may hold in a block of `threads` threads.

        MUSA MP_22 (the S4000 write-up): 256 only at ≤ 512 threads per block, 128 at 1024.
        NVIDIA: 255, and no more than the multiprocessor's file spread over the block.
        """
        if self.vendor == "musa":
            return self.max_registers_per_thread if threads <= 512 else 128
        return min(self.max_registers_per_thread, self.registers_per_sm // max(threads, 1))

    @property
    def name(self) -> str:
        return f"{self.vendor} {self.arch}"

    @property
    def compute_capability(self) -> str:
        """'90' for sm_90: what nvcc's -arch and NVRTC's --gpu-architecture want."""
        return self.arch.split("_", 1)[1]


TARGETS: dict[str, Target] = {
    "cuda sm_80": Target(
        "cuda",
        "sm_80",
        32,
        1024,
        2048,
        65536,
        255,
        166912,
        167936,
        {"f16": _WMMA_F16, "bf16": _WMMA_F16},
        True,
        32,
        _PTX,
        fma_shapes=_FMA,
    ),
    "cuda sm_90": Target(
        "cuda",
        "sm_90",
        32,
        1024,
        2048,
        65536,
        255,
        232448,
        233472,
        {"f16": _WMMA_F16, "bf16": _WMMA_F16},
        True,
        32,
        _PTX,
        _WGMMA,
        fma_shapes=_FMA,
    ),
    "cuda sm_120": Target(
        "cuda",
        "sm_120",
        32,
        1024,
        1536,
        65536,
        255,
        101376,
        102400,
        {"f16": _WMMA_F16, "bf16": _WMMA_F16},
        True,
        32,
        _PTX,
        fma_shapes=_FMA,
    ),
    "musa mp_22": Target(
        "musa",
        "mp_22",
        128,
        1024,
        6144,
        131072,
        256,
        73728,
        73728,
        {"f16": ((16, 8, 8), (16, 16, 8), (16, 16, 16), (32, 32, 16))},
        False,
    ),
}

DEFAULT_TARGET = "cuda sm_90"

#: Architectures known by name whose limits are not documented where we could read them.
UNMODELLED = {"musa mp_31": "its limits are not documented in the S4000 write-up or elsewhere here"}


def build_arch(arch: str, kernels) -> str:
    """The architecture to build `kernels` for on a device of `arch`: a path may exist only
    in the chip-specific target (wgmma: sm_90a), which runs on that chip alone."""
    for k in kernels:
        path = k.schedule.path
        if path.devices and arch not in path.devices:
            from ..errors import UsageError

            raise UsageError(
                f"{path.name} (`mma {path.family}`) runs on {path.devices_text} only, "
                f"and this device is {arch}; "
                "use the mma.sync path (`mma m16n8k16`) or WMMA here"
            )
        if path.build_suffix:
            return path.build_arch(arch)
    return arch


def parse_target_name(text: str) -> str | None:
    """Normalise 'cuda sm_90', 'cuda:sm_90', 'sm_90', 'cuda' or 'musa' to a TARGETS key."""
    words = text.replace(":", " ").split()
    if len(words) == 1:
        word = words[0]
        if word == "cuda":
            return DEFAULT_TARGET
        if word == "musa":
            return "musa mp_22"
        matches = [key for key in TARGETS if key.endswith(" " + word)]
        return matches[0] if matches else None
    key = " ".join(words)
    return key if key in TARGETS else None
