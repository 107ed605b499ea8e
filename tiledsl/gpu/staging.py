"""Operands whose lines TMA cannot address as they lie, copied into lines it can.

cuTensorMapEncodeTiled asks every global stride to be a multiple of 16 bytes: an f16
A[4095, 4099] has rows 8198 bytes apart, and no tensor map reads it. A `copy tma` kernel
has no guarded twin (tiledsl.lowering.edges); its launcher copies such an operand into
lines padded to the next multiple of 128 bytes (8320: TMA's box rows then read whole
128-byte lines; 16 would do for the driver) and encodes the map over the copy,
with the operand's own dimensions, so TMA never reads the padding and still zero-fills
past the operand. C, when TMA stores it, is written into such a copy and copied back
after the kernel.

    plan(launch, {"M": 4095, "N": 4097, "K": 4099})
    # (Staged(param='map_A', operand='A', lines=4095, line_bytes=8198, pitch=8320,
    #         back=False), Staged(param='map_B', ...), Staged(param='map_C', ..., back=True))

`plan` is pure (no GPU); `Stager` holds the padded copies (one per operand and shape, made
once and reused, so a launcher's launches must not overlap: the stream-K scratch's rule)
and runs the copies on the kernel's stream, one block of threads per line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..emit.launch import Launch
from ..ir.expr import evaluate
from .tensor_maps import STRIDE_ALIGNMENT

#: The copy kernel moves units of 2, 4 or 8 bytes: the widest that divides a line's bytes
#: (a line that is a whole 16 bytes needs no staging; TMA's element types are 2 or 4 bytes,
#: so a line is always whole 2-byte units). The padded pitch is a whole 128 bytes, so every
#: line of both sides starts on a whole unit.
UNITS = (8, 4, 2)
THREADS = 256
MAX_BLOCKS = 1 << 20  # a grid this wide covers any line count in a few passes
#: The copy's lines start on 128 bytes, not only on the 16 TMA asks: a box row then
#: reads whole 128-byte lines (on the H200, hopper_tuned_192 at 4095 x 4097 x 4099 ran
#: 331 us on lines 8208 bytes apart, against 208 us for 4088 x 4096 x 4104 unstaged).
PITCH_ALIGNMENT = 128

SOURCE = r"""
// tiledsl.gpu.staging: `lines` lines of `width` units, from lines `src_pitch` units apart
// to lines `dst_pitch` units apart. One block per line, its threads across the line, each
// issuing UNROLL loads before its stores (independent loads keep the memory busy).
template <typename Unit>
__device__ void restride(const Unit* __restrict__ src, long long src_pitch,
                         Unit* __restrict__ dst, long long dst_pitch, int width,
                         long long lines)
{
    constexpr int UNROLL = 8;  // units in flight per thread: enough for 2-byte units too
    for (long long line = blockIdx.x; line < lines; line += gridDim.x) {
        const Unit* from = src + line * src_pitch;
        Unit* to = dst + line * dst_pitch;
        for (int i = threadIdx.x; i < width; i += blockDim.x * UNROLL) {
            Unit v[UNROLL];
            #pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const int j = i + u * blockDim.x;
                if (j < width) v[u] = from[j];
            }
            #pragma unroll
            for (int u = 0; u < UNROLL; ++u) {
                const int j = i + u * blockDim.x;
                if (j < width) to[j] = v[u];
            }
        }
    }
}

// one kernel per unit: 2, 4 or 8 bytes
#define RESTRIDE(BYTES, UNIT)                                                              \
    extern "C" __global__ void tiledsl_restride_##BYTES(                                 \
        const UNIT* __restrict__ src, long long src_pitch, UNIT* __restrict__ dst,         \
        long long dst_pitch, int width, long long lines)                                   \
    {                                                                                      \
        restride<UNIT>(src, src_pitch, dst, dst_pitch, width, lines);                      \
    }
