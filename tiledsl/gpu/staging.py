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
and runs the copies on the kernel's stream: every thread stores one aligned 16-byte chunk,
reading the side whose lines are not a whole 16 bytes as the aligned chunks around its
window, shifted into place.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

from ..emit.launch import Launch
from ..ir.expr import evaluate
from .tensor_maps import STRIDE_ALIGNMENT

#: The copy kernels work in 2-byte halves (TMA's element types are 2 or 4 bytes, so a line
#: is always whole halves) and move 16 bytes per thread: every store is an aligned 16-byte
#: one, and the side whose lines are not a whole 16 bytes is read as the two aligned
#: 16-byte chunks around each window, shifted into place. On the H200 a 4095 x 4099 f16
#: operand's copy in takes 20.8 us (3.2 TB/s read + written), against 26 us (2.5 TB/s) when
#: the copy moved the widest unit that divides a line, 2 bytes here (2026-12-02).
HALF = 2
THREADS = 256
MAX_BLOCKS = 1 << 20  # a grid this wide covers any chunk count in a few passes
#: The copy's lines start on 128 bytes, not only on the 16 TMA asks: a box row then
#: reads whole 128-byte lines (on the H200, hopper_tuned_192 at 4095 x 4097 x 4099 ran
#: 331 us on lines 8208 bytes apart, against 208 us for 4088 x 4096 x 4104 unstaged).
PITCH_ALIGNMENT = 128