RESTRIDE(2, unsigned short)
RESTRIDE(4, unsigned int)
RESTRIDE(8, unsigned long long)
"""


def unit_bytes(line_bytes: int) -> int:
    """The widest unit the copy moves a line of `line_bytes` in."""
    return next(u for u in UNITS if line_bytes % u == 0)


@dataclass(frozen=True)
class Staged:
    """One operand that a launch copies: its lines as the operand holds them (`line_bytes`
    apart, densely) and in the copy (`pitch` apart, a multiple of 128 bytes)."""

    param: str  # its tensor map, e.g. map_A
    operand: str  # A, B or C
    lines: int  # the map's outer dimension
    line_bytes: int  # the map's stride: its innermost dimension times the element's bytes
    pitch: int  # line_bytes rounded up to 16
    back: bool  # C (a TMA store): copied from the copy into the operand after the kernel

    @property
    def bytes(self) -> int:
        return self.lines * self.pitch

    def describe(self) -> str:
        way = "written there and copied back after the kernel" if self.back else "copied in"
        return (
            f"{self.operand}: lines of {self.line_bytes} bytes, not a multiple of "
            f"{STRIDE_ALIGNMENT}: staged in lines of {self.pitch} bytes ({way}; "
            f"{self.lines * self.line_bytes / 1e6:.1f} MB each way)"
        )


def plan(launch: Launch, sizes: Mapping[str, int]) -> tuple[Staged, ...]:
    """The operands `launch` must stage at `sizes`: those with a tensor map whose stride is
    not a multiple of 16 bytes (empty for most sizes)."""
    env = dict(sizes)
    out = []
    for spec in launch.tensor_maps:
        stride = int(evaluate(spec.strides_bytes[0], env))
        if stride % STRIDE_ALIGNMENT == 0:
            continue
        pitch = -(-stride // PITCH_ALIGNMENT) * PITCH_ALIGNMENT
        lines = int(evaluate(spec.global_dims[1], env))
        out.append(Staged(spec.param, spec.operand, lines, stride, pitch, spec.stored))
    return tuple(out)


def copy_launch(staged: Staged, operand: int, copy: int) -> tuple[str, tuple, tuple, tuple]:
    """(kernel, grid, block, arguments) of the copy that fills `staged`'s copy at address
    `copy` from the operand at `operand` (or, for C, empties it back into the operand)."""
    import numpy as np

    src, src_pitch, dst, dst_pitch = (
        (copy, staged.pitch, operand, staged.line_bytes)
        if staged.back
        else (operand, staged.line_bytes, copy, staged.pitch)
    )
    unit = unit_bytes(staged.line_bytes)
    args = (
        np.uint64(src),
        np.int64(src_pitch // unit),
        np.uint64(dst),
        np.int64(dst_pitch // unit),
        np.int32(staged.line_bytes // unit),
        np.int64(staged.lines),
    )
    grid = (max(1, min(staged.lines, MAX_BLOCKS)),)
    return f"tiledsl_restride_{unit}", grid, (THREADS,), args


class Stager:
    """The padded copies of one launcher, and the kernel that fills and empties them.
    `load(source, name)` compiles and loads a module (tiledsl.gpu.runtime.load_module at
    the device's architecture)."""

    def __init__(self, load: Callable[[str, str], object]) -> None:
        self._load = load
        self._copies: dict[tuple[str, int, int], object] = {}
        self._module: object | None = None
        self._kernels: dict[str, object] = {}

    def buffer(self, staged: Staged) -> int:
        """The device address of `staged`'s copy (made on first use, then kept)."""
        import cupy

        key = (staged.operand, staged.lines, staged.pitch)
        copy = self._copies.get(key)
        if copy is None:
            copy = self._copies[key] = cupy.empty(staged.bytes, dtype=cupy.uint8)
        return int(copy.data.ptr)  # type: ignore[attr-defined]

    def copy(self, staged: Staged, operand: int, copy: int, stream=None) -> None:
        """Into the copy (or, for C, back out of it) on `stream` (None: CuPy's current)."""
        name, grid, block, args = copy_launch(staged, operand, copy)
        kernel = self._kernels.get(name)
        if kernel is None:
            if self._module is None:
                self._module = self._load(SOURCE, "tiledsl_staging.cu")
            # CuPy's CUDA function, which takes a stream (an object with `ptr`, as
            # Launcher.at's; None: CuPy's current one)
            function = self._module.get_function(name)  # type: ignore[attr-defined]
            kernel = self._kernels[name] = function.kernel
        kernel(grid, block, args, 0, stream)  # type: ignore[operator]