SOURCE = r"""
// tiledsl.gpu.staging: `lines` lines of `width` halves (2-byte units), between an operand
// whose lines lie densely (`width` halves apart, from any 2-byte-aligned address) and its
// copy, whose lines are `pitch` halves apart (a multiple of 8: every line starts on 16
// bytes). Each thread writes one aligned 16-byte chunk.
typedef unsigned short half_unit;

// q = n / d, r = n % d: in 32 bits where n fits (every real operand), not 64
__device__ __forceinline__ void split(long long n, long long d, long long& q, long long& r)
{
    if (n < (1ll << 32) && d < (1ll << 32)) {
        q = static_cast<unsigned>(n) / static_cast<unsigned>(d);
        r = static_cast<unsigned>(n) % static_cast<unsigned>(d);
    } else {
        q = n / d;
        r = n % d;
    }
}

// The 8 halves at the 2-byte-aligned `p`: the two aligned 16-byte chunks around them,
// shifted by p's offset in the first; halves outside [lo, hi) (the buffer) read as zero,
// one at a time, where the window reaches past the buffer's ends.
__device__ __forceinline__ uint4 window16(const half_unit* p, const half_unit* lo,
                                          const half_unit* hi)
{
    const unsigned long long at = reinterpret_cast<unsigned long long>(p);
    const uint4* base = reinterpret_cast<const uint4*>(at & ~15ull);
    const half_unit* first = reinterpret_cast<const half_unit*>(base);
    if (first < lo || first + 16 > hi) {
        __align__(16) half_unit h[8];
        #pragma unroll
        for (int k = 0; k < 8; ++k) h[k] = (p + k >= lo && p + k < hi) ? p[k] : 0;
        return *reinterpret_cast<const uint4*>(h);
    }
    const uint4 a = __ldg(base), b = __ldg(base + 1);
    const unsigned w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
    const unsigned offset = (at & 15) / 2;  // halves into the first chunk: 0..7
    const unsigned q = offset / 2;  // whole words
    unsigned out[4];
    #pragma unroll
    for (int i = 0; i < 4; ++i) {
        // words i + q and i + q + 1 of the 8, chosen without indexing registers at run time
        const unsigned lo_word = q == 0 ? w[i] : q == 1 ? w[i + 1] : q == 2 ? w[i + 2]
                                                                            : w[i + 3];
        const unsigned hi_word = q == 0 ? w[i + 1] : q == 1 ? w[i + 2] : q == 2 ? w[i + 3]
                                                                                : w[i + 4];
        out[i] = offset % 2 ? __funnelshift_r(lo_word, hi_word, 16) : lo_word;
    }
    return make_uint4(out[0], out[1], out[2], out[3]);
}

// Into the copy: chunk j of line l takes the operand's 8 halves from (l, 8 j) on (those past
// the line's end land in the copy's padding, which no tensor map reads).
extern "C" __global__ void tiledsl_stage_in(const half_unit* __restrict__ src,
                                            half_unit* __restrict__ dst, long long pitch,
                                            int width, long long lines)
{
    const long long chunks = (width + 7) / 8;  // of a line of the copy that hold its halves
    const half_unit* hi = src + lines * width;
    for (long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x; c < lines * chunks;
         c += (long long)gridDim.x * blockDim.x) {
        long long line, j;
        split(c, chunks, line, j);
        const uint4 v = window16(src + line * width + 8 * j, src, hi);
        *reinterpret_cast<uint4*>(dst + line * pitch + 8 * j) = v;
    }
}

// Back out of the copy: the operand's aligned 16-byte chunks, each 8 halves from at most two
// lines of the copy (the second line's read starts `first` halves before its line, in the
// padding, so that its halves land after the first line's); the few halves before the
// operand's first aligned chunk and after its last, one at a time.
extern "C" __global__ void tiledsl_stage_out(const half_unit* __restrict__ src,
                                             long long pitch, half_unit* __restrict__ dst,
                                             int width, long long lines)
{
    const long long total = lines * width;
    const long long before = (16 - reinterpret_cast<unsigned long long>(dst) % 16) % 16 / 2;
    const long long head = before < total ? before : total;  // halves before the first chunk
    const long long chunks = (total - head) / 8;
    const long long tail = head + chunks * 8;  // the halves from here on, after the last chunk
    const half_unit* hi = src + lines * pitch;
    const long long step = (long long)gridDim.x * blockDim.x;
    const long long me = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (me < head + (total - tail)) {  // at most 14 halves, one per thread
        const long long e = me < head ? me : tail + (me - head);
        long long line, col;
        split(e, width, line, col);
        dst[e] = src[line * pitch + col];
    }
    for (long long c = me; c < chunks; c += step) {
        const long long e = head + 8 * c;
        long long line, col;
        split(e, width, line, col);
        const long long first = width - col < 8 ? width - col : 8;  // halves of this line
        const uint4 v1 = window16(src + line * pitch + col, src, hi);
        uint4 v = v1;
        if (first < 8) {  // the rest from the next line
            const uint4 v2 = window16(src + (line + 1) * pitch - first, src, hi);
            const unsigned a[4] = {v1.x, v1.y, v1.z, v1.w}, b[4] = {v2.x, v2.y, v2.z, v2.w};
            unsigned o[4];
            #pragma unroll
            for (int i = 0; i < 4; ++i)  // halves 2i and 2i + 1: below `first` from v1
                o[i] = 2 * i + 1 < first ? a[i]
                       : 2 * i >= first  ? b[i]
                                         : __byte_perm(a[i], b[i], 0x7610);  // low half from v1
            v = make_uint4(o[0], o[1], o[2], o[3]);
        }
        *reinterpret_cast<uint4*>(dst + e) = v;
    }
}
"""


@dataclass(frozen=True)
class Staged:
    """One operand that a launch copies: its lines as the operand holds them (`line_bytes`
    apart, densely) and in the copy (`pitch` apart, a multiple of 128 bytes)."""

    param: str  # its tensor map, e.g. map_A
    operand: str  # A, B or C
    lines: int  # the map's outer dimension
    line_bytes: int  # the map's stride: its innermost dimension times the element's bytes
    pitch: int  # line_bytes rounded up to PITCH_ALIGNMENT (128)
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

    width, pitch = staged.line_bytes // HALF, staged.pitch // HALF
    if staged.back:
        name = "tiledsl_stage_out"
        args = (np.uint64(copy), np.int64(pitch), np.uint64(operand), np.int32(width),
                np.int64(staged.lines))  # fmt: skip
        chunks = staged.lines * width // 8 + 1
    else:
        name = "tiledsl_stage_in"
        args = (np.uint64(operand), np.uint64(copy), np.int64(pitch), np.int32(width),
                np.int64(staged.lines))  # fmt: skip
        chunks = staged.lines * -(-width // 8)
    grid = (max(1, min(-(-chunks // THREADS), MAX_BLOCKS)),)
    return name, grid, (THREADS,), args


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
